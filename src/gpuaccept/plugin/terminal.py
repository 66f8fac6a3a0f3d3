"""Lines printed while a session runs, past pytest's output capture."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuaccept.errors import shown


def terminal_line(config: pytest.Config) -> Callable[[str], None]:
    """Print a line now, past output capture, where this process has a terminal (not xdist workers)."""

    def say(text: str) -> None:
        # looked up when called: the terminal reporter registers after this plugin configures
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        if reporter is None or hasattr(config, "workerinput"):
            return
        if capture is not None:
            with capture.global_and_fixture_disabled():
                _own_line(reporter, text)
        else:
            _own_line(reporter, text)

    return say


def _own_line(reporter: pytest.TerminalReporter, text: str) -> None:
    # under -q the progress dots share one line, and write_line does not end it first
    if reporter._tw.width_of_current_line:
        reporter._tw.line()
    reporter.write_line(shown(text))
