"""`profile init` from a golden machine's command outputs, and what it must never write: a profile
its own schema rejects, or one that fails the machine it was made from."""

import copy
import json

import pytest
import yaml

from gpuaccept.checks import topology
from gpuaccept.checks.verdict import Outcome
from gpuaccept.cli import main as cli
from gpuaccept.importers import import_files
from gpuaccept.profile import load_profile
from gpuaccept.profile.from_results import profile_from_results
from tests.helpers import DATA, ROOT, run_record
from tests.test_import_damage import variant

IMPORTS = DATA / "imports"
REAL_RUN = ROOT / "examples" / "results" / "h200x4.json"


def init_from_text(tmp_path, capsys, *files):
    out = tmp_path / "golden.yaml"
    assert cli(["profile", "init", "--from-text", *map(str, files), "--name", "golden", "-o", str(out)]) == 0
    return load_profile(out, []), out.read_text(), capsys.readouterr().err


def every_gpu_passes(profile, facts):
    verdicts = [topology.nvlink_links(profile, facts, g) for g in range(facts.gpu_count)]
    verdicts += [topology.link_type(profile, facts, pair) for pair in profile.gpu_pairs()]
    return [v.message for v in verdicts if v.outcome is not Outcome.PASSED]


def test_a_gpu_without_a_bridge_keeps_its_own_count(tmp_path, capsys):
    source = IMPORTS / "rtxa6000-3-bridged-pair-topo-m-nvlink-s.txt"
    profile, text, _ = init_from_text(tmp_path, capsys, source)
    data = yaml.safe_load(text)
    assert data["nvlink"] == {"active_links": 4, "active_links_per_gpu": {"gpu2": 0}}
    assert data["links"] == {"all": "NODE", "pairs": {"gpu0-gpu1": "NV4"}}
    assert data["gpus"] == {"count": 3, "model": "NVIDIA RTX A6000"}  # no memory: the text does not tell it
    assert every_gpu_passes(profile, import_files([source]).facts) == []


def test_links_down_on_the_golden_machine_are_written_as_inactive_by_design(tmp_path, capsys):
    # a bridged pair that uses fewer links than it has, as a bridged H100 PCIe uses 12 of 18
    fewer = variant(tmp_path, "rtx3090-2-nvlink-rig-report.txt", lambda t: t.replace(
        "         Link 3: 14.062 GB/s\nGPU 1", "         Link 3: <inactive>\nGPU 1").replace(
        "         Link 3: 14.062 GB/s\n```", "         Link 3: <inactive>\n```"))
    profile, text, err = init_from_text(tmp_path, capsys, fewer)
    data = yaml.safe_load(text)
    assert data["nvlink"] == {"active_links": 3, "inactive_by_design": {"gpu0": [3], "gpu1": [3]}}
    assert "nvlink.inactive_by_design" not in err
    facts = import_files([fewer]).facts
    assert every_gpu_passes(profile, facts) == []
    # the same machine with another link down fails its own profile, naming the link
    worse = variant(tmp_path, "rtx3090-2-nvlink-rig-report.txt", lambda t: t.replace(
        "         Link 3: 14.062 GB/s\nGPU 1", "         Link 3: <inactive>\nGPU 1").replace(
        "         Link 2: 14.062 GB/s\n         Link 3: 14.062 GB/s\n```", "         Link 2: <inactive>\n         Link 3: <inactive>\n```"),
        "worse.txt")
    verdict = topology.nvlink_links(profile, import_files([worse]).facts, 1)
    assert verdict.message == "gpu1: 2 NVLinks active, expected 3 (down, not by design: link 2) (profile golden)"


