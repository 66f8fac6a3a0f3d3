"""Burn-in values: each value a burn-in stage measures, judged over every round it was measured in.

A burn-in is a machine kept under load for its duration; a value that drops in two rounds has
dropped, but one round alone is one sample, and no single noisy sample decides a failure (the same
rule as confirm-before-failing in a standard run). So the second-worst round decides: a miss in one
round among passing ones passes, marked transient, with the round named; a miss in two rounds
fails; with one round, that round decides; wrong data, or a step that gave no value (a hang, a
crash), in any round decides at once. Every round's
value is kept in the verdict's context and message. Each round is judged by the stage's own check,
against the same floor as a standard run. A value measured in some rounds only (the memory test, at
its interval) is judged over those; a bandwidth measured beside the sustained load shares the GPUs
with it, so there only its wrong data and hangs count, and its value is shown beside the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuaccept.checks.declare import Subjects, check
from gpuaccept.checks.missing import BURNIN
from gpuaccept.checks.stages import Check, stage_values
from gpuaccept.checks.verdict import Better, Judge, Outcome, Verdict
from gpuaccept.facts.model import Facts
from gpuaccept.facts.telemetry import BurnInRound
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.display import show
from gpuaccept.vocabulary.steps import LoadKey, StepKey


@dataclass(frozen=True)
class BurninCase:
    """One value a burn-in measures: `test_burnin_value[local_copy-gpu0]`."""

    stage: str
    check: Check
    subject: Any
    name: str
    judged_beside_load: bool = True
    key: StepKey | None = None  # where some rounds of the stage do not measure the value

    @property
    def id(self) -> str:
        return f"{self.check.__name__}-{self.name}"


def burnin_cases(profile: Profile) -> list[BurninCase]:
    return [
        BurninCase(
            stage, value.check, subject, value.name_of(subject), value.judged_beside_load,
            value.key_of(subject) if value.key_of else None,
        )
        for stage, values in stage_values().items()
        for value in values
        if value.in_burnin
        for subject in value.subjects(profile)
    ]


BURNIN_CASE = Subjects(
    "burnin_case", burnin_cases, lambda case: case.id, "no values a burn-in measures",
    "each value the burn-in's stages measure (a stage's check and its subject)", "local_copy-gpu0",
)


def _measured(burnin_round: BurnInRound, key: StepKey) -> bool:
    """Whether the round measured the per-GPU load `key` (or tried and failed)."""
    sweep = burnin_round.measurements.compute
    return isinstance(key, LoadKey) and sweep is not None and (sweep.result(key) is not None or sweep.failure(key) is not None)


def _decides_alone(verdict: Verdict) -> bool:
    """Wrong data, or a round whose step gave no value at all (it hung, crashed or could not be
    read): not a noisy sample that another round may outvote."""
    no_value = verdict.measured is None and verdict.outcome in (Outcome.FAILED, Outcome.ERROR)
    return verdict.final or no_value


def _worst_first(verdict: Verdict) -> tuple[int, float]:
    """Sorts the worst verdict first: what decides alone, then failures, errors, passes; lower values
    first where higher is better (and the other way round)."""
    value = verdict.measured
    number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0
    closeness = number if verdict.better is Better.HIGHER else -number if verdict.better is Better.LOWER else 0.0
    standing = {Outcome.FAILED: 1, Outcome.ERROR: 2, Outcome.PASSED: 3}.get(verdict.outcome, 4)
    return (0 if _decides_alone(verdict) else standing, closeness)


@check(subjects=BURNIN_CASE, name="burnin_value")
def over_rounds(_: Judge, profile: Profile, facts: Facts, case: BurninCase) -> Verdict:
    """The value of `case` judged in every burn-in round that measured its stage; the second-worst
    round decides (the worst, where it is the only round or its data is wrong)."""
    judge = case.check.judge(profile)  # the verdict is the value's, named by its own check
    burnin = facts.burnin
    if burnin is None:
        return judge.missing(case.name, BURNIN)
    rounds = [r for r in burnin.rounds_with(case.stage) if case.key is None or _measured(r, case.key)]
    if not rounds:
        what = f"the {case.stage} stage" if case.key is None else str(case.key)
        return judge.error(case.name, f"no burn-in round measured {what} ({len(burnin.rounds)} round(s) in all)")
    every = [case.check(profile, facts.model_copy(update={"measurements": r.measurements}), case.subject) for r in rounds]
    if all(v.outcome is Outcome.NOT_APPLICABLE for v in every):
        return every[0]
    # beside the sustained load a bandwidth is shared with the products: only its wrong data and hangs count
    kept = [i for i, r in enumerate(rounds) if case.judged_beside_load or not r.beside_load or _decides_alone(every[i])]
    if not kept:
        return judge.error(case.name, f"every burn-in round that measured {case.stage} ran beside the sustained load: no unloaded value")
    beside = [show(v.measured) for i, v in enumerate(every) if i not in kept and v.measured is not None]
    verdicts = [every[i] for i in kept]
    rounds = [rounds[i] for i in kept]
    ranked = sorted(range(len(verdicts)), key=lambda i: _worst_first(verdicts[i]))
    worst_index = ranked[0]
    worst = verdicts[worst_index]
    # one round alone never fails a value: the next-worst round must miss as well
    deciding_index = worst_index if _decides_alone(worst) or len(ranked) == 1 else ranked[1]
    deciding = verdicts[deciding_index]
    one_off = worst.outcome is Outcome.FAILED and deciding.outcome is not Outcome.FAILED
    values = [v.measured for v in verdicts]
    shown = ", ".join("-" if value is None else show(value) for value in values)
    unit = f" {worst.unit}" if worst.unit else ""
    # a burn-in's rounds are numbered over all its stages (fabric rounds between load rounds), so the
    # rounds that measured this value are named, not counted
    measured_in = "rounds " + ", ".join(str(r.index) for r in rounds) if len(rounds) > 1 else f"round {rounds[0].index}"
    if one_off:
        note = (
            f"round {rounds[worst_index].index} alone missed ({worst.message}); no other round confirmed it; "
            f"{measured_in}: {shown}{unit}"
        )
    else:
        note = f"deciding: round {rounds[deciding_index].index}; {measured_in}: {shown}{unit}"
    if beside:
        note += f"; beside the sustained load (not judged): {', '.join(beside)}{unit}"
    context = {
        **deciding.context,
        "burnin_rounds": [r.index for r in rounds],
        "burnin_values": [v if isinstance(v, (int, float, str, bool)) or v is None else str(v) for v in values],
        "burnin_worst_round": rounds[worst_index].index,
        "burnin_deciding_round": rounds[deciding_index].index,
        "burnin_beside_load_values": beside,
    }
    update = {"message": f"{deciding.message} [{note}]", "context": context, "transient": deciding.transient or one_off}
    return deciding.model_copy(update=update)
