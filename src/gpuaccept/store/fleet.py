"""The fleet from the store: each host's latest run as the HostResults that report/fleet.py judges,
so a fleet read from files and one read from the store are judged by one code path.

The store answers in a handful of scans (DuckDB, columnar): the latest run per host, its failures
(root causes first, three per host), its numeric values of the checks a fleet median is taken of,
its transient values, and per test family its worst state for the fleet page.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from gpuaccept.report.fleet import FAILURES_SHOWN, MEDIAN_CHECKS, OLDER_RESULTS_LOWER_IS_BETTER, HostResults
from gpuaccept.report.junit import Counts
from gpuaccept.store.db import open_for_reading

LATEST = """
    CREATE TEMP TABLE latest AS
    SELECT * FROM runs
    QUALIFY row_number() OVER (PARTITION BY host ORDER BY started_at DESC, added_at DESC, run_id) = 1
"""


def fleet_from_store(db: Path) -> list[HostResults]:
    """Every host's latest run, by host name."""
    with open_for_reading(db) as connection:
        return hosts_of(connection)


def hosts_of(connection: Any) -> list[HostResults]:
    connection.execute("DROP TABLE IF EXISTS latest")
    connection.execute(LATEST)
    failures: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for run_id, test_id, message in connection.execute(
        "SELECT r.run_id, r.test_id, coalesce(r.message, '') FROM results r JOIN latest USING (run_id) "
        "WHERE r.failure_rank < ? ORDER BY r.run_id, r.failure_rank",
        [FAILURES_SHOWN],
    ).fetchall():
        failures[run_id].append((test_id, message))
    transients: dict[str, list[str]] = defaultdict(list)
    for run_id, test_id, attempts in connection.execute(
        "SELECT r.run_id, r.test_id, coalesce(r.attempts, '') FROM results r JOIN latest USING (run_id) "
        "WHERE r.transient ORDER BY r.run_id, r.test_id"
    ).fetchall():
        transients[run_id].append(f"{test_id} (attempts {attempts})")
    values: dict[str, dict[str, tuple[bool, float, str]]] = defaultdict(dict)
    older_lower = sorted(OLDER_RESULTS_LOWER_IS_BETTER)
    for run_id, test_id, lower, measured, unit in connection.execute(
        "SELECT r.run_id, r.test_id, coalesce(r.better = 'lower', list_contains(?, r.check_name)), r.measured, coalesce(r.unit, '') "
        "FROM results r JOIN latest USING (run_id) WHERE r.measured IS NOT NULL AND list_contains(?, r.check_name) "
        "AND isfinite(r.measured)",
        [older_lower, sorted(MEDIAN_CHECKS)],
    ).fetchall():
        values[run_id][test_id] = (bool(lower), float(measured), unit)
    families: dict[str, dict[str, str]] = defaultdict(dict)
    for run_id, family, failed, transient, marginal in connection.execute(
        "SELECT r.run_id, r.family, bool_or(r.outcome IN ('failed', 'error')), bool_or(r.transient), bool_or(r.marginal) "
        "FROM results r JOIN latest USING (run_id) GROUP BY ALL"
    ).fetchall():
        families[run_id][family] = "failed" if failed else "transient" if transient else "marginal" if marginal else "passed"
    hosts = []
    for run_id, host, profile, complete, exit_status, tests, failed, errors, skipped, marginal, source in connection.execute(
        "SELECT run_id, host, profile, complete, exit_status, tests, failed, errors, skipped, marginal, source FROM latest ORDER BY host"
    ).fetchall():
        hosts.append(HostResults(
            source or run_id, host, profile, bool(complete), values.get(run_id, {}), Counts(tests, failed, errors, skipped),
            tuple(failures.get(run_id, ())), tuple(transients.get(run_id, ())), int(marginal or 0), exit_status,
            families=families.get(run_id, {}),
        ))
    return hosts
