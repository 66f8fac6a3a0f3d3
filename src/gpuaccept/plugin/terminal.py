"""Lines printed while a session runs, past pytest's output capture."""

from __future__ import annotations

from collections.abc import Callable

import pytest


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
                reporter.write_line(text)
        else:
            reporter.write_line(text)

    return say
