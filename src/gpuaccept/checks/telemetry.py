"""Telemetry checks: what every GPU did while it was sampled, judged per GPU against the profile's
`burnin` settings and NVML's own limits.

- clock slowdown: the share of a GPU's samples under load with a hardware slowdown, hardware
  thermal or power brake clock event reason, at most `burnin.max_slowdown_share` (1%). Software
  power capping and idling are how a healthy GPU runs, and do not count.
- temperature: the hottest sample at most NVML's slowdown temperature for that GPU.
- SM clock under load: the median of the samples where the GPU was busy (NVML utilization 50% or
  more) at least `burnin.min_sm_clock_mhz`, where the profile sets one.

Readings NVML does not give are not counted as zeros: a GPU with none skips with NVML's reason.
Facts that hold no telemetry could not judge it where the profile asks for loads to sample it under.
A live run whose telemetry could not be sampled, or held no sample while loads ran long enough to
have been sampled (a sampler stuck in the driver), could not judge: an error, not a skip.
"""

from __future__ import annotations

import statistics

from gpuaccept.checks.declare import GPU, check
from gpuaccept.checks.missing import TELEMETRY
from gpuaccept.checks.stages import stages_asked
from gpuaccept.checks.verdict import AtLeast, AtMost, Better, Judge, Verdict
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.facts.telemetry import TelemetrySample
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.links import gpu_key
from gpuaccept.vocabulary.telemetry import SLOWDOWN_REASONS, reason_names

BUSY_PCT = 50  # NVML's GPU utilization at or above which a sample counts as the GPU working


# loads that ran this many sampling periods and more were sampled, unless the sampler failed
SAMPLED_PERIODS = 3


def _samples(judge: Judge, profile: Profile, facts: Facts, gpu: int, under_load: bool) -> list[TelemetrySample] | Verdict:
    """The GPU's samples (those taken while a stage loaded the GPUs, if `under_load`), or the verdict
    where there are none: a skip where nothing was to be sampled, an error where sampling failed or
    the facts hold none of what the profile asks to be loaded."""
    subject = gpu_key(gpu)
    if gpu >= facts.gpu_count:  # nothing samples a GPU the machine lacks: its GPU count fails
        return judge.absent_gpu(subject, gpu, facts.gpu_count)
    telemetry = facts.telemetry
    if telemetry is None:
        return judge.missing(subject, TELEMETRY, asked=bool(stages_asked(profile)))
    if telemetry.not_sampled:
        return judge.error(subject, f"telemetry could not be sampled: {telemetry.not_sampled}")
    samples = [s for s in telemetry.of_gpu(gpu) if not under_load or telemetry.under_load(s)]
    if samples:
        return samples
    loaded_s = sum(window.ended_s - window.started_s for window in telemetry.loads)
    when = " while a stage loaded the GPUs" if under_load else ""
    reason = f"no telemetry sample of {subject} was taken{when} ({len(telemetry.loads)} load stage(s), {loaded_s:.0f} s)"
    if loaded_s >= SAMPLED_PERIODS * telemetry.period_s:
        return judge.error(subject, f"{reason}: the sampler stopped, every {telemetry.period_s:g} s was due")
    return judge.not_applicable(subject, reason)


def _none_read(judge: Judge, facts: Facts, subject: str, samples: list[TelemetrySample], field: str) -> Verdict:
    """No sample of this GPU holds `field`: skipped with NVML's answer where no GPU gives it (a VM
    that does not), could not judge where the other GPUs gave it and this one did not."""
    reason = f"NVML gives no {field.replace('_', ' ')}: {getattr(samples[0], field)}"
    assert facts.telemetry is not None  # there are samples
    others = [s for s in facts.telemetry.samples if s.gpu != samples[0].gpu]
    answered = sorted({s.gpu for s in others if not isinstance(getattr(s, field), Unavailable)})
    if answered:
        return judge.error(subject, f"{reason}, though {', '.join(map(gpu_key, answered))} gave it")
    return judge.not_applicable(subject, reason)


