"""Fabric checks: collective bus bandwidth and correctness, pairwise bandwidth, copy bandwidth.

Each bandwidth is judged against the profile's floor and reported with its share of the physical
peak. A measurement that hung or crashed fails its test with the step named; one missing from
replayed facts is an error, never a pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuaccept.checks.declare import GPU, GPU_ORDERED_PAIR, GPU_PAIR, Subjects, check, every_gpu
from gpuaccept.checks.missing import COPY_BANDWIDTH, NCCL_SWEEP, PAIRWISE_SWEEP
from gpuaccept.checks.peaks import Peak, collective_peak, pair_peak, pcie_peak
from gpuaccept.checks.verdict import AtLeast, Better, Context, Criterion, Equals, Judge, Verdict
from gpuaccept.facts.measurements import CollectiveResult, CopyResult, CopySweep
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.collectives import Collective
from gpuaccept.vocabulary.copies import CopyKind, floor_key
from gpuaccept.vocabulary.links import gpu_key, pair_key
from gpuaccept.vocabulary.measures import COPY_MEASURES, Measure
from gpuaccept.vocabulary.sizes import format_size, human_size, parse_size
from gpuaccept.vocabulary.steps import CollectiveKey, CopyKey, PairKey, StepKey, collective_label


def busbw_cases(profile: Profile) -> list[tuple[Collective, str]]:
    """(collective, size as the profile wrote it), in profile order: one test each."""
    nccl = profile.spec.nccl
    if nccl is None:
        return []
    return [(collective, size) for collective, sizes in nccl.busbw.items() for size in sizes]


def case_id(collective: str, size: str) -> str:
    return f"{collective}-{format_size(parse_size(size))}"


BUSBW_CASE = Subjects(
    "busbw_case", lambda profile: list(busbw_cases(profile)), lambda case: case_id(*case), "no collective bandwidth floors",
    "each collective and size the profile sets a floor for", "all_reduce-1GiB", every_gpu,
)


def _pairwise(profile: Profile) -> bool:
    return profile.spec.pairwise is not None


def _with_peak(measured: float, peak: Peak | None) -> tuple[str, Context]:
    if peak is None:
        return "", {}
    share = peak.share(measured)
    return f"{share:.0f}% of {peak.GBps:.1f} GB/s {peak.what} peak", {"peak_GBps": round(peak.GBps, 2), "percent_of_peak": round(share, 1)}


def _collective_result(
    judge: Judge, profile: Profile, facts: Facts, case: tuple[Collective, str], criterion: Criterion
) -> CollectiveResult | Verdict:
    """The sweep's result for one collective and size, or the verdict that says why there is none."""
    key = collective_step_key(case)
    label = collective_label(key.collective, key.size_bytes)
    sweep = facts.measurements.collectives
    if sweep is None:
        return judge.missing(label, NCCL_SWEEP, criterion)
    failure = sweep.failure(key)
    if failure:
        return judge.step_failed(label, failure, criterion)
    result = sweep.result(key.collective, key.nominal_size)
    if result is None:
        return judge.error(label, "no result for this collective and size in the sweep", criterion)
    worlds = _worlds(profile)
    if result.ranks not in worlds:
        # busbw depends on the world it was measured in: another world's figure says nothing of this one
        judged = " or ".join(str(world) for world in worlds)
        message = f"measured on {result.ranks} ranks, but profile {profile.name} judges a world of {judged} GPUs"
        return judge.error(label, message, criterion)
    return result


def _worlds(profile: Profile) -> list[int]:
    """The rank counts a profile's floors are for: one node's GPUs, and every node's where it spans several."""
    cluster = profile.spec.cluster
    return [profile.gpu_count] + ([profile.gpu_count * cluster.nodes] if cluster is not None else [])


def collective_step_key(case: tuple[Collective, str]) -> CollectiveKey:
    """The key of the value a collective check judges: the collective at the profile's size."""
    collective, size_text = case
    return CollectiveKey(collective, parse_size(size_text))


def collective_step_keys(profile: Profile, case: tuple[Collective, str]) -> list[StepKey]:
    return [collective_step_key(case)]


