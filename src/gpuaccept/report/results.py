"""Writing a run as it goes: results.json, its journal, and the run's JUnit files.

A run can be killed at any moment (SIGKILL, a node lost, a CI job's time limit), and what finished
must then still be on disk, readable. Rewriting results.json whole after every test did that at a
cost that grows with the square of the tests: each rewrite carries the facts and every test so
far, so an 8-GPU profile's 357 tests wrote between 180 and 360 times the size of the file they
left (and JUnit again). So:

- the **journal** (`results.json.journal`) gets one JSON line per test as it finishes (and one of
  the facts when a stage has measured), appended and flushed to the operating system at once: a
  test costs the bytes of its own record. A kill of the process loses nothing that was flushed;
  a line cut by the kill is left out when read.
- **results.json** (and the JUnit files) are rewritten whole, each to a temporary file renamed
  over the old one, so each is valid at every moment; rewritten at the start, at the end
  (`complete: true`), when the journal has grown as large as the last rewrite (so rewrites cost at
  most twice the journal: O(N) bytes for N tests), and when the run has been quiet for `idle_s`
  (1 s) with tests not yet in them. That last is why a run killed in a long measurement (the
  moment a kill usually comes) leaves a results.json and a junit.xml holding every test that
  finished; they lag the journal by at most `idle_s` otherwise.
- after each rewrite the journal starts again, with one line naming its run. A kill between the
  rename and the truncation leaves lines that the rewrite holds already: the reader
  (`load_results`) keeps each test once, so merging is safe whenever it happens.

`load_results` merges a journal left beside a results.json that is not complete; the run's own end
removes it. A new run in the same folder empties the journal before it writes its first results.json,
and the reader takes in only a journal that names the run results.json holds: a killed run's journal
is never read as part of the next run.

Other schemes were weighed: JSON Lines as results.json itself (not one JSON document, which every
reader of the old file expects); appending inside the JSON array in place (a kill mid-write leaves
a file that does not parse); rewrites on a timer alone (a fast run of replayed facts still
rewrote on the order of N times).
"""

from __future__ import annotations

import datetime
import errno
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from gpuaccept.errors import GpuAcceptError
from gpuaccept.facts import Facts
from gpuaccept.facts.run_record import JournalEntry, RunRecord, TestRecord, journal_of
from gpuaccept.files import write_atomically
from gpuaccept.outcomes import EXIT_FAILED, EXIT_PASSED
from gpuaccept.report.junit import suite, write_junit

