"""Per-GPU load checks: GEMM throughput, its spread over the machine's GPUs, GEMM correctness, HBM
copy and triad bandwidth, and the memory pattern test. One verdict per GPU each.

A GPU whose load hung or crashed fails its tests with the step named. Facts that hold no per-GPU
loads at all (recorded before the compute stage existed, or with a profile that asked for none)
could not judge the values the profile asks for: never passed, never skipped; a live run always
measures them. Wrong data (a GEMM result that differs from the first, NaN or
Inf, a memory word read back wrong) fails at once and is never measured away.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuaccept.checks.declare import GPU, StepKeys, check
from gpuaccept.checks.missing import PER_GPU_LOADS
from gpuaccept.checks.verdict import AtLeast, Better, Criterion, Equals, Judge, Verdict
from gpuaccept.facts.measurements import ComputeSweep, GemmResult, HbmResult, MemtestResult
from gpuaccept.facts.model import Facts
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.display import show
from gpuaccept.vocabulary.links import gpu_key
from gpuaccept.vocabulary.steps import LoadKey, LoadKind, StepKey

GIB = 1 << 30

Result = GemmResult | HbmResult | MemtestResult


def _keys(what: LoadKind) -> StepKeys:
    def keys(profile: Profile, gpu: int) -> list[StepKey]:
        return [LoadKey(what, gpu)]

    return keys


def _asked(profile: Profile) -> bool:
    """Whether the profile asks for the per-GPU loads: the compute stage runs them only then."""
    return profile.spec.compute is not None


def _load(what: LoadKind) -> Callable[[int], StepKey]:
    """The key of a load on one GPU: a burn-in runs some loads (the memory test) in some rounds only."""
    return lambda gpu: LoadKey(what, gpu)


def _result(judge: Judge, profile: Profile, facts: Facts, key: LoadKey, criterion: Criterion) -> Result | Verdict:
    """The GPU's result for one load, or the verdict that says why there is none."""
    subject = gpu_key(key.gpu)
    sweep = facts.measurements.compute
    if sweep is None:
        return judge.missing(subject, PER_GPU_LOADS, criterion)
    failure = sweep.failure(key)
    if failure:
        return judge.step_failed(subject, failure, criterion)
    result = sweep.result(key)
    if result is None:
        return judge.failed(subject, f"not measured ({facts.gpu_count} GPU(s) under test)", None, criterion)
    return result


def _error_text(error: float | None) -> str:
    return "not a number: the block held NaN or Inf" if error is None else f"{error:.2g}"


def _gemm_note(result: GemmResult) -> str:
    return f"{result.dtype} {result.size}x{result.size}x{result.size}, {result.repeats} products, {result.time_us:.0f} us each"


@check(subjects=GPU, marginal=True, stage="compute", asked=_asked, key_of=_load("gemm"), attempts=_keys("gemm"), headline=True,
       fleet=True, better=Better.HIGHER)
