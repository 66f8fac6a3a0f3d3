"""Loads of one GPU alone: sustained GEMM, HBM bandwidth and a memory pattern test.

Each runs in a worker process of its own that sees one GPU (the compute stage starts one per GPU
at once, so every GPU is loaded while the others are); on a machine without CUDA the same code
runs on the CPU device with the small sizes the project's tests set.

- GEMM: `repeats` back-to-back n x n x n products timed with CUDA events, TFLOP/s = 2 n^3 / t.
  Then the check gpu-burn makes, and one more: the last product of the timed loop and
  `verify_repeats` further ones are compared with the first result bit for bit (the same inputs
  on the same GPU give the same bits), NaN and Inf are counted in the first result, and a block of
  the first result is compared with a float32 product of the same inputs within a tolerance that
  covers rounding to the output type.
- HBM: a device-to-device copy (bytes read and written counted) and a STREAM triad a = b + s*c
  (two arrays read, one written), float32; both results checked exactly (the inputs are small
  integers, so the triad's result is exact in float32).
- Memory test: int32 chunks over `fraction` of the memory free when it begins, each pattern
  written over every chunk before any is read back (a fault that aliases two addresses shows):
  own address, seeded random, moving inversions (0/1, 5/A: write p; ascending, check p and write
  ~p; descending, check ~p and write p), walking ones (one bit of 32 per pass). Passes run in that
  order until the time cap; the record says how many ran. Each chunk's mismatches are counted on
  the GPU and added there; the host waits for the GPU once a pass, not once a chunk (a wait a chunk
  left the GPU idle between a chunk's check and the next one's). A pass of one constant (walking
  ones) reads each chunk back as its least and greatest word, and counts word by word only the
  chunks where those are not the constant.

The drills (measure/drills.py, from the plan), each naming GPUs as test ids do: `slow_gemm` makes
that GPU's timed products wait SLOW_GEMM_S after each one (the GPU idles, as one held back by
another load); `corrupt_gemm` changes one element of a verification product; `memtest_flip` flips
one bit of memory after the first pattern is written.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from typing import Any

from gpuaccept.measure.drills import NO_DRILLS, SLOW_GEMM_S, Drills, names_gpu
from gpuaccept.measure.plan import GemmStep, HbmStep, MemtestStep
from gpuaccept.measure.timing import phase, time_operation, untimed
from gpuaccept.vocabulary.steps import LoadKey

REFERENCE_BLOCK = 256  # rows and columns of the first result compared with a float32 product
# |got - ref| <= RTOL |ref| + ATOL rms(ref): bf16 output rounding is 2^-9 relative; reductions in bf16
# (torch allows them for speed) add a few of those. A flipped exponent or high mantissa bit is far out.
REFERENCE_RTOL = 0.02
REFERENCE_ATOL = 0.02
CPU_MEMTEST_BYTES = 64 << 20  # the CPU device's memory test, where the step gives no cap
TRIAD_SCALAR = 3.0


def measure_load(step: GemmStep | HbmStep | MemtestStep, me: Any, drills: Drills = NO_DRILLS) -> list[dict]:
    import torch

    if not me.cuda:
        torch.set_num_threads(1)  # one worker per "GPU" on a few cores: keep them from fighting
    if isinstance(step, GemmStep):
        return [measure_gemm(step, me, drills)]
    if isinstance(step, HbmStep):
        return measure_hbm(step, me)
    return [measure_memtest(step, me, drills)]


def _generator(device: Any, seed: int) -> Any:
    import torch

    return torch.Generator(device=device).manual_seed(seed)


def measure_gemm(step: GemmStep, me: Any, drills: Drills = NO_DRILLS) -> dict:
    import torch

    n, device = step.size, me.device
    a, b = gemm_operands(step.gpu, n, step.dtype, device)
    out = torch.empty(n, n, dtype=a.dtype, device=device)

    def product() -> None:
        torch.matmul(a, b, out=out)

    for _ in range(step.warmup):
        product()
    first = torch.matmul(a, b)
    timed = product
    if names_gpu(drills.slow_gemm, step.gpu):

        def timed() -> None:
            product()
            time.sleep(SLOW_GEMM_S)

    seconds = time_operation(timed, step.repeats, me)
    # the last product of the sustained loop, then untimed ones: each must equal the first
    mismatches = int((out != first).sum().item())
    for repeat in range(step.verify_repeats):
        product()
        if repeat == 0 and names_gpu(drills.corrupt_gemm, step.gpu):
            flat = out.view(-1)
            flat[0] += flat[0].abs() + 1  # the injected fault: one element of one result is off
        mismatches += int((out != first).sum().item())
    return {
        "key": str(LoadKey("gemm", step.gpu)),
        "load": "gemm",
        "gpu": step.gpu,
        "size": n,
        "dtype": step.dtype,
        "repeats": step.repeats,
        "verify_repeats": step.verify_repeats,
        "time_us": seconds * 1e6,
        "tflops": 2 * n**3 / seconds / 1e12,
        "mismatches": mismatches,
        **check_first_product(a, b, first),
    }


def gemm_operands(gpu: int, n: int, dtype_name: str, device: Any) -> tuple[Any, Any]:
    """The two factors of a GPU's products: seeded by the GPU, the same on every run."""
    import torch

    dtype = getattr(torch, dtype_name)
    generator = _generator(device, 1234 + gpu)
    a = torch.randn(n, n, generator=generator, device=device).to(dtype)
    b = torch.randn(n, n, generator=generator, device=device).to(dtype)
    return a, b