EXIT_INTERRUPTED = 2  # pytest's exit status for a run interrupted
IDLE_S = 1.0  # a run quiet this long with tests not yet in results.json and junit.xml gets them rewritten


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def run_moment() -> str:
    """When a run starts or ends, as its record says it: to the microsecond, so that a run's time
    tells it from another run of its host begun in the same second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")


def _append(journal: TextIO, line: str) -> None:
    journal.write(line)
    journal.flush()  # to the operating system: a killed process loses nothing written


def unwritten(write: Callable[..., object], *args: object) -> list[str]:
    """Why `write(*args)` wrote no file (one line, naming it), or nothing where it did."""
    try:
        write(*args)
    except GpuAcceptError as error:  # OutputError
        return [str(error)]
    return []


class ResultsWriter:
    """Holds the record of a run as its tests finish, and writes it: results.json with its journal
    (where `results` is given) and the JUnit files. `idle_s=None` rewrites only by size and at the
    end (no thread); `clock` is for tests."""

    def __init__(
        self, record: RunRecord, results: Path | None = None, junit: Sequence[Path] = (), *, idle_s: float | None = IDLE_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.results = Path(results) if results is not None else None
        self.junit = tuple(Path(target) for target in junit)
        self._record = record
        self._tests = list(record.tests)
        self._clock = clock
        self._changed = threading.Condition()
        self._journal: TextIO | None = None
        self._journal_bytes = 0  # since the last rewrite
        self._rewrite_bytes = 0  # the last rewrite's
        self._pending = False  # tests or facts that the last rewrite does not hold
        self._last_change = clock()
        self._closed = False
        # why files could not be written (a full disk), one line each: the run goes on, its record
        # kept in memory, and the end tries once more; empty while they could
        self.write_errors: list[str] = []
        if self.results is not None:
            self._journal = self._open_journal(journal_of(self.results))
        with self._changed:
            self._rewrite()
        self._idle = None
        if idle_s is not None and (self.results is not None or self.junit):
            self._idle = threading.Thread(target=self._rewrite_when_idle, args=(idle_s,), name="gpu-accept results", daemon=True)
            self._idle.start()

    def _open_journal(self, path: Path) -> TextIO | None:
        """The journal, emptied (a journal of an earlier run never joins this one) and appended to
        (O_APPEND: every line lands at the end, after a truncation too). Never through a symbolic
        link: its name is the run's own. Where it cannot be opened, `write_errors` says why."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as error:
            why = "a symbolic link: the run writes its own journal there" if error.errno == errno.ELOOP else error.strerror or error
            self.write_errors = [f"{path}: cannot write it ({why})"]
            return None
        return open(descriptor, "a", encoding="utf-8")  # open until the run finishes

    @property
    def record(self) -> RunRecord:
        with self._changed:
            return self._record.with_tests(self._tests)

    def leave_out(self, not_selected: dict[str, int]) -> None:
        """The tests the run left out (-k, -m, test ids), by area: its coverage counts them as not checked."""
        with self._changed:
            if not_selected != self._record.not_selected:
                self._record = self._record.model_copy(update={"not_selected": dict(not_selected)})
                self._pending = True
                self._changed.notify()

    def add_test(self, test: TestRecord, facts: Facts | None = None) -> None:
        """A test that finished, and the facts as they are now (where a stage measured since)."""
        with self._changed:
            if facts is not None and facts is not self._record.facts and facts != self._record.facts:
                self._record = self._record.with_facts(facts)
                self._log(JournalEntry(facts=facts))
            self._tests.append(test)
            self._log(JournalEntry(test=test))
            self._pending = True
            self._last_change = self._clock()
            if self._journal_bytes >= self._rewrite_bytes:
                self._rewrite()
            self._changed.notify()

    def finish(
        self, exit_status: int, facts: Facts | None = None, stopped: Sequence[str] = (),
        other_reports: Callable[[RunRecord], list[str]] = lambda record: [],
    ) -> RunRecord:
        """The run's end, `complete`: its verdict decided once from what it recorded (`stopped`: what
        beside its tests kept it from judging all it set out to, facts/run_record.py `judged`); the
        other reports written from the record (`other_reports` says why any could not be); then the
        JUnit files, and results.json last; the journal removed. A report that cannot be written is a
        reason of the verdict too (could not judge, unless a check failed), known only once tried:
        results.json carries every such reason but its own, which only the record returned (and the
        exit code) carry. `write_errors` names every file not written."""
        self._stop()
        with self._changed:
            if facts is not None:
                self._record = self._record.with_facts(facts)
            run = self._record.run.model_copy(update={"finished_at": run_moment(), "exit_status": exit_status})
            ended = self._record.model_copy(update={"run": run, "complete": True}).with_tests(self._tests)
            not_written: list[str] = []

            def decided() -> RunRecord:
                reasons = [*stopped, *(f"report not written: {why}" for why in not_written)]
                verdict = ended.judged(reasons)
                # stopped where pytest saw a pass or a failure: recorded as pytest records an interrupted run
                status = EXIT_INTERRUPTED if reasons and exit_status in (EXIT_PASSED, EXIT_FAILED) else exit_status
                return ended.model_copy(update={"verdict": verdict, "run": ended.run.model_copy(update={"exit_status": status})})

            self._record = decided()
            not_written += other_reports(self._record)
            run_suite = suite(self._record)
            not_written += [why for target in self.junit for why in unwritten(write_junit, target, [run_suite])]
            if not_written:
                self._record = decided()
            if self.results is not None:
                results_error = unwritten(write_atomically, self.results, self._record.to_json())
                if results_error:
                    not_written += results_error
                    self._record = decided()
                else:
                    self._close_journal()
            self.write_errors = not_written
            return self._record

    def _close_journal(self) -> None:
        """The end of a run whose results.json holds it all: its journal is no longer needed."""
        if self._journal is not None and self.results is not None:
            self._journal.close()
            self._journal = None
            journal_of(self.results).unlink(missing_ok=True)

    def _log(self, entry: JournalEntry) -> None:
        if self._journal is not None and not self.write_errors:
            line = entry.to_line()
            try:
                _append(self._journal, line)
            except OSError as error:
                self.write_errors = [f"{self._journal.name}: cannot write it ({error.strerror or error})"]
                return
            self._journal_bytes += len(line.encode("utf-8"))

    def _rewrite(self) -> None:
        """results.json and the JUnit files, whole, from the record as it is; then an empty journal.
        Each file is tried on its own; one that cannot be written stops the writing until the end
        (`write_errors` names each)."""
        if not self.write_errors:
            self._write_files()
        self._pending = False  # written, or not to be tried again before the end

    def _write_files(self) -> None:
        record = self._record.with_tests(self._tests)
        written = 0
        errors: list[str] = []
        if self.results is not None:
            text = record.to_json()
            errors += unwritten(write_atomically, self.results, text)
            written += len(text.encode("utf-8"))
        if self.junit:
            run_suite = suite(record)
            for target in self.junit:
                errors += unwritten(write_junit, target, [run_suite])
            written += len(run_suite.xml.encode("utf-8")) * len(self.junit)
        if errors:
            self.write_errors = errors  # the journal keeps what the last good rewrite lacks
            return
        self._journal_bytes = 0
        if self._journal is not None:
            try:
                self._journal.truncate(0)
            except OSError as error:
                self.write_errors = [f"{self._journal.name}: cannot write it ({error.strerror or error})"]
                return
            self._log(JournalEntry(run=record.run))  # whose journal it is: never merged into another run's file
        self._rewrite_bytes = written

    # The thread never relies on a wake-up alone to end, nor the end on the thread: SIGTERM arrives as
    # a KeyboardInterrupt raised between any two steps of the main thread, and one raised as a `with`
    # block ends can skip its __exit__ (CPython issue 29988), leaving the lock held or a notify unsent.
    # The thread looks at `_closed` every WAKE_S; the end waits for it at most END_WAIT_S, then writes
    # the record itself.
    WAKE_S = 0.5
    END_WAIT_S = 5.0

    def _rewrite_when_idle(self, idle_s: float) -> None:
        with self._changed:
            while not self._closed:
                if not self._pending:
                    self._changed.wait(self.WAKE_S)
                    continue
                quiet = self._clock() - self._last_change
                if quiet >= idle_s:
                    self._rewrite()
                else:
                    self._changed.wait(min(idle_s - quiet, self.WAKE_S))

    def _stop(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify()
        if self._idle is not None:
            self._idle.join(self.END_WAIT_S)  # a daemon thread: one still stuck does not hold the process
            self._idle = None
