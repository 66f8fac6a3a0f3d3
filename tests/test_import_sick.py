"""nccl-tests logs of a real 4xH200 run, made sick: nccl-tests' own verdict, a size measured twice,
a run of another world, a log of more sizes than any sweep has. None of them passes."""

from pathlib import Path

import pytest

from gpuaccept.checks import fabric
from gpuaccept.checks.verdict import Outcome
from gpuaccept.errors import ImportedTextError
from gpuaccept.importers import import_files
from gpuaccept.profile import ProfileCatalog
from tests.helpers import REFERENCE

ALL_REDUCE = REFERENCE / "nccl-tests-all_reduce_perf-g4.txt"
ONE_GIB_ROW = "  1073741824     536870912  bfloat16     sum      -1  4546.34  236.18  354.27       0  4521.07  237.50  356.25       0"


def sick(tmp_path: Path, change, source: Path = ALL_REDUCE) -> Path:
    path = tmp_path / source.name
    path.write_text(change(source.read_text(encoding="utf-8")), encoding="utf-8")
    return path


def h200_4():
    return ProfileCatalog.with_shipped().load("h200-4-nvswitch")


def test_the_reference_row_is_as_the_tests_quote_it():
    assert ONE_GIB_ROW in ALL_REDUCE.read_text(encoding="utf-8")


def test_nccl_tests_own_data_check_failing_fails_every_size_though_each_row_reads_0_wrong(tmp_path):
    log = sick(tmp_path, lambda text: text.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 12 FAILED"))
    imported = import_files([log])
    assert f"{log}:27: damaged: nccl-tests reports 12 out-of-bounds values: its own data check FAILED, so every size of the run fails" \
        in imported.lines()
    for check in (fabric.busbw, fabric.collective_correct):
        verdict = check(h200_4(), imported.facts, ("all_reduce", "1GiB"))
        assert verdict.outcome is Outcome.FAILED, verdict
        assert "data check FAILED with 12 out-of-bounds values" in verdict.message


def test_a_size_measured_twice_is_judged_by_its_worse_row(tmp_path):
    again = ONE_GIB_ROW.replace("4546.34  236.18  354.27", "45463.4   23.62   35.43")
    log = sick(tmp_path, lambda text: text.replace("# Out of bounds values", f"{again}\n# Out of bounds values"))
    imported = import_files([log])
    assert imported.facts.measurements.collectives.result("all_reduce", "1GiB").busbw_GBps == 35.43
    assert any("1073741824 bytes appears twice (first at line 25, busbw 354.27 then 35.43 GB/s): the slower row, line 27, is kept"
               in line for line in imported.lines())
    verdict = fabric.busbw(h200_4(), imported.facts, ("all_reduce", "1GiB"))
    assert verdict.outcome is Outcome.FAILED and verdict.measured == 35.43


def test_the_worse_row_is_kept_whichever_comes_first(tmp_path):
    slow = ONE_GIB_ROW.replace("4546.34  236.18  354.27", "45463.4   23.62   35.43")
    log = sick(tmp_path, lambda text: text.replace(ONE_GIB_ROW, f"{slow}\n{ONE_GIB_ROW}"))
    assert import_files([log]).facts.measurements.collectives.result("all_reduce", "1GiB").busbw_GBps == 35.43


def test_wrong_elements_of_a_faster_row_are_not_hidden_by_a_slower_one(tmp_path):
    # -o all: the size measured with max too, faster and 7 elements wrong; the slower sum row reads 0
    faster = ONE_GIB_ROW.replace("bfloat16     sum", "bfloat16     max").replace("354.27       0", "360.10       7")
    log = sick(tmp_path, lambda text: text.replace("# Out of bounds values", f"{faster}\n# Out of bounds values"))
    imported = import_files([log])
    result = imported.facts.measurements.collectives.result("all_reduce", "1GiB")
    assert (result.busbw_GBps, result.wrong) == (354.27, 7)
    assert fabric.collective_correct(h200_4(), imported.facts, ("all_reduce", "1GiB")).outcome is Outcome.FAILED
    # several data types or reductions are how the run was asked, not damage
    assert any(line.endswith("note: each size was measured in 2 data types or reductions (bfloat16 max, bfloat16 sum): each is "
                             "judged by its slowest row, its wrong elements by any") for line in imported.lines())


def test_a_two_gpu_run_is_not_judged_by_a_four_gpu_profile():
    facts = import_files([REFERENCE / "nccl-tests-all_reduce_perf-g2.txt"]).facts
    verdict = fabric.busbw(h200_4(), facts, ("all_reduce", "1GiB"))
    assert verdict.outcome is Outcome.ERROR
    assert "measured on 2 ranks, but profile h200-4-nvswitch judges a world of 4 GPUs" in verdict.message


def test_a_log_of_more_sizes_than_any_sweep_is_refused(tmp_path):
    def ten_thousand_sizes(text: str) -> str:  # refused at the 4097th, line 4115
        rows = "\n".join(ONE_GIB_ROW.replace("  1073741824", f"{1024 + 16 * i:>12}", 1) for i in range(10_000))
        return text.replace("# Out of bounds values", f"{rows}\n# Out of bounds values")

    log = sick(tmp_path, ten_thousand_sizes)
    with pytest.raises(ImportedTextError) as refused:
        import_files([log])
    assert refused.value.lines() == [f"{log}:4115: more than 4096 sizes in one run: no nccl-tests sweep of a machine has as many; "
                                     "a damaged or generated log"]


TOPO_M = REFERENCE / "nvidia-smi-topo-m.txt"
TOPO_P2P = REFERENCE / "nvidia-smi-topo-p2p-r.txt"
FOUR_COLUMNS = "GPU0\tGPU1\tGPU2\tGPU3\t"


@pytest.mark.parametrize(
    "source, columns, expected",
    [
        (TOPO_M, "GPU1\tGPU0\tGPU2\tGPU3\t", "the nvidia-smi topo -m header's GPU columns are not in order (GPU1 GPU0 GPU2 GPU3): "
         "which cell is which GPU's cannot be told"),
        (TOPO_P2P, "GPU0\tGPU2\tGPU1\tGPU3\t", "the nvidia-smi topo -p2p header's GPU columns are not in order (GPU0 GPU2 GPU1 "
         "GPU3): which cell is which GPU's cannot be told"),
        (TOPO_M, "\t".join(f"GPU{i}" for i in range(100_000)) + "\t", "nvidia-smi topo -m: a header of 100000 GPU columns, "
         "beyond any host (this tool reads at most 128): a damaged output"),
        (TOPO_P2P, "\t".join(f"GPU{i}" for i in range(30_000)) + "\t", "nvidia-smi topo -p2p: a header of 30000 GPU columns, "
         "beyond any host (this tool reads at most 128): a damaged output"),
    ],
    ids=["topo-m-shuffled", "topo-p2p-shuffled", "topo-m-100000-columns", "topo-p2p-30000-columns"],
)
def test_a_matrix_header_that_cannot_be_a_hosts_is_refused_before_its_rows_are_read(tmp_path, source, columns, expected):
    assert FOUR_COLUMNS in source.read_text(encoding="utf-8")
    damaged = sick(tmp_path, lambda text: text.replace(FOUR_COLUMNS, columns, 1), source)
    with pytest.raises(ImportedTextError) as refused:
        import_files([damaged])
    assert refused.value.lines() == [f"{damaged}:1: {expected}"]
