"""Shapes of real outputs that were misread: a multi-node nccl-tests log without its rank lines or
its `# nThread` line, `nvidia-smi nvlink -s` with its UUIDs trimmed or shortened by dots, and
`topo -m` with an empty CPU Affinity field, NIC rows the header has no column for, or NIC rows cut.
Each is read right, or refused in one line that names what is missing; where a variant is made
from a real capture, the change is written out here (tests/data/imports/README.md names sources)."""

import pytest
import yaml

from gpuaccept.cli import main as cli
from gpuaccept.errors import ImportedTextError
from gpuaccept.facts.machine import NicLink
from gpuaccept.facts.record import Unavailable
from gpuaccept.importers import import_files
from gpuaccept.importers.nvlink_status import find_nvlink_status
from gpuaccept.importers.text import read_text_file
from gpuaccept.profile import load_profile
from gpuaccept.profile.from_results import profile_from_results
from tests.helpers import DATA, checks_of_areas
from tests.test_import_damage import variant
from tests.verdicts import verdicts

IMPORTS = DATA / "imports"
H100_LOG = "h100-2x8-ib-nccl-tests-all_reduce_perf.txt"  # 16 ranks on two 8-GPU machines, under mpirun
ROCE_LOG = "a100-2node-roce-nccl-tests-all_reduce.txt"  # 16 ranks on two 8-GPU machines, rank lines elided


def without_rank_lines(text):
    return "".join(line for line in text.splitlines(keepends=True) if "Rank " not in line)


def refused(*paths):
    with pytest.raises(ImportedTextError) as error:
        import_files(list(paths))
    return error.value.lines()


# -- nccl-tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("log, topo", [(H100_LOG, "h100-8-nvswitch-topo-m.txt"), (ROCE_LOG, "a100-8-nvswitch-topo-m.txt")])
def test_a_multi_node_log_with_an_empty_device_block_counts_ranks_from_its_rows(tmp_path, log, topo):
    # nThread 1 nGpus 1 is one process's GPUs: the rows' busbw/algbw (15/8 for all_reduce) says 16
    empty = variant(tmp_path, log, without_rank_lines)
    facts = import_files([empty, IMPORTS / topo]).facts
    sweep = facts.measurements.collectives
    assert sweep.ranks == 16 and {r.ranks for r in sweep.results} == {16} and facts.gpu_count == 8
    whole = import_files([IMPORTS / log]).facts.measurements.collectives
    assert [r.busbw_GBps for r in sweep.results] == [r.busbw_GBps for r in whole.results]
    # alone, it does not say how many GPUs one machine has: refused, naming what to add
    [line] = refused(empty)
    assert line.startswith(f"{empty}:") and line.endswith(
        "how many GPUs the machine has cannot be told: the log names no device (no rank lines under `# Using devices`) and "
        "its 16 ranks ran as several processes; import it with the machine's nvidia-smi topo -m or nvlink -s")


def test_ranks_no_row_tells_under_a_launcher_are_refused_not_taken_from_one_process(tmp_path):
    # the rows below 64 KiB carry too few digits to tell 16 ranks from 15 or 17: nothing says the count
    def small_rows_only(text):
        text = without_rank_lines(text)
        return text[: text.index("      131072")] + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.5\n"

    small = variant(tmp_path, H100_LOG, small_rows_only)
    [line] = refused(small, IMPORTS / "h100-8-nvswitch-topo-m.txt")
    assert line == (f"{small}:20: how many ranks ran cannot be told: no rank lines under `# Using devices`; no row large "
                    "enough to tell it by busbw/algbw; nThread x nGpus counts one process's GPUs, and line 1 (mpirun) shows several")


def test_rank_lines_that_contradict_the_rows_are_refused_in_one_line(tmp_path):
    # rows of 16 ranks under rank lines of 24: not the lines and rows of one run
    extra = "".join(f"#  Rank {r} Group  0 Pid  1 on bm-h100-03 device  {r - 16} [0000:19:00] NVIDIA H100 80GB HBM3\n"
                    for r in range(16, 24))
    more = variant(tmp_path, H100_LOG, lambda t: t.replace("NCCL version 2.26.2", extra + "NCCL version 2.26.2"))
    assert refused(more) == [f"{more}:20: the rank lines list 24 ranks but busbw/algbw of its rows says 16: not the lines "
                             "and rows of one run"]


