"""`gpu-accept store add`: results.json files into the store, each read once.

A file is read (as a run record, by facts/run_record.py's one reader, so a killed run's journal is
merged) in a worker process, one per core, which also turns its tests into rows: what crosses back
is a few lines of JSON per file. The rows go into DuckDB through its JSON reader, a batch of files
per transaction: a store killed in the middle keeps every batch it committed, each run whole.

What makes a run that run is its own id (given when it starts; absent in older files), its host,
its start to the microsecond (whole seconds in older files), its profile and its GPUs: the run
key. Two files of one key are copies of one run where every test both hold says the same (a killed
copy holds the first tests of the finished one); the fuller copy is kept, and an incomplete copy
never replaces a complete one. Two files of one key that disagree on a test are two runs (older
files of one host started in the same second), each kept, the second under an id that adds its
content's hash.

A file already in the store with the same size and modification time is not read again. A file
the store cannot take is refused in one line and the others go in: a run dated after the moment it
is added (a clock set wrong would make it its host's latest run for good), one that ends before it
starts, a time that is not one, a host without a name, a test that passed on a value that is not a
number. A value that is not a finite number is kept as text, never as a number a median would read.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import math
import os
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb

from gpuaccept.errors import GpuAcceptError, excerpt
from gpuaccept.facts.coverage import causes_first
from gpuaccept.facts.run_record import RunRecord, load_results
from gpuaccept.report.fleet import exit_status_of
from gpuaccept.store.db import open_for_writing

# the columns of a result row, in the order the CSV holds them
RESULT_COLUMNS = (
    "run_id", "test_id", "family", "outcome", "check_name", "subject", "measured", "measured_text", "unit", "better",
    "limit_value", "expected", "marginal", "transient", "attempts", "message", "failure_rank",
)
BATCH_FILES = 1000  # files per transaction: a few hundred MB of rows at most in the temporary files
# how far a node's clock may run ahead of the machine that adds its files before a run is refused as
# dated in the future (NTP keeps clocks within a second; a clock set wrong is off by hours or years)
CLOCK_SLACK_S = 600


@dataclass(frozen=True)
class ReadRun:
    """One results file as rows, ready to insert (JSON lines and CSV, written by the worker that read it)."""

    path: str
    size: int
    mtime_ns: int
    run_id: str  # the id its rows carry: its run key, or another where a different run holds that key
    key: str  # the run key: what makes a run that run (module docstring)
    content: str  # sha256 of its test rows: a copy with the same tests has the same
    tests: int
    complete: bool
    run_row: str
    gpu_rows: str
    result_rows: str


@dataclass
class AddReport:
    added: list[str] = field(default_factory=list)  # run ids
    replaced: list[str] = field(default_factory=list)
    already: int = 0  # files whose run was in the store already
    unchanged: int = 0  # files not read again: in the store with the same size and time
    problems: list[str] = field(default_factory=list)  # one line per file that could not be read or was refused


def run_key_of(record: RunRecord) -> str:
    """What makes a run that run, wherever its file was copied: its own id, host, start, profile and
    GPUs (a file without its own id is keyed as the stores before it keyed it)."""
    uuids = ",".join(gpu.uuid for gpu in record.environment.gpus)
    parts = [record.environment.host, record.run.started_at, record.run.profile.sha256, record.run.profile.name, uuids]
    if record.run.id is not None:
        parts.append(record.run.id)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def other_run_id(key: str, content: str) -> str:
    """The id of a run whose key another run in the store holds, and whose tests say otherwise."""
    return hashlib.sha256(f"{key}\n{content}".encode()).hexdigest()[:16]


def _vbios(record: RunRecord) -> list[str | None]:
    return [gpu.vbios if isinstance(gpu.vbios, str) else None for gpu in record.facts.gpus]


class Refused(GpuAcceptError):
    """A results file the store does not take: what about it, in one line."""


def _moment(text: str | None, key: str) -> datetime | None:
    """A time of the run as the store keeps it (UTC), or Refused naming the key."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.removesuffix("Z") + ("+00:00" if text.endswith("Z") else ""))
    except ValueError:
        raise Refused(f"{key} {excerpt(text)} is not a time (ISO 8601, as gpu-accept writes it)") from None
    if moment.tzinfo is None:
        raise Refused(f"{key} {excerpt(text)} has no time zone: which moment it was is not known")
    return moment.astimezone(timezone.utc)


def _number(value: float | None) -> float | None:
    """A value as a number the store computes with: None where it is not a finite number (kept as text)."""
    return value if value is None or math.isfinite(value) else None


