"""busbw as nccl-tests defines it, checked against the numbers nccl-tests printed on a 4xH200."""

import re

import pytest

from gpuaccept.measure.collectives import bandwidths, buffers, bus_factor
from tests.helpers import REFERENCE

ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+bfloat16\s+\w+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+|N/A)")
LOGS = {
    "all_reduce": ("nccl-tests-all_reduce_perf-g4.txt", 4),
    "all_gather": ("nccl-tests-all_gather_perf-g4.txt", 4),
    "reduce_scatter": ("nccl-tests-reduce_scatter_perf-g4.txt", 4),
    "alltoall": ("nccl-tests-alltoall_perf-g4.txt", 4),
    "broadcast": ("nccl-tests-broadcast_perf-g4.txt", 4),
    "all_reduce-g2": ("nccl-tests-all_reduce_perf-g2.txt", 2),
}


def rows(name):
    text = (REFERENCE / LOGS[name][0]).read_text()
    return [tuple(float(g) for g in m.groups()[:5]) for m in map(ROW.match, text.splitlines()) if m]


@pytest.mark.parametrize("name", LOGS)
def test_algbw_and_busbw_match_what_nccl_tests_printed(name):
    collective = name.split("-")[0]
    ranks = LOGS[name][1]
    found = rows(name)
    assert len(found) == 12
    for size, count, time_us, algbw, busbw in found:
        ours_algbw, ours_busbw = bandwidths(collective, int(size), time_us / 1e6, ranks)
        # nccl-tests prints two decimals
        assert ours_algbw == pytest.approx(algbw, abs=0.011, rel=1e-3)
        assert ours_busbw == pytest.approx(busbw, abs=0.011, rel=1e-3)
        # and the size it prints is the one our buffers give for its per-rank count
        shape = buffers(collective, int(size), ranks, "bfloat16")
        assert shape.size_bytes == size
        per_rank = shape.input_elements if collective in ("all_reduce", "broadcast", "reduce_scatter") else shape.output_elements
        if collective in ("all_gather", "reduce_scatter", "alltoall"):
            assert size == count * 2 * ranks  # the count column is per rank (per peer for alltoall)
        else:
            assert per_rank == count


def test_bus_factors():
    assert bus_factor("all_reduce", 4) == 1.5
    assert bus_factor("all_gather", 4) == bus_factor("reduce_scatter", 4) == bus_factor("alltoall", 4) == 0.75
    assert bus_factor("broadcast", 8) == bus_factor("sendrecv", 2) == 1
    with pytest.raises(ValueError):
        bus_factor("gossip", 2)


def test_sizes_that_do_not_divide_round_down_as_nccl_tests_does():
    shape = buffers("all_gather", 1 << 20, 3, "bfloat16")
    assert shape.input_elements == 174760 and shape.size_bytes == 174760 * 3 * 2  # 16-byte multiple per rank
    assert buffers("all_reduce", 1 << 20, 3, "bfloat16").size_bytes == 1 << 20