@pytest.mark.parametrize("log", [H100_LOG, ROCE_LOG, "a100-8-nvswitch-nccl-tests-all_reduce-old.txt"])
def test_a_log_missing_only_its_nthread_line_is_read(tmp_path, log):
    cut = variant(tmp_path, log, lambda t: "".join(line for line in t.splitlines(keepends=True) if "nThread" not in line))
    imported = import_files([cut])
    whole = import_files([IMPORTS / log])
    sweep, expected = imported.facts.measurements.collectives, whole.facts.measurements.collectives
    assert [(r.size_bytes, r.busbw_GBps) for r in sweep.results] == [(r.size_bytes, r.busbw_GBps) for r in expected.results]
    assert sweep.ranks == expected.ranks and imported.facts.gpu_count == whole.facts.gpu_count
    first = sweep.results[0]
    assert first.iterations.unavailable == first.warmup.unavailable == "not_probed"
    assert any("damaged: the log lacks the run's `# nThread ... nGpus ...` header: the sizes it was asked for, its warm-up "
               "and iteration counts are unknown; its rows are read" in line for line in imported.lines())


def test_a_log_without_its_header_that_crashed_is_refused(tmp_path):
    crash = "bm-h100-02: Test NCCL failure common.cu:303 'remote process exited or there was a network error / '"

    def crashed_without_header(text):
        text = "".join(line for line in text.splitlines(keepends=True) if "nThread" not in line)
        return text[: text.index("  2147483648")] + crash + "\n"

    damaged = variant(tmp_path, H100_LOG, crashed_without_header)
    [line] = refused(damaged)
    assert line.endswith("the run crashed after 1073741824 bytes and the log lacks its `# nThread ... minBytes ... maxBytes` "
                         "header: which sizes it did not reach cannot be told")


def test_processes_that_each_ran_their_own_test_are_refused():
    # nccl-tests built without MPI under mpirun: two headers, and rank 0 on each host
    path = IMPORTS / "v100-2-hosts-nccl-tests-without-mpi.txt"
    assert refused(path) == [f"{path}:9: rank 0 is on ip-172-31-20-228 and on ip-172-31-22-230: each process ran a test of its "
                             "own (nccl-tests built without MPI=1, started by a launcher), so no row measures the job; rebuild "
                             "it with MPI=1 and run it again"]


def test_a_header_of_no_gpus_is_refused(tmp_path):
    none = variant(tmp_path, "rtx5090-2-nccl-tests-all_reduce_perf-crashed.txt", lambda t: t.replace("nGpus 2", "nGpus 0"))
    assert refused(none) == [f"{none}:2: the header says nThread 1 nGpus 0: a run on no GPU; its rows are no measurement of one"]


def test_a_log_of_two_machines_makes_a_cluster_profile_that_passes_its_own_log(tmp_path, capsys):
    out = tmp_path / "golden.yaml"
    log = IMPORTS / H100_LOG
    assert cli(["profile", "init", "--from-text", str(log), "--name", "golden", "-o", str(out)]) == 0
    data = yaml.safe_load(out.read_text())
    assert data["gpus"]["count"] == 8 and data["match"]["gpu_count"] == 8 and "nccl" not in data
    assert data["cluster"]["nodes"] == 2 and data["cluster"]["busbw"]["all_reduce"]["16GiB"] == 422.3
    assert (data["cluster"]["warmup"], data["cluster"]["iterations"], data["cluster"]["dtype"]) == (5, 20, "float32")
    profile = load_profile(out, [])
    judged = verdicts(profile, import_files([log]).facts)
    assert [v for v in judged if v[2] == "failed"] == []
    assert any(v[0] == "gpu_count" and v[2] == "passed" for v in judged)
    # what no output tells is all that was not established: the CUDA/NVML agreement, and the health
    # readings, per-GPU loads and telemetry that a measuring run records
    assert {v[0] for v in judged if v[2] == "error"} <= {"p2p_cuda_agrees"} | checks_of_areas("health", "compute", "telemetry", "burn-in")


def test_a_log_of_some_of_the_gpus_is_refused_for_a_profile():
    # an 8-rank log of a machine that has 6 GPUs (or 16 ranks of 6-GPU machines): its floors fit no run
    facts = import_files([IMPORTS / "a100-8-nvswitch-nccl-tests-all_reduce-old.txt"]).facts
    fewer = facts.model_copy(update={"gpus": facts.gpus[:6]})
    with pytest.raises(ValueError) as refused_profile:
        profile_from_results([fewer], ["log"], "x", 0.9)
    assert str(refused_profile.value) == (
        "the logs ran on 8 ranks and the machine has 6 GPUs: their floors fit no run of a profile of it (a run measures on "
        "all 6 GPUs of each machine); import logs of all its GPUs, or of whole machines")