def gemm_throughput(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """Sustained GEMM throughput of the GPU is at least the profile's `compute.gemm.min_tflops`."""
    compute = profile.spec.compute
    gemm = compute.gemm if compute else None
    if gemm is None or gemm.min_tflops is None:
        return judge.not_applicable(gpu_key(gpu), "the profile sets no compute.gemm.min_tflops")
    criterion = AtLeast(gemm.min_tflops, "TFLOP/s")
    result = _result(judge, profile, facts, LoadKey("gemm", gpu), criterion)
    if isinstance(result, Verdict):
        return result
    assert isinstance(result, GemmResult)
    context = {"time_us": round(result.time_us, 1), "size": result.size, "dtype": result.dtype}
    return judge(gpu_key(gpu), "GEMM", result.tflops, criterion, note=_gemm_note(result), context=context)


def _best(sweep: ComputeSweep, gpus: int) -> GemmResult | None:
    measured = [r for r in sweep.results if isinstance(r, GemmResult) and r.gpu < gpus]
    return max(measured, key=lambda r: r.tflops, default=None)


@check(subjects=GPU, marginal=True, stage="compute", asked=_asked, measured_again=False, key_of=_load("gemm"), attempts=_keys("gemm"))
def gemm_within_best(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """The GPU's GEMM throughput is within the profile's share of the machine's best GPU."""
    compute = profile.spec.compute
    gemm = compute.gemm if compute else None
    if gemm is None or gemm.within_best is None:
        return judge.not_applicable(gpu_key(gpu), "the profile sets no compute.gemm.within_best")
    result = _result(judge, profile, facts, LoadKey("gemm", gpu), AtLeast(0.0, "TFLOP/s"))
    if isinstance(result, Verdict):
        return result
    assert isinstance(result, GemmResult) and facts.measurements.compute is not None
    best = _best(facts.measurements.compute, profile.gpu_count) or result
    criterion = AtLeast(best.tflops * (1 - gemm.within_best), "TFLOP/s")
    measured = sorted(r.gpu for r in facts.measurements.compute.results if isinstance(r, GemmResult))
    note = (
        f"at most {gemm.within_best:.0%} below the best GPU, {gpu_key(best.gpu)} at {show(best.tflops, 'TFLOP/s')}; "
        f"{len(measured)} of {profile.gpu_count} GPU(s) measured"
    )
    context = {"best_gpu": gpu_key(best.gpu), "best_tflops": round(best.tflops, 2), "share_of_best": round(result.tflops / best.tflops, 4)}
    return judge(gpu_key(gpu), "GEMM", result.tflops, criterion, note=note, context=context)


@check(subjects=GPU, stage="compute", asked=_asked, measured_again=False, key_of=_load("gemm"), attempts=_keys("gemm"))
def gemm_correct(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """Every repeated GEMM product equals the first, holds no NaN or Inf, and is within tolerance of a float32 reference."""
    compute = profile.spec.compute
    if compute is None or compute.gemm is None:
        return judge.not_applicable(gpu_key(gpu), "the profile sets no compute.gemm")
    criterion = Equals(0, "wrong elements")
    result = _result(judge, profile, facts, LoadKey("gemm", gpu), criterion)
    if isinstance(result, Verdict):
        return result
    assert isinstance(result, GemmResult)
    wrong = result.mismatches + result.nonfinite + result.reference_wrong
    detail = (
        f"{result.mismatches} element(s) differing from the first result over {result.verify_repeats + 1} compared product(s), "
        f"{result.nonfinite} NaN/Inf, {result.reference_wrong} of {result.reference_elements} outside the float32 reference's "
        f"tolerance (largest error {_error_text(result.reference_max_error)})"
    )
    context = {
        "mismatches": result.mismatches,
        "nonfinite": result.nonfinite,
        "reference_wrong": result.reference_wrong,
        "reference_max_error": result.reference_max_error,
    }
    if wrong:
        message = f"GEMM result check: {criterion.violation(wrong)}: {detail} ({_gemm_note(result)})"
        return judge.failed(gpu_key(gpu), message, wrong, criterion, context=context, final=True)
    return judge(gpu_key(gpu), "GEMM result check:", wrong, criterion, note=detail, context=context)


def _hbm(judge: Judge, what: LoadKind, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    compute = profile.spec.compute
    hbm = compute.hbm if compute else None
    name = "copy_min" if what == "hbm_copy" else "triad_min"
    floor = getattr(hbm, name) if hbm else None
    if floor is None:
        return judge.not_applicable(gpu_key(gpu), f"the profile sets no compute.hbm.{name}")
    criterion = AtLeast(floor, "GB/s")
    result = _result(judge, profile, facts, LoadKey(what, gpu), criterion)
    if isinstance(result, Verdict):
        return result
    assert isinstance(result, HbmResult)
    label = "HBM copy" if what == "hbm_copy" else "HBM triad"
    if result.wrong:
        message = f"{label}: {result.wrong} element(s) of the result wrong, {result.GBps:.1f} GB/s"
        return judge.failed(gpu_key(gpu), message, result.GBps, criterion, final=True)
    moved = "read and written" if what == "hbm_copy" else "two arrays read, one written"
    note = f"{result.size_bytes / GIB:.3g} GiB arrays, bytes {moved}, {result.time_us:.0f} us"
    return judge(gpu_key(gpu), label, result.GBps, criterion, note=note, context={"time_us": round(result.time_us, 1)})


@check(subjects=GPU, marginal=True, stage="compute", asked=_asked, key_of=_load("hbm_copy"), attempts=_keys("hbm_copy"), headline=True,
       fleet=True, better=Better.HIGHER)
def hbm_copy(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """HBM copy bandwidth of the GPU is at least the profile's `compute.hbm.copy_min`."""
    return _hbm(judge, "hbm_copy", profile, facts, gpu)


@check(subjects=GPU, marginal=True, stage="compute", asked=_asked, key_of=_load("hbm_triad"), attempts=_keys("hbm_triad"), headline=True,
       fleet=True, better=Better.HIGHER)
def hbm_triad(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """HBM triad bandwidth of the GPU is at least the profile's `compute.hbm.triad_min`."""
    return _hbm(judge, "hbm_triad", profile, facts, gpu)


@check(subjects=GPU, stage="compute", asked=_asked, measured_again=False, key_of=_load("memtest"))
def memtest(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """A memory pattern test over most of the GPU's free memory reads every word back right."""
    compute = profile.spec.compute
    if compute is None or compute.memtest is None:
        return judge.not_applicable(gpu_key(gpu), "the profile sets no compute.memtest")
    criterion = Equals(0, "mismatches")
    result = _result(judge, profile, facts, LoadKey("memtest", gpu), criterion)
    if isinstance(result, Verdict):
        return result
    assert isinstance(result, MemtestResult)
    capped = f" (time cap {compute.memtest.time_cap_s:g} s)" if result.capped else ""
    note = (
        f"{result.bytes_tested / GIB:.3g} GiB of {result.free_bytes / GIB:.3g} GiB free, "
        f"{result.passes_done} of {result.passes_planned} passes in {result.seconds:.1f} s{capped}"
    )
    context = {"bytes_tested": result.bytes_tested, "passes_done": result.passes_done, "passes_planned": result.passes_planned}
    if result.bytes_tested == 0 or result.passes_done == 0:
        # no mismatch in no memory is no evidence: a test that tested nothing is never a pass
        tested = AtLeast(1, "passes")
        message = f"memory test tested nothing: {result.passes_done} passes < 1 pass ({note})"
        return judge.failed(gpu_key(gpu), message, result.passes_done, tested, context=context, final=True)
    if result.mismatches:
        message = f"memory test: {criterion.violation(result.mismatches)} ({note})"
        return judge.failed(gpu_key(gpu), message, result.mismatches, criterion, context=context, final=True)
    return judge(gpu_key(gpu), "memory test:", result.mismatches, criterion, note=note, context=context)
