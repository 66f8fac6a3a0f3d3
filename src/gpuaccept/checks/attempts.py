"""Values measured more than once: a check judges every attempt, and the best one decides.

A measured value that misses its criterion is measured again before the verdict (see
`gpuaccept.session.store`): the repeat lands in the facts as a confirmation round holding
only the steps it measured again. A check marked `@judged_on_every_attempt` is then evaluated on the
first measurement and on each round that measured its subject's steps, and `best_attempt` makes
one verdict of them, keeping every attempt's value. Checks themselves stay pure functions of one
set of facts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from gpuaccept.checks.verdict import Better, Outcome, Verdict, best_attempt
from gpuaccept.facts import Facts
from gpuaccept.profile import Profile

StepKeys = Callable[[Profile, Any], list[str]]


def judged_on_every_attempt(step_keys: StepKeys):
    """Mark a check whose subject is measured by the steps `step_keys(profile, subject)` names."""

    def wrap(check: Callable[[Profile, Facts, Any], Verdict]):
        @functools.wraps(check)
        def judged(profile: Profile, facts: Facts, subject: Any) -> Verdict:
            keys = set(step_keys(profile, subject))
            attempts = [check(profile, facts, subject)]
            for index, again in enumerate(facts.measurements.rounds):
                if keys & set(again.keys):
                    attempts.append(check(profile, facts.at_attempt(index), subject))
            return best_attempt(attempts)

        judged.step_keys = step_keys  # type: ignore[attr-defined]
        return judged

    return wrap


def worth_measuring_again(verdict: Verdict, within: float) -> bool:
    """A failure on a number that missed its limit by at most `within` (a fraction of the limit):
    a dip that one more measurement may show to be noise. A miss larger than that is a fault, not
    a dip; wrong data, a step that hung and a fact that could not be read are never noise."""
    if verdict.outcome is not Outcome.FAILED or verdict.final:
        return False
    value, limit = verdict.measured, verdict.criterion.get("limit")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (value, limit)):
        return False
    if verdict.better is Better.HIGHER:
        return value >= limit * (1 - within)
    if verdict.better is Better.LOWER:
        return value <= limit * (1 + within)
    return False