def check_run(record: RunRecord, added: float) -> tuple[datetime, datetime | None]:
    """The run's start and end (UTC), or Refused saying why the store does not take it: a host
    without a name, a time that is none or is later than `added` (when the file is added), an end
    before the start, a test that passed on a value that is not a number."""
    if not record.environment.host.strip():
        raise Refused("environment.host is empty: a run names the host it ran on")
    started = _moment(record.run.started_at, "run.started_at")
    finished = _moment(record.run.finished_at, "run.finished_at")
    assert started is not None
    latest = datetime.fromtimestamp(added + CLOCK_SLACK_S, timezone.utc)
    for key, moment in (("run.started_at", started), ("run.finished_at", finished)):
        if moment is not None and moment > latest:
            now = datetime.fromtimestamp(added, timezone.utc).isoformat(timespec="seconds")
            raise Refused(
                f"{key} {moment.isoformat()} is later than now ({now}, when it is added): the clock of the machine that ran it "
                "was wrong; a run dated in the future would stay its host's latest run"
            )
    if finished is not None and finished < started:
        raise Refused(
            f"run.finished_at {finished.isoformat()} is before run.started_at {started.isoformat()}: the run ends before it starts"
        )
    for test in record.tests:
        verdict = test.verdict
        if test.outcome == "passed" and verdict is not None and verdict.numeric is not None and math.isnan(verdict.numeric):
            raise Refused(f"{test.id} passed with measured value NaN: no criterion passes a value that is not a number")
    return started, finished


def rows_of(record: RunRecord, path: str, size: int, mtime_ns: int, run_id: str | None = None, added: float | None = None) -> ReadRun:
    """The file's rows under `run_id` (its run key where not given); Refused where the store does not take it."""
    started, finished = check_run(record, time.time() if added is None else added)
    key = run_key_of(record)
    run_id = run_id or key
    run, env = record.run, record.environment
    ranks = {id(test): rank for rank, test in enumerate(causes_first(record.tests))}  # root causes first
    # CSV, in RESULT_COLUMNS' order: a C writer, and DuckDB's fastest reader (JSON lines cost twice the time).
    # Every field quoted: Python's writer leaves a carriage return unquoted, which ends a row for DuckDB
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n", quoting=csv.QUOTE_ALL)
    families: dict[str, str] = {}  # a run's 300 tests come from a handful of modules: each named once
    for test in record.tests:
        verdict = test.verdict
        where = test.nodeid.partition("::")[0]
        family = families.get(where) or families.setdefault(where, test.module)
        if verdict is None:
            writer.writerow((run_id, test.id, family, test.outcome, *([None] * 8), False, False, None, test.message or None,
                             ranks.get(id(test))))
            continue
        measured = verdict.measured
        writer.writerow((
            run_id, test.id, family, test.outcome, verdict.check, verdict.subject, _number(verdict.numeric),
            None if measured is None else str(measured), verdict.unit or None, verdict.better, _number(verdict.limit), verdict.expected,
            verdict.marginal, verdict.transient, verdict.attempts_text if verdict.attempts else None, test.message or None,
            ranks.get(id(test)),
        ))
    vbios = _vbios(record)
    known_vbios = sorted({v for v in vbios if v})
    summary = record.summary
    run_row = {
        "run_id": run_id, "run_key": key, "own_id": run.id, "host": env.host, "profile": run.profile.name,
        "profile_sha256": run.profile.sha256, "started_at": started.isoformat(), "finished_at": finished.isoformat() if finished else None,
        "complete": record.complete, "exit_status": exit_status_of(record),
        "stopped": "\n".join(record.recorded_verdict().stopped) or None,
        "driver": env.driver, "cuda_driver": env.cuda_driver, "nccl": env.nccl, "torch": env.torch,
        "vbios": ",".join(known_vbios) or None, "gpu_model": env.gpu_model, "gpu_count": env.gpu_count,
        "tool_version": run.tool_version, "tests": summary.total, "failed": summary.failed, "errors": summary.error,
        "skipped": summary.skipped, "marginal": sum(1 for t in record.tests if t.verdict and t.verdict.marginal),
        "transient": sum(1 for t in record.tests if t.verdict and t.verdict.transient), "source": path,
        "nodes": _cluster_nodes(record),
    }
    gpus = [
        {"run_id": run_id, "gpu_index": gpu.index, "uuid": gpu.uuid, "serial": gpu.serial, "pci_bus_id": gpu.pci_bus_id,
         "vbios": vbios[i] if i < len(vbios) else None}
        for i, gpu in enumerate(env.gpus)
    ]
    content = content_of(record)
    run_row["content_sha256"] = content
    return ReadRun(
        path, size, mtime_ns, run_id, key, content, summary.total, record.complete, json.dumps(run_row) + "\n",
        "".join(json.dumps(g) + "\n" for g in gpus), text.getvalue(),
    )


