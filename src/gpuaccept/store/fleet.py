"""The fleet engine: each host's latest run as the HostResults that report/fleet.py judges, and the
outliers, asked in SQL of a store. Results files given to `report fleet` are loaded into a store in
memory first (store add's reader and rules: a run in two files is one run), so that files and a
store are reported by the same SQL, line for line: a host is a host, its latest run counts.

The store answers in a handful of scans (DuckDB, columnar): the latest run per host, its failures
(root causes first, three per host), its transient values, per test family its worst state for the
fleet page (a family none of whose tests was judged is "not judged" or "skipped", never "passed"),
and the outliers, all in SQL, so that the values of 10,000 hosts never become Python objects (that
was two thirds of the report's time and memory when the outliers were found in Python).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpuaccept.errors import GpuAcceptError
from gpuaccept.report.fleet import FAILURES_SHOWN, MEDIAN_CHECKS, MEDIAN_HOSTS, OLDER_RESULTS_LOWER_IS_BETTER, HostResults, Outlier
from gpuaccept.report.junit import Counts
from gpuaccept.store.db import in_memory, open_for_reading
from gpuaccept.store.ingest import add_to
from gpuaccept.vocabulary.display import show

IN_MEMORY = "results files in memory"  # how messages name the store that a report loads files into

# Each host's latest run: by its start, but never later than when it was added (a clock set wrong in an
# older store must not make a run its host's latest for good; store add refuses such runs now). Of two
# runs begun at the same moment, the worse counts: a run that failed is never hidden by one that passed.
LATEST = """
    CREATE TEMP TABLE latest AS
    SELECT * FROM runs
    QUALIFY row_number() OVER (
        PARTITION BY host
        ORDER BY least(started_at, added_at) DESC, failed > 0 DESC, errors > 0 OR NOT complete DESC, added_at DESC, run_id
    ) = 1
"""


class FilesNotRead(GpuAcceptError):
    """Results files a report could not read or load, one line each: nothing is reported from the rest."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))

    def lines(self) -> list[str]:
        return list(self.problems)


@contextmanager
def fleet_database(paths: list[str], db: Path | None = None, workers: int | None = None) -> Iterator[Any]:
    """The runs a fleet report asks, as a store: the store at `db` where it lies; results files
    loaded into a store in memory; or both, the store copied into memory and the files added to it
    (a run in both is one run). A file that cannot be read, or that `store add` would refuse, ends
    it (FilesNotRead), every such file named."""
    if not paths:
        assert db is not None, "a fleet of a store, of files, or of both"
        with open_for_reading(db) as connection:
            yield connection
        return
    with in_memory(copy_of=db) as connection:
        added = add_to(connection, IN_MEMORY, paths, workers)
        if added.problems:
            raise FilesNotRead(added.problems)
        yield connection


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
    for run_id, test_id, attempts, unit in connection.execute(
        "SELECT r.run_id, r.test_id, coalesce(r.attempts, ''), coalesce(r.unit, '') FROM results r JOIN latest USING (run_id) "
        "WHERE r.transient ORDER BY r.run_id, r.test_id"
    ).fetchall():
        transients[run_id].append(f"{test_id} (attempts {attempts_shown(attempts, unit)})")
    families: dict[str, dict[str, str]] = defaultdict(dict)
    for run_id, family, failed, not_judged, passed, transient, marginal in connection.execute(
        "SELECT r.run_id, coalesce(r.family, ''), bool_or(r.outcome = 'failed'), bool_or(r.outcome = 'error'), "
        "bool_or(r.outcome = 'passed'), bool_or(r.transient), bool_or(r.marginal) FROM results r JOIN latest USING (run_id) GROUP BY ALL"
    ).fetchall():
        families[run_id][family] = family_state(failed, not_judged, passed, transient, marginal)
    hosts = []
    # a store of version 1 or 2, read as it is, has no `stopped`: its runs' exit status says what it can
    columns = {row[0] for row in connection.execute("DESCRIBE latest").fetchall()}
    stopped_column = "coalesce(stopped, '')" if "stopped" in columns else "''"
    for run_id, host, profile, complete, exit_status, tests, failed, errors, skipped, marginal, source, stopped in connection.execute(
        "SELECT run_id, host, profile, complete, exit_status, tests, failed, errors, skipped, marginal, source, "
        f"{stopped_column} FROM latest ORDER BY host"
    ).fetchall():
        hosts.append(HostResults(
            source or run_id, host, profile, bool(complete), Counts(tests, failed, errors, skipped),
            tuple(failures.get(run_id, ())), tuple(transients.get(run_id, ())), int(marginal or 0), exit_status,
            families=families.get(run_id, {}), stopped=tuple(line for line in stopped.splitlines() if line),
        ))
    return hosts


