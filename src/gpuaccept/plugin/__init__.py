"""The pytest plugin: options, one run context per session, test ids from the profile, verdicts.

Loaded in every pytest run of the environment (entry point `pytest11`), it stays inert unless
`--profile` or `--facts` is given: no hardware is touched at import or for other projects' tests.
"""

from __future__ import annotations

import signal
import tempfile
import threading
from pathlib import Path

import pytest

from gpuaccept.errors import GpuAcceptError, OptionError
from gpuaccept.outputs import check_output_file
from gpuaccept.plugin.context import AUTO, RunContext
from gpuaccept.plugin.parametrize import parametrize_from_profile
from gpuaccept.plugin.reporting import RunReporting
from gpuaccept.plugin.terminal import terminal_line
from gpuaccept.plugin.verdicts import VERDICTS_KEY, VerdictRecorder, failure_message
from gpuaccept.report.baseline import load_baseline, parse_percent
from gpuaccept.session.store import MeasurementStore, merge

CONTEXT_KEY = pytest.StashKey[RunContext]()
BASELINE_KEY = pytest.StashKey[tuple]()
STORE_KEY = pytest.StashKey[MeasurementStore]()
WORKER_INPUT = "gpuaccept_context"
WORKER_STORE = "gpuaccept_store"
DEFAULT_MAX_REGRESSION = "5%"
OUTPUT_OPTIONS = (
    ("gpuaccept_results", "--results"),
    ("gpuaccept_html", "--html-report"),
    ("gpuaccept_facts_out", "--facts-out"),
    ("gpuaccept_save_baseline", "--save-baseline"),
)


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
    group.addoption(
        "--baseline",
        dest="gpuaccept_baseline",
        metavar="FILE",
        help="gate on a baseline saved earlier: one test per value it holds",
    )
    group.addoption(
        "--max-regression",
        dest="gpuaccept_max_regression",
        metavar="PERCENT",
        help="with --baseline: how much worse than the baseline a value may be (default 5%%)",
    )
    group.addoption(
        "--confirm",
        dest="gpuaccept_confirm",
        type=int,
        default=2,
        metavar="N",
        help="measure a value that misses its criterion again, up to N more times, before it fails; the best attempt "
        "decides and every attempt is reported (default 2; 0 judges the first measurement)",
    )
    group.addoption(
        "--save-baseline",
        dest="gpuaccept_save_baseline",
        metavar="FILE",
        help="save this run's measured values as a baseline for later runs",
    )
    group.addoption(
        "--html-report",
        dest="gpuaccept_html",
        metavar="FILE",
        help="write a self-contained HTML report at the end (needs --results)",
    )
    group.addoption(
        "--results",
        dest="gpuaccept_results",
        metavar="FILE",
        help="write results.json (facts, every verdict, environment, timings), kept valid as the run goes",
    )


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    try:
        _check_options(config.option)
        if getattr(config.option, "gpuaccept_baseline", None):
            config.stash[BASELINE_KEY] = (
                load_baseline(Path(config.getoption("gpuaccept_baseline"))),
                _max_regression(config.getoption("gpuaccept_max_regression")),
            )
    except GpuAcceptError as error:
        raise pytest.UsageError(f"gpu-accept: {error}") from None
    if workerinput is not None and WORKER_INPUT in workerinput:
        context = RunContext.from_json(workerinput[WORKER_INPUT])
        config.stash[CONTEXT_KEY] = context
        config.stash[STORE_KEY] = MeasurementStore(
            Path(workerinput[WORKER_STORE]), live=context.live, confirm=config.getoption("gpuaccept_confirm")
        )
        return
    profile = config.getoption("gpuaccept_profile")
    facts_file = config.getoption("gpuaccept_facts")
    if profile is None and facts_file is None:
        return  # not a gpu-accept run
    try:
        for dest, option in OUTPUT_OPTIONS:  # before anything is probed: not at the end of a full run
            if config.getoption(dest):
                check_output_file(config.getoption(dest), option)
        context = RunContext.build(profile or AUTO, facts_file, config.getoption("gpuaccept_profile_dirs"))
    except GpuAcceptError as error:
        raise pytest.UsageError(f"gpu-accept: {error}") from None
    config.stash[CONTEXT_KEY] = context
    baseline = config.stash.get(BASELINE_KEY, None)
    if baseline is not None:
        # a baseline of other GPUs or another profile would fail every value for the wrong reason
        mismatch = baseline[0].mismatch(context.facts, context.profile.name)
        if mismatch:
            raise pytest.UsageError(
                f"gpu-accept: {baseline[0].path}: this baseline cannot judge this run: {'; '.join(mismatch)} "
                "(save a baseline on this kind of machine, against this profile)"
            )
    folder = Path(tempfile.mkdtemp(prefix="gpuaccept-session-"))
    store = MeasurementStore(folder, live=context.live, say=terminal_line(config), confirm=config.getoption("gpuaccept_confirm"))
    config.stash[STORE_KEY] = store
    config.pluginmanager.register(RunReporting(config, context, store, baseline[0] if baseline else None), "gpuaccept-reporting")
    _end_cleanly_on_sigterm()


