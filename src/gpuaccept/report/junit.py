"""JUnit from run records: the one writer of a run's junit.xml (as it goes and at its end) and of
fleet JUnit (one testsuite per host).

A test case carries its verdict as properties (check, subject, outcome, measured, expected, unit,
profile, marginal, attempts, transient) and a failure, error or skipped element with the test's
message; a test suite carries the run's machine, software, profile and facts source. The shape
depends on the record alone, so a run killed half way and a finished run give the same elements
and property names, and so do a run and a fleet of runs. The flavour is xunit1's: test-case
properties, which CI servers keep (Jenkins `keepProperties`, GitLab).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuaccept.facts.run_record import RunRecord, TestRecord
from gpuaccept.files import write_atomically

# XML 1.0 allows no control characters but tab, newline and carriage return, and no unpaired surrogates
_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_PROBLEM_ELEMENT = {"failed": "failure", "error": "error", "skipped": "skipped"}


def _text(value: object) -> str:
    return _ILLEGAL_XML.sub("\ufffd", str(value))


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
    }


def case_properties(test: TestRecord) -> dict[str, str]:
    """A test case's properties, from its verdict; none where the test ended without one."""
    verdict = test.verdict
    if verdict is None:
        return {}
    return {
        "check": verdict.check,
        "subject": verdict.subject,
        "outcome": verdict.outcome,
        "measured": "" if verdict.measured is None else str(verdict.measured),
        "expected": verdict.expected,
        "unit": verdict.unit,
        "profile": verdict.profile,
        "marginal": str(verdict.marginal).lower(),
        "attempts": verdict.attempts_text,
        "transient": str(verdict.transient).lower(),
    }


def _properties(parent: ET.Element, properties: dict[str, str]) -> None:
    if properties:
        element = ET.SubElement(parent, "properties")
        for name, value in properties.items():
            ET.SubElement(element, "property", name=name, value=_text(value))


def _case(test: TestRecord) -> ET.Element:
    case = ET.Element("testcase", classname=test.module, name=_text(test.id), time=f"{test.duration_s:.4f}")
    _properties(case, case_properties(test))
    problem = _PROBLEM_ELEMENT.get(test.outcome)
    if problem is not None:
        element = ET.SubElement(case, problem, type=problem, message=_text(test.message))
        element.text = _text(test.message)
    return case


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
    element = ET.Element(
        "testsuite", name=_text(name or record.environment.host), tests=str(counts.tests), failures=str(counts.failures),
        errors=str(counts.errors), skipped=str(counts.skipped), time=f"{counts.time_s:.3f}", timestamp=record.run.started_at,
        hostname=_text(record.environment.host),
    )
    _properties(element, {**suite_properties(record), **(extra or {})})
    element.extend(_case(test) for test in record.tests)
    return Suite(ET.tostring(element, encoding="unicode"), counts)


def failing_suite(name: str, cases: Sequence[tuple[str, str, str]], properties: dict[str, str]) -> Suite:
    """A testsuite of failures that no run holds (a fleet's outliers): (classname, name, message) each."""
    element = ET.Element("testsuite", name=_text(name), tests=str(len(cases)), failures=str(len(cases)), errors="0", skipped="0")
    _properties(element, properties)
    for classname, case_name, message in cases:
        case = ET.SubElement(element, "testcase", classname=_text(classname), name=_text(case_name))
        failure = ET.SubElement(case, "failure", type="failure", message=_text(message))
        failure.text = _text(message)
    return Suite(ET.tostring(element, encoding="unicode"), Counts(len(cases), len(cases)))


def junit_xml(suites: Sequence[Suite], name: str) -> str:
    total = sum((s.counts for s in suites), Counts())
    head = (
        f'<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="{_attribute(name)}" tests="{total.tests}" '
        f'failures="{total.failures}" errors="{total.errors}" skipped="{total.skipped}" time="{total.time_s:.3f}">'
    )
    return head + "".join(s.xml for s in suites) + "</testsuites>\n"


def _attribute(value: str) -> str:
    return _text(value).replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")


def write_junit(target: Path, suites: Sequence[Suite], name: str = "gpu-accept") -> Counts:
    """One JUnit file of `suites`, written whole or not at all."""
    write_atomically(target, junit_xml(suites, name))
    return sum((s.counts for s in suites), Counts())
