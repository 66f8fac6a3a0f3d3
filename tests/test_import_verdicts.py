"""Imported outputs judged by the same checks: faults that people find in such outputs fail against
the right profile, naming the pair, the link or the size; what text cannot tell is an error."""

import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest

from gpuaccept.checks import affinity, fabric, p2p, topology
from gpuaccept.checks.peaks import collective_peak
from gpuaccept.checks.verdict import Outcome
from gpuaccept.importers import import_files
from gpuaccept.profile import ProfileCatalog, load_profile
from tests.helpers import DATA
from tests.test_import_damage import variant

IMPORTS = DATA / "imports"
PROFILES = IMPORTS / "profiles"


def shipped(name):
    return ProfileCatalog.with_shipped().load(name)


def test_profile(name):
    return load_profile(PROFILES / f"{name}.yaml", ProfileCatalog.with_shipped().base_folders())


test_profile.__test__ = False


def facts_of(*paths):
    return import_files(list(paths)).facts


def test_degraded_bridge_nv3_where_nv4_is_expected(tmp_path):
    degraded = variant(tmp_path, "rtx3090-2-nvlink-rig-report.txt", lambda t: t.replace("NV4", "NV3"))
    verdict = topology.link_type(shipped("rtx3090-2-nvlink"), facts_of(degraded), (0, 1))
    assert verdict.outcome is Outcome.FAILED
    assert verdict.message == (f"gpu0-gpu1: link type NV3, expected NV4 (nvidia-smi topo -m, {degraded}:33) "
                               "(profile rtx3090-2-nvlink)")
    healthy = topology.link_type(shipped("rtx3090-2-nvlink"), facts_of(IMPORTS / "rtx3090-2-nvlink-rig-report.txt"), (0, 1))
    assert healthy.outcome is Outcome.PASSED


def test_missing_bridge_node_where_nv12_is_expected(tmp_path):
    unbridged = variant(tmp_path, "bridged-pair-nv2-topo-m.txt", lambda t: t.replace("NV2", "NODE"))
    verdict = topology.link_type(test_profile("h100-pcie-2-nvlink"), facts_of(unbridged), (0, 1))
    assert verdict.outcome is Outcome.FAILED
    assert verdict.message.startswith("gpu0-gpu1: link type NODE, expected NV12 (nvidia-smi topo -m,")


def test_eight_gpu_node_with_no_nvlink_visible():
    profile, facts = shipped("h100-8-nvswitch"), facts_of(IMPORTS / "rtx4090-8-pcie-topo-m.txt")
    verdicts = [topology.link_type(profile, facts, pair) for pair in profile.gpu_pairs()]
    assert len(verdicts) == 28 and all(v.outcome is Outcome.FAILED for v in verdicts)
    assert verdicts[0].message.startswith("gpu0-gpu1: link type SYS, expected NV18 (nvidia-smi topo -m,")
    assert verdicts[-1].subject == "gpu6-gpu7"
    # what topo -m cannot say is not passed: the NVLink state is unknown, not zero
    links = topology.nvlink_links(profile, facts, 0)
    assert links.outcome is Outcome.ERROR and "not probed (no nvidia-smi nvlink -s among the imported files)" in links.message


def test_a_link_down_on_one_gpu(tmp_path):
    down = variant(tmp_path, "rtx3090-2-nvlink-rig-report.txt", lambda t: t.replace(
        "         Link 3: 14.062 GB/s\n```", "         Link 3: <inactive>\n```"))
    profile, facts = shipped("rtx3090-2-nvlink"), facts_of(down)
    assert topology.nvlink_links(profile, facts, 0).outcome is Outcome.PASSED
    verdict = topology.nvlink_links(profile, facts, 1)
    assert verdict.outcome is Outcome.FAILED
    assert verdict.message == "gpu1: 3 NVLinks active, expected 4 (down, not by design: link 3) (profile rtx3090-2-nvlink)"


