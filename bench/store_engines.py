"""DuckDB or SQLite for the results store: the same rows, the same fleet question, side by side.

Takes the results rows of a store written by bench/fleet.py (DuckDB), copies runs and results into
an SQLite file (the standard library's engine), and times on each: loading the rows, and the
fleet's central query, every value's median per profile and test with the hosts more than 10%
below it. SQLite has no median aggregate: it is computed with window functions, as a user of
plain SQL would write it.

    python bench/store_engines.py /tmp/fleet/fleet.db
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import duckdb

CHECKS = "('busbw', 'pair_busbw', 'p2p_copy', 'local_copy', 'host_to_device', 'device_to_host', 'ddp_scaling')"

DUCK_QUERY = f"""
WITH v AS (SELECT r.host, r.profile, x.test_id, x.measured FROM results x JOIN runs r USING (run_id)
           WHERE x.measured IS NOT NULL AND x.check_name IN {CHECKS}),
m AS (SELECT profile, test_id, median(measured) AS median FROM v GROUP BY ALL)
SELECT count(*) FROM v JOIN m USING (profile, test_id) WHERE v.measured < m.median * 0.9
"""

SQLITE_QUERY = f"""
WITH v AS (SELECT r.host, r.profile, x.test_id, x.measured FROM results x JOIN runs r USING (run_id)
           WHERE x.measured IS NOT NULL AND x.check_name IN {CHECKS}),
ranked AS (SELECT profile, test_id, measured,
           row_number() OVER (PARTITION BY profile, test_id ORDER BY measured) AS k,
           count(*) OVER (PARTITION BY profile, test_id) AS n FROM v),
m AS (SELECT profile, test_id, avg(measured) AS median FROM ranked WHERE k IN ((n + 1) / 2, (n + 2) / 2) GROUP BY profile, test_id)
SELECT count(*) FROM v JOIN m USING (profile, test_id) WHERE v.measured < m.median * 0.9
"""


def main() -> int:
    source = Path(sys.argv[1])
    duck = duckdb.connect(str(source), read_only=True)
    rows = duck.execute("SELECT count(*) FROM results").fetchone()[0]
    hosts = duck.execute("SELECT count(DISTINCT host) FROM runs").fetchone()[0]
    print(f"{hosts} hosts, {rows} result rows; DuckDB file {source.stat().st_size / 1e6:.0f} MB")
    began = time.perf_counter()
    found = duck.execute(DUCK_QUERY).fetchone()[0]
    print(f"DuckDB: fleet medians and outliers {time.perf_counter() - began:.2f} s ({found} values below 90% of their median)")
    target = Path(tempfile.mkdtemp()) / "fleet.sqlite"
    lite = sqlite3.connect(target)
    lite.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, host TEXT, profile TEXT)")
    lite.execute("CREATE TABLE results (run_id TEXT, test_id TEXT, check_name TEXT, measured REAL)")
    began = time.perf_counter()
    lite.executemany("INSERT INTO runs VALUES (?, ?, ?)", duck.execute("SELECT run_id, host, profile FROM runs").fetchall())
    cursor = duck.execute("SELECT run_id, test_id, check_name, measured FROM results")
    while batch := cursor.fetchmany(200_000):
        lite.executemany("INSERT INTO results VALUES (?, ?, ?, ?)", batch)
    lite.commit()
    size = target.stat().st_size / 1e6
    print(f"SQLite: rows loaded in {time.perf_counter() - began:.2f} s (the rows already in Python), file {size:.0f} MB")
    began = time.perf_counter()
    found = lite.execute(SQLITE_QUERY).fetchone()[0]
    print(f"SQLite: fleet medians and outliers {time.perf_counter() - began:.2f} s ({found} values below 90% of their median)")
    target.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
