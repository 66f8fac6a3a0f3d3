"""Opening a store: one DuckDB file, its schema created or migrated forward, one writer at a time.

DuckDB lets one process hold a database file for writing, and a second process that tries gets an
error, not a wait. So every opener first takes a lock on `<db>.lock` (flock, released by the kernel
when the process ends, even killed): writers exclusively, readers shared. Concurrent `store add`
runs therefore queue behind each other; each then adds only what is not in yet. A reader opens the
lock only to read it, so that a store can be read by a user who may not write it, or from a
read-only folder; where there is no lock file and it cannot make one, there is no writer to wait
for either.

Whatever DuckDB says of a store it cannot open or read (a damaged file, another program's database)
is one line naming the file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from gpuaccept.errors import GpuAcceptError

SCHEMA_VERSION = 4
# what readers read: versions 2 to 4 added only what `store add` needs to tell runs apart, what a run
# recorded of why it could not judge and a cluster run's nodes, so a store that its reader may not
# write (another user's, a read-only copy) is read as it is
READABLE_VERSIONS = (1, 2, 3, 4)

# Each step takes a store from version i to i + 1; a store is migrated forward when opened for writing.
# Version 1: runs, their GPUs, every test's result, and the files each run was read from.
MIGRATIONS = [
    """
    CREATE TABLE schema_version (version INTEGER NOT NULL);
    CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY,      -- sha256 of host, start time, profile and GPU UUIDs (a run added twice is one run)
        host VARCHAR NOT NULL,
        profile VARCHAR NOT NULL,
        profile_sha256 VARCHAR,
        started_at TIMESTAMPTZ NOT NULL,
        finished_at TIMESTAMPTZ,         -- NULL: the run did not finish (killed)
        complete BOOLEAN NOT NULL,
        exit_status INTEGER,             -- pytest's: 0 passed, 1 a test failed, others could not judge
        driver VARCHAR, cuda_driver VARCHAR, nccl VARCHAR, torch VARCHAR,
        vbios VARCHAR,                   -- the GPUs' VBIOS versions, distinct, comma-separated
        gpu_model VARCHAR, gpu_count INTEGER,
        tool_version VARCHAR,
        tests INTEGER, failed INTEGER, errors INTEGER, skipped INTEGER, marginal INTEGER, transient INTEGER,
        source VARCHAR,                  -- the results file it was read from
        added_at TIMESTAMPTZ NOT NULL
    );
    CREATE TABLE gpus (
        run_id VARCHAR NOT NULL, gpu_index INTEGER, uuid VARCHAR, serial VARCHAR, pci_bus_id VARCHAR, vbios VARCHAR
    );
    CREATE TABLE results (
        run_id VARCHAR NOT NULL,
        test_id VARCHAR NOT NULL,        -- test_busbw[all_reduce-1GiB]
        family VARCHAR,                  -- the suite module: test_nccl
        outcome VARCHAR NOT NULL,        -- passed, failed, error, skipped
        check_name VARCHAR, subject VARCHAR,
        measured DOUBLE,                 -- NULL where the value is not a number (a state, a version)
        measured_text VARCHAR,           -- the value as judged, as text
        unit VARCHAR, better VARCHAR,    -- better: higher, lower, exact (NULL in older results)
        limit_value DOUBLE,              -- the floor or ceiling, where the criterion has one
        expected VARCHAR,
        marginal BOOLEAN, transient BOOLEAN, attempts VARCHAR,
        message VARCHAR,
        failure_rank INTEGER             -- order of a test that did not pass, root causes first; NULL otherwise
    );
    CREATE TABLE files (
        path VARCHAR PRIMARY KEY, size BIGINT, mtime_ns BIGINT, run_id VARCHAR, added_at TIMESTAMPTZ
    );
    INSERT INTO schema_version VALUES (1);
    """,
    # Version 2: what makes a run that run (store/ingest.py): its key, its own id and a hash of its tests'
    # content, so that two runs of a host begun in the same second are two runs, and copies of one run one
    """
    ALTER TABLE runs ADD COLUMN run_key VARCHAR;     -- sha256 of its own id, host, start, profile and GPUs
    ALTER TABLE runs ADD COLUMN own_id VARCHAR;      -- the id the run gave itself (NULL in older files)
    ALTER TABLE runs ADD COLUMN content_sha256 VARCHAR;  -- what its tests say; NULL where added before version 2
    UPDATE runs SET run_key = run_id;
    """,
    # Version 3: what kept a run from judging beside its tests, as its recorded verdict says (a signal, a
    # burn-in cut short, a report not written): a fleet names it where it could not judge
    """
    ALTER TABLE runs ADD COLUMN stopped VARCHAR;     -- one reason a line; NULL where none, or added before version 3
    """,
    # Version 4: a cluster's runs (gpu-accept cluster) beside its hosts': `host` is then the cluster's name
    # (its user's, or its nodes' hosts), and its nodes are listed here
    """
    ALTER TABLE runs ADD COLUMN nodes VARCHAR;       -- a cluster run's nodes' hosts, node0 first, one a line; NULL for one host's run
    """,
]


@contextmanager
def _locked(db: Path, exclusive: bool) -> Iterator[None]:
    lock_path = db.with_name(db.name + ".lock")
    handle = _open_lock(db, lock_path, exclusive)
    if handle is None:
        yield  # no lock file, and none can be made here: nobody writes this store through it
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)  # waits for the writer before us
        yield
    finally:
        os.close(handle)  # releases the lock


def _open_lock(db: Path, lock_path: Path, exclusive: bool) -> int | None:
    """The lock file, opened to write for a writer and only to read for a reader (flock locks either)."""
    try:
        if exclusive:
            return os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            return os.open(lock_path, os.O_RDONLY)
        except FileNotFoundError:
            try:
                return os.open(lock_path, os.O_RDONLY | os.O_CREAT, 0o644)
            except OSError:
                return None
    except OSError as error:
        raise GpuAcceptError(f"{db}: cannot lock the store ({lock_path}: {error.strerror or error})") from None


def _connect(db: Path | str, read_only: bool) -> duckdb.DuckDBPyConnection:
    try:
        connection = duckdb.connect(str(db), read_only=read_only)
        # a shared machine: DuckDB's default takes 80% of memory and every core
        connection.execute("SET memory_limit = '2GB'")
        connection.execute(f"SET threads = {max(1, min(4, os.cpu_count() or 1))}")
        return connection
    except duckdb.Error as error:
        raise GpuAcceptError(f"{db}: not a readable results store ({_first_line(error)})") from None


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def schema_version(connection: duckdb.DuckDBPyConnection) -> int:
    tables = {row[0] for row in connection.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    if "schema_version" not in tables:
        return 0 if not tables else -1
    row = connection.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else -1


def migrate(connection: duckdb.DuckDBPyConnection, db: Path) -> None:
    """Bring the store to SCHEMA_VERSION, one step at a time, each step in its own transaction."""
    version = schema_version(connection)
    if version < 0:
        raise GpuAcceptError(f"{db}: a DuckDB database, but not a gpu-accept results store (no schema_version table)")
    if version > SCHEMA_VERSION:
        raise GpuAcceptError(f"{db}: store schema version {version} is newer than this gpu-accept reads ({SCHEMA_VERSION}): upgrade it")
    for step in range(version, SCHEMA_VERSION):
        connection.execute("BEGIN")
        connection.execute(MIGRATIONS[step])
        if step > 0:
            connection.execute("UPDATE schema_version SET version = ?", [step + 1])
        connection.execute("COMMIT")


@contextmanager
def open_for_writing(db: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """The store at `db` (created where missing), locked against every other opener."""
    db = Path(db)
    if not db.parent.is_dir():
        raise GpuAcceptError(f"{db}: its folder {db.parent} does not exist")
    with _locked(db, exclusive=True):
        connection = _connect(db, read_only=False)
        try:
            migrate(connection, db)
            yield connection
        except duckdb.Error as error:
            raise GpuAcceptError(f"{db}: cannot use the results store ({_first_line(error)})") from None
        finally:
            _close(connection)


@contextmanager
def open_for_reading(db: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """The store at `db`, read-only, with writers kept out while it is read."""
    db = Path(db)
    if not db.is_file():
        raise GpuAcceptError(f"{db}: no such results store (gpu-accept store add RESULTS... --db {db} creates it)")
    with _locked(db, exclusive=False):
        connection = _connect(db, read_only=True)
        try:
            _refuse_unreadable(schema_version(connection), db)
            yield connection
        except duckdb.Error as error:
            raise GpuAcceptError(f"{db}: not a readable results store ({_first_line(error)})") from None
        finally:
            _close(connection)


@contextmanager
def in_memory(copy_of: Path | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A store in memory, of the current schema: where results files given to a report are loaded, so
    that they are asked by the same SQL as a store. With `copy_of`, it starts as a copy of that store
    (read under its reader's lock, migrated forward here, the store itself untouched)."""
    connection = _connect(":memory:", read_only=False)
    try:
        if copy_of is None:
            migrate(connection, Path(":memory:"))
        else:
            _copy(connection, Path(copy_of))
        yield connection
    except duckdb.Error as error:
        where = f"{copy_of} (its copy in memory)" if copy_of else "the results files' store in memory"
        raise GpuAcceptError(f"{where}: cannot be asked ({_first_line(error)})") from None
    finally:
        _close(connection)