def _check_options(option) -> None:
    """Options that cannot work as given, refused before anything runs."""
    if getattr(option, "gpuaccept_max_regression", None) is not None and not getattr(option, "gpuaccept_baseline", None):
        raise OptionError("--max-regression needs --baseline FILE: it is how far below that baseline a value may fall")
    confirm = getattr(option, "gpuaccept_confirm", 0)
    if confirm < 0:
        raise OptionError(f"--confirm {confirm}: the number of measurements more to make, 0 or more")


def _max_regression(text: str | None) -> float:
    try:
        return parse_percent(text or DEFAULT_MAX_REGRESSION)
    except ValueError as error:
        raise OptionError(f"--max-regression {error}") from None


TERMINATED: list[int] = []  # the signals that asked this run to end


def _end_cleanly_on_sigterm() -> None:
    """SIGTERM (a CI job cancelled, a scheduler's time limit) ends the run as Ctrl-C does: pytest
    then still writes its JUnit and this plugin its results of what finished."""
    if threading.current_thread() is not threading.main_thread():
        return

    def interrupt(signum, frame):
        TERMINATED.append(signum)
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logfinish() -> None:
    # Python drops an exception raised while it runs a finalizer (`__del__`, a weakref callback):
    # a SIGTERM that landed there is honoured at the next test instead of being lost
    if TERMINATED:
        raise KeyboardInterrupt(f"signal {TERMINATED[0]}")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    if TERMINATED and session.exitstatus != pytest.ExitCode.INTERRUPTED:
        session.exitstatus = pytest.ExitCode.INTERRUPTED  # ended by a signal: not a verdict on the machine


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


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    context = metafunc.config.stash.get(CONTEXT_KEY, None)
    if context is not None:
        parametrize_from_profile(metafunc, context.profile)
    if "baseline_metric" in metafunc.fixturenames:
        baseline = metafunc.config.stash.get(BASELINE_KEY, None)
        keys = sorted(baseline[0].metrics) if baseline else []
        if keys:
            metafunc.parametrize("baseline_metric", keys, ids=keys)
        else:
            reason = "no --baseline given" if baseline is None else f"the baseline {baseline[0].path} holds no values"
            metafunc.parametrize("baseline_metric", [pytest.param(None, marks=pytest.mark.skip(reason=reason))], ids=["none"])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    message = failure_message(item)
    verdicts = item.stash.get(VERDICTS_KEY, None)
    if report.when == "call" and verdicts:
        report.gpuaccept_verdict = verdicts[-1].as_record()  # travels with the report from xdist workers
    crash = getattr(report.longrepr, "reprcrash", None)
    if report.when == "call" and report.failed and message and crash is not None:
        # the verdict's own line, without pytest's "Failed: " prefix, in the summary and in JUnit
        crash.message = message
    if report.when == "call" and report.skipped and isinstance(report.longrepr, tuple) and verdicts:
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


@pytest.fixture(scope="session")
def facts_with_everything(facts_with_nccl, facts_with_copies, facts_with_ddp):
    """The facts with every measurement stage the profile asks for."""
    return merge(merge(facts_with_nccl, facts_with_copies.measurements), facts_with_ddp.measurements)


@pytest.fixture(scope="session")
def baseline(request: pytest.FixtureRequest):
    """(the baseline, the regression allowed). One of other GPUs or another profile never gets here
    (a usage error at configure); other software is noted in the gpu-accept summary."""
    return request.config.stash[BASELINE_KEY]


@pytest.fixture
def verdict(request: pytest.FixtureRequest) -> VerdictRecorder:
    """Call with a Verdict: records it on the test (JUnit properties, reports) and passes, fails or skips."""
    return VerdictRecorder(request.node)