def _cluster_nodes(record: RunRecord) -> str | None:
    """A cluster run's nodes' hosts, node0 first, one a line; None for the run of one host, and for a
    node's own record of its part in a cluster run (node-results.json), which is its host's."""
    cluster = record.cluster
    if cluster is None or [node.host for node in cluster.nodes] == [record.environment.host]:
        return None
    return "\n".join(node.host for node in cluster.nodes)


def content_of(record: RunRecord) -> str:
    """A hash of what the run's tests say (each test's id, outcome, value and message, in order): a
    copy of the run has the same; another run of the same key, another."""
    digest = hashlib.sha256()
    for test in record.tests:
        measured = test.verdict.measured if test.verdict is not None else None
        digest.update(json.dumps([test.id, test.outcome, None if measured is None else str(measured), test.message]).encode())
    return digest.hexdigest()[:32]


def _read(path: str, run_id: str | None = None) -> ReadRun | str:
    """A file as rows, or the one line that says why it cannot be read or is refused."""
    try:
        stat = os.stat(path)
        return rows_of(load_results(path), path, stat.st_size, stat.st_mtime_ns, run_id)
    except Refused as refused:
        return f"{path}: refused: {refused}"
    except GpuAcceptError as error:
        return "; ".join(error.lines()[:3])
    except OSError as error:
        return f"{path}: cannot read results: {error.strerror or error}"