TABLES = ("runs", "gpus", "results", "files")  # what a store holds beside its schema version


def _copy(connection: duckdb.DuckDBPyConnection, db: Path) -> None:
    """Every row of the store at `db` into `connection` (of the current schema), read under the
    store's reader lock: a store of an older version that readers read gets what its migrations give."""
    if not db.is_file():
        raise GpuAcceptError(f"{db}: no such results store (gpu-accept store add RESULTS... --db {db} creates it)")
    migrate(connection, Path(":memory:"))
    with _locked(db, exclusive=False):
        try:
            connection.execute("ATTACH ? AS store (READ_ONLY)", [str(db)])
        except duckdb.Error as error:
            raise GpuAcceptError(f"{db}: not a readable results store ({_first_line(error)})") from None
        try:
            _refuse_unreadable(_attached_version(connection), db)
            for table in TABLES:
                connection.execute(f"INSERT INTO {table} BY NAME SELECT * FROM store.{table}")
        except duckdb.Error as error:
            raise GpuAcceptError(f"{db}: not a readable results store ({_first_line(error)})") from None
        finally:
            connection.execute("DETACH store")
    connection.execute("UPDATE runs SET run_key = run_id WHERE run_key IS NULL")  # version 2's step, for a store of version 1


def _attached_version(connection: duckdb.DuckDBPyConnection) -> int:
    tables = {row[0] for row in connection.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'store'"
    ).fetchall()}
    if "schema_version" not in tables:
        return -1
    row = connection.execute("SELECT max(version) FROM store.schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else -1


def _refuse_unreadable(version: int, db: Path) -> None:
    """A store of a version readers do not read, in one line."""
    if version in READABLE_VERSIONS:
        return
    if version < 0:
        raise GpuAcceptError(f"{db}: a DuckDB database, but not a gpu-accept results store")
    raise GpuAcceptError(
        f"{db}: store schema version {version}, this gpu-accept reads {SCHEMA_VERSION}"
        + (" (gpu-accept store add migrates it)" if version < SCHEMA_VERSION else ": upgrade gpu-accept")
    )


def _close(connection: duckdb.DuckDBPyConnection) -> None:
    # a database DuckDB gave up on (a full disk) may not close cleanly: what it committed is on disk, the rest was never there
    with contextlib.suppress(duckdb.Error):
        connection.close()


def query(connection: duckdb.DuckDBPyConnection, sql: str, parameters: list[Any] | None = None) -> list[tuple[Any, ...]]:
    return connection.execute(sql, parameters or []).fetchall()