def test_a_slow_multi_node_log():
    profile, facts = test_profile("h100-2x8-ib"), facts_of(IMPORTS / "h100-2x8-ib-nccl-tests-all_reduce_perf.txt")
    verdict = fabric.busbw(profile, facts, ("all_reduce", "16GiB"))
    assert verdict.outcome is Outcome.FAILED
    assert verdict.message == ("all_reduce 16 GiB: busbw 469.2 GB/s < 480 GB/s (algbw 250.2 GB/s, 68652 us, 16 ranks) "
                               "(profile h100-2x8-ib)")
    assert fabric.collective_correct(profile, facts, ("all_reduce", "16GiB")).outcome is Outcome.PASSED  # #wrong 0 both ways


def profile_text(tmp_path, text):
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    return load_profile(path, [])


def test_a_crashed_log_fails_and_a_cut_log_cannot_establish(tmp_path):
    profile = profile_text(tmp_path, 'schema: 1\nname: rtx5090-2\ngpus: {count: 2, model: "NVIDIA GeForce RTX 5090"}\n'
                           "nccl: {busbw: {all_reduce: {128MiB: 10}}}\n")
    crashed = facts_of(IMPORTS / "rtx5090-2-nccl-tests-all_reduce_perf-crashed.txt")
    verdict = fabric.busbw(profile, crashed, ("all_reduce", "128MiB"))
    assert verdict.outcome is Outcome.FAILED
    assert verdict.message.startswith("all_reduce 128 MiB: the run crashed before its first size: GENOA-06: Test NCCL failure "
                                      "common.cu:392 'unhandled cuda error")
    cut = variant(tmp_path, "h100-2x8-ib-nccl-tests-all_reduce_perf.txt", lambda t: t[: t.index("  2147483648")])
    unknown = fabric.busbw(test_profile("h100-2x8-ib"), facts_of(cut), ("all_reduce", "16GiB"))
    assert unknown.outcome is Outcome.ERROR
    assert unknown.message == (
        f"all_reduce 16 GiB: could not be established: the log ends after 1 GiB ({cut} is cut short) (profile h100-2x8-ib)"
    )


def test_p2p_states_and_what_text_cannot_tell(tmp_path):
    geforce = facts_of(IMPORTS / "rtx5090-2-pcie-topo-m-and-p2p-rw.txt")
    profile = profile_text(tmp_path, "schema: 1\nname: pair\ngpus: {count: 2, model: x}\np2p: {all: {read: false, write: false}}\n")
    assert p2p.p2p_capability(profile, geforce, (0, 1)).outcome is Outcome.PASSED  # GNS both ways, as a GeForce pair should
    l4 = facts_of(IMPORTS / "l4-2-pcie-topo-p2p-r.txt")
    wanted = profile_text(tmp_path, "schema: 1\nname: pair\ngpus: {count: 2, model: x}\np2p: {all: {read: true}}\n")
    verdict = p2p.p2p_capability(wanted, l4, (1, 0))
    assert verdict.message == "gpu1-gpu0: P2P read CHIPSET_NOT_SUPPORTED, expected OK (profile pair)"
    # capabilities the grids did not show, and CUDA's view, are not passed: could not be established
    shipped_pair = p2p.p2p_capability(shipped("rtx4090-2-pcie"), geforce, (0, 1))
    assert shipped_pair.outcome is Outcome.ERROR and "nvlink not probed" in shipped_pair.message
    agrees = p2p.p2p_cuda_agrees(profile, geforce, (0, 1))
    assert agrees.outcome is Outcome.ERROR and "CUDA peer access could not be read" in agrees.message


def test_the_peak_is_the_links_reported_speed():
    facts = facts_of(IMPORTS / "rtx3090-2-nvlink-rig-report.txt")
    peak = collective_peak(facts)
    assert peak.what == "NVLink, 4 x 14.062 GB/s as reported" and round(peak.GBps, 3) == 56.248  # not 4 x 25


