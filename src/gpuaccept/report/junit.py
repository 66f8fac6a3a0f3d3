"""JUnit from run records: the one writer of a run's junit.xml (as it goes and at its end) and of
fleet JUnit (one testsuite per host).

A test case carries its verdict as properties (check, subject, outcome, measured, expected, unit,
profile, marginal, marginal_line, attempts, transient, the area it judges, and `cause`: the test
whose failure is its root cause, where one is) and a failure, error or skipped element with the
test's message, as the outcome policy (outcomes.py) says: a check that failed is a <failure>, a
value that could not be established an <error>; a test suite carries the run's machine, software,
profile and facts source, and its coverage by area (`coverage.compute`: what was judged and why
not; `not_checked`: the areas not wholly checked, a line each). The shape
depends on the record alone, so a run killed half way and a finished run give the same elements
and property names, and so do a run and a fleet of runs. The flavour is xunit1's: test-case
properties, which CI servers keep (Jenkins `keepProperties`, GitLab).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuaccept.facts.coverage import AreaCoverage, area_of, cause_of_each
from gpuaccept.facts.run_record import RunRecord, TestRecord
from gpuaccept.files import write_atomically
from gpuaccept.outcomes import JUNIT_ELEMENT
from gpuaccept.vocabulary.areas import AREAS

# XML 1.0 allows no control characters but tab, newline and carriage return, and no unpaired
# surrogates: each is written as U+FFFD. In an attribute a newline or tab is kept as a character
# reference (a parser would read it as a space). One translation per value: the fleet writes millions.
_ILLEGAL = [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0xD800, 0xE000), 0xFFFE, 0xFFFF]
_IN_TEXT = str.maketrans({**dict.fromkeys(map(chr, _ILLEGAL), "\ufffd"), "&": "&amp;", "<": "&lt;", ">": "&gt;"})
_IN_ATTRIBUTE = str.maketrans(
    {**dict.fromkeys(map(chr, _ILLEGAL), "\ufffd"), "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\n": "&#10;", "\r": "&#13;",
     "\t": "&#9;"}
)


def _text(value: object) -> str:
    return str(value).translate(_IN_TEXT)


def xml_attribute(value: object) -> str:
    return str(value).translate(_IN_ATTRIBUTE)


def _attributes(**values: object) -> str:
    return "".join(f' {name}="{xml_attribute(value)}"' for name, value in values.items())


@dataclass(frozen=True)
class Counts:
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    time_s: float = 0.0

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.tests + other.tests, self.failures + other.failures, self.errors + other.errors, self.skipped + other.skipped,
            self.time_s + other.time_s,
        )


@dataclass(frozen=True)
class Suite:
    """One <testsuite>, written: small enough to send between the processes that read a fleet."""

    xml: str
    counts: Counts


def suite_properties(record: RunRecord) -> dict[str, str]:
    """A run's testsuite properties: the machine, its software, the profile, where the facts came from."""
    environment, run = record.environment, record.run
    return {
        "host": environment.host,
        "driver": str(environment.driver),
        "cuda_driver": environment.cuda_driver,
        "gpu_model": str(environment.gpu_model),
        "gpu_count": str(environment.gpu_count),
        "gpu_uuids": ",".join(gpu.uuid for gpu in environment.gpus),
        "profile": run.profile.name,
        "profile_sha256": run.profile.sha256,
        "facts_source": str(run.facts_source),
        "gpu_accept_version": run.tool_version,
        "nccl": str(environment.nccl),
        "torch": str(environment.torch),
        "complete": str(record.complete).lower(),
        **coverage_properties(record),
    }


def coverage_properties(record: RunRecord) -> dict[str, str]:
    """The run's coverage by area: `not_checked` (a line per area not wholly checked) and, per area,
    `coverage.<area>`: its state and its tests by outcome, and what the facts lacked. Every area has
    its property, one the run has no test of as not asked: a run killed half way and a finished one
    carry the same property names."""
    properties = {"not_checked": "\n".join(record.unchecked())}
    known = {area.area: area for area in record.coverage}
    for area in [known.get(name) or AreaCoverage(area=name) for name in AREAS] + [a for a in record.coverage if a.area not in AREAS]:
        counts = (
            f"{area.state}: {area.passed} passed, {area.failed} failed, {area.not_judged} not judged, {area.skipped} skipped"
            + (f", {area.not_selected} not selected" if area.not_selected else "")
        )
        properties[f"coverage.{area.area or 'other'}"] = counts + (f" ({'; '.join(area.why)})" if area.why else "")
    return properties