def attempts_shown(attempts: str, unit: str) -> str:
    """A transient value's attempts as the store keeps them (`310.0, 394.97`), for people, as a run's
    summary shows them (`310, 395 GB/s`; `-` where none was measured)."""
    shown = []
    for attempt in attempts.split(","):
        try:
            shown.append(show(float(attempt)))
        except ValueError:
            shown.append(attempt.strip())
    return f"{', '.join(shown)} {unit}".rstrip()


def family_state(failed: bool, not_judged: bool, passed: bool, transient: bool, marginal: bool) -> str:
    """A test family's state on the fleet page, the worst of its tests': failed; else not judged where a
    test could not judge (the family is not proven good); else transient, marginal or passed where one
    passed; else skipped (the profile asked nothing of it): a family nothing judged is never "passed"."""
    if failed:
        return "failed"
    if not_judged:
        return "not_judged"
    if passed:
        return "transient" if transient else "marginal" if marginal else "passed"
    return "skipped"


# The values a fleet compares: every number of a fleet check (report/fleet.py's MEDIAN_CHECKS) in the
# latest runs, and whether it is better lower (as its verdict says, or for older results as the check declares)
FLEET_VALUES = """
    SELECT coalesce(l.source, l.run_id) AS path, l.host, l.profile, r.test_id, r.measured, coalesce(r.unit, '') AS unit,
        coalesce(r.better = 'lower', list_contains($older, r.check_name)) AS lower
    FROM results r JOIN latest l USING (run_id)
    WHERE r.measured IS NOT NULL AND isfinite(r.measured) AND list_contains($checks, r.check_name)
"""


def fleet_values(connection: Any) -> dict[tuple[str, str], tuple[bool, float, str]]:
    """(host, test id) -> (better lower, value, unit) of every value the fleet compares. `connection`
    must hold the `latest` table hosts_of made."""
    rows = connection.execute(
        FLEET_VALUES, {"older": sorted(OLDER_RESULTS_LOWER_IS_BETTER), "checks": sorted(MEDIAN_CHECKS)}
    ).fetchall()
    return {(host, test): (bool(lower), float(value), unit) for _, host, _, test, value, unit, lower in rows}


def outliers_of(connection: Any, tolerance: float) -> list[Outlier]:
    """Values of the latest runs more than `tolerance` worse than the median of the same test across
    the hosts of one profile (of MEDIAN_HOSTS or more; which checks, and which way each improves,
    report/fleet.py says). `connection` must hold the `latest` table hosts_of made."""
    rows = connection.execute(
        f"""
        WITH v AS ({FLEET_VALUES}),
        m AS (SELECT profile, test_id, median(measured) AS median, count(*) AS hosts FROM v GROUP BY ALL HAVING count(*) >= $least)
        SELECT v.path, v.host, v.test_id, v.measured, m.median, v.unit, m.hosts FROM v JOIN m USING (profile, test_id)
        WHERE CASE WHEN v.lower THEN v.measured > m.median * (1 + $tolerance) ELSE v.measured < m.median * (1 - $tolerance) END
        """,
        {"older": sorted(OLDER_RESULTS_LOWER_IS_BETTER), "checks": sorted(MEDIAN_CHECKS), "least": MEDIAN_HOSTS, "tolerance": tolerance},
    ).fetchall()
    found = [Outlier(path, host, test, float(value), float(median), unit, int(n)) for path, host, test, value, median, unit, n in rows]
    found.sort(key=lambda o: (o.host, o.deviation))
    return found