def test_nic_and_cpu_affinity_against_a_profile(tmp_path):
    golden = IMPORTS / "h20-8-nvswitch-topo-m.txt"
    moved = variant(tmp_path, "h20-8-nvswitch-topo-m.txt", lambda t: t.replace(
        "GPU6    NV18    NV18    NV18    NV18    NV18    NV18     X      NV18    PHB     PHB     96-191,288-383",
        "GPU6    NV18    NV18    NV18    NV18    NV18    NV18     X      NV18    SYS     SYS     0-95,192-287  "))
    profile_file = tmp_path / "h20.yaml"
    profile_file.write_text(
        'schema: 1\ngpus: {count: 8, model: "NVIDIA H20"}\n'
        "affinity:\n  nic: {all: {link: SYS}, gpu6: {link: PHB, nic: NIC0}}\n  cpu: {gpu6: '96-191,288-383'}\n  numa: {gpu6: 1}\n"
    )
    profile = load_profile(profile_file, [])
    good, bad = facts_of(golden), facts_of(moved)
    assert affinity.nic_affinity(profile, good, 6).outcome is Outcome.PASSED
    assert affinity.cpu_affinity(profile, good, 6).outcome is Outcome.PASSED
    assert affinity.nic_affinity(profile, bad, 6).message == (
        "gpu6: closest NIC NIC0/NIC1 at SYS, expected a NIC at PHB or closer, NIC0 (profile h20)")
    assert affinity.cpu_affinity(profile, bad, 6).message == "gpu6: CPU affinity 0-95,192-287, expected 96-191,288-383 (profile h20)"
    assert affinity.nic_affinity(profile, bad, 0).outcome is Outcome.PASSED


