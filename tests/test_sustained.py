"""The sustained load's rounds on the CPU device, in this process: what a round measures and checks, the
flags it shares with the driver (stop, a fabric stage beside it, a memory test that is due), and the plan
that spreads a duration over rounds with the memory test at its interval."""

from __future__ import annotations

import gc
import time
import weakref
from types import SimpleNamespace

import pytest

from gpuaccept.measure import load_steps
from gpuaccept.measure.drills import Drills
from gpuaccept.measure.plan import HbmStep, MemtestStep, SustainedRoundStep
from gpuaccept.measure.sustained import FABRIC_FLAG, STOP_FLAG, clear_kept, memtest_due_flag, memtest_flag, sustained_round
from gpuaccept.stages.sustained import memtest_rounds, rounds_of
from tests.helpers import needs_torch

pytestmark = [needs_torch, pytest.mark.slow]  # the load's own code on the CPU: imports torch


@pytest.fixture
def cpu():
    """The worker's view of its device, here the CPU; torch is imported by the tests that run, not at collection."""
    import torch

    return SimpleNamespace(cuda=False, device=torch.device("cpu"))


@pytest.fixture(autouse=True)
def fresh_operands():
    clear_kept()
    yield
    clear_kept()


def _step(tmp_path, index=1, seconds=0.05, memtest=True, **changes) -> SustainedRoundStep:
    return SustainedRoundStep(
        gpu=1, round=index, ends_at=time.time() + seconds, size=32, dtype="float32", chunk=4,
        hbm=HbmStep(gpu=1, size_bytes=1 << 16, warmup=1, iterations=2),
        memtest=MemtestStep(gpu=1, fraction=0.9, max_bytes=1 << 20, chunk_bytes=1 << 18, time_cap_s=30) if memtest else None,
        control_dir=str(tmp_path), **changes,
    )


def test_a_round_checks_every_product_then_measures_hbm_and_the_memory(tmp_path, cpu):
    records = {r["key"]: r for r in sustained_round(_step(tmp_path), cpu)}
    assert sorted(records) == ["load/gemm/gpu1", "load/hbm_copy/gpu1", "load/hbm_triad/gpu1", "load/memtest/gpu1"]
    gemm = records["load/gemm/gpu1"]
    assert gemm["repeats"] >= 4 and gemm["repeats"] % 4 == 0 and gemm["verify_repeats"] == gemm["repeats"] - 1
    assert gemm["mismatches"] == 0 and gemm["nonfinite"] == 0 and gemm["reference_wrong"] == 0 and gemm["tflops"] > 0
    assert records["load/memtest/gpu1"]["mismatches"] == 0 and records["load/memtest/gpu1"]["bytes_tested"] > 0
    assert not memtest_flag(tmp_path, 1).exists() and not memtest_due_flag(tmp_path, 1).exists()


def test_a_round_begun_after_its_end_still_measures_one_chunk(tmp_path, cpu):
    (gemm,) = [r for r in sustained_round(_step(tmp_path, seconds=-10, memtest=False), cpu) if r["load"] == "gemm"]
    assert gemm["repeats"] == 4


def test_a_corrupted_product_is_counted_in_its_round_only(tmp_path, cpu):
    drills = Drills.from_environment({"GPUACCEPT_INJECT_CORRUPT_GEMM": "gpu1"})
    first = next(r for r in sustained_round(_step(tmp_path, 1, memtest=False), cpu, drills) if r["load"] == "gemm")
    second = next(r for r in sustained_round(_step(tmp_path, 2, memtest=False), cpu, drills) if r["load"] == "gemm")
    assert first["mismatches"] == 1 and second["mismatches"] == 0


def test_after_the_stop_flag_the_rounds_left_give_nothing_at_once(tmp_path, cpu):
    (tmp_path / STOP_FLAG).touch()
    began = time.monotonic()
    records = sustained_round(_step(tmp_path, seconds=600), cpu)
    assert time.monotonic() - began < 60  # not the round's 10 minutes
    assert all(r.get("skipped") for r in records) and len(records) == 4


def test_a_memory_test_due_while_a_fabric_stage_runs_waits_then_runs(tmp_path, cpu):
    (tmp_path / FABRIC_FLAG).touch()
    # the wait is bounded (a driver that died leaves its flag): with none allowed it runs at once, saying it was due
    records = {r["key"]: r for r in sustained_round(_step(tmp_path, memtest_wait_s=0), cpu)}
    assert records["load/memtest/gpu1"]["bytes_tested"] > 0
    assert not memtest_due_flag(tmp_path, 1).exists() and not memtest_flag(tmp_path, 1).exists()