@check(subjects=BUSBW_CASE, marginal=True, stage="nccl", judged_beside_load=False, attempts=collective_step_keys, headline=True,
       fleet=True, better=Better.HIGHER, measure=Measure.COLLECTIVE_BUSBW)
def busbw(judge: Judge, profile: Profile, facts: Facts, case: tuple[Collective, str]) -> Verdict:
    """NCCL bus bandwidth of a collective at a size is at least the profile's floor."""
    collective, size_text = case
    floor = profile.spec.nccl.busbw.get(collective, {}).get(size_text) if profile.spec.nccl else None
    if floor is None:
        return judge.not_applicable(collective_label(collective, parse_size(size_text)), "the profile sets no busbw floor for this size")
    criterion = AtLeast(floor, "GB/s")
    result = _collective_result(judge, profile, facts, case, criterion)
    if isinstance(result, Verdict):
        return result
    note, context = _with_peak(result.busbw_GBps, collective_peak(facts))
    context.update(
        algbw_GBps=round(result.algbw_GBps, 2), time_us=round(result.time_us, 1), ranks=result.ranks, size_bytes=result.size_bytes
    )
    note = "; ".join(part for part in (note, f"algbw {result.algbw_GBps:.1f} GB/s, {result.time_us:.0f} us, {result.ranks} ranks") if part)
    label = collective_label(collective, parse_size(size_text))
    return judge(label, "busbw", result.busbw_GBps, criterion, note=note, context=context)


@check(subjects=BUSBW_CASE, stage="nccl", measured_again=False, attempts=collective_step_keys)
def collective_correct(judge: Judge, profile: Profile, facts: Facts, case: tuple[Collective, str]) -> Verdict:
    """Every element of a collective's result is right: wrong data fails at once."""
    collective, size_text = case
    criterion = Equals(0, "wrong elements")
    result = _collective_result(judge, profile, facts, case, criterion)
    if isinstance(result, Verdict):
        return result
    label = collective_label(collective, parse_size(size_text))
    note = f"{result.dtype}, {result.ranks} ranks"
    if isinstance(result.wrong, Unavailable):
        return judge.unavailable(label, "result check:", result.wrong, criterion)
    if result.wrong:
        return judge.failed(label, f"result check: {criterion.violation(result.wrong)} ({note})", result.wrong, criterion, final=True)
    return judge(label, "result check:", result.wrong, criterion, note=note)


def pair_step_keys(profile: Profile, pair: tuple[int, int]) -> list[StepKey]:
    return [PairKey.between(*pair)]


@check(subjects=GPU_PAIR, marginal=True, stage="nccl", asked=_pairwise, judged_beside_load=False, attempts=pair_step_keys, headline=True,
       fleet=True, better=Better.HIGHER, measure=Measure.PAIR_BUSBW)
def pair_busbw(judge: Judge, profile: Profile, facts: Facts, pair: tuple[int, int]) -> Verdict:
    """Send/receive bandwidth between two GPUs is at least the profile's pairwise floor."""
    subject = pair_key(*pair)
    spec = profile.spec.pairwise
    if spec is None:
        return judge.not_applicable(subject, "the profile sets no pairwise bandwidth")
    criterion = AtLeast(spec.min_busbw, "GB/s")
    sweep = facts.measurements.pairwise
    if sweep is None:
        return judge.missing(subject, PAIRWISE_SWEEP, criterion)
    failure = sweep.failure(PairKey.between(*pair))
    if failure:
        return judge.step_failed(subject, failure, criterion)
    result = sweep.result(*pair)
    if result is None:
        return judge.failed(subject, f"pair not measured ({facts.gpu_count} GPU(s) under test)", None, criterion)
    if result.wrong:  # judged on the wrong count, not on a speed that may well meet its floor
        wrong = Equals(0, "wrong elements")
        return judge.failed(subject, f"{result.wrong} elements arrived wrong in the send/receive check", result.wrong, wrong, final=True)
    note, context = _with_peak(result.busbw_GBps, pair_peak(facts, *pair))
    how = "concurrently with the other pairs of its round" if sweep.concurrent else "alone"
    note = "; ".join(part for part in (note, f"each way, {human_size(result.size_bytes)}, {how}") if part)
    context.update(time_us=round(result.time_us, 1), round=result.round)
    return judge(subject, "send/receive", result.busbw_GBps, criterion, note=note, context=context)


