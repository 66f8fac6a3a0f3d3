"""Reading a GPU's health snapshots, for every health check: the start snapshot, the first and the
last, what a reading NVML did not give makes of a check, a counter's growth, and the time between
two snapshots.
"""

from __future__ import annotations

import datetime
from typing import Any

from gpuaccept.checks.missing import HEALTH_READINGS, LOAD_FOR_HEALTH
from gpuaccept.checks.stages import stages_asked
from gpuaccept.checks.verdict import Criterion, Judge, Verdict
from gpuaccept.facts.health import HealthSnapshot
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.links import gpu_key

NO_SNAPSHOT_AFTER_LOAD = "no health snapshot after the load could be taken (only the start snapshot is in the facts)"


def snapshots_of(facts: Facts, gpu: int) -> list[HealthSnapshot]:
    return facts.health.of(gpu)


def none_taken(judge: Judge, facts: Facts, gpu: int) -> Verdict | None:
    if facts.gpu(gpu) is None:
        return judge.absent_gpu(gpu_key(gpu), gpu, facts.gpu_count)
    if not snapshots_of(facts, gpu):
        others = sorted({snapshot.gpu for snapshot in facts.health.snapshots})
        if others:
            # the others were read: this GPU's health was asked for and is not there (one that stopped answering)
            seen = ", ".join(gpu_key(other) for other in others)
            return judge.error(gpu_key(gpu), f"no health snapshot of this GPU, though the facts hold those of {seen}")
        return judge.missing(gpu_key(gpu), HEALTH_READINGS)
    return None


def at_start(judge: Judge, facts: Facts, gpu: int) -> HealthSnapshot | Verdict:
    missing = none_taken(judge, facts, gpu)
    return missing if missing is not None else snapshots_of(facts, gpu)[0]


def first_and_last(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> tuple[HealthSnapshot, HealthSnapshot] | Verdict:
    missing = none_taken(judge, facts, gpu)
    if missing is not None:
        return missing
    taken = snapshots_of(facts, gpu)
    if len(taken) < 2:
        return _only_the_start(judge, profile, facts, gpu)
    return taken[0], taken[-1]


def _only_the_start(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """One snapshot: no load ran (could not judge where the profile asks for loads; nothing to judge
    where it asks for none), or every snapshot after a load failed (a GPU that stopped answering
    NVML, say after an XID 79): that is never a pass."""
    if a_load_ran(facts):
        return judge.error(gpu_key(gpu), NO_SNAPSHOT_AFTER_LOAD)
    return judge.missing(gpu_key(gpu), LOAD_FOR_HEALTH, asked=bool(stages_asked(profile)))


def a_load_ran(facts: Facts) -> bool:
    """Whether any measurement stage left a sweep in the facts (the confirmation bookkeeping aside)."""
    measured = facts.measurements
    return any(getattr(measured, name) is not None for name in type(measured).model_fields if name not in ("rounds", "unconfirmed"))


def unreadable(judge: Judge, subject: str, what: str, reading: Unavailable, criterion: Criterion) -> Verdict:
    """Not supported or not read: not applicable, with the reason. Anything else (no permission, an
    error): the fact could not be established, which is never a pass."""
    if reading.unavailable in ("not_supported", "not_probed", "not_found"):
        return judge.not_applicable(subject, f"{what}: {reading}")
    return judge.unavailable(subject, what, reading, criterion)


def seconds_between(first: HealthSnapshot, last: HealthSnapshot) -> float:
    begin = datetime.datetime.fromisoformat(first.taken_at)
    end = datetime.datetime.fromisoformat(last.taken_at)
    return max((end - begin).total_seconds(), 0.0)


# snapshots of one GPU taken at one instant (the clock did not move, or the facts were made up):
# a rate over no time is no rate, and dividing by an invented second would judge one
NO_TIME = "the first and the last snapshot of this GPU were taken at the same instant ({at}): a rate over no time cannot be judged"


def span_of(first: HealthSnapshot, last: HealthSnapshot) -> str:
    return f"{first.label} -> {last.label}, {seconds_between(first, last):.0f} s"

def all_of(judge: Judge, subject: str, checks: list[tuple[str, Any, Criterion]], scope: str = "") -> Verdict:
    """Several readings under one test: the first readable one that breaks its rule decides; else a
    reading that is not there makes the whole not applicable (or an error), never a partial pass."""
    for what, value, criterion in checks:
        if not isinstance(value, Unavailable) and not criterion.holds(value):
            return judge(subject, what, value, criterion, scope=scope)
    for what, value, criterion in checks:
        if isinstance(value, Unavailable):
            return unreadable(judge, subject, what, value, criterion)
    what, value, criterion = checks[0]
    others = "; ".join(f"{w} {v}" for w, v, _ in checks[1:])
    return judge(subject, what, value, criterion, note=others, scope=scope)


def counter_delta(before: int | Unavailable, after: int | Unavailable) -> int | Unavailable:
    """How much a counter grew. One that went down (the driver reset it, or it wrapped without a
    rollover count to say so) tells nothing of the run: could not be established, never a pass."""
    if isinstance(before, Unavailable):
        return before
    if isinstance(after, Unavailable):
        return after
    if after < before:
        return Unavailable(unavailable="error", detail=f"the counter went down from {before} to {after} (reset or rolled over)")
    return after - before
