"""The health part of the plugin: XID events listened for from the start of a live session to its
end (in the controlling process, before any test can start a load), and the markers that sort
health tests by what they need.

Markers: `health_state` tests judge the start snapshot and need no measurement stage (a quick
gate selects them with -m health_state); `health_run` tests judge the change over the run: their
facts (the `facts` fixture, plugin/needs.py) hold the level's loads first (every measurement stage
at the standard level, the burn-in's rounds in a burn-in) and every health reading since.
"""

from __future__ import annotations

import pytest

from gpuaccept.plugin.context import RUN_KEY
from gpuaccept.stages.health import SessionListener

LISTENER_KEY = pytest.StashKey[SessionListener]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "health_state: a health check of the start snapshot; needs no measurement stage")
    config.addinivalue_line("markers", "health_run: a health check of the change over the run; runs the measurement stages first")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The run checks last: they judge the change over every stage, which the other suites' tests
    run in their own order; asked for first, they would pull every stage ahead of those tests."""
    items.sort(key=lambda item: item.get_closest_marker("health_run") is not None)


@pytest.hookimpl(tryfirst=True)  # registered before any test runs, in this process or an xdist worker
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    run = config.stash.get(RUN_KEY, None)
    if run is None or hasattr(config, "workerinput") or not run.context.live:
        return
    listener = SessionListener(run.context.facts, run.store.folder)
    listener.start()
    config.stash[LISTENER_KEY] = listener


@pytest.hookimpl(tryfirst=True)  # before the recording reads the facts and removes the session's folder
def pytest_sessionfinish(session: pytest.Session) -> None:
    listener = session.config.stash.get(LISTENER_KEY, None)
    if listener is not None:
        listener.stop()
