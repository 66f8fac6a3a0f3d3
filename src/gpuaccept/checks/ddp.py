"""DDP checks: scaling efficiency, exposed communication, and the NVLink A/B, per setting."""

from __future__ import annotations

from gpuaccept.checks.declare import Subjects, check
from gpuaccept.checks.missing import DDP_SWEEP, DDP_SWEEP_WITHOUT_P2P
from gpuaccept.checks.verdict import AtLeast, AtMost, Better, Criterion, Judge, Verdict
from gpuaccept.facts.measurements import DdpResult, DdpSweep
from gpuaccept.facts.model import Facts
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.measures import Measure
from gpuaccept.vocabulary.steps import DdpKey, StepKey, parse_ddp_case


def ddp_cases(profile: Profile) -> list[str]:
    """Every setting with a threshold, in profile order: one test id each per kind of check."""
    ddp = profile.spec.ddp
    if ddp is None:
        return []
    cases: list[str] = []
    for table in (ddp.min_efficiency, ddp.max_exposed_comm, ddp.nvlink_ab):
        cases += [case for case in table if case not in cases]
    return cases


def _ranks(profile: Profile, case: str) -> list[int]:
    """The GPUs a setting trains on: the first `world` of the machine."""
    return list(range(parse_ddp_case(case)[0]))


DDP_CASE = Subjects("ddp_case", ddp_cases, str, "no DDP settings", "each DDP setting the profile sets a limit for", "4gpu-bs8", _ranks)


def _scaling_keys(profile: Profile, case: str) -> list[StepKey]:
    return [DdpKey.of_case(case)]


def _both_arms(profile: Profile, case: str) -> list[StepKey]:
    return [DdpKey.of_case(case), DdpKey.of_case(case, without_p2p=True)]


def _throughput(
    judge: Judge, sweep: DdpSweep | None, case: str, world: int, batch: int, accumulation: int, criterion: Criterion
) -> DdpResult | Verdict:
    """The result of one setting, or the verdict that says why there is none."""
    if sweep is None:
        return judge.missing(case, DDP_SWEEP, criterion)
    failure = sweep.failure(DdpKey(world, batch, accumulation, sweep.p2p_disabled))
    if failure:
        return judge.step_failed(case, failure, criterion)
    result = sweep.result(world, batch, accumulation)
    if result is None:
        return judge.error(case, f"no result for {world} GPU(s), batch {batch}, accumulation {accumulation}", criterion)
    return result


@check(subjects=DDP_CASE, name="ddp_scaling", marginal=True, stage="ddp", in_burnin=False, attempts=_scaling_keys, headline=True,
       fleet=True, share=True, better=Better.HIGHER, measure=Measure.DDP_EFFICIENCY)
def scaling(judge: Judge, profile: Profile, facts: Facts, case: str) -> Verdict:
    """DDP training throughput per GPU at a setting, as a share of one GPU's, is at least the profile's efficiency."""
    minimum = profile.spec.ddp.min_efficiency.get(case) if profile.spec.ddp else None
    if minimum is None:
        return judge.not_applicable(case, "the profile sets no scaling efficiency for this setting")
    criterion = AtLeast(minimum)
    world, batch, accumulation = parse_ddp_case(case)
    sweep = facts.measurements.ddp
    if sweep is None:
        return judge.missing(case, DDP_SWEEP, criterion)
    many = _throughput(judge, sweep, case, world, batch, accumulation, criterion)
    if isinstance(many, Verdict):
        return many
    one = _throughput(judge, sweep, case, 1, batch, accumulation, criterion)
    if isinstance(one, Verdict):
        return one
    efficiency = facts.measurements.ddp_efficiency(world, batch, accumulation)
    note = (
        f"{many.samples_per_s_per_gpu:.1f} samples/s per GPU on {world} GPUs, {one.samples_per_s_per_gpu:.1f} on 1; "
        f"{many.parameters / 1e6:.1f}M parameters, {sweep.dtype}"
    )
    context = {
        "samples_per_s_per_gpu": round(many.samples_per_s_per_gpu, 2),
        "baseline_samples_per_s": round(one.samples_per_s_per_gpu, 2),
        "tokens_per_s_per_gpu": round(many.tokens_per_s_per_gpu, 1),
        "step_s": round(many.step_s, 5),
    }
    return judge(case, "scaling efficiency", efficiency, criterion, note=note, context=context)


@check(subjects=DDP_CASE, name="ddp_exposed_comm", marginal=True, stage="ddp", in_burnin=False, attempts=_scaling_keys, headline=True,
       fleet=True, share=True, better=Better.LOWER, measure=Measure.DDP_EXPOSED_COMMUNICATION)
def exposed_communication(judge: Judge, profile: Profile, facts: Facts, case: str) -> Verdict:
    """The share of a DDP step spent in gradient communication not hidden by compute is at most the profile's."""
    maximum = profile.spec.ddp.max_exposed_comm.get(case) if profile.spec.ddp else None
    if maximum is None:
        return judge.not_applicable(case, "the profile sets no exposed-communication limit for this setting")
    criterion = AtMost(maximum)
    world, batch, accumulation = parse_ddp_case(case)
    result = _throughput(judge, facts.measurements.ddp, case, world, batch, accumulation, criterion)
    if isinstance(result, Verdict):
        return result
    exposed = result.exposed_share
    if exposed is None or result.no_sync_step_s is None:
        return judge.error(case, "the sweep did not time steps without gradient synchronization", criterion)
    note = f"step {result.step_s * 1e3:.1f} ms, {result.no_sync_step_s * 1e3:.1f} ms without gradient all-reduce"
    return judge(case, "exposed communication", exposed, criterion, note=note)


@check(subjects=DDP_CASE, name="ddp_nvlink_speedup", marginal=True, stage="ddp", in_burnin=False, attempts=_both_arms, headline=True,
       fleet=True, better=Better.HIGHER, measure=Measure.DDP_NVLINK_SPEEDUP)
def nvlink_speedup(judge: Judge, profile: Profile, facts: Facts, case: str) -> Verdict:
    """DDP training with P2P is at least the profile's factor faster than with NCCL_P2P_DISABLE=1."""
    minimum = profile.spec.ddp.nvlink_ab.get(case) if profile.spec.ddp else None
    if minimum is None:
        return judge.not_applicable(case, "the profile sets no NVLink A/B for this setting")
    p2p = profile.expected_p2p(0, 1)
    if p2p is not None and p2p.read is False:
        return judge.not_applicable(case, "the profile says P2P is not supported: there is no P2P path to compare")
    criterion = AtLeast(minimum, "x")
    world, batch, accumulation = parse_ddp_case(case)
    with_p2p = _throughput(judge, facts.measurements.ddp, case, world, batch, accumulation, criterion)
    if isinstance(with_p2p, Verdict):
        return with_p2p
    without_sweep = facts.measurements.ddp_without_p2p
    if without_sweep is None:
        return judge.missing(case, DDP_SWEEP_WITHOUT_P2P, criterion)
    without = _throughput(judge, without_sweep, case, world, batch, accumulation, criterion)
    if isinstance(without, Verdict):
        return without
    ratio = facts.measurements.ddp_speedup(world, batch, accumulation)
    note = (
        f"{with_p2p.samples_per_s_per_gpu:.1f} samples/s per GPU with P2P, "
        f"{without.samples_per_s_per_gpu:.1f} with NCCL_P2P_DISABLE=1"
    )
    return judge(case, "P2P speedup", ratio, criterion, note=note)