def case_properties(test: TestRecord, cause: str | None = None) -> dict[str, str]:
    """A test case's properties, from its verdict (none where the test ended without one), and the
    test whose failure is its root cause, where one is."""
    verdict = test.verdict
    if verdict is None:
        return {"cause": cause} if cause else {}
    return {
        "check": verdict.check,
        "subject": verdict.subject,
        "outcome": verdict.outcome.value,
        "measured": _property_text(verdict.measured),
        "expected": verdict.expected,
        "unit": verdict.unit,
        "profile": verdict.profile,
        "marginal": _property_text(verdict.marginal),
        "marginal_line": verdict.marginal_line,  # where the criterion's marginal line was: 'marginal below 346.5 GB/s'
        "attempts": verdict.attempts_text,
        "transient": _property_text(verdict.transient),
        "area": area_of(test),
        "cause": cause or "",  # the root cause's test id; a property of every case, so that every run has one shape
    }


def _properties(properties: dict[str, str]) -> str:
    if not properties:
        return ""
    # the names are this module's own words: only the values need escaping
    each = "".join(f'<property name="{name}" value="{value.translate(_IN_ATTRIBUTE)}" />' for name, value in properties.items())
    return f"<properties>{each}</properties>"


def _case(test: TestRecord, cause: str | None = None) -> str:
    head = f"<testcase{_attributes(classname=test.module, name=test.id, time=f'{test.duration_s:.4f}')}>"
    problem = JUNIT_ELEMENT.get(test.outcome)
    body = f"<{problem}{_attributes(type=problem, message=test.message)}>{_text(test.message)}</{problem}>" if problem else ""
    return head + _properties(case_properties(test, cause)) + body + "</testcase>"


def count(tests: Iterable[TestRecord]) -> Counts:
    total = Counts()
    for test in tests:
        total += Counts(
            1, int(test.outcome == "failed"), int(test.outcome == "error"), int(test.outcome == "skipped"), test.duration_s
        )
    return total


def suite(record: RunRecord, name: str | None = None, extra: dict[str, str] | None = None) -> Suite:
    """The testsuite of one run, named by its host unless `name` says otherwise."""
    counts = count(record.tests)
    attributes = _attributes(
        name=name or record.environment.host, tests=counts.tests, failures=counts.failures, errors=counts.errors,
        skipped=counts.skipped, time=f"{counts.time_s:.3f}", timestamp=record.run.started_at, hostname=record.environment.host,
    )
    head = f"<testsuite{attributes}>"
    causes = cause_of_each(record.causes)
    cases = "".join(_case(test, causes.get(test.id)) for test in record.tests)
    return Suite(head + _properties({**suite_properties(record), **(extra or {})}) + cases + "</testsuite>", counts)


def failing_suite(name: str, cases: Sequence[tuple[str, str, str]], properties: dict[str, str]) -> Suite:
    """A testsuite of failures that no run holds (a fleet's outliers): (classname, name, message) each."""
    head = f"<testsuite{_attributes(name=name, tests=len(cases), failures=len(cases), errors=0, skipped=0)}>"
    body = "".join(
        f"<testcase{_attributes(classname=classname, name=case_name)}>"
        f"<failure{_attributes(type='failure', message=message)}>{_text(message)}</failure></testcase>"
        for classname, case_name, message in cases
    )
    return Suite(head + _properties(properties) + body + "</testsuite>", Counts(len(cases), len(cases)))


def fleet_host_suite(
    name: str, cases: Sequence[tuple[str, str, str | None, dict[str, str], str]], properties: dict[str, str]
) -> Suite:
    """A fleet's hosts, a test case each: (host, profile, the line saying why it did not pass or None,
    properties, the host's outcome: `failed`, or `error` where its values could not be established)."""
    failures = sum(1 for _, _, line, _, outcome in cases if line and outcome != "error")
    errors = sum(1 for _, _, line, _, outcome in cases if line and outcome == "error")
    head = f"<testsuite{_attributes(name=name, tests=len(cases), failures=failures, errors=errors, skipped=0)}>"
    body = "".join(
        f"<testcase{_attributes(classname=f'fleet.{profile}', name=host)}>" + _properties(each) + _problem(line, outcome) + "</testcase>"
        for host, profile, line, each, outcome in cases
    )
    return Suite(head + _properties(properties) + body + "</testsuite>", Counts(len(cases), failures, errors))


def _problem(line: str | None, outcome: str) -> str:
    element = JUNIT_ELEMENT.get(outcome, "failure")
    return f"<{element}{_attributes(type=element, message=line)}>{_text(line)}</{element}>" if line else ""


def _property_text(value: object) -> str:
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


def junit_xml(suites: Sequence[Suite], name: str) -> str:
    total = sum((s.counts for s in suites), Counts())
    attributes = _attributes(
        name=name, tests=total.tests, failures=total.failures, errors=total.errors, skipped=total.skipped, time=f"{total.time_s:.3f}",
    )
    return f'<?xml version="1.0" encoding="utf-8"?>\n<testsuites{attributes}>' + "".join(s.xml for s in suites) + "</testsuites>\n"


def write_junit(target: Path, suites: Sequence[Suite], name: str = "gpu-accept") -> Counts:
    """One JUnit file of `suites`, written whole or not at all."""
    write_atomically(target, junit_xml(suites, name))
    return sum((s.counts for s in suites), Counts())
