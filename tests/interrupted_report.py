"""A pytest plugin for tests/test_reports.py (`-p tests.interrupted_report`): SIGTERM in the fifth
test, and pytest's own report of the interruption failing after the session has finished, as it
does where the signal lands in a frame without a line number (pytest's traceback display then
subtracts from None)."""

import os
import signal

CALLS: list[str] = []


def pytest_runtest_call(item):
    CALLS.append(item.nodeid)
    if len(CALLS) == 5:
        os.kill(os.getpid(), signal.SIGTERM)


def pytest_keyboard_interrupt(excinfo):
    raise TypeError("unsupported operand type(s) for -: 'NoneType' and 'int'")