def test_the_memory_test_lets_its_memory_go_when_it_returns(monkeypatch, cpu):
    chunks: list[weakref.ref] = []
    original = load_steps._Memtest.__init__

    def keep_refs(self, chunk_list, *args):
        chunks.extend(weakref.ref(chunk) for chunk in chunk_list)
        original(self, chunk_list, *args)

    monkeypatch.setattr(load_steps._Memtest, "__init__", keep_refs)
    gc.disable()  # the memory must go without a garbage collection: a worker goes on after it
    try:
        step = MemtestStep(gpu=0, fraction=0.9, max_bytes=1 << 20, chunk_bytes=1 << 18, time_cap_s=30)
        assert load_steps.measure_memtest(step, cpu)["bytes_tested"] > 0
        assert chunks and all(ref() is None for ref in chunks)
    finally:
        gc.enable()


def test_the_memory_test_counts_on_the_device_and_says_where_its_time_went():
    import torch

    from gpuaccept.measure.worker import Rank

    me = Rank(rank=0, world=1, local_rank=0, device=torch.device("cpu"), backend="gloo")
    step = MemtestStep(gpu=0, fraction=0.9, max_bytes=8 << 20, chunk_bytes=1 << 20, time_cap_s=60)
    found = load_steps.measure_memtest(step, me, Drills.from_environment({"GPUACCEPT_INJECT_MEMTEST_FLIP": "gpu0"}))
    # the bit flipped after the first pattern is written is read back wrong once, in that pass alone
    assert found["mismatches"] == 1 and found["passes_done"] == found["passes_planned"] == 36 and not found["capped"]
    parts = {name.removeprefix("memory test on gpu0: ") for name in me.phases}
    assert parts == {"allocation", "own address", "seeded random", "moving inversions", "walking ones"}


def test_a_memory_test_cut_by_its_time_cap_keeps_the_mismatches_its_last_pass_found(monkeypatch, cpu):
    ticks = []

    def tick(self):  # the time cap, reached as the first pass reads its first chunk back
        ticks.append(1)
        if len(ticks) > len(self.chunks):
            raise load_steps._OutOfTime

    monkeypatch.setattr(load_steps._Memtest, "_tick", tick)
    step = MemtestStep(gpu=0, fraction=0.9, max_bytes=8 << 20, chunk_bytes=1 << 20, time_cap_s=60)
    found = load_steps.measure_memtest(step, cpu, Drills.from_environment({"GPUACCEPT_INJECT_MEMTEST_FLIP": "gpu0"}))
    assert found["passes_done"] == 0 and found["capped"] and found["mismatches"] == 1  # counted, though its pass was cut short


def _faults_in_walking_ones(monkeypatch, bit: int) -> None:
    """After the walking-ones pass of `bit` is written: three words of the second chunk lose the
    bit (all of a chunk's bounds below it), one word of the last chunk gains another bit."""
    original = load_steps._Memtest._fill_every_chunk

    def fill_then_fault(self, value):
        original(self, value)
        if value == 1 << bit:
            self.chunks[1][10:13].zero_()
            self.chunks[-1][0:1].fill_((1 << bit) | 1)

    monkeypatch.setattr(load_steps._Memtest, "_fill_every_chunk", fill_then_fault)


def test_a_walking_ones_pass_counts_every_word_read_back_wrong(monkeypatch, cpu):
    _faults_in_walking_ones(monkeypatch, 5)
    step = MemtestStep(gpu=0, fraction=0.9, max_bytes=8 << 20, chunk_bytes=1 << 20, time_cap_s=60)
    found = load_steps.measure_memtest(step, cpu)
    assert found["mismatches"] == 4 and found["passes_done"] == 36


def test_a_walking_ones_pass_cut_by_the_time_cap_counts_the_chunks_it_read(monkeypatch, cpu):
    _faults_in_walking_ones(monkeypatch, 0)
    step = MemtestStep(gpu=0, fraction=0.9, max_bytes=8 << 20, chunk_bytes=1 << 20, time_cap_s=60)
    original_tick = load_steps._Memtest._tick

    def tick(self):  # the time cap, reached in the first walking-ones pass after its third chunk is read
        original_tick(self)
        if self.done == 4 and len(self.bounds) == 3:
            raise load_steps._OutOfTime

    monkeypatch.setattr(load_steps._Memtest, "_tick", tick)
    found = load_steps.measure_memtest(step, cpu)
    # the second chunk's three words were read before the cap; the last chunk's word never was
    assert found["passes_done"] == 4 and found["capped"] and found["mismatches"] == 3


def test_a_duration_is_spread_over_rounds_with_the_memory_test_at_its_interval():
    assert rounds_of(1800, 30) == 60 and rounds_of(20, 30) == 1 and rounds_of(100, 30) == 3
    assert memtest_rounds(60, 30.0, 300.0) == {1, 11, 21, 31, 41, 51}
    assert memtest_rounds(3, 40.0, 60.0) == {1, 3}
    assert memtest_rounds(4, 30.0, 3600.0) == {1}