# -- nvidia-smi nvlink -s ---------------------------------------------------------------------------


def test_trimmed_uuids_and_a_leading_elision(tmp_path):
    path = IMPORTS / "v100-nvlink-s-uuid-trimmed-links-down.txt"
    [status] = find_nvlink_status(read_text_file(path))
    gpu = status.gpus[3]
    assert (gpu.name, gpu.uuid) == ("Tesla V100-SXM2-32GB", "")  # `(UUID: ...)` is no UUID
    assert [(link, up) for link, up, _ in gpu.links] == [(0, True), (1, True), (2, True), (3, False), (4, True), (5, False)]
    # `....` before GPU 3: GPUs were left out, so the listing does not say how many the machine has
    assert refused(path) == [f"{path}:2: how many GPUs the machine has cannot be told: the nvidia-smi nvlink -s listing has "
                             "lines left out where GPUs may be; import it with the machine's nvidia-smi topo -m, or the whole listing"]
    # a whole listing whose GPU lines lost their UUID part is read as it is
    bare = variant(tmp_path, "rtxa6000-3-bridged-pair-topo-m-nvlink-s.txt",
                   lambda t: "\n".join(line.split(" (UUID")[0] for line in t.splitlines()) + "\n")
    facts = import_files([bare]).facts
    assert [g.name for g in facts.gpus] == ["NVIDIA RTX A6000"] * 3 and {g.uuid for g in facts.gpus} == {""}
    assert [len(g.nvlinks) for g in facts.gpus] == [4, 4, 0]


@pytest.mark.parametrize("listing, elided_gpu, topo", [
    ("a100-nvlink-s-dot-elided.txt", 2, "a100-8-nvswitch-topo-m.txt"),  # an 8x A100 SXM at NV12, as the listing's
    ("gb200-nvlink-s-elided.txt", 1, "gb200-4-topo-m-cut.txt"),  # a GB200 tray's 4 GPUs at NV18
])
def test_a_listing_cut_by_dots_leaves_links_unknown_not_one_active(tmp_path, listing, elided_gpu, topo):
    [status] = find_nvlink_status(read_text_file(IMPORTS / listing))
    assert status.gpus[elided_gpu].elided and not status.tells_gpu_count
    facts = import_files([IMPORTS / listing, IMPORTS / topo]).facts
    count = facts.gpu_count
    assert count == (8 if "a100" in listing else 4)
    assert isinstance(facts.gpu(elided_gpu).nvlinks, Unavailable) and "leaves some of this GPU's links out" in facts.gpu(
        elided_gpu).nvlinks.detail
    assert isinstance(facts.gpu(count - 1).nvlinks, Unavailable) and isinstance(facts.gpu(count - 1).name, Unavailable)
    # profile init: the named GPUs agree on the model; no GPU is written with the one link shown
    out = tmp_path / "golden.yaml"
    assert cli(["profile", "init", "--from-text", str(IMPORTS / listing), str(IMPORTS / topo), "--name", "golden",
                "-o", str(out)]) == 0
    data = yaml.safe_load(out.read_text())
    model = facts.gpu(0).name
    assert data["gpus"] == {"count": count, "model": model} and data["nvlink"] == {"active_links": 12 if count == 8 else 18}


def test_a_link_listed_twice_leaves_the_gpus_links_unknown(tmp_path):
    # link 16 twice and 17 absent: 18 lines, not 18 links
    twice = variant(tmp_path, "gb200-nvlink-s-elided.txt", lambda t: t.replace("Link 17:", "Link 16:", 1))
    [status] = find_nvlink_status(read_text_file(twice))
    assert status.gpus[0].twice == 16
    assert f"{twice}:20: damaged: GPU 0 lists link 16 twice: which links it has is not known; its links are not used" in [
        str(f) for f in status.findings]


def test_model_names_with_wildcards_are_written_to_match_themselves_only(tmp_path):
    starred = variant(tmp_path, "rtxa6000-3-bridged-pair-topo-m-nvlink-s.txt", lambda t: t.replace("NVIDIA RTX A6000", "NVIDIA*"))
    out = tmp_path / "starred.yaml"
    assert cli(["profile", "init", "--from-text", str(starred), "--name", "starred", "-o", str(out)]) == 0
    profile = load_profile(out, [])
    assert profile.spec.gpus.model == ["NVIDIA[*]"]
    assert profile.model_matches("NVIDIA*") and not profile.model_matches("NVIDIA H100 80GB HBM3")