def _copy_verdict(judge: Judge, profile: Profile, facts: Facts, what: CopyKind, gpus: tuple[int, ...], peak: Peak | None) -> Verdict:
    subject = pair_key(*gpus) if len(gpus) == 2 else gpu_key(gpus[0])
    copies = profile.spec.copies
    floor = copies.floor(what) if copies else None
    if floor is None:
        return judge.not_applicable(subject, f"the profile sets no copies.{floor_key(what)}")
    criterion = AtLeast(floor, "GB/s")
    sweep = facts.measurements.copies
    if sweep is None:
        return judge.missing(subject, COPY_BANDWIDTH, criterion)
    failure = sweep.failure(CopyKey(what, gpus))
    if failure:
        return judge.step_failed(subject, failure, criterion)
    result = sweep.result(what, gpus)
    if result is None:
        return judge.failed(subject, f"not measured ({facts.gpu_count} GPU(s) under test)", None, criterion)
    if result.wrong:
        message = f"{result.wrong} bytes differ from the source after the copy"
        return judge.failed(subject, message, result.wrong, Equals(0, "bytes"), final=True)
    note, context = _with_peak(result.GBps, peak)
    beside = _copied_at_once(sweep, result)
    if beside:
        note = "; ".join(part for part in (note, f"at once with {', '.join(pair_key(*r.gpus) for r in beside)}") if part)
        context.update(round=result.round)
    return judge(subject, what.replace("_", " "), result.GBps, criterion, note=note, context=context)


def _copied_at_once(sweep: CopySweep, result: CopyResult) -> list[CopyResult]:
    """The copies that ran at the same time as `result`: of its kind and round, between other GPUs,
    and for one-way copies in the same direction (a round copies from each pair's lower GPU first,
    then back)."""
    if result.round is None:
        return []
    upward = result.gpus[0] < result.gpus[-1]
    return [
        other for other in sweep.results
        if other.what == result.what and other.round == result.round and not set(other.gpus) & set(result.gpus)
        and (result.what != "p2p" or (other.gpus[0] < other.gpus[-1]) == upward)
    ]


def _copy_keys(what: CopyKind) -> Callable[[Profile, Any], list[StepKey]]:
    return lambda profile, gpus: [CopyKey(what, gpus if isinstance(gpus, tuple) else (gpus,))]


def _copies_asked(what: CopyKind) -> Callable[[Profile], bool]:
    """Whether the profile sets a floor for this copy: the copy stage measures it only then."""
    return lambda profile: profile.spec.copies is not None and profile.spec.copies.floor(what) is not None


def _copy(what: CopyKind) -> dict[str, Any]:
    """What every copy check declares: a marginal band, the copy stage, judged on every attempt, a headline
    and fleet value, better higher, and the copy the page draws (none for both directions at once)."""
    return {
        "marginal": True, "stage": "copies", "asked": _copies_asked(what), "judged_beside_load": False, "attempts": _copy_keys(what),
        "headline": True, "fleet": True, "better": Better.HIGHER, "measure": COPY_MEASURES.get(what),
    }