def _read_all(paths: list[str], workers: int) -> Iterator[ReadRun | str]:
    if workers <= 1 or len(paths) < 8:
        yield from map(_read, paths)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(_read, paths, chunksize=max(1, min(64, len(paths) // (workers * 8))))


@dataclass
class _Stored:
    """A run of the store, or of the batch not yet committed: what a new copy is judged against."""

    run_id: str
    complete: bool
    tests: int
    content: str | None  # None in a store written before runs had it


def add_files(db: Path, paths: list[str], workers: int | None = None) -> AddReport:
    """Add `paths` to the store at `db`: new runs in, runs known already kept (the fuller copy),
    files that cannot be read or are refused named, one line each."""
    with open_for_writing(db) as connection:
        return add_to(connection, str(db), paths, workers)


def add_to(connection: Any, store: str, paths: list[str], workers: int | None = None) -> AddReport:
    """`add_files` into an open store (`store` names it in messages): a store's file, or one in
    memory that a report loads results files into (store/fleet.py)."""
    report = AddReport()
    try:
        with tempfile.TemporaryDirectory(prefix="gpuaccept-store-") as scratch:
            _add(connection, store, paths, workers, Path(scratch), report)
    except OSError as error:  # the scratch folder's own files (a full /tmp)
        said = f"{error.strerror or error} ({error.filename})" if error.filename else str(error.strerror or error)
        raise GpuAcceptError(f"{store}: cannot add to the store: {said}; every batch committed before is whole") from None
    return report


def _add(connection: Any, db: str, paths: list[str], workers: int | None, scratch: Path, report: AddReport) -> None:
    """Read what is not in yet, place each run, commit batch by batch."""
    known_files = {row[0]: (row[1], row[2]) for row in connection.execute("SELECT path, size, mtime_ns FROM files").fetchall()}
    known: dict[str, list[_Stored]] = {}
    for key, run_id, complete, tests, content in connection.execute(
        "SELECT run_key, run_id, complete, tests, content_sha256 FROM runs"
    ).fetchall():
        known.setdefault(key, []).append(_Stored(run_id, bool(complete), int(tests or 0), content))
    todo: dict[str, None] = {}  # each file once, in the order given
    for path in paths:
        absolute = os.path.abspath(path)
        try:
            stat = os.stat(absolute)
        except OSError as error:
            report.problems.append(f"{path}: cannot read results: {error.strerror or error}")
            continue
        if known_files.get(absolute) == (stat.st_size, stat.st_mtime_ns):
            report.unchanged += 1
        else:
            todo[absolute] = None
    batch = _Batch(scratch, db, report)
    for read in _read_all(list(todo), workers or min(len(todo), os.cpu_count() or 1)):
        if isinstance(read, str):
            report.problems.append(read)
            continue
        _place(read, known.setdefault(read.key, []), batch, connection)
        if batch.files >= BATCH_FILES:
            batch.commit(connection)
    batch.commit(connection)


def _place(read: ReadRun, stored: list[_Stored], batch: _Batch, connection: Any) -> None:
    """Put one read file where it belongs: a new run, a fuller copy of a run (replacing it), or a
    copy of a run the store holds as fully already (only the file is noted)."""
    same = next((s for s in stored if s.content == read.content and s.complete == read.complete), None)
    if same is not None:
        batch.add_file_only(read, same.run_id)
        return
    for run in stored:
        if batch.holds(run.run_id):
            batch.commit(connection)  # its rows are compared in the store
        if not _agree(connection, run.run_id, read):
            continue
        if (read.complete and not run.complete) or (read.complete == run.complete and read.tests > run.tests):
            batch.add(_under(read, run.run_id), replaces=True)
            run.complete, run.tests, run.content = read.complete, read.tests, read.content
        else:
            batch.add_file_only(read, run.run_id)  # an incomplete copy never replaces a complete one
        return
    run_id = read.key if not any(s.run_id == read.key for s in stored) else other_run_id(read.key, read.content)
    batch.add(_under(read, run_id), replaces=False)
    stored.append(_Stored(run_id, read.complete, read.tests, read.content))


def _under(read: ReadRun, run_id: str) -> ReadRun:
    """The file's rows filed under `run_id`: read again where that is not the id they carry (rare:
    another run holds its key, or it replaces a run filed under another id)."""
    if run_id == read.run_id:
        return read
    again = _read(read.path, run_id)
    if isinstance(again, str):  # changed or removed since it was read: its rows as read, re-filed
        raise GpuAcceptError(again)
    return replace(again, size=read.size, mtime_ns=read.mtime_ns)


def _agree(connection: Any, run_id: str, read: ReadRun) -> bool:
    """Whether the run in the store and the file say the same of every test both hold."""
    theirs = {row[0]: (row[1], row[2]) for row in connection.execute(
        "SELECT test_id, outcome, measured_text FROM results WHERE run_id = ?", [run_id]
    ).fetchall()}
    column = {name: index for index, name in enumerate(RESULT_COLUMNS)}
    for row in csv.reader(io.StringIO(read.result_rows)):
        test_id, outcome, measured = row[column["test_id"]], row[column["outcome"]], row[column["measured_text"]] or None
        if test_id in theirs and theirs[test_id] != (outcome, measured):
            return False
    return True


class _Batch:
    """Rows of some files in temporary JSON-lines and CSV files, inserted in one transaction. Where
    the store refuses a row (a number out of its range), each file is tried in a transaction of its
    own: the others go in, the refused one is named. Where the store cannot be written at all (a
    full disk), one line says so; every batch committed before stays, whole."""

    def __init__(self, folder: Path, db: str, report: AddReport) -> None:
        self.folder = folder
        folder.mkdir(exist_ok=True)
        self.db = db
        self.report = report
        self.refused: list[str] = []  # run ids the store refused: not in it
        self._open()

    def _open(self) -> None:
        self.files = 0
        self.entries: list[tuple[ReadRun, str, str]] = []  # (read, run id, added | replaced | already)
        self.handles = {name: (self.folder / f"{name}.jsonl").open("w", encoding="utf-8", newline="")
                        for name in ("runs", "gpus", "results", "files")}

    def holds(self, run_id: str) -> bool:
        return any(entry[1] == run_id and entry[2] != "already" for entry in self.entries)

    def add(self, read: ReadRun, replaces: bool) -> None:
        self._write("runs", read.run_row)
        self._write("gpus", read.gpu_rows)
        self._write("results", read.result_rows)
        self._file(read, read.run_id)
        self.entries.append((read, read.run_id, "replaced" if replaces else "added"))

    def add_file_only(self, read: ReadRun, run_id: str) -> None:
        self._file(read, run_id)
        self.entries.append((read, run_id, "already"))

    def _file(self, read: ReadRun, run_id: str) -> None:
        self.files += 1
        self._write("files", json.dumps({"path": read.path, "size": read.size, "mtime_ns": read.mtime_ns, "run_id": run_id}) + "\n")

    def _write(self, table: str, text: str) -> None:
        try:
            self.handles[table].write(text)
        except OSError as error:
            raise GpuAcceptError(self._not_written(f"cannot write its rows to {self.folder} ({error.strerror or error})")) from None

    def commit(self, connection: Any) -> None:
        try:
            for handle in self.handles.values():
                handle.close()
        except OSError as error:
            raise GpuAcceptError(self._not_written(f"cannot write its rows to {self.folder} ({error.strerror or error})")) from None
        if self.files:
            now = datetime.now(timezone.utc).isoformat()
            try:
                _insert(connection, self.folder, [entry[1] for entry in self.entries if entry[2] == "replaced"], now)
                done = self.entries
            except duckdb.Error as error:
                _roll_back(connection)
                if _cannot_write(error):
                    raise GpuAcceptError(self._not_written(_first_line(error))) from None
                done = self._one_by_one(connection, now)
            for _, run_id, what in done:
                if what == "added":
                    self.report.added.append(run_id)
                elif what == "replaced":
                    self.report.replaced.append(run_id)
                else:
                    self.report.already += 1
        self._open()

    def _one_by_one(self, connection: Any, now: str) -> list[tuple[ReadRun, str, str]]:
        """Each file of a batch the store refused, in a transaction of its own."""
        done = []
        single = _Batch(self.folder / "one", self.db, self.report)
        for read, run_id, what in self.entries:
            if what == "already":
                single.add_file_only(read, run_id)
            else:
                single.add(read, replaces=what == "replaced")
            for handle in single.handles.values():
                handle.close()
            try:
                _insert(connection, single.folder, [run_id] if what == "replaced" else [], now)
                done.append((read, run_id, what))
            except duckdb.Error as error:
                _roll_back(connection)
                if _cannot_write(error):
                    raise GpuAcceptError(self._not_written(_first_line(error))) from None
                self.report.problems.append(f"{read.path}: refused by the store: {_first_line(error)}")
                if what == "added":
                    self.refused.append(run_id)
            single._open()
        for handle in single.handles.values():
            handle.close()
        return done

    def _not_written(self, why: str) -> str:
        report = self.report
        return (f"{self.db}: cannot write the store: {why}; this batch of {self.files} file(s) was not added "
                f"(before it: {len(report.added)} run(s) added, {len(report.replaced)} replaced, each whole)")


def _insert(connection: Any, folder: Path, replaced: list[str], now: str) -> None:
    """The rows in `folder`'s files into the store, in one transaction (rolled back by the caller)."""
    connection.execute("BEGIN")
    if replaced:
        for table in ("runs", "gpus", "results"):
            connection.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT unnest(?))", [replaced])
    for table in ("runs", "gpus", "results", "files"):
        source = folder / f"{table}.jsonl"
        if source.stat().st_size == 0:
            continue
        columns = _columns(connection, table)
        if table == "results":
            kinds = {name: columns.get(name, "VARCHAR") for name in RESULT_COLUMNS}
            spec = "{" + ", ".join(f"'{name}': '{kind}'" for name, kind in kinds.items()) + "}"
            connection.execute(
                # the dialect given, never sniffed: a quoted carriage return or NUL is text, not a row's end
                f"INSERT INTO results BY NAME SELECT * FROM read_csv(?, header = false, auto_detect = false, "
                f"delim = ',', new_line = '\\n', columns = {spec}, quote = '\"', escape = '\"', nullstr = '', "
                f"strict_mode = true)",
                [str(source)],
            )
            continue
        added = ", ? AS added_at" if "added_at" in columns else ""
        listed = {name: kind for name, kind in columns.items() if name != "added_at"}
        spec = "{" + ", ".join(f"'{name}': '{kind}'" for name, kind in listed.items()) + "}"
        verb = "INSERT OR REPLACE INTO" if table == "files" else "INSERT INTO"
        connection.execute(
            f"{verb} {table} BY NAME SELECT *{added} FROM read_json(?, format = 'newline_delimited', columns = {spec})",
            ([now] if added else []) + [str(source)],
        )
    connection.execute("COMMIT")


def _roll_back(connection: Any) -> None:
    with contextlib.suppress(duckdb.Error):  # no transaction left to roll back (DuckDB ended it with the error)
        connection.execute("ROLLBACK")


def _cannot_write(error: BaseException) -> bool:
    """A store that cannot be written at all (a full disk, a file too large, a database DuckDB gave
    up on), as against a row it refused (a number out of its column's range, a key twice)."""
    refused_row = (
        duckdb.ConversionException, duckdb.ConstraintException, duckdb.InvalidInputException, duckdb.OutOfRangeException,
        duckdb.TypeMismatchException,
    )
    return not isinstance(error, refused_row)


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _columns(connection: Any, table: str) -> dict[str, str]:
    rows = connection.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position", [table]
    ).fetchall()
    return {name: kind for name, kind in rows}
