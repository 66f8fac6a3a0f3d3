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
