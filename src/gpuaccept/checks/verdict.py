"""Verdicts and the criteria that produce them.

A criterion knows its own limit, checks itself when built (a minimum above a maximum is a bug in
the profile, not a hardware fault) and prints the rule it applies: `>= 330 GB/s`. A verdict is
the frozen record of one judgement: subject, measured value, expected criterion, unit, outcome,
and one line a person can act on.
"""

from __future__ import annotations

import enum
import fnmatch
from dataclasses import dataclass, field
from typing import Any

from gpuaccept.facts.model import Unavailable


class Outcome(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"  # the hardware is not what the profile says
    ERROR = "error"  # the fact could not be established: the machine is not proven good
    NOT_APPLICABLE = "not_applicable"  # the profile asks nothing here


@dataclass(frozen=True)
class Verdict:
    check: str
    subject: str
    outcome: Outcome
    measured: Any
    expected: str
    unit: str = ""
    message: str = ""
    profile: str = ""
    context: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.outcome in (Outcome.PASSED, Outcome.NOT_APPLICABLE)

    def as_record(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "subject": self.subject,
            "outcome": self.outcome.value,
            "measured": self.measured if isinstance(self.measured, (int, float, str, bool)) or self.measured is None else str(self.measured),
            "expected": self.expected,
            "unit": self.unit,
            "message": self.message,
            "profile": self.profile,
            "context": self.context,
        }


def show(value: Any, unit: str = "") -> str:
    if isinstance(value, float):
        text = f"{value:.4g}" if abs(value) < 1000 else f"{value:.1f}"
    else:
        text = str(value)
    return f"{text} {unit}".rstrip() if unit else text


class Criterion:
    unit: str = ""

    def holds(self, value: Any) -> bool:
        raise NotImplementedError

    def violation(self, value: Any) -> str:
        """How `value` breaks the rule, for a failure message: '212.4 GB/s < 330 GB/s'."""
        raise NotImplementedError


@dataclass(frozen=True)
class Equals(Criterion):
    value: Any
    unit: str = ""

    def holds(self, value: Any) -> bool:
        return value == self.value

    def violation(self, value: Any) -> str:
        return f"{show(value, self.unit)}, expected {show(self.value, self.unit)}"

    def __str__(self) -> str:
        return f"== {show(self.value, self.unit)}"


@dataclass(frozen=True)
class AtLeast(Criterion):
    minimum: float
    unit: str = ""

    def holds(self, value: Any) -> bool:
        return value >= self.minimum

    def violation(self, value: Any) -> str:
        return f"{show(value, self.unit)} < {show(self.minimum, self.unit)}"

    def __str__(self) -> str:
        return f">= {show(self.minimum, self.unit)}"


@dataclass(frozen=True)
class AtMost(Criterion):
    maximum: float
    unit: str = ""

    def holds(self, value: Any) -> bool:
        return value <= self.maximum

    def violation(self, value: Any) -> str:
        return f"{show(value, self.unit)} > {show(self.maximum, self.unit)}"

    def __str__(self) -> str:
        return f"<= {show(self.maximum, self.unit)}"


@dataclass(frozen=True)
class InRange(Criterion):
    minimum: float
    maximum: float
    unit: str = ""

    def __post_init__(self):
        if self.minimum > self.maximum:
            raise ValueError(f"minimum {self.minimum} cannot be greater than maximum {self.maximum}")

    def holds(self, value: Any) -> bool:
        return self.minimum <= value <= self.maximum

    def violation(self, value: Any) -> str:
        side = "<" if value < self.minimum else ">"
        limit = self.minimum if value < self.minimum else self.maximum
        return f"{show(value, self.unit)} {side} {show(limit, self.unit)}"

    def __str__(self) -> str:
        return f"{show(self.minimum)} .. {show(self.maximum, self.unit)}"


@dataclass(frozen=True)
class MatchesAny(Criterion):
    patterns: tuple[str, ...]

    def holds(self, value: Any) -> bool:
        return any(fnmatch.fnmatchcase(str(value), p) for p in self.patterns)

    def violation(self, value: Any) -> str:
        return f"{value!r}, expected {' or '.join(repr(p) for p in self.patterns)}"

    def __str__(self) -> str:
        return " or ".join(repr(p) for p in self.patterns)


@dataclass(frozen=True)
class AtLeastVersion(Criterion):
    minimum: str

    def holds(self, value: Any) -> bool:
        return version_tuple(str(value)) >= version_tuple(self.minimum)

    def violation(self, value: Any) -> str:
        return f"{value} is older than {self.minimum}"

    def __str__(self) -> str:
        return f">= {self.minimum}"


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
    ('link max x16'), `context` the same facts as structured data for reports.
    """

    check: str
    profile: str

    def __call__(
        self, subject: str, what: str, measured: Any, criterion: Criterion, *, note: str = "", scope: str = "", context: dict | None = None
    ) -> Verdict:
        if isinstance(measured, Unavailable):
            return self.unavailable(subject, what, measured, criterion, scope=scope, context=context)
        passed = criterion.holds(measured)
        detail = f"{what} {show(measured, criterion.unit)}" if passed else f"{what} {criterion.violation(measured)}"
        if note:
            detail += f" ({note})"
        return self._verdict(subject, Outcome.PASSED if passed else Outcome.FAILED, measured, criterion, detail, scope, context)

    def unavailable(
        self, subject: str, what: str, reading: Unavailable, criterion: Criterion, *, scope: str = "", context: dict | None = None
    ) -> Verdict:
        # "not supported" means the hardware lacks what the profile requires: a failure. Anything
        # else means the fact could not be read: an error, and never a pass.
        outcome = Outcome.FAILED if reading.unavailable == "not_supported" else Outcome.ERROR
        detail = f"{what} {reading}, expected {criterion}"
        return self._verdict(subject, outcome, str(reading), criterion, detail, scope, context)

    def failed(self, subject: str, detail: str, measured: Any, criterion: Criterion, *, scope: str = "", context: dict | None = None) -> Verdict:
        """A failure whose message the check words itself (several mismatches at once, a GPU missing)."""
        return self._verdict(subject, Outcome.FAILED, measured, criterion, detail, scope, context)

    def passed(self, subject: str, detail: str, measured: Any, criterion: Criterion, *, scope: str = "", context: dict | None = None) -> Verdict:
        return self._verdict(subject, Outcome.PASSED, measured, criterion, detail, scope, context)

    def error(self, subject: str, detail: str, criterion: Criterion | str = "", *, scope: str = "", context: dict | None = None) -> Verdict:
        return self._verdict(subject, Outcome.ERROR, None, criterion, detail, scope, context)

    def not_applicable(self, subject: str, reason: str) -> Verdict:
        return Verdict(self.check, subject, Outcome.NOT_APPLICABLE, None, "", message=f"{subject}: {reason}", profile=self.profile)

    def _verdict(self, subject, outcome, measured, criterion, detail, scope, context) -> Verdict:
        where = f"{scope}, profile {self.profile}" if scope else f"profile {self.profile}"
        return Verdict(
            check=self.check,
            subject=subject,
            outcome=outcome,
            measured=measured,
            expected=str(criterion),
            unit=getattr(criterion, "unit", ""),
            message=f"{subject}: {detail} ({where})",
            profile=self.profile,
            context=dict(context or {}),
        )
