"""Clocks and heat over the run (run checks): the time the hardware held the clocks down under
load, and the hottest GPU and HBM temperatures of the snapshots against NVML's thresholds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from gpuaccept.checks.declare import GPU, check
from gpuaccept.checks.health.snapshots import NO_TIME, counter_delta, first_and_last, seconds_between, snapshots_of, span_of, unreadable
from gpuaccept.checks.verdict import AtMost, Described, Judge, Verdict
from gpuaccept.facts.health import HealthSnapshot
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.links import gpu_key


def _load_seconds(facts: Facts) -> float | None:
    """How long the stages loaded the GPUs, where the telemetry's load windows tell (their union)."""
    telemetry = facts.telemetry
    if telemetry is None or not telemetry.loads:
        return None
    total, reached = 0.0, -math.inf
    for started, ended in sorted((window.started_s, window.ended_s) for window in telemetry.loads):
        total += max(0.0, ended - max(started, reached))
        reached = max(reached, ended)
    return total


@check(subjects=GPU, family="health_run")
def clock_slowdown_during_run(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """Time the clocks were held down by the hardware (HW thermal slowdown, HW power brake) as a
    share of the time the stages loaded the GPUs (of the whole run where no telemetry tells when
    they did): a minute of idle between stages does not thin out a slowdown under load. Software
    power capping and idle are how a GPU normally runs, and are only reported."""
    criterion = AtMost(profile.spec.health.hw_slowdown_max_percent, "%")
    pair = first_and_last(judge, profile, facts, gpu)
    if isinstance(pair, Verdict):
        return pair
    first, last = pair
    subject = gpu_key(gpu)
    deltas = {
        name: counter_delta(getattr(first.clock_event_ns, name), getattr(last.clock_event_ns, name))
        for name in ("hw_thermal", "hw_power_brake", "sw_thermal", "sw_power_cap")
    }
    for name in ("hw_thermal", "hw_power_brake"):
        value = deltas[name]
        if isinstance(value, Unavailable):
            return unreadable(judge, subject, f"{name.replace('_', ' ')} time", value, criterion)
    span_s = seconds_between(first, last)
    if span_s == 0:
        return judge.error(subject, NO_TIME.format(at=first.taken_at), criterion, scope=span_of(first, last))
    loaded_s = _load_seconds(facts)
    under_load = loaded_s is not None and 1.0 <= loaded_s < span_s
    base_s = loaded_s if under_load and loaded_s is not None else span_s
    held_ns = sum(value for name, value in deltas.items() if name.startswith("hw_") and isinstance(value, int))
    share = round(100 * held_ns / (base_s * 1e9), 3)
    shown = ", ".join(
        f"{name.replace('_', ' ')} {v / 1e9:.2f} s" if isinstance(v, int) else f"{name.replace('_', ' ')} {v}" for name, v in deltas.items()
    )
    of = f"of {base_s:.0f} s under load" if under_load else "of the run"
    return judge(subject, f"HW slowdown time (thermal + power brake) {of}", share, criterion, note=shown, scope=span_of(first, last))


def _temperature(
    judge: Judge,
    profile: Profile,
    facts: Facts,
    gpu: int,
    what: str,
    reading: Callable[[HealthSnapshot], Any],
    limit: Callable[[HealthSnapshot], Any],
    limit_name: str,
) -> Verdict:
    subject = gpu_key(gpu)
    pair = first_and_last(judge, profile, facts, gpu)
    if isinstance(pair, Verdict):
        return pair
    taken = snapshots_of(facts, gpu)
    threshold = limit(taken[0])
    placeholder = Described(f"below NVML's {limit_name}")
    if isinstance(threshold, Unavailable):
        return unreadable(judge, subject, f"NVML's {limit_name}", threshold, placeholder)
    values = [(reading(s), s.label) for s in taken]
    unknown = next((v for v, _ in values if isinstance(v, Unavailable)), None)
    if unknown is not None:
        return unreadable(judge, subject, what, unknown, placeholder)
    hottest, label = max(values, key=lambda pair: pair[0])
    criterion = AtMost(threshold - 1, "°C")
    return judge(subject, f"hottest {what} ({label})", hottest, criterion, note=f"NVML {limit_name} {threshold} °C")


@check(subjects=GPU, family="health_run")
def gpu_temperature(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """The hottest GPU temperature of the snapshots stays below NVML's slowdown threshold."""
    return _temperature(
        judge, profile, facts, gpu, "GPU temperature", lambda s: s.temperature_C, lambda s: s.slowdown_C, "slowdown threshold"
    )


@check(subjects=GPU, family="health_run")
def memory_temperature(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """The hottest HBM temperature of the snapshots stays below NVML's memory max temperature."""
    return _temperature(
        judge,
        profile,
        facts,
        gpu,
        "HBM temperature",
        lambda s: s.memory_temperature_C,
        lambda s: s.memory_max_C,
        "memory max temperature",
    )