@check(subjects=GPU, **_copy("local"))
def local_copy(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """Copy bandwidth within the GPU is at least the profile's floor."""
    return _copy_verdict(judge, profile, facts, "local", (gpu,), None)


@check(subjects=GPU, **_copy("host_to_device"))
def host_to_device(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """Copy bandwidth from pinned host memory to the GPU is at least the profile's floor."""
    found = facts.gpu(gpu)
    return _copy_verdict(judge, profile, facts, "host_to_device", (gpu,), pcie_peak(found) if found else None)


@check(subjects=GPU, **_copy("device_to_host"))
def device_to_host(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """Copy bandwidth from the GPU to pinned host memory is at least the profile's floor."""
    found = facts.gpu(gpu)
    return _copy_verdict(judge, profile, facts, "device_to_host", (gpu,), pcie_peak(found) if found else None)


@check(subjects=GPU_ORDERED_PAIR, **_copy("p2p"))
def p2p_copy(judge: Judge, profile: Profile, facts: Facts, pair: tuple[int, int]) -> Verdict:
    """Copy-engine bandwidth from one GPU to another is at least the profile's floor."""
    return _copy_verdict(judge, profile, facts, "p2p", pair, pair_peak(facts, *pair))


@check(subjects=GPU_PAIR, **_copy("p2p_bidirectional"))
def p2p_copy_bidirectional(judge: Judge, profile: Profile, facts: Facts, pair: tuple[int, int]) -> Verdict:
    """Copy-engine bandwidth between two GPUs, both ways at once, is at least the profile's floor."""
    peak = pair_peak(facts, *pair)
    both_ways = Peak(2 * peak.GBps, f"{peak.what}, both ways") if peak else None
    return _copy_verdict(judge, profile, facts, "p2p_bidirectional", pair, both_ways)


@check()
def nvls(judge: Judge, profile: Profile, facts: Facts) -> Verdict:
    """NCCL used NVLink SHARP where the profile expects it. Two witnesses: CUDA's multicast attribute
    per GPU (what the hardware and driver offer) and NCCL's set-up lines (what NCCL did). A board
    that offers multicast but whose NCCL set up none (fabric manager unreachable, NCCL_NVLS_ENABLE=0)
    fails as surely as one without multicast, and the message says which it was."""
    subject = "NVLS"
    expected = profile.spec.nccl.nvls if profile.spec.nccl else None
    if expected is None:
        return judge.not_applicable(subject, "the profile does not say whether NCCL must use NVLink SHARP (nccl.nvls)")
    if expected is False:
        return judge.not_applicable(subject, "the profile expects no NVLink SHARP (nccl.nvls: false)")
    criterion = Equals("used")
    offered = _multicast_missing(facts)
    sweep = facts.measurements.collectives
    if sweep is None:
        return judge.missing(subject, NCCL_SWEEP, criterion)
    used = sweep.nvls
    if used is None:
        return judge.error(subject, "could not be established: the facts were recorded before NVLS use was read", criterion)
    if isinstance(used, Unavailable):
        if offered:
            return judge.failed(subject, f"not offered: {offered}, expected used by NCCL", "not offered", criterion)
        return judge.error(subject, f"could not be established: NCCL's set-up lines: {used}", criterion)
    context: Context = {"nvls_comms": used.nvls_comms, "nvls_channels": used.nvls_channels, "ranks": sweep.ranks}
    if used.used:
        return judge.passed(subject, f"used by NCCL ({used.nvls_comms} rank(s) set it up)", "used", criterion, context=context)
    return judge.failed(subject, f"not used by NCCL, expected used: {_why_not_used(used, offered, sweep.ranks)}", "not used",
                        criterion, context=context)


def _multicast_missing(facts: Facts) -> str:
    """Which GPUs CUDA says offer no multicast ('' where every GPU does, or CUDA could not be asked)."""
    cuda = facts.cuda
    if isinstance(cuda, Unavailable) or not isinstance(cuda.multicast, list):
        return ""
    missing = [f"gpu{index}" for index, reading in enumerate(cuda.multicast) if reading is False]
    if not missing:
        return ""
    return f"CUDA reports no multicast on {', '.join(missing)} (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED 0)"


def _why_not_used(used: Any, offered: str, ranks: int) -> str:
    reasons = []
    if used.enable_setting is not None and used.enable_setting.strip() in ("0", "false", "False"):
        reasons.append(f"NCCL_NVLS_ENABLE={used.enable_setting} in the environment (the site's setting)")
    if used.not_available_on:
        reasons.append("NCCL: NVLS multicast support is not available on dev " + ",".join(map(str, used.not_available_on)))
    if offered:
        reasons.append(offered)
    if ranks <= 2:
        reasons.append(f"NCCL sets NVLS up for more than 2 ranks only ({ranks} here)")
    if not reasons:
        channels = "no line on NVLS channels" if used.nvls_channels is None else f"{used.nvls_channels} nvls channels"
        reasons.append(f"NCCL set up no NVLS communicator ({channels}; fabric manager or multicast binding, see NCCL's WARN lines)")
    return "; ".join(reasons)
