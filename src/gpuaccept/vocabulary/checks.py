"""What every writer needs of each check, as the checks declare it (checks/declare.py), held below
them as data: vocabulary/checks.json, written from the declarations by
`python -m gpuaccept.checks.catalog meanings > src/gpuaccept/vocabulary/checks.json` (a test fails
where the file is not what the declarations say).

A verdict carries its check's meaning itself (facts/verdict.py); this table serves what has only a
check's name: a verdict written before verdicts carried it, the rows of the results store, and the
metric names, which come only from declared checks (a results file may name anything).
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any


@dataclass(frozen=True)
class CheckMeaning:
    area: str  # the area of the machine it judges (areas.py)
    better: str | None  # higher or lower: which way its value improves, where the same for every subject
    fleet: bool  # its value is compared across a fleet's hosts and over a host's runs
    headline: bool  # its value is worth seeing when it passes (the terminal's summary)
    metric: bool  # its value is a Prometheus series of its own
    share: bool  # its value, without a unit, is a share of something: a ratio
    measure: str | None = None  # the measured value it judges, where report.html draws it (measures.py)

    def as_data(self) -> dict[str, Any]:
        return asdict(self)


UNDECLARED = CheckMeaning("", None, False, False, False, False, None)  # a name no check declares: shown in no view


@functools.cache
def declared_meanings() -> dict[str, CheckMeaning]:
    """Every declared check's meaning, by its name."""
    text = resources.files("gpuaccept.vocabulary").joinpath("checks.json").read_text(encoding="utf-8")
    return {name: CheckMeaning(**fields) for name, fields in json.loads(text).items()}


def meaning_of(check: str) -> CheckMeaning:
    return declared_meanings().get(check, UNDECLARED)


def checks_where(*, fleet: bool | None = None, better: str | None = None) -> list[str]:
    """The names of the declared checks that are fleet values (`fleet`), or whose value improves the
    way `better` says: for SQL over stored rows, which hold a check's name only."""
    return sorted(
        name for name, meaning in declared_meanings().items()
        if (fleet is None or meaning.fleet == fleet) and (better is None or meaning.better == better)
    )
