"""Turning a verdict into a test outcome, and a test's report into its record, verdict and all."""

from __future__ import annotations

import pytest

from gpuaccept.checks.verdict import Outcome, Verdict
from gpuaccept.errors import shown
from gpuaccept.facts.run_record import TestOutcome, TestRecord, VerdictRecord

VERDICTS_KEY = pytest.StashKey[list[Verdict]]()


class VerdictRecorder:
    def __init__(self, item: pytest.Item):
        self.item = item

    def __call__(self, verdict: Verdict) -> Verdict:
        # kept on the test: its report carries it as a record (from xdist workers too) to every writer
        self.item.stash.setdefault(VERDICTS_KEY, []).append(verdict)
        if verdict.outcome is Outcome.NOT_APPLICABLE:
            pytest.skip(shown(verdict.message))
        if verdict.outcome is Outcome.FAILED:
            pytest.fail(shown(verdict.message), pytrace=False)
        if verdict.outcome is Outcome.ERROR:
            pytest.fail(shown(verdict.message), pytrace=False)
        return verdict


def failure_message(item: pytest.Item) -> str:
    """The lines of the verdicts that failed this test; '' where none did (a crash keeps its traceback)."""
    lines = []
    for verdict in item.stash.get(VERDICTS_KEY, []):
        if verdict.outcome is Outcome.FAILED:
            lines.append(verdict.message)
        elif verdict.outcome is Outcome.ERROR:
            lines.append(f"could not be established: {verdict.message}")
    return "\n".join(lines)


def test_record(report: pytest.TestReport) -> TestRecord | None:
    """One test of the run record, from its report: None for phases that decide nothing."""
    outcome: TestOutcome
    if report.when == "call":
        outcome = report.outcome
    elif report.when == "setup" and not report.passed:
        outcome = "skipped" if report.skipped else "error"
    elif report.when == "teardown" and report.failed:
        outcome = "error"
    else:
        return None
    verdict = getattr(report, "gpuaccept_verdict", None)  # Verdict.as_record(), set by the makereport hook
    return TestRecord(
        id=report.nodeid.rsplit("::", 1)[-1],
        nodeid=report.nodeid,
        outcome=outcome,
        duration_s=round(report.duration, 4),
        message=_message(report),
        verdict=VerdictRecord.of(verdict) if verdict is not None else None,
    )


def _message(report: pytest.TestReport) -> str:
    if report.passed:
        return ""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)
    return str(report.longrepr).strip().splitlines()[-1] if report.longrepr else ""
