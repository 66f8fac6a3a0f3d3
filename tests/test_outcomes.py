"""The outcome policy (outcomes.py) where a run or a test ends unusually."""

from types import SimpleNamespace

import pytest

from gpuaccept.outcomes import EXIT_FAILED, EXIT_NOT_JUDGED, EXIT_PASSED, run_exit_code
from gpuaccept.plugin.verdicts import VERDICT_ON_REPORT, report_outcome


@pytest.mark.parametrize(
    "status, complete, outcomes, code",
    [
        (0, True, ["passed", "skipped"], EXIT_PASSED),
        (1, True, ["passed", "failed"], EXIT_FAILED),
        (1, True, ["passed", "error"], EXIT_NOT_JUDGED),
        (2, False, ["passed"], EXIT_NOT_JUDGED),  # stopped before its end with nothing failed: not proven good
        (2, False, ["passed", "failed"], EXIT_FAILED),  # stopped after a check failed: the machine is faulty
        (2, False, ["error", "failed"], EXIT_FAILED),
        (None, False, [], EXIT_NOT_JUDGED),  # killed: nothing recorded its end
    ],
)
def test_a_failed_check_decides_a_run_however_it_ended(status, complete, outcomes, code):
    assert run_exit_code(status, complete, outcomes) == code
    # what the plugin recorded as stopping the run (a signal, a burn-in cut short, nothing judged, a
    # report not written) where pytest saw a pass: could not judge, unless a check failed
    assert run_exit_code(status, complete, outcomes, stopped=True) == (EXIT_FAILED if code == EXIT_FAILED else EXIT_NOT_JUDGED)


def _call(failed: bool, verdict_outcome: str | None) -> SimpleNamespace:
    report = SimpleNamespace(when="call", failed=failed, outcome="failed" if failed else "passed", passed=not failed)
    if verdict_outcome is not None:
        setattr(report, VERDICT_ON_REPORT, {"outcome": verdict_outcome})
    return report


def test_a_test_that_raises_after_its_verdict_passed_is_failed_not_passed():
    assert report_outcome(_call(failed=True, verdict_outcome="passed")) == "failed"  # type: ignore[arg-type]
    assert report_outcome(_call(failed=True, verdict_outcome="failed")) == "failed"  # type: ignore[arg-type]
    assert report_outcome(_call(failed=True, verdict_outcome="error")) == "error"  # type: ignore[arg-type]
    assert report_outcome(_call(failed=False, verdict_outcome="passed")) == "passed"  # type: ignore[arg-type]
    assert report_outcome(_call(failed=True, verdict_outcome=None)) == "failed"  # type: ignore[arg-type]
