"""The pytest plugin: options, one run context per session, test ids from the profile, verdicts.

Loaded in every pytest run of the environment (entry point `pytest11`), it stays inert unless
`--profile` or `--facts` is given: no hardware is touched at import or for other projects' tests.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from gpuaccept.errors import GpuAcceptError
from gpuaccept.facts import save_facts
from gpuaccept.plugin.context import AUTO, RunContext
from gpuaccept.plugin.junit import add_suite_properties
from gpuaccept.plugin.measurements import MeasurementStore, merge, terminal_line
from gpuaccept.plugin.parametrize import parametrize_from_profile
from gpuaccept.plugin.verdicts import VERDICTS_KEY, VerdictRecorder, failure_message

CONTEXT_KEY = pytest.StashKey[RunContext]()
STORE_KEY = pytest.StashKey[MeasurementStore]()
WORKER_INPUT = "gpuaccept_context"
WORKER_STORE = "gpuaccept_store"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpu-accept", "GPU server acceptance (gpu-accept)")
    group.addoption(
        "--profile",
        dest="gpuaccept_profile",
        metavar="NAME|PATH|auto",
        help="the hardware profile to check against: a shipped name, a YAML path, or 'auto' to pick by GPU model and count",
    )
    group.addoption(
        "--profile-dir",
        dest="gpuaccept_profile_dirs",
        action="append",
        default=[],
        metavar="DIR",
        help="another folder of profiles, searched before the shipped ones (repeatable)",
    )
    group.addoption(
        "--facts",
        dest="gpuaccept_facts",
        metavar="FILE",
        help="evaluate facts recorded earlier (gpu-accept record) instead of probing this machine",
    )
    group.addoption(
        "--facts-out",
        dest="gpuaccept_facts_out",
        metavar="FILE",
        help="save the facts this run gathered, to re-check them later with --facts",
    )


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and WORKER_INPUT in workerinput:
        context = RunContext.from_json(workerinput[WORKER_INPUT])
        config.stash[CONTEXT_KEY] = context
        config.stash[STORE_KEY] = MeasurementStore(Path(workerinput[WORKER_STORE]), live=context.live)
        return
    profile = config.getoption("gpuaccept_profile")
    facts_file = config.getoption("gpuaccept_facts")
    if profile is None and facts_file is None:
        return  # not a gpu-accept run
    try:
        context = RunContext.build(profile or AUTO, facts_file, config.getoption("gpuaccept_profile_dirs"))
    except GpuAcceptError as error:
        raise pytest.UsageError(f"gpu-accept: {error}") from None
    config.stash[CONTEXT_KEY] = context
    folder = Path(tempfile.mkdtemp(prefix="gpuaccept-session-"))
    config.stash[STORE_KEY] = MeasurementStore(folder, live=context.live, say=terminal_line(config))


def context_of(config: pytest.Config) -> RunContext:
    context = config.stash.get(CONTEXT_KEY, None)
    if context is None:
        raise pytest.UsageError("gpu-accept: these tests need --profile NAME|PATH|auto (or --facts FILE)")
    return context


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist: give each worker the controller's context instead of probing again."""
    context = node.config.stash.get(CONTEXT_KEY, None)
    if context is not None:
        node.workerinput[WORKER_INPUT] = context.to_json()
        node.workerinput[WORKER_STORE] = str(node.config.stash[STORE_KEY].folder)


def pytest_report_header(config: pytest.Config) -> str | None:
    context = config.stash.get(CONTEXT_KEY, None)
    return f"gpu-accept: {context.describe()}" if context else None


def pytest_sessionstart(session: pytest.Session) -> None:
    context = session.config.stash.get(CONTEXT_KEY, None)
    if context is not None and not hasattr(session.config, "workerinput"):
        add_suite_properties(session.config, context)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    context = config.stash.get(CONTEXT_KEY, None)
    if context is None or hasattr(config, "workerinput"):
        return
    store = config.stash[STORE_KEY]
    target = config.getoption("gpuaccept_facts_out")
    if target:
        save_facts(merge(context.facts, store.collected()) if context.live else context.facts, Path(target))
    shutil.rmtree(store.folder, ignore_errors=True)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    context = metafunc.config.stash.get(CONTEXT_KEY, None)
    if context is not None:
        parametrize_from_profile(metafunc, context.profile)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    message = failure_message(item)
    crash = getattr(report.longrepr, "reprcrash", None)
    if report.when == "call" and report.failed and message and crash is not None:
        # the verdict's own line, without pytest's "Failed: " prefix, in the summary and in JUnit
        crash.message = message
    if report.when == "call" and report.skipped and isinstance(report.longrepr, tuple) and item.stash.get(VERDICTS_KEY, None):
        # a verdict skips from inside the plugin: point the skip at the test, as skip marks do
        path, line = item.reportinfo()[:2]
        report.longrepr = (str(path), (line or 0) + 1, report.longrepr[2])
    return report


@pytest.fixture(scope="session")
def profile(request: pytest.FixtureRequest):
    """The profile this run checks against."""
    return context_of(request.config).profile


@pytest.fixture(scope="session")
def facts(request: pytest.FixtureRequest):
    """The facts of the machine under test (probed once per session, or replayed from a file)."""
    return context_of(request.config).facts


@pytest.fixture(scope="session")
def facts_with_nccl(request: pytest.FixtureRequest):
    """The facts with the NCCL stage's collective sweep and pairwise exchange (measured on first use)."""
    context = context_of(request.config)
    return request.config.stash[STORE_KEY].with_stage("nccl", context.facts, context.profile)


@pytest.fixture(scope="session")
def facts_with_copies(request: pytest.FixtureRequest):
    """The facts with the copy stage's bandwidths (measured on first use)."""
    context = context_of(request.config)
    return request.config.stash[STORE_KEY].with_stage("copies", context.facts, context.profile)


@pytest.fixture(scope="session")
def facts_with_ddp(request: pytest.FixtureRequest):
    """The facts with the DDP stage's scaling sweep, and its P2P A/B where asked (measured on first use)."""
    context = context_of(request.config)
    return request.config.stash[STORE_KEY].with_stage("ddp", context.facts, context.profile)


@pytest.fixture
def verdict(request: pytest.FixtureRequest) -> VerdictRecorder:
    """Call with a Verdict: records it on the test (JUnit properties, reports) and passes, fails or skips."""
    return VerdictRecorder(request.node)
