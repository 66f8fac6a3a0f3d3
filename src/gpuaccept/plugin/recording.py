"""What the controlling pytest process records of a run: the run record growing test by test
(reports from xdist workers arrive here too), written as results.json and JUnit as it goes; at the
end the facts out, the HTML report, a baseline, and the lines of the terminal summary.

The hooks (plugin/hooks.py) call it; nothing here is a hook.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from gpuaccept import __version__
from gpuaccept.burnin.driver import read_burnin
from gpuaccept.errors import GpuAcceptError
from gpuaccept.facts import Facts, save_facts
from gpuaccept.facts.coverage import did_not_pass
from gpuaccept.facts.measurements import Measurements
from gpuaccept.facts.run_record import RunInfo, RunProfile, RunRecord, TestRecord
from gpuaccept.files import OutputError, write_atomically
from gpuaccept.outcomes import EXIT_PASSED
from gpuaccept.plugin.context import GpuAcceptRun
from gpuaccept.plugin.terminal import terminal_line
from gpuaccept.plugin.verdicts import test_record
from gpuaccept.report.baseline import named, save_baseline
from gpuaccept.report.html import render_html
from gpuaccept.report.results import ResultsWriter, run_moment, unwritten
from gpuaccept.report.summary import banner, summary_lines
from gpuaccept.stages.health import with_health
from gpuaccept.stages.registry import STAGES
from gpuaccept.stages.store import merge
from gpuaccept.stages.telemetry import LOADS_FILE, TELEMETRY_FILE, read_telemetry
from gpuaccept.vocabulary.telemetry import show_duration

RECORD_KEY = pytest.StashKey[RunRecord]()  # the run's record at its end, with its verdict: what `gpu-accept run` reads
NOT_STARTED_KEY = pytest.StashKey[str]()  # why the run could not start (no driver, a profile that does not load)


class RunRecording:
    def __init__(self, config: pytest.Config, run: GpuAcceptRun):
        self.config = config
        self.run = run
        self.recorded: set[str] = set()  # node ids of the tests recorded
        self.notes: list[str] = []
        self.stops: list[str] = []  # what kept the run from judging all it set out to, beside its tests
        self.unwritten = ""  # why a report could not be written, once said
        self._facts: Facts | None = None  # as last read, with the state of the files it was read from
        self._facts_state: frozenset[tuple[str, int, int, int]] | None = None
        context = run.context
        profile = context.profile
        info = RunInfo(
            started_at=run_moment(), id=uuid.uuid4().hex, tool_version=__version__, command=list(sys.argv),
            facts_source=context.facts_source,
            profile=RunProfile(name=profile.name, path=str(profile.path), sha256=profile.sha256, chosen_because=context.chosen_because),
        )
        outputs = run.options.outputs
        self.writer = ResultsWriter(RunRecord.started(info, context.facts), outputs.results, outputs.junit)

    def facts(self) -> Facts:
        """The facts as far as they are known: probed, plus whatever the stages (and a burn-in's
        rounds) measured so far. The telemetry joins at the end: read at every test it would be
        written into the journal again with every test. Read again only where the session's files
        changed since (a stage measured, a snapshot or an event came): most tests change nothing."""
        context = self.run.context
        if not context.live:
            return context.facts
        state = _files_read(self.run.store.folder)
        if state is None and self._facts is not None:
            return self._facts  # the session's folder is gone with its end (the summary comes after): as last read
        if self._facts is None or state != self._facts_state:
            facts = with_health(merge(context.facts, self.run.store.collected()), self.run.store.folder)
            burnin = read_burnin(self.run.store.folder)
            self._facts = facts.model_copy(update={"burnin": burnin}) if burnin is not None else facts
            self._facts_state = state
        return self._facts

    @property
    def tests(self) -> list[TestRecord]:
        return self.writer.record.tests

    def add(self, report: pytest.TestReport) -> None:
        test = test_record(report)
        if test is None or test.nodeid in self.recorded:
            return  # a teardown error after a recorded call keeps the call's outcome
        self.recorded.add(test.nodeid)
        self.writer.add_test(test, self.facts())
        if self.writer.write_errors and not self.unwritten:
            self.unwritten = "; ".join(self.writer.write_errors)
            terminal_line(self.config)(
                f"gpu-accept: {self.unwritten}: the run goes on and tries again at its end; until then its record is in memory only"
            )

    def leave_out(self, not_selected: dict[str, int]) -> None:
        """The tests the run left out (-k, -m, test ids), by area."""
        self.writer.leave_out(not_selected)

    def stopped_by(self, reason: str) -> None:
        """What kept the run from judging all it set out to, as the session learns it (a signal, a
        collection error): one of the reasons its verdict is decided from at its end."""
        if reason not in self.stops:
            self.stops.append(reason)

    def finish(self, session: pytest.Session) -> RunRecord:
        """The end of the session: the run's verdict decided once, from what it recorded (its tests,
        pytest's exit status, what stopped it, the reports it could not write), and written with
        the reports. The session's exit status is that verdict's exit code: 0 passed, 1 a check
        failed, 2 could not judge, in plain pytest and `gpu-accept run` alike."""
        exitstatus = int(session.exitstatus)
        facts = self.facts()
        telemetry = read_telemetry(self.run.store.folder) if self.run.context.live else None
        if telemetry is not None:
            facts = facts.model_copy(update={"telemetry": telemetry})
        # Exit 0 says every check passed. With no check made that is a gate that stays green whatever
        # the machine is (a -k that selects only tests the profile leaves out, the baseline tests
        # without --baseline, --collect-only): "could not judge", as pytest's "no tests"
        nothing_judged = self.nothing_judged(exitstatus) or self._listed_only()
        for reason in (nothing_judged, _burnin_cut_short(facts, self.run.options.level)):
            if reason:
                self.stopped_by(reason)
                self.notes.append(reason)
        outputs = self.run.options.outputs

        def other_reports(record: RunRecord) -> list[str]:
            """The reports besides results.json and JUnit; why any could not be written."""
            not_written: list[str] = []
            if (facts_path := outputs.facts) is not None:
                not_written += unwritten(save_facts, facts, facts_path)
            if (html_path := outputs.html) is not None:
                not_written += unwritten(write_atomically, html_path, render_html(record))
            if outputs.baseline is not None:
                notes, unsaved = self._save_baseline(record)
                self.notes.extend(notes)
                not_written += unsaved
            return not_written

        record = self.writer.finish(exitstatus, facts, self.stops, other_reports)
        shutil.rmtree(self.run.store.folder, ignore_errors=True)
        # the verdicts stand, but a gate reading the reports would read old ones or none
        self.notes.extend(f"report not written: {why}" for why in self.writer.write_errors)
        assert record.verdict is not None
        session.exitstatus = record.verdict.exit_code
        self.config.stash[RECORD_KEY] = record
        return record

    def _save_baseline(self, record: RunRecord) -> tuple[list[str], list[str]]:
        """The summary's notes on --save-baseline, and why its file could not be written (a full disk)."""
        target = self.run.options.outputs.baseline
        assert target is not None and record.verdict is not None
        bad = [t.id for t in did_not_pass(record.tests)]
        if bad:
            return [
                f"baseline not saved to {target}: {len(bad)} test(s) did not pass ({named(bad, 3)}); "
                "a baseline is a picture of a healthy machine"
            ], []
        if record.verdict.exit_code != EXIT_PASSED:
            return [f"baseline not saved to {target}: the run did not pass ({record.verdict.cause})"], []
        try:
            saved = save_baseline(target, record.facts, self.run.context.profile.name)
        except OutputError as error:
            return [], [str(error)]
        except GpuAcceptError as error:
            return [f"baseline not saved to {target}: {line}" for line in error.lines()], []
        return [f"saved {saved.values} measured values as a baseline to {target}", *saved.notes()], []

    def nothing_judged(self, exitstatus: int) -> str:
        """Why a finished run judged nothing, or '' when it judged something (or did not run tests)."""
        if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED) or self._listed_only():
            return ""
        tests = self.tests
        if any(test.outcome != "skipped" for test in tests):
            return ""
        if not tests:
            return "no test was selected: -k, -m or the test ids given match none of the suites' tests"
        selected = "the one selected test was" if len(tests) == 1 else f"all {len(tests)} selected tests were"
        return f"nothing was judged: {selected} skipped ({tests[0].message})"

    def _listed_only(self) -> str:
        """Why a run judged nothing where pytest was asked to list or plan the tests without running them."""
        for option, flag in (("collectonly", "--collect-only lists"), ("setupplan", "--setup-plan plans"),
                             ("setuponly", "--setup-only sets up")):
            if getattr(self.config.option, option, False):
                return f"nothing judged: {flag} the tests without running them"
        return ""

    def summary_lines(self) -> list[str]:
        facts = self.facts()
        record = self.writer.record
        said = banner(record)
        lines = [*([said] if said else []), *summary_lines(record.tests, record.not_selected), *confirmation_lines(facts.measurements),
                 *self.notes]
        gate = self.run.options.gate
        if gate is not None:
            differences = gate.baseline.differences(facts)
            if differences:
                lines.append(
                    f"note: baseline {gate.baseline.path} was saved with other software or on another host: {'; '.join(differences)}"
                )
        return lines


