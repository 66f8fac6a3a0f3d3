"""What the controlling pytest process records of a run: suite properties, results.json growing
test by test (reports from xdist workers arrive here too), facts out, the terminal summary."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from gpuaccept.errors import GpuAcceptError
from gpuaccept.facts import Facts, save_facts
from gpuaccept.facts.model import STAGE_SWEEPS, Measurements
from gpuaccept.plugin.context import RunContext
from gpuaccept.plugin.junit import add_suite_properties
from gpuaccept.plugin.verdicts import test_record
from gpuaccept.report.baseline import Baseline, named, save_baseline
from gpuaccept.report.fleet import host_results, write_fleet_junit
from gpuaccept.report.html import render_html
from gpuaccept.report.results import ResultsWriter
from gpuaccept.report.summary import did_not_pass, summary_lines
from gpuaccept.session.store import MeasurementStore, merge

NOTHING_JUDGED_KEY = pytest.StashKey[str]()


class RunReporting:
    def __init__(self, config: pytest.Config, context: RunContext, store: MeasurementStore, baseline: Baseline | None = None):
        self.config = config
        self.context = context
        self.store = store
        self.baseline = baseline
        self.records: dict[str, dict] = {}
        self.writer: ResultsWriter | None = None
        self.notes: list[str] = []

    def facts(self) -> Facts:
        """The facts as far as they are known: probed, plus whatever the stages measured so far."""
        return merge(self.context.facts, self.store.collected()) if self.context.live else self.context.facts

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        add_suite_properties(self.config, self.context)
        target = self.config.getoption("gpuaccept_results")
        if target:
            self.writer = ResultsWriter(
                Path(target), self.context.profile, self.context.facts, self.context.facts_source, sys.argv, self.context.chosen_because
            )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = test_record(report)
        if record is None or report.nodeid in self.records:
            return  # a teardown error after a recorded call keeps the call's outcome
        self.records[report.nodeid] = record
        if self.writer is not None:
            self.writer.add_test(record, self.facts())
            junit = self.config.getoption("xmlpath", None)
            if junit:
                # JUnit of what finished so far: pytest writes the full file at the end, which a
                # killed run never reaches
                write_fleet_junit([host_results(self.writer.document, str(self.writer.path))], Path(junit))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        exitstatus = session.exitstatus  # as this plugin's earlier hooks may have corrected it
        nothing_judged = self.nothing_judged(exitstatus)
        if nothing_judged:
            # Exit 0 says every check passed. With no check made that is a gate that stays green
            # whatever the machine is (a -k that selects only tests the profile leaves out, or
            # the baseline tests without --baseline): "could not judge", as pytest's "no tests".
            session.exitstatus = exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
            self.config.stash[NOTHING_JUDGED_KEY] = nothing_judged
            self.notes.append(nothing_judged)
        facts = self.facts()
        target = self.config.getoption("gpuaccept_facts_out")
        if target:
            save_facts(facts, Path(target))
        if self.writer is not None:
            self.writer.finish(int(exitstatus), facts)
            html_target = self.config.getoption("gpuaccept_html")
            if html_target:
                Path(html_target).write_text(render_html(self.writer.document), encoding="utf-8")
        baseline_target = self.config.getoption("gpuaccept_save_baseline")
        if baseline_target:
            self.notes.extend(self._save_baseline(Path(baseline_target), facts, int(exitstatus)))
        shutil.rmtree(self.store.folder, ignore_errors=True)

    def _save_baseline(self, target: Path, facts: Facts, exitstatus: int) -> list[str]:
        bad = [r["id"] for r in did_not_pass(list(self.records.values()))]
        if bad:
            return [
                f"baseline not saved to {target}: {len(bad)} test(s) did not pass ({named(bad, 3)}); "
                "a baseline is a picture of a healthy machine"
            ]
        if exitstatus != pytest.ExitCode.OK:
            return [f"baseline not saved to {target}: the run did not end cleanly (pytest exit status {exitstatus})"]
        try:
            saved = save_baseline(target, facts, self.context.profile.name)
        except GpuAcceptError as error:
            return [f"baseline not saved to {target}: {line}" for line in error.lines()]
        return [f"saved {saved.values} measured values as a baseline to {target}", *saved.notes()]

    def nothing_judged(self, exitstatus: int) -> str:
        """Why a finished run judged nothing, or '' when it judged something (or did not run tests)."""
        if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            return ""
        tests_not_run = any(getattr(self.config.option, name, False) for name in ("collectonly", "setuponly", "setupplan"))
        if exitstatus == pytest.ExitCode.OK and tests_not_run:
            return ""
        records = list(self.records.values())
        if any(record["outcome"] != "skipped" for record in records):
            return ""
        if not records:
            return "no test was selected: -k, -m or the test ids given match none of the suites' tests"
        selected = "the one selected test was" if len(records) == 1 else f"all {len(records)} selected tests were"
        return f"nothing was judged: {selected} skipped ({records[0]['message']})"

    def pytest_terminal_summary(self, terminalreporter) -> None:
        lines = summary_lines(list(self.records.values())) + confirmation_lines(self.facts().measurements) + self.notes
        if self.baseline is not None:
            differences = self.baseline.differences(self.facts())
            if differences:
                lines.append(
                    f"note: baseline {self.baseline.path} was saved with other software or on another host: {'; '.join(differences)}"
                )
        if lines:
            terminalreporter.section("gpu-accept summary")
            for line in lines:
                terminalreporter.write_line(line)


def confirmation_lines(measured: Measurements) -> list[str]:
    """What confirming misses cost: per stage, the rounds, the values measured again and the time."""
    lines = []
    for stage in STAGE_SWEEPS:
        rounds = [r for r in measured.rounds if r.stage == stage]
        if rounds:
            keys = sorted({str(key) for r in rounds for key in r.keys})
            lines.append(
                f"  {stage} stage: {len(rounds)} round(s), {len(keys)} value(s), {sum(r.wall_s for r in rounds):.1f} s: " + ", ".join(keys)
            )
    if measured.unconfirmed:
        lines.append("  not measured again, the stage's time for it spent: " + ", ".join(map(str, measured.unconfirmed)))
    return ["measured again after missing their criterion:"] + lines if lines else []