@check(subjects=GPU, metric=True, better=Better.LOWER)
def clock_slowdown(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """The share of samples under load with the clocks held down by the hardware is within the profile's limit."""
    limit = profile.spec.burnin.max_slowdown_share
    subject = gpu_key(gpu)
    samples = _samples(judge, profile, facts, gpu, under_load=True)
    if isinstance(samples, Verdict):
        return samples
    read = [s for s in samples if isinstance(s.clock_event_reasons, int)]
    if not read:
        return _none_read(judge, facts, subject, samples, "clock_event_reasons")
    slowed = [s for s in read if s.clock_event_reasons & SLOWDOWN_REASONS]  # type: ignore[operator]
    share = 100.0 * len(slowed) / len(read)
    seen = sorted({name for s in slowed for name in reason_names(s.clock_event_reasons & SLOWDOWN_REASONS)})  # type: ignore[operator]
    period = facts.telemetry.period_s if facts.telemetry else 0.0
    note = f"{len(slowed)} of {len(read)} samples under load, about {len(slowed) * period:.0f} s" + (f": {', '.join(seen)}" if seen else "")
    context = {"samples_under_load": len(read), "samples_slowed": len(slowed), "reasons": seen}
    return judge(subject, "clock slowdown (hardware, thermal, power brake)", share, AtMost(limit * 100, "%"), note=note, context=context)


@check(subjects=GPU, metric=True, better=Better.LOWER)
def max_temperature(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """The hottest GPU temperature the telemetry sampled stays below NVML's slowdown temperature."""
    subject = gpu_key(gpu)
    samples = _samples(judge, profile, facts, gpu, under_load=False)
    if isinstance(samples, Verdict):
        return samples
    assert facts.telemetry is not None  # there are samples
    limits = facts.telemetry.limits_of(gpu)
    threshold = limits.slowdown_temperature_c if limits is not None else Unavailable(unavailable="not_probed")
    if isinstance(threshold, Unavailable):
        return judge.not_applicable(subject, f"NVML gives no slowdown temperature to judge against: {threshold}")
    read = [s.temperature_c for s in samples if isinstance(s.temperature_c, int)]
    if not read:
        return _none_read(judge, facts, subject, samples, "temperature_c")
    hottest = max(read)
    note = f"NVML's slowdown temperature; {len(read)} samples"
    # at the slowdown temperature the GPU slows itself: reaching it fails, as the health check has it
    criterion = AtMost(threshold - 1, "°C")
    return judge(subject, "hottest GPU temperature", hottest, criterion, note=note, context={"samples": len(read)})


@check(subjects=GPU, marginal=True, metric=True, better=Better.HIGHER)
def sm_clock_under_load(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """The median SM clock under load is at least the profile's `burnin.min_sm_clock_mhz`."""
    floor = profile.spec.burnin.min_sm_clock_mhz
    subject = gpu_key(gpu)
    if floor is None:
        return judge.not_applicable(subject, f"profile {profile.name} sets no burnin.min_sm_clock_mhz")
    samples = _samples(judge, profile, facts, gpu, under_load=True)
    if isinstance(samples, Verdict):
        return samples
    # a stage's window holds this GPU's idle moments too (its worker starting; under -n N, waiting
    # for another GPU's longer load): the clock is judged where NVML saw the GPU itself busy
    utilization_read = [s for s in samples if isinstance(s.utilization_pct, int)]
    busy = [s for s in utilization_read if s.utilization_pct >= BUSY_PCT] if utilization_read else samples  # type: ignore[operator]
    read = [s.sm_clock_mhz for s in busy if isinstance(s.sm_clock_mhz, int)]
    if not read:
        if utilization_read and not busy:
            return judge.not_applicable(subject, f"no sample under load found {subject} at least {BUSY_PCT}% busy")
        return _none_read(judge, facts, subject, samples, "sm_clock_mhz")
    median = statistics.median(read)
    which = f"{BUSY_PCT}%+ busy" if utilization_read else "under load (utilization not read)"
    note = f"median of {len(read)} samples {which}, lowest {min(read)} MHz"
    context = {"samples": len(read), "lowest_mhz": min(read)}
    return judge(subject, "SM clock under load", median, AtLeast(floor, "MHz"), note=note, context=context)
