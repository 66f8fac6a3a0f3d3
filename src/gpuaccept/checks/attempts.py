"""Values measured more than once: a check judges every attempt, and the best one decides.

A measured value that misses its criterion is measured again before the verdict (see
`gpuaccept.stages.store`): the repeat lands in the facts as a confirmation round holding only
the steps it measured again. A check declared with `attempts=` (checks/declare.py) is then evaluated on the first
measurement and on each round that measured its subject's steps, and `best_attempt` makes one
verdict of them, keeping every attempt's value. Checks themselves stay pure functions of one set
of facts. This module says which misses are worth measuring again.
"""

from __future__ import annotations

from typing import TypeGuard

from gpuaccept.checks.verdict import Better, Outcome, Verdict


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def worth_measuring_again(verdict: Verdict, within: float) -> bool:
    """A failure on a number that missed its limit by at most `within` (a fraction of the limit):
    a dip that one more measurement may show to be noise. A miss larger than that is a fault, not
    a dip; wrong data, a step that hung and a fact that could not be read are never noise."""
    if verdict.outcome is not Outcome.FAILED or verdict.final:
        return False
    value, limit = verdict.measured, verdict.limit
    if not (_number(value) and _number(limit)):
        return False
    if verdict.better is Better.HIGHER:
        return value >= limit * (1 - within)
    if verdict.better is Better.LOWER:
        return value <= limit * (1 + within)
    return False
