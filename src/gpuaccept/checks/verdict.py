"""Verdicts and the criteria that produce them.

A criterion knows its own limit, checks itself when built (a minimum above a maximum is a bug in
the profile, not a hardware fault) and prints the rule it applies: `>= 330 GB/s`. A verdict is
the frozen record of one judgement: subject, measured value, expected criterion, unit, outcome,
and one line a person can act on.
"""

from __future__ import annotations

import enum
import fnmatch
from dataclasses import dataclass, field, replace
from typing import Any

from gpuaccept.facts.model import StepFailure, Unavailable
from gpuaccept.vocabulary.display import show, show_apart

Context = dict[str, Any]  # a verdict's evidence as data, for reports: {"peak_GBps": 478.12}


class Outcome(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"  # the hardware is not what the profile says
    ERROR = "error"  # the fact could not be established: the machine is not proven good
    NOT_APPLICABLE = "not_applicable"  # the profile asks nothing here


class Better(str, enum.Enum):
    """Which way a measured value improves: what "the best attempt" and "a regression" mean."""

    HIGHER = "higher"
    LOWER = "lower"
    EXACT = "exact"  # a state (a link type, a model name): no better or worse, only right or wrong


@dataclass(frozen=True)
class Verdict:
    """One judgement. `criterion` is the rule as data ({"op": ">=", "limit": 330.0, "unit": "GB/s"});
    `expected` is the same rule as text, for people. `measured` is the exact value judged; only
    messages round it. `attempts` holds every value measured for this verdict, in order, where a
    miss was measured again; `transient` says the first attempt missed and a later one passed."""

    check: str
    subject: str
    outcome: Outcome
    measured: Any
    expected: str
    unit: str = ""
    message: str = ""
    profile: str = ""
    context: Context = field(default_factory=dict)
    criterion: dict[str, Any] = field(default_factory=dict)
    better: Better = Better.EXACT
    marginal: bool = False  # passed within the profile's marginal band of its limit
    attempts: tuple[Any, ...] = ()
    transient: bool = False
    final: bool = False  # a failure that measuring again cannot undo: wrong data is never noise

    @property
    def ok(self) -> bool:
        return self.outcome in (Outcome.PASSED, Outcome.NOT_APPLICABLE)

    def as_record(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "subject": self.subject,
            "outcome": self.outcome.value,
            "measured": _plain(self.measured),
            "expected": self.expected,
            "criterion": self.criterion,
            "better": self.better.value,
            "unit": self.unit,
            "marginal": self.marginal,
            "attempts": [_plain(value) for value in self.attempts],
            "transient": self.transient,
            "final": self.final,
            "message": self.message,
            "profile": self.profile,
            "context": self.context,
        }


def _plain(value: Any) -> Any:
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)


class Criterion:
    unit: str = ""
    better: Better = Better.EXACT

    def holds(self, value: Any) -> bool:
        raise NotImplementedError

    def violation(self, value: Any) -> str:
        """How `value` breaks the rule, for a failure message: '212.4 GB/s < 330 GB/s'."""
        raise NotImplementedError

    def as_data(self) -> dict[str, Any]:
        """The rule as data, for every writer: {"op": ">=", "limit": 330.0, "unit": "GB/s"}."""
        raise NotImplementedError

    def marginal(self, value: Any, band: float) -> bool:
        """Whether a value that holds lies within `band` (a fraction) of the limit."""
        return False


@dataclass(frozen=True)
class Equals(Criterion):
    value: Any
    unit: str = ""

    def holds(self, value: Any) -> bool:
        return bool(value == self.value)

    def violation(self, value: Any) -> str:
        shown, wanted = show_apart(value, self.value, self.unit)
        return f"{shown}, expected {wanted}"

    def as_data(self) -> dict[str, Any]:
        return {"op": "==", "value": _plain(self.value), "unit": self.unit}

    def __str__(self) -> str:
        return f"== {show(self.value, self.unit)}"


@dataclass(frozen=True)
class AtLeast(Criterion):
    minimum: float
    unit: str = ""
    better = Better.HIGHER

    def holds(self, value: Any) -> bool:
        return bool(value >= self.minimum)

    def violation(self, value: Any) -> str:
        shown, limit = show_apart(value, self.minimum, self.unit)
        return f"{shown} < {limit}"

    def as_data(self) -> dict[str, Any]:
        return {"op": ">=", "limit": self.minimum, "unit": self.unit}

    def marginal(self, value: Any, band: float) -> bool:
        return self.holds(value) and bool(value < self.minimum * (1 + band))

    def __str__(self) -> str:
        return f">= {show(self.minimum, self.unit)}"


@dataclass(frozen=True)
class AtMost(Criterion):
    maximum: float
    unit: str = ""
    better = Better.LOWER

    def holds(self, value: Any) -> bool:
        return bool(value <= self.maximum)

    def violation(self, value: Any) -> str:
        shown, limit = show_apart(value, self.maximum, self.unit)
        return f"{shown} > {limit}"

    def as_data(self) -> dict[str, Any]:
        return {"op": "<=", "limit": self.maximum, "unit": self.unit}

    def marginal(self, value: Any, band: float) -> bool:
        return self.holds(value) and bool(value > self.maximum * (1 - band))

    def __str__(self) -> str:
        return f"<= {show(self.maximum, self.unit)}"


