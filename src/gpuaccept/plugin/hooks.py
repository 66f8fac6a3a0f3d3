"""The plugin's pytest hooks: a run configured from its options (context, measurement store,
recording), the context handed to pytest-xdist workers, test ids from the profile, each verdict
kept on its test's report, every test recorded, SIGTERM ended as Ctrl-C ends a run, and the
gpu-accept summary at the end.

Every hook is inert in a pytest run that is not a gpu-accept run (neither --profile nor --facts).
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Generator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from gpuaccept.burnin.driver import burnin_stages
from gpuaccept.checks.declare import areas_of_tests
from gpuaccept.errors import GpuAcceptError, shown
from gpuaccept.facts.run_record import journal_of
from gpuaccept.measure.drills import Drills
from gpuaccept.measure.launch import WorkerPool
from gpuaccept.outputs import check_output_file, refuse_links, refuse_overlaps
from gpuaccept.plugin.burnin import BurninHooks
from gpuaccept.plugin.context import RUN_KEY, GpuAcceptRun, RunContext
from gpuaccept.plugin.head_start import first_wave
from gpuaccept.plugin.levels import mark_levels, outside_level, register_markers
from gpuaccept.plugin.needs import needs_of, stages_asked
from gpuaccept.plugin.options import RunOptions, given_head_start, given_options, given_probe, read_options
from gpuaccept.plugin.parametrize import parametrize_from_profile
from gpuaccept.plugin.recording import NOT_STARTED_KEY, RunRecording
from gpuaccept.plugin.terminal import terminal_line
from gpuaccept.plugin.torch_check import TorchCheck
from gpuaccept.plugin.verdicts import MESSAGE_ON_REPORT, VERDICT_ON_REPORT, VERDICTS_KEY, failure_message, report_status
from gpuaccept.process import HeldSignals, hold_signals
from gpuaccept.stages.health import SnapshotAfterStage
from gpuaccept.stages.registry import STAGES
from gpuaccept.stages.store import MeasurementStore

WORKER_INPUT = "gpuaccept_context"
WORKER_STORE = "gpuaccept_store"
NOT_SELECTED_OUTPUT = "gpuaccept_not_selected"  # what a pytest-xdist worker left out, for the controller's record
NOT_SELECTED_KEY = pytest.StashKey[Counter[str]]()  # the tests -k, -m or test ids left out, by area
TERMINATED: list[int] = []  # the signals that asked this run to end


@pytest.hookimpl(tryfirst=True)  # before pytest's junitxml configures: a gpu-accept run writes its JUnit itself
def pytest_configure(config: pytest.Config) -> None:
    register_markers(config)  # in every run, so that the suites pass --strict-markers
    given = given_options(config.pluginmanager.get_plugins())  # read and checked by `gpu-accept run`
    started_probe = given_probe(config.pluginmanager.get_plugins())  # started by `gpu-accept run` as it began
    head_start = given_head_start(config.pluginmanager.get_plugins())  # started by `gpu-accept run` once its options were read
    try:
        options = given.with_junitxml(getattr(config.option, "xmlpath", None)) if given is not None else read_options(config.option)
    except GpuAcceptError as error:
        raise pytest.UsageError(_usage(error)) from None
    if options is None:
        return  # not a gpu-accept run
    # added first, run last: after pytest's own cleanups have collected (pytest_collection_finish froze)
    config.add_cleanup(gc.unfreeze)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and WORKER_INPUT in workerinput:
        context = RunContext.from_json(workerinput[WORKER_INPUT])
        shared = Path(workerinput[WORKER_STORE])
        store = MeasurementStore(
            shared, live=context.live, confirm=options.confirm, after_stage=[SnapshotAfterStage(shared)], drills=context.drills
        )
        config.stash[RUN_KEY] = GpuAcceptRun(options, context, store)
        return
    # --junitxml FILE is written by this plugin, from the run record, in the shape of every other
    # gpu-accept JUnit: pytest's own writer would be a second one at the same path
    config.option.xmlpath = None
    distributed = getattr(config.option, "numprocesses", None) not in (None, 0)
    collect_only = bool(config.option.collectonly)
    if head_start is not None and head_start.fits(distributed, collect_only):
        pool = head_start.pool
    else:
        if head_start is not None:
            head_start.pool.close()  # the command guessed pytest's arguments wrong: its workers go unused
        pool = first_wave(options, distributed, collect_only)
    torch_check: TorchCheck | None = head_start.torch_check if head_start is not None else None
    folder: Path | None = None
    try:
        refuse_overlaps(options.inputs(), options.outputs.named())  # no output is an input or another output
        for option, path in options.outputs.named():  # before anything is probed: not at the end of a full run
            check_output_file(path, option)
        if options.outputs.results is not None:  # results.json's journal is named by the run, never by its user
            refuse_links(options.outputs.results.parent, [journal_of(options.outputs.results).name], "--results")
        if torch_check is None:  # asked beside the probe, answered before any test
            torch_check = TorchCheck.of_run(options)
        # the fault drills are read here, once: the workers of pytest-xdist get them with the context
        # a profile derived from the catalogue is kept beside the reports, to review and keep
        derive_into = options.outputs.results.parent if options.outputs.results is not None else None
        context = RunContext.build(
            options.profile, options.source, options.profile_dirs, Drills.from_environment(os.environ), options.expect_gpus, derive_into,
            started_probe, quick=options.level == "quick",
        )
        _refuse_a_baseline_of_another_kind(options, context)
        _refuse_a_burnin_without_loads(options, context)
        folder = Path(tempfile.mkdtemp(prefix="gpuaccept-session-"))
        say = terminal_line(config)
        snapshots = SnapshotAfterStage(folder, say)
        store = MeasurementStore(
            folder, live=context.live, say=say, confirm=options.confirm, after_stage=[snapshots], drills=context.drills, pool=pool,
        )
        if _sets_up_before_collecting(options, pool):
            store.expect(list(STAGES), context.facts, context.profile)
        if torch_check is not None:
            torch_check.passed()
    except GpuAcceptError as error:
        config.stash[NOT_STARTED_KEY] = "; ".join(error.lines())  # the run's verdict carries it (gpu-accept run)
        _stop(pool, torch_check, folder)
        raise pytest.UsageError(_usage(error)) from None
    except BaseException:
        _stop(pool, torch_check, folder)
        raise
    if context.live and options.level != "quick" and not config.option.collectonly:
        snapshots.start(context.facts)  # ready, NVML open, by the time the first stage has measured
    run = GpuAcceptRun(options, context, store)
    config.stash[RUN_KEY] = run
    config.pluginmanager.register(RecordingHooks(config, run, TERMINATED), "gpuaccept-recording")
    config.pluginmanager.register(BurninHooks(config, run, TERMINATED), "gpuaccept-burnin")
    _end_cleanly_on_sigterm()


def _stop(pool: WorkerPool, torch_check: TorchCheck | None, folder: Path | None) -> None:
    """What the run started before it could not start after all."""
    pool.close()
    if torch_check is not None:
        torch_check.stop()
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _sets_up_before_collecting(options: RunOptions, pool: WorkerPool) -> bool:
    """Whether the first stages' workers are given their plans now, as the run is configured, not
    once its tests are collected: a standard run's tests ask for every stage the profile asks for,
    in the registry's order, so that order is known before collection, and the workers started
    ahead (plugin/head_start.py's `first_wave`) set up while pytest collects and torch's check is answered. The
    session says the order again once collected (pytest_collection_finish): where -k, -m or test
    ids made it another, what was set up is ended before anything measures."""
    return options.level == "standard" and bool(pool.waiting)


def _refuse_a_baseline_of_another_kind(options: RunOptions, context: RunContext) -> None:
    """A baseline of other GPUs or another profile would fail every value for the wrong reason."""
    if options.gate is None:
        return
    mismatch = options.gate.baseline.mismatch(context.facts, context.profile.name)
    if mismatch:
        raise GpuAcceptError(
            f"{options.gate.baseline.path}: this baseline cannot judge this run: {'; '.join(mismatch)} "
            "(save a baseline on this kind of machine, against this profile)"
        )


def _refuse_a_burnin_without_loads(options: RunOptions, context: RunContext) -> None:
    """A burn-in whose profile asks for no stage it runs would load nothing for its whole duration."""
    if options.level == "burn-in" and context.live and not burnin_stages(context.profile):
        raise GpuAcceptError(
            f"--level burn-in: profile {context.profile.name} asks for no stage a burn-in runs "
            f"({', '.join(burnin_stages())}): nothing would load the GPUs"
        )


def _end_cleanly_on_sigterm() -> None:
    """SIGTERM (a CI job cancelled, a scheduler's time limit) ends the run as Ctrl-C does: the
    session still finishes, and results.json and JUnit hold what finished."""
    if threading.current_thread() is not threading.main_thread():
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        TERMINATED.append(signum)
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # xdist's WorkerController
    """pytest-xdist: give each worker the controller's context instead of probing again."""
    run = node.config.stash.get(RUN_KEY, None)
    if run is not None:
        node.workerinput[WORKER_INPUT] = run.context.to_json()
        node.workerinput[WORKER_STORE] = str(run.store.folder)


def _interrupted(terminated: list[int]) -> str:
    """Why a run was interrupted: the signal that asked it to end, or Ctrl-C."""
    if terminated:
        return f"interrupted by {signal.Signals(terminated[0]).name}"
    return "interrupted (Ctrl-C, SIGINT)"


def _usage(error: GpuAcceptError) -> str:
    """The error as pytest prints a usage error: each line shown escaped, as every line this tool prints."""
    return "\n".join(shown(f"gpu-accept: {line}" if i == 0 else line) for i, line in enumerate(error.lines()))


def pytest_report_header(config: pytest.Config) -> str | None:
    run = config.stash.get(RUN_KEY, None)
    # the host's name and the profile's description are the machine's and the file's words: shown, never acted on
    return shown(f"gpu-accept: {run.context.describe()}") if run else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    run = metafunc.config.stash.get(RUN_KEY, None)
    if run is not None:
        parametrize_from_profile(metafunc, run.context.profile)
    if "baseline_metric" in metafunc.fixturenames:
        gate = run.options.gate if run is not None else None
        keys = sorted(gate.baseline.metrics) if gate is not None else []
        if keys:
            metafunc.parametrize("baseline_metric", keys, ids=keys)
        else:
            reason = "no --baseline given" if gate is None else f"the baseline {gate.baseline.path} holds no values"
            metafunc.parametrize("baseline_metric", [pytest.param(None, marks=pytest.mark.skip(reason=reason))], ids=["none"])


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A suite's tests that the run's level does not run are left out as their module is collected:
    never counted as collected, so a level's run says nothing of the other levels' tests."""
    report = yield
    run = collector.config.stash.get(RUN_KEY, None)
    if run is not None and isinstance(collector, pytest.Module) and report.passed:
        report.result = [node for node in report.result if not outside_level(node, run.options.level)]
    return report


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run = config.stash.get(RUN_KEY, None)
    if run is None:
        return
    mark_levels(items)
    for item in items:
        needs_of(item)  # a need misspelt in a suite is a usage error before any test runs


@pytest.hookimpl(trylast=True)  # after every hook that reorders or deselects the tests
def pytest_collection_finish(session: pytest.Session) -> None:
    """The stages the tests will ask for, in the order they will: each stage's workers start ahead,
    while the stage before it (or, for the first, the tests before it) runs. Not in a pytest-xdist
    worker, which cannot know which worker a stage falls to."""
    config = session.config
    run = config.stash.get(RUN_KEY, None)
    if run is not None:
        # what the run holds from here to its end (the modules, the models of the facts and the
        # profile, the collected tests) is put beyond the garbage collector's reach: the collections
        # while the tests run, and those at the end (pytest's check for unraisable exceptions
        # collects as it unconfigures and again in its cleanup), go through what the tests made,
        # not every object imported (most of the quick level's end: bench/quick_cpu.py).
        # They are given back to it as the session's last cleanup (pytest_configure): a pytest run
        # inside another process keeps nothing
        gc.freeze()
    if run is None or hasattr(config, "workerinput") or config.option.collectonly:
        return
    order: list[str] = []
    for item in session.items:
        order += [name for name in stages_asked(needs_of(item), run.options.level) if name not in order]
    # a burn-in's rounds measure before the tests: nothing may hold the GPUs beside them
    run.store.expect(order, run.context.facts, run.context.profile, set_up_now=run.options.level != "burn-in")


def pytest_deselected(items: list[pytest.Item]) -> None:
    """The tests -k, -m or test ids left out of a gpu-accept run, counted by area: not checked."""
    if not items or items[0].config.stash.get(RUN_KEY, None) is None:
        return
    counts = items[0].config.stash.setdefault(NOT_SELECTED_KEY, Counter())
    areas = areas_of_tests()
    for item in items:
        counts[areas.get(getattr(item, "originalname", item.name), "")] += 1


def not_selected(config: pytest.Config) -> dict[str, int]:
    """The tests -k, -m or test ids left out of the run, by area."""
    counts: Counter[str] = config.stash.get(NOT_SELECTED_KEY, Counter())
    return dict(counts)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    message = failure_message(item)
    verdicts = item.stash.get(VERDICTS_KEY, None)
    if report.when == "call" and verdicts:
        # plain data, which travels with the report from xdist workers to the controller's recording
        setattr(report, VERDICT_ON_REPORT, verdicts[-1].as_data())
    crash = getattr(report.longrepr, "reprcrash", None)
    if report.when == "call" and report.failed and message and crash is not None:
        # the verdict's own line, without pytest's "Failed: " prefix, in the summary and in JUnit;
        # pytest prints it as it is (its short summary): shown escaped there, kept whole for the record
        crash.message = shown(message)
        setattr(report, MESSAGE_ON_REPORT, message)
    if report.when == "call" and report.skipped and isinstance(report.longrepr, tuple) and verdicts:
        # a verdict skips from inside the plugin: point the skip at the test, as skip marks do
        path, line = item.reportinfo()[:2]
        report.longrepr = (str(path), (line or 0) + 1, report.longrepr[2])
        setattr(report, MESSAGE_ON_REPORT, verdicts[-1].message)  # the reason pytest prints is shown escaped
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    return report_status(report)  # a verdict that could not be established: ERROR, not FAILED


@pytest.hookimpl(tryfirst=True)  # before pytest's own report of the interruption reads the traceback
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """A signal that lands where Python keeps no line number (a `with` statement's set-up) leaves a
    traceback entry whose line is None, and pytest's report of the interruption, subtracting from
    it, raised after the session had recorded its verdict: the run then ended with a traceback and
    exit 1. Such entries are left out of the traceback shown; the run ends interrupted."""
    excinfo.traceback = excinfo.traceback.filter(_has_a_line)


def _has_a_line(entry: Any) -> bool:
    try:
        entry.lineno  # noqa: B018  # None - 1 for a frame where the signal landed outside any line
    except TypeError:
        return False
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logfinish() -> None:
    # Python drops an exception raised while it runs a finalizer (`__del__`, a weakref callback):
    # a SIGTERM that landed there is honoured at the next test instead of being lost
    if TERMINATED:
        raise KeyboardInterrupt(f"signal {TERMINATED[0]}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)
    if output is not None:  # a pytest-xdist worker: the controller records what it left out
        output[NOT_SELECTED_OUTPUT] = not_selected(session.config)
    run = session.config.stash.get(RUN_KEY, None)
    if run is not None:
        # workers started ahead for a stage no test asked for after all. The controlling process
        # waits for the last stage's workers to be torn down (a second or more: the driver ends
        # their CUDA contexts one by one) once its reports are written, not before
        run.store.close(wait=output is not None)


def _ready_to_draw_the_report() -> None:
    """report.html's imports and templates, while the first stage sets up and the stages measure
    (in their workers: this process waits meanwhile); where any fails, the report's own drawing
    at the end says so."""
    from gpuaccept.report.charts import ready_to_draw

    with contextlib.suppress(Exception):
        ready_to_draw("report.html.j2")


class RecordingHooks:
    """The hooks of the controlling process that record a gpu-accept run: registered for one
    session, as pytest_runtest_logreport is given no config to find the session's recording by.
    What stops the run (a signal, a collection error) is recorded as it comes; the run's exit
    status is decided once, at the end of the session, from what was recorded (recording.py)."""

    def __init__(self, config: pytest.Config, run: GpuAcceptRun, terminated: list[int]):
        self.config = config
        self.run = run
        self.terminated = terminated  # TERMINATED: the signals that asked the run to end
        self.recording: RunRecording | None = None
        self.held: HeldSignals | None = None

    def pytest_sessionstart(self) -> None:
        self.recording = RunRecording(self.config, self.run)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.recording is not None:
            self.recording.add(report)  # reports from xdist workers arrive here too

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if self.recording is not None and report.failed:  # from xdist workers too
            said = str(report.longrepr).strip().splitlines()
            why = said[-1].removeprefix("E").strip() if said else "no message"  # pytest's last line: the exception
            self.recording.stopped_by(f"collection error: {report.nodeid or 'the session'}: {why}")

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """The session ended early: Ctrl-C, a signal, collection errors, or pytest.exit."""
        if self.recording is None:
            return
        stopped = excinfo.value
        if isinstance(stopped, pytest.Session.Interrupted):
            if not self.recording.stops:  # "1 error during collection": each was recorded as it came
                self.recording.stopped_by(f"stopped: {stopped}")
        elif isinstance(stopped, KeyboardInterrupt):
            self.recording.stopped_by(_interrupted(self.terminated))
        else:  # pytest.exit(reason)
            self.recording.stopped_by(f"ended by pytest.exit: {getattr(stopped, 'msg', stopped)}")

    def pytest_collection_finish(self) -> None:
        if self.recording is not None:
            self.recording.leave_out(not_selected(self.config))
        # once collected: begun with the session, the imports slowed the collection by as long
        # (a lent 4xH200: the first stage 0.7-1.1 s after the session's start, against 0.2)
        if self.run.context.live and self.run.options.level != "quick" and self.run.options.outputs.html is not None:
            threading.Thread(target=_ready_to_draw_the_report, name="gpu-accept report's imports", daemon=True).start()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:  # pytest-xdist: a worker ended
        """Each worker collected every test and left the same out: the first to end says which."""
        left_out = getattr(node, "workeroutput", {}).get(NOT_SELECTED_OUTPUT)
        if left_out and NOT_SELECTED_KEY not in self.config.stash:
            self.config.stash[NOT_SELECTED_KEY] = Counter(left_out)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        try:
            return (yield)
        finally:
            # the tests have ended; what is left is writing the reports and the summary: a signal now
            # waits until they are written (held to the end of the session), it does not cut them
            self.held = hold_signals()

    @pytest.hookimpl(trylast=True)  # the end of the session: after every other plugin's end (the telemetry stopped)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.held is None:  # the session ended before its tests (collection errors)
            self.held = hold_signals()
        if self.recording is not None:
            if self.terminated:  # a signal whose KeyboardInterrupt was lost (raised in a finalizer)
                self.recording.stopped_by(_interrupted(self.terminated))
            self.recording.leave_out(not_selected(self.config))
            self.recording.finish(session)  # decides the run's verdict, and the session's exit status with it
        self.run.store.settle()  # the command ends with no worker of its left on a GPU

    def pytest_unconfigure(self) -> None:
        held = self.held
        if held is not None:
            held.release()
            if held.arrived:
                names = ", ".join(signal.Signals(number).name for number in held.arrived)
                print(f"gpu-accept: {names} arrived while the reports were written: they were finished first", file=sys.stderr)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        lines = self.recording.summary_lines() if self.recording is not None else []
        if lines:
            terminalreporter.write_sep("=", "gpu-accept summary")  # on a line of its own, after the progress dots
            for line in lines:
                terminalreporter.write_line(shown(line))
