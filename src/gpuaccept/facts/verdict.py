"""A verdict and its criterion: one record, from the check that gives it to every writer and reader.

A criterion is one of a typed union, told apart by its `op`: it knows its own limit, checks itself
when built (a minimum above a maximum is a bug in the profile, not a hardware fault), prints the
rule it applies (`>= 330 GB/s`) and, where the check judges a measured value with a marginal band,
holds the marginal line too (as OpenHTF's `InRange(marginal_minimum=...)`): `>= 330 GB/s, marginal
below 346.5 GB/s`. A verdict is the frozen record of one judgement: subject, measured value,
criterion, unit, outcome, and one line a person can act on. The same record is results.json's
`verdict` (older files, written before a key existed, read with its default: see run_record.py).
"""

from __future__ import annotations

import enum
import fnmatch
import json
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Discriminator, Field, JsonValue, SerializerFunctionWrapHandler, Tag, model_serializer

from gpuaccept.facts.record import Record
from gpuaccept.outcomes import Outcome
from gpuaccept.vocabulary.areas import RootCause
from gpuaccept.vocabulary.checks import meaning_of
from gpuaccept.vocabulary.display import show, show_apart
from gpuaccept.vocabulary.measures import Measure


class Better(str, enum.Enum):
    """Which way a measured value improves: what "the best attempt" and "a regression" mean."""

    HIGHER = "higher"
    LOWER = "lower"
    EXACT = "exact"  # a state (a link type, a model name): no better or worse, only right or wrong

    def __str__(self) -> str:  # as results.json writes it
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


Context = dict[str, Any]  # a verdict's evidence as data, for reports: {"peak_GBps": 478.12}
Number = int | float


def plain(value: Any) -> Any:
    """A measured value as a record holds it: a number, text, a bool or None; anything else as text."""
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)


Measured = Annotated[bool | int | float | str | None, BeforeValidator(plain)]  # the exact value judged


_JSON_SCALARS = (str, int, float, bool, type(None))


class _NotJson(Exception):
    pass


def _json_copy(value: Any) -> Any:
    """A copy of `value` where it is already what JSON reads back (mappings with text keys, lists,
    plain scalars: no tuple, no subclass such as an enum); raises _NotJson otherwise."""
    kind = type(value)
    if kind in _JSON_SCALARS:
        return value
    if kind is dict:
        if not all(type(key) is str for key in value):
            raise _NotJson
        return {key: _json_copy(item) for key, item in value.items()}
    if kind is list:
        return [_json_copy(item) for item in value]
    raise _NotJson


def _as_json(value: Any) -> Any:
    """`value` as the file will hold it: tuples as lists, keys as text, anything else as its text."""
    try:
        return _json_copy(value)  # most evidence already is: no round trip through the text
    except _NotJson:
        return json.loads(json.dumps(value, default=str))


Evidence = Annotated[dict[str, JsonValue], BeforeValidator(_as_json)]


def _marginal_line(limit: Number, band: float, sign: int) -> float | None:
    """The marginal line `band` (a fraction) inside `limit`: above a floor, below a ceiling."""
    if band <= 0:
        return None
    return round(limit * (1 + sign * band), 9)


