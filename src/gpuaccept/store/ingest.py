"""`gpu-accept store add`: results.json files into the store, each read once.

A file is read (as a run record, by facts/run_record.py's one reader, so a killed run's journal is
merged) in a worker process, one per core, which also turns its tests into rows: what crosses back
is a few lines of JSON per file. The rows go into DuckDB through its JSON reader, a batch of files
per transaction: a store killed in the middle keeps every batch it committed, each run whole.

A file already in the store with the same size and modification time is not read again. A run
already in the store (the same run id) is kept, unless the new file holds more of it: a run added
while it was still going, or from its killed file, is replaced by its finished results.json.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import tempfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpuaccept.errors import GpuAcceptError
from gpuaccept.facts.run_record import RunRecord, load_results
from gpuaccept.report.summary import did_not_pass
from gpuaccept.store.db import open_for_writing

# the columns of a result row, in the order the CSV holds them
RESULT_COLUMNS = (
    "run_id", "test_id", "family", "outcome", "check_name", "subject", "measured", "measured_text", "unit", "better",
    "limit_value", "expected", "marginal", "transient", "attempts", "message", "failure_rank",
)
BATCH_FILES = 1000  # files per transaction: a few hundred MB of rows at most in the temporary files


@dataclass(frozen=True)
class ReadRun:
    """One results file as rows, ready to insert (JSON lines, written by the worker that read it)."""

    path: str
    size: int
    mtime_ns: int
    run_id: str
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
    problems: list[str] = field(default_factory=list)  # one line per file that could not be read


def run_id_of(record: RunRecord) -> str:
    """What makes a run that run, wherever its file was copied: its host, start, profile and GPUs."""
    uuids = ",".join(gpu.uuid for gpu in record.environment.gpus)
    key = "\n".join((record.environment.host, record.run.started_at, record.run.profile.sha256, record.run.profile.name, uuids))
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _vbios(record: RunRecord) -> list[str | None]:
    return [gpu.vbios if isinstance(gpu.vbios, str) else None for gpu in record.facts.gpus]


def rows_of(record: RunRecord, path: str, size: int, mtime_ns: int) -> ReadRun:
    run_id = run_id_of(record)
    run, env = record.run, record.environment
    ranks = {id(test): rank for rank, test in enumerate(did_not_pass(record.tests))}
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
            run_id, test.id, family, test.outcome, verdict.check, verdict.subject, verdict.numeric,
            None if measured is None else str(measured), verdict.unit or None, verdict.better, verdict.limit, verdict.expected,
            verdict.marginal, verdict.transient, verdict.attempts_text if verdict.attempts else None, test.message or None,
            ranks.get(id(test)),
        ))
    vbios = _vbios(record)
    known_vbios = sorted({v for v in vbios if v})
    summary = record.summary
    run_row = {
        "run_id": run_id, "host": env.host, "profile": run.profile.name, "profile_sha256": run.profile.sha256,
        "started_at": run.started_at, "finished_at": run.finished_at, "complete": record.complete, "exit_status": run.exit_status,
        "driver": env.driver, "cuda_driver": env.cuda_driver, "nccl": env.nccl, "torch": env.torch,
        "vbios": ",".join(known_vbios) or None, "gpu_model": env.gpu_model, "gpu_count": env.gpu_count,
        "tool_version": run.tool_version, "tests": summary.total, "failed": summary.failed, "errors": summary.error,
        "skipped": summary.skipped, "marginal": sum(1 for t in record.tests if t.verdict and t.verdict.marginal),
        "transient": sum(1 for t in record.tests if t.verdict and t.verdict.transient), "source": path,
    }
    gpus = [
        {"run_id": run_id, "gpu_index": gpu.index, "uuid": gpu.uuid, "serial": gpu.serial, "pci_bus_id": gpu.pci_bus_id,
         "vbios": vbios[i] if i < len(vbios) else None}
        for i, gpu in enumerate(env.gpus)
    ]
    return ReadRun(
        path, size, mtime_ns, run_id, summary.total, record.complete, json.dumps(run_row) + "\n",
        "".join(json.dumps(g) + "\n" for g in gpus), text.getvalue(),
    )


def _read(path: str) -> ReadRun | str:
    """A file as rows, or the one line that says why it cannot be read."""
    try:
        stat = os.stat(path)
        return rows_of(load_results(path), path, stat.st_size, stat.st_mtime_ns)
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


def add_files(db: Path, paths: list[str], workers: int | None = None) -> AddReport:
    """Add `paths` to the store at `db`: new runs in, runs known already kept, damaged files named."""
    report = AddReport()
    with open_for_writing(db) as connection, tempfile.TemporaryDirectory(prefix="gpuaccept-store-") as scratch:
        known_files = {row[0]: (row[1], row[2]) for row in connection.execute("SELECT path, size, mtime_ns FROM files").fetchall()}
        known_runs = {row[0]: (row[1], row[2]) for row in connection.execute("SELECT run_id, complete, tests FROM runs").fetchall()}
        todo = []
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
                todo.append(absolute)
        batch = _Batch(Path(scratch))
        for read in _read_all(todo, workers or min(len(todo), os.cpu_count() or 1)):
            if isinstance(read, str):
                report.problems.append(read)
                continue
            before = known_runs.get(read.run_id)
            if before is None:
                report.added.append(read.run_id)
                batch.add(read, replaces=False)
            elif (read.complete and not before[0]) or read.tests > before[1]:
                report.replaced.append(read.run_id)
                batch.add(read, replaces=True)
            else:
                report.already += 1
                batch.add_file_only(read)
            known_runs[read.run_id] = (read.complete or bool(before and before[0]), max(read.tests, before[1] if before else 0))
            if batch.files >= BATCH_FILES:
                batch.commit(connection)
        batch.commit(connection)
    return report


class _Batch:
    """Rows of some files in temporary JSON-lines files, inserted in one transaction."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._open()

    def _open(self) -> None:
        self.files = 0
        self.replaced: list[str] = []
        self.handles = {name: (self.folder / f"{name}.jsonl").open("w", encoding="utf-8", newline="")
                        for name in ("runs", "gpus", "results", "files")}

    def add(self, read: ReadRun, replaces: bool) -> None:
        if replaces:
            self.replaced.append(read.run_id)
        self.handles["runs"].write(read.run_row)
        self.handles["gpus"].write(read.gpu_rows)
        self.handles["results"].write(read.result_rows)
        self.add_file_only(read)

    def add_file_only(self, read: ReadRun) -> None:
        self.files += 1
        row = {"path": read.path, "size": read.size, "mtime_ns": read.mtime_ns, "run_id": read.run_id}
        self.handles["files"].write(json.dumps(row) + "\n")

    def commit(self, connection: Any) -> None:
        for handle in self.handles.values():
            handle.close()
        if self.files:
            now = datetime.now(timezone.utc).isoformat()
            connection.execute("BEGIN")
            try:
                if self.replaced:
                    for table in ("runs", "gpus", "results"):
                        connection.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT unnest(?))", [self.replaced])
                for table in ("runs", "gpus", "results", "files"):
                    source = self.folder / f"{table}.jsonl"
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
            except BaseException:
                connection.execute("ROLLBACK")
                raise
        self._open()


def _columns(connection: Any, table: str) -> dict[str, str]:
    rows = connection.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position", [table]
    ).fetchall()
    return {name: kind for name, kind in rows}