# -- nvidia-smi topo -m ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "capture, row, blanked, gpu, numa",
    [
        # tab-separated: nvidia-smi writes the empty field and its tab
        ("rtx3090-2-pcie-sys-topo-m.txt", "GPU1\tSYS\t X \t8-15,24-31\t1", "GPU1\tSYS\t X \t\t1", 1, "1"),
        # padded with spaces as a terminal shows it: the value's place left blank
        ("gb200-4-topo-m-cut.txt", "SYS     72-143  1,19-25,27-33", "SYS             1,19-25,27-33", 2, "1,19-25,27-33"),
    ],
    ids=["tabs", "spaces"],
)
def test_an_empty_cpu_affinity_field_does_not_shift_the_columns(tmp_path, capture, row, blanked, gpu, numa):
    damaged = variant(tmp_path, capture, lambda t: t.replace(row, blanked, 1))
    imported = import_files([damaged])
    facts = imported.facts
    cpu = facts.gpu(gpu).cpu_affinity
    assert isinstance(cpu, Unavailable) and cpu.detail == "nvidia-smi topo -m leaves the field empty"
    assert facts.gpu(gpu).numa_affinity == numa  # not taken for the CPU list, not lost
    assert any(line.endswith(f"damaged: GPU{gpu} leaves its CPU Affinity empty") for line in imported.lines())
    whole = import_files([IMPORTS / capture]).facts
    assert facts.gpu(0).cpu_affinity == whole.gpu(0).cpu_affinity and facts.gpu(0).numa_affinity == whole.gpu(0).numa_affinity


def test_nic_rows_give_the_gpus_their_nics_and_a_cut_nic_table_is_named():
    path = IMPORTS / "nv12-2-gpu-10-nic-topo-m-nic-rows-cut.txt"
    imported = import_files([path])
    facts = imported.facts
    assert facts.gpu(0).nics[:3] == [NicLink(nic="NIC0", link="PXB"), NicLink(nic="NIC1", link="PXB"), NicLink(nic="NIC2", link="SYS")]
    assert len(facts.gpu(1).nics) == 10 and facts.gpu(1).cpu_affinity == "48-63,176-191" and facts.gpu(1).numa_affinity == "3"
    assert imported.lines()[1:] == [
        f"{path}:7: damaged: row NIC3 has 1 of 12 cells: the output is cut here; what the row lacks is read from the other rows "
        "where they say it",
        f"{path}:7: damaged: the table ends without the rows of NIC4, NIC5, NIC6, NIC7, NIC8, NIC9: the output is cut here; how "
        "the GPUs reach them is read from the GPU rows",
    ]


def test_a_nic_table_cut_after_its_first_row_is_named_as_damage(tmp_path):
    cut = variant(tmp_path, "h20-8-nvswitch-topo-m.txt",
                  lambda t: t[: t.index("NIC1    SYS")])
    lines = import_files([cut]).lines()
    assert f"{cut}:11: damaged: the table ends without the rows of NIC1: the output is cut here; how the GPUs reach them is " \
        "read from the GPU rows" in lines
    assert import_files([cut]).facts.gpu(6).nics == [NicLink(nic="NIC0", link="PHB"), NicLink(nic="NIC1", link="PHB")]


def test_a_listing_cut_inside_a_gpus_links_is_named_and_leaves_them_unknown():
    # the reference 4xH200's `nvlink -s | head -60`: GPU 3 shows 2 of its 18 links
    listing = DATA / "reference" / "h200x4" / "nvidia-smi-nvlink-s-head.txt"
    imported = import_files([listing, DATA / "reference" / "h200x4" / "nvidia-smi-topo-m.txt"])
    facts = imported.facts
    assert [len(facts.gpu(g).nvlinks) for g in range(3)] == [18, 18, 18]
    assert isinstance(facts.gpu(3).nvlinks, Unavailable) and facts.gpu(3).name == "NVIDIA H200"
    assert f"{listing}:60: damaged: the listing ends inside GPU 3's links (2 shown, another NVIDIA H200 has 18): the output " \
        "is cut here" in imported.lines()
    # alone, it does not say the machine has 4 GPUs: more may have followed
    [line] = refused(listing)
    assert line.startswith(f"{listing}:60: how many GPUs the machine has cannot be told")
