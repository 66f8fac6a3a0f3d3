"""Turning a verdict into a test outcome, and a test's report into its record, verdict and all.

What each verdict outcome means for its test is the outcome policy's (outcomes.py): a verdict that
could not be established ends its test as an error, shown as ERROR and written as JUnit's <error>,
never as a failure.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuaccept.checks.verdict import Outcome, Verdict
from gpuaccept.errors import shown
from gpuaccept.facts.run_record import TestRecord
from gpuaccept.outcomes import SHOWN, TestOutcome

VERDICTS_KEY = pytest.StashKey[list[Verdict]]()
VERDICT_ON_REPORT = "gpuaccept_verdict"  # the deciding verdict as plain data, carried by the call's report (from xdist workers too)
MESSAGE_ON_REPORT = "gpuaccept_message"  # the failure's lines as the verdicts said them (the terminal's are shown escaped)


class VerdictRecorder:
    def __init__(self, item: pytest.Item):
        self.item = item

    def __call__(self, verdict: Verdict) -> Verdict:
        # kept on the test: its report carries it as a record (from xdist workers too) to every writer
        self.item.stash.setdefault(VERDICTS_KEY, []).append(verdict)
        if verdict.outcome is Outcome.NOT_APPLICABLE:
            pytest.skip(shown(verdict.message))
        if verdict.outcome in (Outcome.FAILED, Outcome.ERROR):
            # pytest has no outcome of its own for "could not judge" in a test's call: the report is
            # marked an error from its verdict (report_outcome), for the terminal, the record and the exit code
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


def verdict_of(report: pytest.TestReport) -> dict[str, Any] | None:
    verdict: dict[str, Any] | None = getattr(report, VERDICT_ON_REPORT, None)
    return verdict


def report_outcome(report: pytest.TestReport) -> TestOutcome | None:
    """The outcome of a test's phase by the outcome policy: None for phases that decide nothing."""
    if report.when == "call":
        verdict = verdict_of(report)
        if report.failed and verdict is not None and verdict["outcome"] == Outcome.ERROR.value:
            return "error"  # the value could not be established; any other failure of the call is a failure
        return report.outcome
    if report.when == "setup" and not report.passed:
        return "skipped" if report.skipped else "error"
    if report.when == "teardown" and report.failed:
        return "error"
    return None


def report_status(report: pytest.TestReport) -> tuple[str, str, str] | None:
    """pytest's terminal status of a call whose verdict could not be established: an error, not a failure."""
    if report.when == "call" and report_outcome(report) == "error":
        return "error", "E", SHOWN["error"]
    return None


def test_record(report: pytest.TestReport) -> TestRecord | None:
    """One test of the run record, from its report: None for phases that decide nothing."""
    outcome = report_outcome(report)
    if outcome is None:
        return None
    verdict = verdict_of(report)
    return TestRecord(
        id=report.nodeid.rsplit("::", 1)[-1],
        nodeid=report.nodeid,
        outcome=outcome,
        duration_s=round(report.duration, 4),
        message=_message(report),
        verdict=Verdict.from_data(verdict) if verdict is not None else None,
    )


def _message(report: pytest.TestReport) -> str:
    if report.passed:
        return ""
    said: str | None = getattr(report, MESSAGE_ON_REPORT, None)
    if said is not None:
        return said
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)
    return str(report.longrepr).strip().splitlines()[-1] if report.longrepr else ""
