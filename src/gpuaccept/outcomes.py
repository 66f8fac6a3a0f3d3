"""The outcome policy: what a verdict's outcome means for its test, its JUnit element, the words the
terminal and the reports show, and the exit code. Every runner (`gpu-accept run` and the pytest
plugin, `gpu-accept cluster`, `gpu-accept health-check`) and every writer (JUnit, results.json,
HTML, metrics, the report commands) asks this module; docs/outcomes.md states the same table.

| verdict        | test    | JUnit element | exit code                             |
|----------------|---------|---------------|---------------------------------------|
| passed         | passed  | (none)        | 0                                     |
| failed         | failed  | <failure>     | 1                                     |
| error          | error   | <error>       | 2 where no check failed, else 1       |
| not_applicable | skipped | <skipped>     | 0                                     |

A check that failed anywhere makes the run exit 1: the machine is shown not to be what the profile
says. Otherwise a value that could not be established makes it exit 2, "could not judge": the
machine is not proven good, and it is not shown bad either. A fixture that raised before its test
could judge is an error too (a test whose own code raised is failed, as pytest counts it). Bad usage
and unreadable input exit 2 before anything is judged (errors.py); an interrupted run exits 1 where
a check had failed by then and 2 otherwise; one that judged nothing exits 2.

Facts that lack what a check judges (a stage the profile asks for, a health reading, the telemetry,
a GPU that is not there) make it "could not judge", never a skip: a skip is only what the profile
does not ask for (`outcome_of_missing`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Literal

from gpuaccept.errors import EXIT_CHECK_FAILED, EXIT_OK, EXIT_USAGE

EXIT_PASSED = EXIT_OK  # every check passed (or the profile asked nothing of it)
EXIT_FAILED = EXIT_CHECK_FAILED  # a check failed
EXIT_NOT_JUDGED = EXIT_USAGE  # could not judge: a value not established, a run interrupted, bad input


class Outcome(str, enum.Enum):
    """A verdict's outcome."""

    PASSED = "passed"
    FAILED = "failed"  # the hardware is not what the profile says
    ERROR = "error"  # the fact could not be established: the machine is not proven good
    NOT_APPLICABLE = "not_applicable"  # the profile asks nothing here

    def __str__(self) -> str:  # as results.json writes it, in every message and report
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


TestOutcome = Literal["passed", "failed", "error", "skipped"]

TEST_OUTCOME: dict[str, TestOutcome] = {
    "passed": "passed",
    "failed": "failed",
    "error": "error",
    "not_applicable": "skipped",
}
# a test's outcome -> the element its JUnit test case carries (none for a pass)
JUNIT_ELEMENT: dict[str, str] = {"failed": "failure", "error": "error", "skipped": "skipped"}
# a verdict's or a test's outcome -> the word the terminal and the reports show
SHOWN: dict[str, str] = {
    "passed": "PASSED", "failed": "FAILED", "error": "ERROR", "not_applicable": "SKIPPED", "skipped": "SKIPPED",
}


def test_outcome(verdict_outcome: str) -> TestOutcome:
    """The test's outcome for a verdict's (an `Outcome` or its text)."""
    return TEST_OUTCOME[Outcome(verdict_outcome).value]


def outcome_of_missing(asked: bool) -> Outcome:
    """The outcome of a check whose facts lack what it judges (a stage's measurements, a reading):
    could not judge where the profile asks for it (an error: the machine is not proven good), not
    applicable where it does not. A skip is only what the profile does not ask for, never what was
    not measured."""
    return Outcome.ERROR if asked else Outcome.NOT_APPLICABLE


def exit_code(outcomes: Iterable[str]) -> int:
    """The exit code of verdicts or tests judged (their outcomes, verdicts' or tests'): 1 where one
    failed, else 2 where one could not be established, else 0."""
    seen = {Outcome(o).value if isinstance(o, Outcome) else o for o in outcomes}
    if "failed" in seen:
        return EXIT_FAILED
    if "error" in seen:
        return EXIT_NOT_JUDGED
    return EXIT_PASSED


# pytest's exit statuses other than 0 (passed) and 1 (a test failed), as a verdict names them
PYTEST_STATUS_WORDS = {2: "interrupted (a signal, or a burn-in cut short)", 3: "internal error", 4: "usage error", 5: "no test was judged"}


def stopped_by_pytest(status: int | None) -> list[str]:
    """What pytest's own exit status says kept a run from judging (a run recorded before its verdict
    said why, or one pytest itself ended: an internal error): nothing for 0 and 1, where its tests say."""
    if status is None or status in (EXIT_PASSED, EXIT_FAILED):
        return []
    return [f"{PYTEST_STATUS_WORDS.get(status, 'pytest ended')} (exit status {status})"]


def worst_exit_code(codes: Iterable[int]) -> int:
    """One exit code for several judged parts (hosts, clusters): a failure anywhere, else could not judge."""
    found = set(codes)
    return EXIT_FAILED if EXIT_FAILED in found else EXIT_NOT_JUDGED if EXIT_NOT_JUDGED in found else EXIT_PASSED


def run_exit_code(pytest_status: int | None, complete: bool, test_outcomes: Iterable[str], stopped: bool = False) -> int:
    """The exit code of a run, from what it recorded: a check that failed makes it 1 however the run
    ended; else its tests decide where pytest ran them to the end (pytest's status 0, or 1, which
    pytest gives for a failure and an error alike) and nothing stopped it (`stopped`: a signal, a
    burn-in cut short, a collection error, nothing judged, a report not written); a run that did not
    end (killed, interrupted, an internal or usage error) could not judge."""
    code = exit_code(test_outcomes)
    if code == EXIT_FAILED:
        return EXIT_FAILED  # a check that failed stands, however the run ended
    if stopped or not complete or pytest_status not in (0, 1):
        return EXIT_NOT_JUDGED
    return EXIT_FAILED if pytest_status == 1 and code == EXIT_PASSED else code


__test__ = False  # `test_outcome` is no test, wherever pytest meets this module