def check_first_product(a: Any, b: Any, first: Any) -> dict[str, Any]:
    """The first product against the inputs: NaN and Inf counted over all of it, and a block
    compared with a float32 product of the same inputs within a tolerance that covers rounding to
    the output type. Every later product is compared with this one, bit for bit."""
    import torch

    n = first.shape[0]
    nonfinite = int((~torch.isfinite(first)).sum().item())
    block = min(n, REFERENCE_BLOCK)
    reference = a[:block].float() @ b[:, :block].float()
    got = first[:block, :block].float()
    scale = float(reference.pow(2).mean().sqrt().item())
    error = (got - reference).abs()
    allowed = REFERENCE_RTOL * reference.abs() + REFERENCE_ATOL * scale
    reference_wrong = int((~(error <= allowed)).sum().item())  # NaN counts as wrong
    worst = float((error / (reference.abs() + scale)).max().item()) if scale > 0 else 0.0
    return {
        "nonfinite": nonfinite,
        "reference_wrong": reference_wrong,
        "reference_elements": block * block,
        "reference_max_error": worst if math.isfinite(worst) else None,  # NaN or Inf in the block: no error to give
    }


def measure_hbm(step: HbmStep, me: Any) -> list[dict]:
    import torch

    device = me.device
    elements = max(1, step.size_bytes // 4)
    generator = _generator(device, 4321 + step.gpu)
    # small integers: b + 3c is exact in float32, so the triad's result is checked exactly
    b = torch.randint(0, 1024, (elements,), generator=generator, device=device).float()
    c = torch.randint(0, 1024, (elements,), generator=generator, device=device).float()
    a = torch.empty_like(b)

    def copy() -> None:
        a.copy_(b)

    def triad() -> None:
        torch.add(b, c, alpha=TRIAD_SCALAR, out=a)

    results = []
    for what, operation, moved, expected in (
        ("hbm_copy", copy, 2 * elements * 4, lambda: b),
        ("hbm_triad", triad, 3 * elements * 4, lambda: b + TRIAD_SCALAR * c),
    ):
        for _ in range(step.warmup):
            operation()
        seconds = time_operation(operation, step.iterations, me)
        wrong = int((a != expected()).sum().item())
        results.append({
            "key": str(LoadKey(what, step.gpu)),  # type: ignore[arg-type]  # one of the two kinds above
            "load": what,
            "gpu": step.gpu,
            "size_bytes": elements * 4,
            "iterations": step.iterations,
            "time_us": seconds * 1e6,
            "GBps": moved / seconds / 1e9,
            "wrong": wrong,
        })
    return results


def measure_memtest(step: MemtestStep, me: Any, drills: Drills = NO_DRILLS) -> dict:
    import torch

    device = me.device
    began = time.monotonic()
    if me.cuda:
        torch.cuda.empty_cache()  # what earlier steps of this worker cached is free memory too
        free, total = torch.cuda.mem_get_info(device)
    else:
        free = total = step.max_bytes or CPU_MEMTEST_BYTES
    words = max(1, step.chunk_bytes // 4)
    budget = int(free * step.fraction) - words * 4  # the scratch chunk comes out of it
    if step.max_bytes is not None:
        budget = min(budget, step.max_bytes)
    chunks = []
    with phase(me, f"{step.label}: allocation"):
        try:
            while (len(chunks) + 1) * words * 4 <= max(budget, words * 4):
                chunks.append(torch.empty(words, dtype=torch.int32, device=device))
        except torch.OutOfMemoryError:
            if not chunks:
                raise
        scratch = torch.empty(words, dtype=torch.int32, device=device)
    # its passes measure whether memory holds what was written, never how fast: what starts beside
    # them changes nothing they judge (the allocation before, the driver's busiest part, it would slow)
    untimed(me)
    test = _Memtest(chunks, scratch, step, began, device, names_gpu(drills.memtest_flip, step.gpu))
    test.run(lambda name: phase(me, f"{step.label}: {name}"))
    found = {
        "key": str(LoadKey("memtest", step.gpu)),
        "load": "memtest",
        "gpu": step.gpu,
        "bytes_tested": len(chunks) * words * 4,
        "free_bytes": int(free),
        "total_bytes": int(total),
        "chunk_bytes": words * 4,
        "passes_planned": len(test.passes),
        "passes_done": test.done,
        "mismatches": test.mismatches,
        "capped": test.done < len(test.passes),
        "seconds": time.monotonic() - began,
    }
    # the test's passes refer back to it, so it outlives this call until a garbage collection: its
    # memory is let go here, for a worker that goes on (the sustained load) and for what runs beside it
    chunks.clear()
    test.scratch = None
    return found


def _int32(value: int) -> int:
    """A 32-bit pattern as the int32 value that holds it."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class _OutOfTime(Exception):
    pass


class _Memtest:
    def __init__(self, chunks: list, scratch: Any, step: MemtestStep, began: float, device: Any, flip: bool):
        import torch

        self.chunks, self.scratch, self.step, self.began, self.device = chunks, scratch, step, began, device
        self.mismatches = 0
        self.done = 0
        self.flip = flip  # the memtest_flip drill
        self.counted = torch.zeros((), dtype=torch.int64, device=device)  # the pass's mismatches so far, on the device
        # a constant pass's chunks as read back: the chunk, its least and greatest word (on the device), the constant
        self.bounds: list[tuple[Any, Any, Any, int]] = []
        inversions = [0x00000000, 0x55555555]
        # each pass with the part of the test it belongs to, as its time is reported
        self.passes = (
            [("own address", self._own_address), ("seeded random", self._random)]
            + [("moving inversions", lambda p=p: self._moving_inversions(p)) for p in inversions]
            + [("walking ones", lambda bit=bit: self._constant(1 << bit)) for bit in range(32)]
        )

    def run(self, timed: Callable[[str], Any] = lambda part: contextlib.nullcontext()) -> None:
        """Every pass in order until the time cap; `timed(part)` times each pass under its part's name."""
        for part, run_pass in self.passes:
            with timed(part):
                try:
                    run_pass()
                except _OutOfTime:
                    # the chunks of the pass cut short that were checked count too (it is not done)
                    self.mismatches += self._pass_mismatches()
                    return
                self.mismatches += self._pass_mismatches()  # the host waits for the pass here, once
            self.done += 1

    def _pass_mismatches(self) -> int:
        """The mismatches of the pass: those counted on the device, and those of each chunk whose
        bounds said it is not all its constant (counted now, before the next pass writes it)."""
        import torch

        counted = self.counted
        if self.bounds:
            chunks, lows, highs, values = zip(*self.bounds, strict=True)
            expected = torch.tensor(values, dtype=torch.int32, device=self.device)
            off = ((torch.stack(lows) != expected) | (torch.stack(highs) != expected)).nonzero().flatten().tolist()
            for index in off:  # a fault: its chunk counted word by word, as every other pass counts
                counted = counted + (chunks[index] != values[index]).sum()
            self.bounds = []
        found = int(counted.item())
        self.counted.zero_()
        return found

    def _tick(self) -> None:
        if time.monotonic() - self.began > self.step.time_cap_s:
            raise _OutOfTime

    def _written(self) -> None:
        """After the first pattern is written: the injected fault, one bit flipped."""
        if self.flip:
            self.chunks[0][7:8].bitwise_xor_(1)
            self.flip = False

    def _count(self, chunk: Any, expected: Any) -> None:
        self.counted += (chunk != expected).sum()
        self._tick()

    def _fill_every_chunk(self, value: int) -> None:
        for chunk in self.chunks:
            chunk.fill_(value)
            self._tick()
        self._written()

    def _constant(self, pattern: int) -> None:
        """Every chunk filled with `pattern`, then read back as its least and greatest word: all
        equal the pattern exactly when both do. One read of each word, where comparing word by word
        reads it, writes a mask and reads that again (the 32 walking-ones passes took three
        quarters of the test that way). A chunk whose bounds differ is counted word by word at the
        end of the pass, before anything writes it again."""
        import torch

        value = _int32(pattern)
        self._fill_every_chunk(value)
        for chunk in self.chunks:
            low, high = torch.aminmax(chunk)
            self.bounds.append((chunk, low, high, value))
            self._tick()

    def _address_pattern(self, index: int) -> Any:
        import torch

        torch.arange(self.scratch.numel(), dtype=torch.int32, device=self.device, out=self.scratch)
        # a tag per chunk: every word's value differs from its neighbours' in other chunks too
        return self.scratch.bitwise_xor_(_int32(index * 0x9E3779B1) & 0x7FFFFFFF)

    def _own_address(self) -> None:
        self._write_then_check(self._address_pattern)

    def _random_pattern(self, index: int) -> Any:
        import torch

        generator = _generator(self.device, self.step.seed * 1_000_003 + index)
        return torch.randint(-(1 << 31), (1 << 31) - 1, (self.scratch.numel(),), generator=generator, dtype=torch.int32,
                             device=self.device, out=self.scratch)

    def _random(self) -> None:
        self._write_then_check(self._random_pattern)

    def _write_then_check(self, pattern_of: Callable[[int], Any]) -> None:
        """Every chunk written with its own pattern before any is read back: a fault that aliases
        one address onto another shows as a mismatch in the chunk written first."""
        for index, chunk in enumerate(self.chunks):
            chunk.copy_(pattern_of(index))
            self._tick()
        self._written()
        for index, chunk in enumerate(self.chunks):
            self._count(chunk, pattern_of(index))

    def _moving_inversions(self, pattern: int) -> None:
        value, inverse = _int32(pattern), _int32(~pattern)
        self._fill_every_chunk(value)
        for chunk in self.chunks:
            self._count(chunk, value)
            chunk.fill_(inverse)
        for chunk in reversed(self.chunks):
            self._count(chunk, inverse)
            chunk.fill_(value)
