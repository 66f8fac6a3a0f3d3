"""Judging: a `Judge` makes the verdicts of one check against one profile, and `best_attempt` makes
one verdict of a value measured more than once.

The verdict and its criteria are one record (facts/verdict.py), re-exported here for the checks: a
criterion knows its own limit, checks itself when built and prints the rule it applies (`>= 330
GB/s`); a check judged with a marginal band carries its marginal line inside its criterion.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuaccept.checks.missing import Missing
from gpuaccept.facts.measurements import StepFailure
from gpuaccept.facts.record import Unavailable
from gpuaccept.facts.verdict import (
    AtLeast,
    AtLeastVersion,
    AtMost,
    Better,
    Context,
    Criterion,
    Described,
    Equals,
    InRange,
    MatchesAny,
    NoCriterion,
    Verdict,
    plain,
    version_tuple,
)
from gpuaccept.outcomes import Outcome, outcome_of_missing
from gpuaccept.vocabulary.display import show
from gpuaccept.vocabulary.links import gpu_key

__all__ = [
    "AtLeast", "AtLeastVersion", "AtMost", "Better", "Context", "Criterion", "Described", "Equals", "InRange", "Judge", "MatchesAny",
    "NoCriterion", "Outcome", "Verdict", "best_attempt", "version_tuple",
]


@dataclass(frozen=True)
class Judge:
    """Makes the verdicts of one check against one profile.

    `scope` is the human context of the measurement ('all_reduce 1 GiB'), `note` extra evidence
    ('link max x16'), `context` the same facts as structured data for reports. `marginal_band`
    (a fraction) puts a marginal line that far inside the limit of every criterion judged, and
    marks a measured value that passes between the two; states and inventory facts, which do not
    vary from run to run, are judged with none.
    """

    check: str
    profile: str
    marginal_band: float = 0.0

    def __call__(
        self, subject: str, what: str, measured: Any, criterion: Criterion, *, note: str = "", scope: str = "",
        context: Context | None = None,
    ) -> Verdict:
        if isinstance(measured, Unavailable):
            return self.unavailable(subject, what, measured, criterion, scope=scope, context=context)
        criterion = self._lined(criterion)
        passed = criterion.holds(measured)
        marginal = passed and criterion.within_marginal(measured)
        if not passed:
            detail = f"{what} {criterion.violation(measured)}"
        elif marginal:
            detail = f"{what} {show(measured, criterion.unit)}, marginal: within {self.marginal_band:.0%} of {criterion}"
        else:
            detail = f"{what} {show(measured, criterion.unit)}"
        if note:
            detail += f" ({note})"
        verdict = self._verdict(subject, Outcome.PASSED if passed else Outcome.FAILED, measured, criterion, detail, scope, context)
        return verdict.model_copy(update={"marginal": True}) if marginal else verdict

    def unavailable(
        self, subject: str, what: str, reading: Unavailable, criterion: Criterion, *, scope: str = "", context: Context | None = None
    ) -> Verdict:
        # "not supported" means the hardware lacks what the profile requires: a failure. Anything
        # else means the fact could not be read: an error, and never a pass.
        outcome = Outcome.FAILED if reading.unavailable == "not_supported" else Outcome.ERROR
        detail = f"{what} {reading}, expected {criterion}"
        return self._verdict(subject, outcome, str(reading), criterion, detail, scope, context)

    def failed(
        self, subject: str, detail: str, measured: Any, criterion: Criterion, *, scope: str = "", context: Context | None = None,
        final: bool = False,
    ) -> Verdict:
        """A failure whose message the check words itself (several mismatches at once, a GPU missing).
        `final`: measuring again cannot undo it (wrong data), so no later attempt passes it."""
        verdict = self._verdict(subject, Outcome.FAILED, measured, criterion, detail, scope, context)
        return verdict.model_copy(update={"final": True}) if final else verdict

    def passed(
        self, subject: str, detail: str, measured: Any, criterion: Criterion, *, scope: str = "", context: Context | None = None
    ) -> Verdict:
        return self._verdict(subject, Outcome.PASSED, measured, criterion, detail, scope, context)

    def step_failed(self, subject: str, failure: StepFailure, criterion: Criterion) -> Verdict:
        """A value its step did not give. A step that hung, crashed or was not run fails the value; one
        whose outcome the measurement itself could not establish (a log cut short, a timer that gave no
        number) could not judge it."""
        context = {"reason": failure.reason}
        if failure.reason == "not_in_log":
            return self.error(subject, f"could not be established: {failure.message}", criterion, context=context)
        if failure.reason == "not_a_number":
            return self.error(subject, failure.message, criterion, context=context)
        return self.failed(subject, failure.message, None, criterion, context=context)

    def error(
        self, subject: str, detail: str, criterion: Criterion | None = None, *, scope: str = "", context: Context | None = None
    ) -> Verdict:
        return self._verdict(subject, Outcome.ERROR, None, criterion, detail, scope, context)

    def missing(
        self, subject: str, missing: Missing, criterion: Criterion | None = None, *, asked: bool = True, note: str = ""
    ) -> Verdict:
        """A verdict for want of facts: could not judge where the profile asks for what the facts lack
        (`asked`), not applicable where it does not (the outcome policy's one rule, outcomes.py)."""
        detail = missing.message(self.profile) + (f"; {note}" if note else "")
        if outcome_of_missing(asked) is Outcome.NOT_APPLICABLE:
            return self.not_applicable(subject, detail)
        verdict = self.error(subject, detail, criterion)
        return verdict.model_copy(update={"missing": missing.reason})

    def absent_gpu(self, subject: str, gpu: int, facts_gpus: int, criterion: Criterion | None = None) -> Verdict:
        """A verdict on a GPU the profile asks for and the machine lacks: not judged, its cause the
        failed GPU count (test_gpu_count), never a skip."""
        verdict = self.error(subject, f"GPU not present ({facts_gpus} GPU(s) under test): test_gpu_count fails it", criterion)
        return verdict.model_copy(update={"missing": f"{gpu_key(gpu)} is not present", "gpus": [gpu]})

    def not_applicable(self, subject: str, reason: str) -> Verdict:
        return Verdict(
            check=self.check, subject=subject, outcome=Outcome.NOT_APPLICABLE, measured=None, expected="", better=Better.EXACT,
            message=f"{subject}: {reason}", profile=self.profile,
        )

    def _lined(self, criterion: Criterion) -> Criterion:
        """The criterion with this judge's marginal line inside its limit, where it judges with a band."""
        return criterion.with_marginal_band(self.marginal_band) if self.marginal_band > 0 else criterion

    def _verdict(
        self, subject: str, outcome: Outcome, measured: Any, criterion: Criterion | None, detail: str, scope: str, context: Context | None
    ) -> Verdict:
        where = f"{scope}, profile {self.profile}" if scope else f"profile {self.profile}"
        if criterion is not None:
            criterion = self._lined(criterion)
        return Verdict(
            check=self.check,
            subject=subject,
            outcome=outcome,
            measured=measured,
            expected=str(criterion) if criterion is not None else "",
            unit=criterion.unit if criterion is not None else "",
            message=f"{subject}: {detail} ({where})",
            profile=self.profile,
            context=dict(context or {}),
            criterion=criterion if criterion is not None else NoCriterion(),
            better=criterion.better if criterion is not None else Better.EXACT,
        )


def best_attempt(attempts: list[Verdict]) -> Verdict:
    """The verdict of a value measured more than once: the best attempt decides, every attempt is
    kept. A final failure (wrong data) decides over everything; then a pass beats a failure with a
    number, which beats one without (a step that hung), which beats an error; among failures the
    best number wins. A pass after a miss is transient."""
    if len(attempts) == 1:
        return attempts[0]

    def rank(verdict: Verdict) -> tuple[int, float]:
        numeric = verdict.numeric is not None
        value = verdict.numeric or 0.0
        closeness = value if verdict.better is Better.HIGHER else -value if verdict.better is Better.LOWER else 0.0
        standing = {Outcome.PASSED: 3, Outcome.FAILED: 1 + numeric, Outcome.ERROR: 0}.get(verdict.outcome, 0)
        # among passes the first is kept: a healthy value needs no better one
        return (standing, closeness if verdict.outcome is not Outcome.PASSED else 0.0)

    final = [verdict for verdict in attempts if verdict.final]
    best = final[0] if final else max(attempts, key=rank)  # max keeps the first of equals
    values = [plain(verdict.measured) for verdict in attempts]
    transient = not attempts[0].ok and best.ok
    shown = ", ".join("-" if value is None else show(value) for value in values)
    unit = f" {best.unit}" if best.unit else ""
    note = f"attempts: {shown}{unit}" + ("; transient: passed only when measured again" if transient else "")
    return best.model_copy(update={"attempts": values, "transient": transient, "message": f"{best.message} [{note}]"})