def gpu_accept(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gpuaccept", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.slow
def test_a_vendor_log_judged_against_h100_8_nvswitch_gets_a_junit_test_per_collective_and_size(tmp_path):
    log = IMPORTS / "h100-2x8-ib-nccl-tests-all_reduce_perf.txt"
    done = gpu_accept("run", "--import", str(log), "--profile", "h100-8-nvswitch", "--reports", str(tmp_path), "-k", "test_busbw")
    # a two-node run judged by a one-node profile: its busbw is of 16 ranks, the profile's floors of 8:
    # no value can be judged, and none failed (exit 2, each a JUnit <error>)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"gpu-accept: import: {log}: nccl-tests all_reduce_perf (16 ranks on 2 hosts, 32 sizes, complete)" in done.stderr
    cases = {case.get("name"): case for case in ElementTree.parse(tmp_path / "junit.xml").iter("testcase")}
    assert set(cases) == {"test_busbw[all_reduce-1GiB]", "test_busbw[all_reduce-4GiB]", "test_busbw[all_gather-4GiB]",
                          "test_busbw[reduce_scatter-4GiB]"}
    assert all(case.find("failure") is None for case in cases.values())
    other_world = cases["test_busbw[all_reduce-4GiB]"].find("error").get("message")
    assert "measured on 16 ranks, but profile h100-8-nvswitch judges a world of 8 GPUs" in other_world
    missing = cases["test_busbw[all_gather-4GiB]"].find("error").get("message")
    assert "all_gather 4 GiB: no result for this collective and size in the sweep" in missing
    assert (tmp_path / "facts.json").is_file() and "imported_from" in (tmp_path / "facts.json").read_text()


@pytest.mark.slow
def test_run_and_import_say_why_they_cannot_judge(tmp_path):
    topo = IMPORTS / "h100-8-nvswitch-topo-m.txt"
    auto = gpu_accept("run", "--import", str(topo), "--reports", str(tmp_path))
    assert auto.returncode == 2
    assert auto.stderr.splitlines()[-1].startswith("gpu-accept: --import: the outputs do not name the GPU model")
    fragment = IMPORTS / "h100-multinode-ib-nccl-tests-tagged-fragment.txt"
    refused = gpu_accept("import", str(fragment), "-o", str(tmp_path / "f.json"))
    assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1
    assert refused.stderr.startswith(f"gpu-accept: {fragment}:2: rows of an nccl-tests log without its header")
    read = gpu_accept("import", str(IMPORTS / "nv8-8gpu-topo-m-cut.txt"), "-o", str(tmp_path / "nv8.json"))
    assert read.returncode == 0
    assert "damaged: row GPU7 has 4 of 17 cells" in read.stderr and (tmp_path / "nv8.json").is_file()


def test_the_probe_reads_each_links_speed_where_nvml_answers():
    from tests.helpers import nvml_replay, probe_replay

    replay = nvml_replay("h200x4")  # recorded before the speed was asked: the generation's table speed
    assert collective_peak(probe_replay(replay)).what == "NVLink 4.0, 18 x 26.5625 GB/s"
    for gpu in range(4):
        for link in range(18):
            replay.answer("nvlink_speed_mbps", gpu, link, value=26562.0)
    facts = probe_replay(replay)
    assert facts.gpu(0).nvlinks[5].speed_GBps == 26.562
    assert collective_peak(facts).what == "NVLink, 18 x 26.562 GB/s as reported"
    replay.answer("nvlink_speed_mbps", 2, 7, error="NOT_SUPPORTED")  # an older driver: that GPU falls back to the table
    assert collective_peak(probe_replay(replay)).what == "NVLink, 18 x 26.562 GB/s as reported"  # the slowest GPU's peak


def test_the_reference_4xh200_outputs_pass_their_own_profile():
    from tests.helpers import REFERENCE

    files = [REFERENCE / "nvidia-smi-topo-m.txt", REFERENCE / "nvidia-smi-topo-p2p-r.txt"]
    files += sorted(REFERENCE.glob("nccl-tests-*-g4.txt"))
    profile, facts = shipped("h200-4-nvswitch"), facts_of(*files)
    assert facts.measurements.collectives.ranks == 4 and facts.gpu(0).name == "NVIDIA H200"
    links = [topology.link_type(profile, facts, pair) for pair in profile.gpu_pairs()]
    busbw = [fabric.busbw(profile, facts, case) for case in fabric.busbw_cases(profile)]
    correct = [fabric.collective_correct(profile, facts, case) for case in fabric.busbw_cases(profile)]
    assert len(busbw) == 15 and all(v.outcome is Outcome.PASSED for v in links + busbw + correct)
    # no nvlink -s among them: no peak is claimed, the log's own figures are judged
    assert busbw[1].message == "all_reduce 1 GiB: busbw 354.3 GB/s (algbw 236.2 GB/s, 4546 us, 4 ranks) (profile h200-4-nvswitch)"
    assert {p.nvml["read"] for p in facts.p2p} == {"OK"}


def test_a_pasted_p2p_grid_per_capability_in_a_profile(tmp_path):
    from gpuaccept.errors import ProfileError

    grid = " \tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\t\n" + "".join(
        f" GPU{i}\t" + "\t".join("X" if i == j else ("CNS" if {i, j} == {3, 4} else "OK") for j in range(5)) + "\t\n" for i in range(5))
    pasted = "".join(f"      {line}\n" for line in grid.splitlines())
    body = "schema: 1\nname: five\ngpus: {count: 5, model: x}\np2p:\n  matrix:\n    prop: |\n" + pasted
    profile = profile_text(tmp_path, body)
    facts = facts_of(IMPORTS / "geforce-5-pcie-topo-m-and-p2p-p.txt")  # every pair OK, 3-4 included
    assert p2p.p2p_capability(profile, facts, (0, 1)).outcome is Outcome.PASSED
    verdict = p2p.p2p_capability(profile, facts, (4, 3))
    assert verdict.message == "gpu4-gpu3: P2P prop OK, expected not OK (profile five)"
    with pytest.raises(ProfileError, match=r"p2p\.matrix\.read: the grid has 2 GPUs but gpus.count is 5"):
        profile_text(tmp_path, "schema: 1\ngpus: {count: 5, model: x}\np2p:\n  matrix:\n    read: |\n"
                               "      GPU0 GPU1\n      GPU0 X OK\n      GPU1 OK X\n")
    with pytest.raises(ProfileError, match="not a P2P status"):
        profile_text(tmp_path, "schema: 1\ngpus: {count: 2, model: x}\np2p:\n  matrix:\n    read: |\n"
                               "      GPU0 GPU1\n      GPU0 X YES\n      GPU1 OK X\n")