def test_affinity_and_nccl_floors_from_text(tmp_path, capsys):
    profile, text, err = init_from_text(
        tmp_path, capsys, IMPORTS / "h20-8-nvswitch-topo-m.txt", IMPORTS / "h100-2x8-ib-nccl-tests-all_reduce_perf.txt"
    )
    data = yaml.safe_load(text)
    assert data["affinity"]["nic"]["gpu6"] == {"link": "PHB"}  # NIC0 and NIC1 tie: the link is stated, not the name
    assert data["affinity"]["cpu"]["gpu0"] == "0-95,192-287" and data["affinity"]["numa"]["gpu7"] == "1"
    # the log ran on two 8-GPU machines: its floors are the cluster's, the GPU count the machine's
    assert data["gpus"]["count"] == 8 and data["cluster"]["nodes"] == 2 and "nccl" not in data
    floors = data["cluster"]["busbw"]["all_reduce"]
    assert set(floors) == {"64MiB", "128MiB", "256MiB", "512MiB", "1GiB", "2GiB", "4GiB", "8GiB", "16GiB"}
    assert floors["16GiB"] == round(469.21 * 0.9, 1)
    assert "nccl: floors are written for logged sizes from 64MiB up" in err
    assert "nccl: the logs ran on 2 machines of 8 GPUs: their floors are written as cluster.busbw" in err
    assert profile.spec.cluster.busbw["all_reduce"]["16GiB"] == 422.3


def test_text_that_does_not_name_the_model_is_refused_in_one_line(tmp_path, capsys):
    code = cli(["profile", "init", "--from-text", str(IMPORTS / "h100-8-nvswitch-topo-m.txt"), "--name", "x"])
    assert code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "gpu-accept: the golden machine's outputs do not name its GPU model, which a profile must state: add its "
        "nvidia-smi nvlink -s or an nccl-tests log (topo -m and topo -p2p do not name it)")


def real_run() -> dict:
    return json.loads(REAL_RUN.read_text(encoding="utf-8"))


def from_results(documents: list[dict], *args, **options) -> str:
    """profile_from_results on runs made from the real one as plain data, read as the command reads files."""
    return profile_from_results([run_record(d, f"run {i + 1}") for i, d in enumerate(documents)], *args, **options)


def test_an_efficiency_above_1_is_capped_and_said(tmp_path):
    document = real_run()
    for result in document["facts"]["measurements"]["ddp"]["results"]:
        if result["world"] == 2:
            result["samples_per_s_per_gpu"] *= 1.5  # superlinear: a cache effect, or a slow 1-GPU baseline
    said = []
    text = from_results([document], ["run.json"], "capped", 0.93, said.append)
    data = yaml.safe_load(text)
    assert data["ddp"]["min_efficiency"]["2gpu-bs8"] == 1.0
    warned = "\n".join(said)
    assert "ddp.min_efficiency.2gpu-bs8: " in warned and "is above 1, the most an efficiency can be: written as 1" in warned
    path = tmp_path / "capped.yaml"
    path.write_text(text)
    load_profile(path, [])  # its own schema accepts it


@pytest.mark.parametrize("lacking", ["collectives", "ddp", "all"])
def test_a_run_that_lacks_a_sweep(tmp_path, lacking):
    document = real_run()
    measurements = document["facts"]["measurements"]
    if lacking == "all":
        document["facts"]["measurements"] = {}
    elif lacking == "ddp":
        measurements["ddp"]["results"] = [r for r in measurements["ddp"]["results"] if r["world"] != 1]
    else:
        measurements[lacking] = None
    said = []
    text = from_results([document], ["run.json"], "lacking", 0.93, said.append)
    path = tmp_path / "lacking.yaml"
    path.write_text(text)
    data = yaml.safe_load(text)
    load_profile(path, [])
    if lacking == "ddp":
        assert "ddp" not in data and any("no run on 1 GPU" in line for line in said)
    if lacking == "all":
        assert not {"nccl", "pairwise", "copies", "ddp"} & set(data)
    # and beside a run that has the sweep: one line saying where they differ, no traceback
    with pytest.raises(ValueError, match=r"^the runs disagree on"):
        from_results([real_run(), copy.deepcopy(document)], ["a.json", "b.json"], "x", 0.93)