# the session's files that facts are not read from: the telemetry, read at the end
_NOT_FACTS = {TELEMETRY_FILE, LOADS_FILE}


def _files_read(folder: Path) -> frozenset[tuple[str, int, int, int]] | None:
    """Each file of the session's folder that facts are read from, by name, inode, size and time
    of change; None where the folder is gone."""
    found = set()
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name not in _NOT_FACTS and entry.is_file():
                    stat = entry.stat()
                    found.add((entry.name, stat.st_ino, stat.st_size, stat.st_mtime_ns))
    except FileNotFoundError:
        return None
    return frozenset(found)


def _burnin_cut_short(facts: Facts, level: str) -> str:
    """Why a burn-in run's rounds did not load the GPUs for its whole duration, or '': a signal ended them."""
    burnin = facts.burnin
    if level != "burn-in" or burnin is None or burnin.ended != "interrupted":
        return ""
    return (f"the burn-in was cut short by a signal: {len(burnin.rounds)} round(s) in {show_duration(burnin.elapsed_s)} "
            f"of {show_duration(burnin.duration_s)}")


def confirmation_lines(measured: Measurements) -> list[str]:
    """What confirming misses cost: per stage, the rounds, the values measured again and the time."""
    lines = []
    for stage in STAGES:
        rounds = [r for r in measured.rounds if r.stage == stage]
        if rounds:
            keys = sorted({str(key) for r in rounds for key in r.keys})
            lines.append(
                f"  {stage} stage: {len(rounds)} round(s), {len(keys)} value(s), {sum(r.wall_s for r in rounds):.1f} s: " + ", ".join(keys)
            )
    if measured.unconfirmed:
        lines.append("  not measured again, the stage's time for it spent: " + ", ".join(map(str, measured.unconfirmed)))
    return ["measured again after missing their criterion:"] + lines if lines else []
