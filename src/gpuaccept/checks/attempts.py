"""Values measured more than once: a check judges every attempt, and the best one decides.

A measured value that misses its criterion is measured again before the verdict (see
`gpuaccept.stages.store`): the repeat lands in the facts as a confirmation round holding
only the steps it measured again. A check marked `@judged_on_every_attempt` is then evaluated on the
first measurement and on each round that measured its subject's steps, and `best_attempt` makes
one verdict of them, keeping every attempt's value. Checks themselves stay pure functions of one
set of facts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeGuard

from gpuaccept.checks.verdict import Better, Outcome, Verdict, best_attempt
from gpuaccept.facts import Facts
from gpuaccept.profile import Profile
from gpuaccept.vocabulary.steps import StepKey

Check = Callable[[Profile, Facts, Any], Verdict]  # (profile, facts, subject) -> Verdict
StepKeys = Callable[[Profile, Any], list[StepKey]]  # (profile, subject) -> keys of the values it judges


class JudgedOnEveryAttempt:
    """A check judged on the first measurement and on each confirmation round that measured the
    steps of its subject; `step_keys` names those steps, for the rounds to come."""

    def __init__(self, check: Check, step_keys: StepKeys) -> None:
        self.check = check
        self.step_keys = step_keys
        functools.update_wrapper(self, check)

    def __call__(self, profile: Profile, facts: Facts, subject: Any) -> Verdict:
        keys = set(self.step_keys(profile, subject))
        attempts = [self.check(profile, facts, subject)]
        for index, again in enumerate(facts.measurements.rounds):
            if keys & set(again.keys):
                attempts.append(self.check(profile, facts.at_attempt(index), subject))
        return best_attempt(attempts)


def judged_on_every_attempt(step_keys: StepKeys) -> Callable[[Check], JudgedOnEveryAttempt]:
    """Mark a check whose subject is measured by the steps `step_keys(profile, subject)` names."""
    return functools.partial(JudgedOnEveryAttempt, step_keys=step_keys)


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def worth_measuring_again(verdict: Verdict, within: float) -> bool:
    """A failure on a number that missed its limit by at most `within` (a fraction of the limit):
    a dip that one more measurement may show to be noise. A miss larger than that is a fault, not
    a dip; wrong data, a step that hung and a fact that could not be read are never noise."""
    if verdict.outcome is not Outcome.FAILED or verdict.final:
        return False
    value, limit = verdict.measured, verdict.criterion.get("limit")
    if not (_number(value) and _number(limit)):
        return False
    if verdict.better is Better.HIGHER:
        return value >= limit * (1 - within)
    if verdict.better is Better.LOWER:
        return value <= limit * (1 + within)
    return False
