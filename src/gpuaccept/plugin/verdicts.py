"""Turning a verdict into a test outcome, with its numbers kept on the test for every report."""

from __future__ import annotations

import pytest

from gpuaccept.checks.verdict import Outcome, Verdict

VERDICTS_KEY = pytest.StashKey[list[Verdict]]()


class VerdictRecorder:
    def __init__(self, item: pytest.Item):
        self.item = item

    def __call__(self, verdict: Verdict) -> Verdict:
        self.item.stash.setdefault(VERDICTS_KEY, []).append(verdict)
        # record_property's user_properties travel from xdist workers to the controller's JUnit
        for name, value in (
            ("check", verdict.check),
            ("subject", verdict.subject),
            ("outcome", verdict.outcome.value),
            ("measured", "" if verdict.measured is None else verdict.measured),
            ("expected", verdict.expected),
            ("unit", verdict.unit),
            ("profile", verdict.profile),
            ("marginal", str(verdict.marginal).lower()),
            ("attempts", ", ".join("-" if a is None else str(a) for a in verdict.attempts)),
            ("transient", str(verdict.transient).lower()),
        ):
            self.item.user_properties.append((name, value))
        if verdict.outcome is Outcome.NOT_APPLICABLE:
            pytest.skip(verdict.message)
        if verdict.outcome is Outcome.FAILED:
            pytest.fail(verdict.message, pytrace=False)
        if verdict.outcome is Outcome.ERROR:
            pytest.fail(verdict.message, pytrace=False)
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


def test_record(report: pytest.TestReport) -> dict | None:
    """One test's line in results.json, from its report: None for phases that decide nothing."""
    if report.when == "call":
        outcome = report.outcome
    elif report.when == "setup" and not report.passed:
        outcome = "skipped" if report.skipped else "error"
    elif report.when == "teardown" and report.failed:
        outcome = "error"
    else:
        return None
    return {
        "id": report.nodeid.rsplit("::", 1)[-1],
        "nodeid": report.nodeid,
        "outcome": outcome,
        "duration_s": round(report.duration, 4),
        "message": _message(report),
        "verdict": getattr(report, "gpuaccept_verdict", None),
    }


def _message(report: pytest.TestReport) -> str:
    if report.passed:
        return ""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message
    return str(report.longrepr).strip().splitlines()[-1] if report.longrepr else ""