class _Criterion(Record):
    """What every criterion answers; each kind adds its `op` and its limits."""

    better: ClassVar[Better] = Better.EXACT

    def holds(self, value: Any) -> bool:
        raise NotImplementedError

    def violation(self, value: Any) -> str:
        """How `value` breaks the rule, for a failure message: '212.4 GB/s < 330 GB/s'."""
        raise NotImplementedError

    def with_marginal_band(self, band: float) -> Any:
        """The criterion with its marginal line `band` (a fraction of the limit) inside the limit;
        a rule that judges a state (a name, a version) has none."""
        return self

    def within_marginal(self, value: Any) -> bool:
        """Whether a value that holds lies between the limit and the marginal line."""
        return False

    @property
    def marginal_text(self) -> str:
        """Where the marginal line is, for people: 'marginal below 346.5 GB/s'; '' where there is none."""
        return ""

    @model_serializer(mode="wrap")
    def _without_unset_lines(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a criterion with no marginal line is written as it was before criteria held one
        data: dict[str, Any] = handler(self)
        return {key: value for key, value in data.items() if not (key.startswith("marginal_") and value is None)}


class AtLeast(_Criterion):
    """A floor: `>= 330 GB/s`; marginal between the floor and `marginal_minimum`."""

    op: Literal[">="] = ">="
    limit: Number
    marginal_minimum: Number | None = None
    unit: str = ""
    better: ClassVar[Better] = Better.HIGHER

    def __init__(self, limit: Number, unit: str = "", **data: Any) -> None:
        super().__init__(**{"limit": limit, "unit": unit, **data})

    def holds(self, value: Any) -> bool:
        return bool(value >= self.limit)

    def violation(self, value: Any) -> str:
        shown, limit = show_apart(value, self.limit, self.unit)
        return f"{shown} < {limit}"

    def with_marginal_band(self, band: float) -> AtLeast:
        return self.model_copy(update={"marginal_minimum": _marginal_line(self.limit, band, +1)})

    def within_marginal(self, value: Any) -> bool:
        return self.marginal_minimum is not None and self.holds(value) and bool(value < self.marginal_minimum)

    @property
    def marginal_text(self) -> str:
        return "" if self.marginal_minimum is None else f"marginal below {show(self.marginal_minimum, self.unit)}"

    def __str__(self) -> str:
        return f">= {show(self.limit, self.unit)}"


class AtMost(_Criterion):
    """A ceiling: `<= 0 errors`; marginal between `marginal_maximum` and the ceiling."""

    op: Literal["<="] = "<="
    limit: Number
    marginal_maximum: Number | None = None
    unit: str = ""
    better: ClassVar[Better] = Better.LOWER

    def __init__(self, limit: Number, unit: str = "", **data: Any) -> None:
        super().__init__(**{"limit": limit, "unit": unit, **data})

    def holds(self, value: Any) -> bool:
        return bool(value <= self.limit)

    def violation(self, value: Any) -> str:
        shown, limit = show_apart(value, self.limit, self.unit)
        return f"{shown} > {limit}"

    def with_marginal_band(self, band: float) -> AtMost:
        return self.model_copy(update={"marginal_maximum": _marginal_line(self.limit, band, -1)})

    def within_marginal(self, value: Any) -> bool:
        return self.marginal_maximum is not None and self.holds(value) and bool(value > self.marginal_maximum)

    @property
    def marginal_text(self) -> str:
        return "" if self.marginal_maximum is None else f"marginal above {show(self.marginal_maximum, self.unit)}"

    def __str__(self) -> str:
        return f"<= {show(self.limit, self.unit)}"


class InRange(_Criterion):
    """Both: `0 .. 412.5 s`; marginal within the lines inside either end."""

    op: Literal["in"] = "in"
    minimum: Number
    maximum: Number
    marginal_minimum: Number | None = None
    marginal_maximum: Number | None = None
    unit: str = ""

    def __init__(self, minimum: Number, maximum: Number, unit: str = "", **data: Any) -> None:
        if minimum > maximum:
            raise ValueError(f"minimum {minimum} cannot be greater than maximum {maximum}")
        super().__init__(**{"minimum": minimum, "maximum": maximum, "unit": unit, **data})

    def holds(self, value: Any) -> bool:
        return bool(self.minimum <= value <= self.maximum)

    def violation(self, value: Any) -> str:
        side = "<" if value < self.minimum else ">"
        shown, limit = show_apart(value, self.minimum if value < self.minimum else self.maximum, self.unit)
        return f"{shown} {side} {limit}"

    def with_marginal_band(self, band: float) -> InRange:
        lines = {"marginal_minimum": _marginal_line(self.minimum, band, +1), "marginal_maximum": _marginal_line(self.maximum, band, -1)}
        return self.model_copy(update=lines)

    def within_marginal(self, value: Any) -> bool:
        low = self.marginal_minimum is not None and value < self.marginal_minimum
        high = self.marginal_maximum is not None and value > self.marginal_maximum
        return self.holds(value) and bool(low or high)

    @property
    def marginal_text(self) -> str:
        if self.marginal_minimum is None and self.marginal_maximum is None:
            return ""
        return f"marginal outside {show(self.marginal_minimum)} .. {show(self.marginal_maximum, self.unit)}"

    def __str__(self) -> str:
        return f"{show(self.minimum)} .. {show(self.maximum, self.unit)}"


class Equals(_Criterion):
    op: Literal["=="] = "=="
    value: Measured
    unit: str = ""

    def __init__(self, value: Any, unit: str = "", **data: Any) -> None:
        super().__init__(**{"value": value, "unit": unit, **data})

    def holds(self, value: Any) -> bool:
        return bool(value == self.value)

    def violation(self, value: Any) -> str:
        shown, wanted = show_apart(value, self.value, self.unit)
        return f"{shown}, expected {wanted}"

    def __str__(self) -> str:
        return f"== {show(self.value, self.unit)}"


class MatchesAny(_Criterion):
    op: Literal["matches"] = "matches"
    patterns: list[str]
    unit: str = ""

    def __init__(self, patterns: list[str] | tuple[str, ...], **data: Any) -> None:
        super().__init__(**{"patterns": list(patterns), **data})

    def holds(self, value: Any) -> bool:
        return any(fnmatch.fnmatchcase(str(value), p) for p in self.patterns)

    def violation(self, value: Any) -> str:
        return f"{value!r}, expected {' or '.join(repr(p) for p in self.patterns)}"

    def __str__(self) -> str:
        return " or ".join(repr(p) for p in self.patterns)


class AtLeastVersion(_Criterion):
    op: Literal[">=version"] = ">=version"
    limit: str
    unit: str = ""

    def __init__(self, limit: str, **data: Any) -> None:
        super().__init__(**{"limit": limit, **data})

    def holds(self, value: Any) -> bool:
        return version_tuple(str(value)) >= version_tuple(self.limit)

    def violation(self, value: Any) -> str:
        return f"{value} is older than {self.limit}"

    def __str__(self) -> str:
        return f">= {self.limit}"


class Described(_Criterion):
    """A rule that only words can state ("CUDA agrees with NVML"): the check decides, this names it."""

    op: Literal["rule"] = "rule"
    text: str
    unit: str = ""

    def __init__(self, text: str, **data: Any) -> None:
        super().__init__(**{"text": text, **data})

    def holds(self, value: Any) -> bool:
        raise TypeError(f"{self.text!r} is decided by its check, not by a value")

    def violation(self, value: Any) -> str:
        return f"{value}, expected {self.text}"

    def __str__(self) -> str:
        return self.text


class NoCriterion(_Criterion):
    """A verdict judged against no rule (the profile asks nothing), or an older one that did not record it."""

    @property
    def unit(self) -> str:
        return ""

    def holds(self, value: Any) -> bool:
        raise TypeError("a verdict without a criterion holds no rule to apply")

    def __str__(self) -> str:
        return ""


def _criterion_tag(value: object) -> str:
    op = value.get("op") if isinstance(value, dict) else getattr(value, "op", None)
    return op if isinstance(op, str) else "none"


Criterion = Annotated[
    Annotated[AtLeast, Tag(">=")]
    | Annotated[AtMost, Tag("<=")]
    | Annotated[Equals, Tag("==")]
    | Annotated[InRange, Tag("in")]
    | Annotated[MatchesAny, Tag("matches")]
    | Annotated[AtLeastVersion, Tag(">=version")]
    | Annotated[Described, Tag("rule")]
    | Annotated[NoCriterion, Tag("none")],
    Discriminator(_criterion_tag),
]


def version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.strip().split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


# the rule's text of a floor or a ceiling, as results written before the criterion was data hold it
_OLDER_LIMIT = re.compile(r"(?:>=|<=) (?P<limit>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?: (?P<unit>.+))?")


class Verdict(Record):
    """One judgement. `criterion` is the rule as data, its marginal line inside; `expected` is the
    same rule as text, for people. `measured` is the exact value judged; only messages round it.
    `attempts` holds every value measured for this verdict, in order, where a miss was measured
    again; `transient` says the first attempt missed and a later one passed; `marginal`, that it
    passed between its limit and the criterion's marginal line. `better` is None in results written
    before verdicts said which way their value improves.

    What its check declares rides with it for every writer (checks/declare.py): the `area` of the
    machine it judges, the `gpus` its subject involves (for a root cause, the GPUs at fault), the kind
    of `root` cause its failure is of other checks, whether its value is a `headline` worth seeing
    when it passes, a `fleet` value (compared across hosts and over a host's runs), a `metric` of its
    own and a `share` of something (a ratio), and the `measure`: which measured value it judged, where
    report.html draws that value (vocabulary/measures.py; with the subject, the value it judged).
    `missing` says what the facts lacked, where that is why it could not judge. Results written before
    these keys read with none (vocabulary/areas.py places them by their suite); where a writer needs
    `fleet`, `metric`, `share`, `measure` or `better` of such a verdict, its check's declaration says it
    (vocabulary/checks.json: `in_fleet`, `is_metric`, `is_share`, `measure_judged`, `lower_is_better`)."""

    check: str
    subject: str
    outcome: Outcome
    measured: Measured
    expected: str
    criterion: Criterion = Field(default_factory=NoCriterion)
    better: Better | None = None
    unit: str = ""
    marginal: bool = False
    attempts: list[Measured] = Field(default_factory=list)
    transient: bool = False
    final: bool = False  # a failure that measuring again cannot undo: wrong data is never noise
    message: str = ""
    profile: str = ""
    context: Evidence = Field(default_factory=dict)
    area: str = ""
    gpus: list[int] = Field(default_factory=list)
    root: RootCause | None = None
    missing: str = ""
    headline: bool = False
    fleet: bool | None = None  # None: written before verdicts carried it (as the three below)
    metric: bool | None = None
    share: bool | None = None
    measure: Measure | None = None  # None: its check judges no value the page draws, or written before verdicts carried it

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Verdict:
        """From the plain data it travels as (between pytest-xdist workers), read as results.json is read."""
        return cls.model_validate_json(json.dumps(data))

    def as_data(self) -> dict[str, Any]:
        """The verdict as plain data, as results.json holds it."""
        return self.model_dump(mode="json")

    @property
    def in_fleet(self) -> bool:
        """Whether a fleet compares its value across hosts and over a host's runs."""
        return self.fleet if self.fleet is not None else meaning_of(self.check).fleet

    @property
    def is_metric(self) -> bool:
        """Whether its value is a Prometheus series of its own."""
        return self.metric if self.metric is not None else meaning_of(self.check).metric

    @property
    def is_share(self) -> bool:
        """Whether its value, without a unit, is a share of something: a ratio."""
        return self.share if self.share is not None else meaning_of(self.check).share

    @property
    def measure_judged(self) -> Measure | None:
        """The measured value it judged, where report.html draws it; None where its check judges none."""
        if self.measure is not None:
            return self.measure
        declared = meaning_of(self.check).measure
        return None if declared is None else Measure(declared)

    @property
    def lower_is_better(self) -> bool:
        """Whether its value improves as it falls (a ceiling, a share of time lost)."""
        if self.better is not None:
            return self.better is Better.LOWER
        return meaning_of(self.check).better == Better.LOWER.value

    @property
    def ok(self) -> bool:
        return self.outcome in (Outcome.PASSED, Outcome.NOT_APPLICABLE)

    @property
    def limit(self) -> float | None:
        """The number the criterion compares against (a floor or a ceiling), where it has one; for a
        verdict written before verdicts carried their criterion, the number its rule's text names
        (`>= 315 GB/s`), where that is a floor or a ceiling in its own unit."""
        if isinstance(self.criterion, AtLeast | AtMost):
            return float(self.criterion.limit)
        found = _OLDER_LIMIT.fullmatch(self.expected) if isinstance(self.criterion, NoCriterion) else None
        return float(found["limit"]) if found and (found["unit"] or "") == self.unit else None

    @property
    def numeric(self) -> float | None:
        """The measured value where it is a number (not a state, not a bool, not missing)."""
        value = self.measured
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    @property
    def attempts_text(self) -> str:
        """The attempts as JUnit's `attempts` property holds them: `310.2, 331` (`-`: none measured)."""
        return ", ".join("-" if value is None else str(value) for value in self.attempts)

    @property
    def marginal_line(self) -> str:
        """Where the criterion's marginal line is, for people ('' where it has none)."""
        return self.criterion.marginal_text

