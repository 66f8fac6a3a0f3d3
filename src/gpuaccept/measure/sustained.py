"""A burn-in's sustained load on one GPU, one round at a time (plan.SustainedRoundStep).

The load is the one gpu-burn runs, on the tensor cores: n x n x n products back to back, each
result compared with the first on the GPU itself (the same inputs on the same GPU give the same
bits), so a GPU that computes wrong once it is hot shows it in the round it did. Products are issued
in chunks: a chunk's products are timed together with CUDA events (the throughput of the products
alone, as the standard GEMM measures it), then each is compared with the first. The host waits for
a chunk only once the next one is queued behind it, so the GPU never runs dry between chunks, nor
between rounds: the worker keeps its matrices and its first product (with that product's check
against a float32 reference) for all its rounds.

After the products, a round measures the HBM copy and triad and, where its step asks, runs the
memory test (load_steps.py), both on the GPU still warm from the products. The memory test takes
most of the free memory; a fabric stage beside the load needs some, so the two never overlap: the
driver's `fabric` flag holds a memory test back (products go on meanwhile), and this worker's
`memtest-gpuN` flag holds a fabric stage back (stages/sustained.py). Each side raises its own flag
before it looks at the other's, so one of them always sees the other. A memory test that is due
also says so (`memtest-gpuN.due`), and the driver starts no new fabric stage until it has run:
fabric stages back to back cannot hold it off for good.

The drills as for the per-GPU loads (load_steps.py, from the plan): `slow_gemm` idles the GPU after
each product, `corrupt_gemm` changes one element of one product in the first round, `memtest_flip`
flips one bit in the memory test.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuaccept.measure.drills import NO_DRILLS, Drills, names_gpu
from gpuaccept.measure.load_steps import (
    SLOW_GEMM_S,
    check_first_product,
    gemm_operands,
    measure_hbm,
    measure_memtest,
)
from gpuaccept.measure.plan import SustainedRoundStep
from gpuaccept.vocabulary.steps import LoadKey

WARMUP_PRODUCTS = 3
STOP_FLAG = "stop"
FABRIC_FLAG = "fabric"


def memtest_flag(control_dir: str | Path, gpu: int) -> Path:
    return Path(control_dir) / f"memtest-gpu{gpu}"


def memtest_due_flag(control_dir: str | Path, gpu: int) -> Path:
    return Path(control_dir) / f"memtest-gpu{gpu}.due"


@dataclass
class _Operands:
    a: Any
    b: Any
    outs: list[Any]  # one output per product of a chunk: every product is compared, none overwritten first
    first: Any
    first_check: dict[str, Any]  # the first product against a float32 reference (check_first_product)


_KEPT: dict[tuple, _Operands] = {}  # this worker's operands, kept from round to round


def _operands(step: SustainedRoundStep, me: Any) -> _Operands:
    import torch

    key = (step.gpu, step.size, step.dtype, step.chunk)
    if key not in _KEPT:
        a, b = gemm_operands(step.gpu, step.size, step.dtype, me.device)
        outs = [torch.empty_like(a) for _ in range(step.chunk)]
        for _ in range(WARMUP_PRODUCTS):
            torch.matmul(a, b, out=outs[0])
        first = torch.matmul(a, b)
        _KEPT[key] = _Operands(a, b, outs, first, check_first_product(a, b, first))
    return _KEPT[key]


class _ChunkTimer:
    """Seconds the chunks' products took: CUDA events on the GPU (read one chunk behind, so the
    queue never empties), the host clock on the CPU device, where work is synchronous."""

    def __init__(self, cuda: bool):
        self.cuda = cuda
        self.seconds = 0.0
        self.pending: deque[tuple[Any, Any]] = deque()
        self._began = 0.0
        self._start: Any = None

    def begin(self) -> None:
        if self.cuda:
            import torch

            self._start = torch.cuda.Event(enable_timing=True)
            self._start.record()
        else:
            self._began = time.perf_counter()

    def end(self) -> None:
        if not self.cuda:
            self.seconds += time.perf_counter() - self._began
            return
        import torch

        finished = torch.cuda.Event(enable_timing=True)
        finished.record()
        self.pending.append((self._start, finished))
        while len(self.pending) > 1:  # the chunk before this one: done by the time this one runs
            self._read_oldest()

    def drain(self) -> None:
        while self.pending:
            self._read_oldest()

    def _read_oldest(self) -> None:
        start, finished = self.pending.popleft()
        finished.synchronize()
        self.seconds += start.elapsed_time(finished) / 1e3


def sustained_round(step: SustainedRoundStep, me: Any, drills: Drills = NO_DRILLS) -> list[dict]:
    import torch

    if not me.cuda:
        torch.set_num_threads(1)  # one worker per "GPU" on a few cores: keep them from fighting
    control = Path(step.control_dir)
    stop, fabric, claimed = control / STOP_FLAG, control / FABRIC_FLAG, memtest_flag(control, step.gpu)
    due = memtest_due_flag(control, step.gpu)
    if stop.exists():
        # the burn-in was ended: the rounds still planned give nothing, at once
        return [{"key": str(key), "skipped": True} for key in step.keys]
    operands = _operands(step, me)
    slow = names_gpu(drills.slow_gemm, step.gpu)
    corrupt = step.round == 1 and names_gpu(drills.corrupt_gemm, step.gpu)
    wrong = torch.zeros((), dtype=torch.int64, device=me.device)
    timer = _ChunkTimer(me.cuda)
    products = 0

    def may_end() -> bool:
        if products == 0:
            return False  # every round measures at least one chunk, even one begun after its end
        if stop.exists():
            return True
        if time.time() < step.ends_at:
            return False
        if step.memtest is None:
            return True
        due.touch()
        claimed.touch()  # raised before looking at the driver's flag: one of the two sees the other
        if fabric.exists() and time.time() < step.ends_at + step.memtest_wait_s:
            claimed.unlink()
            return False  # a fabric stage runs beside the load: more products until it is done
        return True

    while not may_end():
        timer.begin()
        for out in operands.outs:
            torch.matmul(operands.a, operands.b, out=out)
            if slow:
                time.sleep(SLOW_GEMM_S)
        timer.end()
        if corrupt:
            flat = operands.outs[0].view(-1)
            flat[0] += flat[0].abs() + 1  # the injected fault: one element of one product is off
            corrupt = False
        for out in operands.outs:
            wrong += (out != operands.first).sum()
        products += len(operands.outs)
    timer.drain()
    n = step.size
    results = [
        {
            "key": str(LoadKey("gemm", step.gpu)),
            "load": "gemm",
            "gpu": step.gpu,
            "size": n,
            "dtype": step.dtype,
            "repeats": products,
            "verify_repeats": products - 1,  # every product is compared with the first: the record counts it so
            "time_us": timer.seconds / products * 1e6,
            "tflops": 2 * n**3 * products / timer.seconds / 1e12,
            "mismatches": int(wrong.item()),
            **operands.first_check,
        }
    ]
    if step.hbm is not None:
        results += measure_hbm(step.hbm, me)
    if step.memtest is not None and stop.exists():
        claimed.unlink(missing_ok=True)
        due.unlink(missing_ok=True)
        results.append({"key": str(LoadKey("memtest", step.gpu)), "skipped": True})  # not begun: the burn-in was ended
    elif step.memtest is not None:
        try:
            results.append(measure_memtest(step.memtest, me, drills))
        finally:
            if me.cuda:
                torch.cuda.empty_cache()  # the memory it tested goes back to the GPU, for the stages beside the load
            claimed.unlink(missing_ok=True)
            due.unlink(missing_ok=True)
    return results


def clear_kept() -> None:
    """Forget the kept operands (the project's tests run rounds in one process)."""
    _KEPT.clear()