@dataclass(frozen=True)
class InRange(Criterion):
    minimum: float
    maximum: float
    unit: str = ""

    def __post_init__(self) -> None:
        if self.minimum > self.maximum:
            raise ValueError(f"minimum {self.minimum} cannot be greater than maximum {self.maximum}")

    def holds(self, value: Any) -> bool:
        return bool(self.minimum <= value <= self.maximum)

    def violation(self, value: Any) -> str:
        side = "<" if value < self.minimum else ">"
        shown, limit = show_apart(value, self.minimum if value < self.minimum else self.maximum, self.unit)
        return f"{shown} {side} {limit}"

    def as_data(self) -> dict[str, Any]:
        return {"op": "in", "minimum": self.minimum, "maximum": self.maximum, "unit": self.unit}

    def marginal(self, value: Any, band: float) -> bool:
        return self.holds(value) and (value < self.minimum * (1 + band) or value > self.maximum * (1 - band))

    def __str__(self) -> str:
        return f"{show(self.minimum)} .. {show(self.maximum, self.unit)}"


@dataclass(frozen=True)
class MatchesAny(Criterion):
    patterns: tuple[str, ...]

    def holds(self, value: Any) -> bool:
        return any(fnmatch.fnmatchcase(str(value), p) for p in self.patterns)

    def violation(self, value: Any) -> str:
        return f"{value!r}, expected {' or '.join(repr(p) for p in self.patterns)}"

    def as_data(self) -> dict[str, Any]:
        return {"op": "matches", "patterns": list(self.patterns), "unit": ""}

    def __str__(self) -> str:
        return " or ".join(repr(p) for p in self.patterns)


@dataclass(frozen=True)
class AtLeastVersion(Criterion):
    minimum: str

    def holds(self, value: Any) -> bool:
        return version_tuple(str(value)) >= version_tuple(self.minimum)

    def violation(self, value: Any) -> str:
        return f"{value} is older than {self.minimum}"

    def as_data(self) -> dict[str, Any]:
        return {"op": ">=version", "limit": self.minimum, "unit": ""}

    def __str__(self) -> str:
        return f">= {self.minimum}"


@dataclass(frozen=True)
class Described(Criterion):
    """A rule that only words can state ("CUDA agrees with NVML"): the check decides, this names it."""

    text: str

    def holds(self, value: Any) -> bool:
        raise TypeError(f"{self.text!r} is decided by its check, not by a value")

    def violation(self, value: Any) -> str:
        return f"{value}, expected {self.text}"

    def as_data(self) -> dict[str, Any]:
        return {"op": "rule", "text": self.text, "unit": ""}

    def __str__(self) -> str:
        return self.text


def version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.strip().split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


@dataclass(frozen=True)
class Judge:
    """Makes the verdicts of one check against one profile.

    `scope` is the human context of the measurement ('all_reduce 1 GiB'), `note` extra evidence
    ('link max x16'), `context` the same facts as structured data for reports. `marginal_band`
    (a fraction) marks a measured value that passes that close to its limit; states and
    inventory facts, which do not vary from run to run, are judged with none.
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
        passed = criterion.holds(measured)
        marginal = passed and criterion.marginal(measured, self.marginal_band)
        if not passed:
            detail = f"{what} {criterion.violation(measured)}"
        elif marginal:
            detail = f"{what} {show(measured, criterion.unit)}, marginal: within {self.marginal_band:.0%} of {criterion}"
        else:
            detail = f"{what} {show(measured, criterion.unit)}"
        if note:
            detail += f" ({note})"
        verdict = self._verdict(subject, Outcome.PASSED if passed else Outcome.FAILED, measured, criterion, detail, scope, context)
        return replace(verdict, marginal=marginal) if marginal else verdict

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
        return replace(verdict, final=True) if final else verdict

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

    def not_applicable(self, subject: str, reason: str) -> Verdict:
        return Verdict(self.check, subject, Outcome.NOT_APPLICABLE, None, "", message=f"{subject}: {reason}", profile=self.profile)

    def _verdict(
        self, subject: str, outcome: Outcome, measured: Any, criterion: Criterion | None, detail: str, scope: str, context: Context | None
    ) -> Verdict:
        where = f"{scope}, profile {self.profile}" if scope else f"profile {self.profile}"
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
            criterion=criterion.as_data() if criterion is not None else {},
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
        numeric = isinstance(verdict.measured, (int, float)) and not isinstance(verdict.measured, bool)
        value = float(verdict.measured) if numeric else 0.0
        closeness = value if verdict.better is Better.HIGHER else -value if verdict.better is Better.LOWER else 0.0
        standing = {Outcome.PASSED: 3, Outcome.FAILED: 1 + numeric, Outcome.ERROR: 0}.get(verdict.outcome, 0)
        # among passes the first is kept: a healthy value needs no better one
        return (standing, closeness if verdict.outcome is not Outcome.PASSED else 0.0)

    final = [verdict for verdict in attempts if verdict.final]
    best = final[0] if final else max(attempts, key=rank)  # max keeps the first of equals
    values = tuple(verdict.measured for verdict in attempts)
    transient = not attempts[0].ok and best.ok
    shown = ", ".join("-" if value is None else show(value) for value in values)
    unit = f" {best.unit}" if best.unit else ""
    note = f"attempts: {shown}{unit}" + ("; transient: passed only when measured again" if transient else "")
    return replace(best, attempts=values, transient=transient, message=f"{best.message} [{note}]")
