"""History and drift from the store: per host and value (a value is a test id: its GPU, pair or
collective is in it), every run's value with its time and software.

Three findings, each computed by DuckDB over the whole store (window functions and aggregates), so
that Python sees only the values that moved:

- a drop: the latest run is worse than the host's own median of its N runs before by more than the
  regression limit (the limit `--max-regression` gives a baseline, 5% by default);
- a decline: over the last N runs (at least MIN_DECLINE_RUNS) a fitted straight line loses more
  than the limit from its first run to its last, the fit explains most of the spread (r² at least
  DECLINE_R2) and most steps go down: a slow drift no single run shows;
- a cohort change: hosts whose driver, CUDA, NCCL, torch or VBIOS changed from A to B; per value the
  median of the fleet's before (each host's median on A) and after (on B), and each host's own.

The run-to-run spread of healthy hosts is a few percent (bench/README.md): a 5% limit, medians of
several runs, and a decline that needs a good straight fit leave such noise silent (tests/test_store.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuaccept.report.fleet import MEDIAN_CHECKS, OLDER_RESULTS_LOWER_IS_BETTER

HISTORY_CHECKS = sorted(MEDIAN_CHECKS)  # the fleet's values: compared across hosts and over a host's runs
MIN_OWN_RUNS = 3  # runs before the latest that a host's own median needs
MIN_DECLINE_RUNS = 5  # runs a fitted decline needs
DECLINE_R2 = 0.7  # how much of the spread a straight line must explain to call it a steady decline
DECLINE_STEPS_DOWN = 0.6  # the share of run-to-run steps that must go down
VERSIONS = ("driver", "cuda_driver", "nccl", "torch", "vbios")

# a value, its direction, and every run's value with its time: the rows every finding starts from
VALUES = """
    SELECT r.host, x.test_id, r.started_at, r.run_id, x.measured, coalesce(x.unit, '') AS unit,
        coalesce(x.better = 'lower', list_contains($older, x.check_name)) AS lower
    FROM results x JOIN runs r USING (run_id)
    WHERE x.measured IS NOT NULL AND isfinite(x.measured) AND list_contains($checks, x.check_name) AND x.outcome <> 'skipped'
"""


@dataclass(frozen=True)
class Drop:
    host: str
    test: str
    latest: float
    own_median: float
    runs: int
    unit: str
    lower: bool

    @property
    def change(self) -> float:
        return (self.latest - self.own_median) / self.own_median

    @property
    def message(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        side = "above" if self.change > 0 else "below"
        return (
            f"{self.host}: {self.test} {self.latest:g}{unit} in its latest run is {abs(self.change):.1%} {side} its own median "
            f"{self.own_median:g}{unit} of the {self.runs} runs before"
        )


@dataclass(frozen=True)
class Decline:
    host: str
    test: str
    values: list[float]  # oldest first
    slope: float  # per run, in the value's unit
    r2: float
    unit: str

    @property
    def fitted_change(self) -> float:
        first = statistics_mean(self.values) - self.slope * (len(self.values) - 1) / 2
        return self.slope * (len(self.values) - 1) / first if first else 0.0

    @property
    def message(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        shown = ", ".join(f"{v:g}" for v in self.values)
        return (
            f"{self.host}: {self.test} drifts {self.fitted_change:+.1%} over its last {len(self.values)} runs "
            f"(fitted slope {self.slope:+.3g}{unit} a run, r² {self.r2:.2f}; values {shown}{unit})"
        )


def statistics_mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


@dataclass(frozen=True)
class CohortValue:
    field: str
    before: str
    after: str
    test: str
    unit: str
    lower: bool
    hosts: list[tuple[str, float, float]]  # (host, its median before, after)
    median_before: float
    median_after: float

    @property
    def change(self) -> float:
        return (self.median_after - self.median_before) / self.median_before if self.median_before else 0.0

    def worse_by(self, limit: float) -> bool:
        return self.change > limit if self.lower else self.change < -limit

    @property
    def message(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return (
            f"{self.field} {self.before} -> {self.after}: {self.test} median {self.change:+.1%} over {len(self.hosts)} hosts "
            f"({self.median_before:g} -> {self.median_after:g}{unit})"
        )


# every value of a host (one host with $host), numbered from its latest run back: age 1 is the latest
AGED = (
    f"v AS ({VALUES} AND ($host IS NULL OR r.host = $host)),\n"
    "        aged AS (SELECT *, row_number() OVER (PARTITION BY host, test_id ORDER BY started_at DESC, run_id) AS age FROM v)"
)

def _parameters(**extra: Any) -> dict[str, Any]:
    return {"older": sorted(OLDER_RESULTS_LOWER_IS_BETTER), "checks": HISTORY_CHECKS, **extra}


def drops(connection: Any, runs: int, limit: float, host: str | None = None) -> list[Drop]:
    """Values whose latest run is worse than the host's own median of its `runs` runs before by more than `limit`."""
    rows = connection.execute(
        f"""
        WITH {AGED},
        judged AS (
            SELECT host, test_id, any_value(unit) AS unit, bool_or(lower) AS lower,
                max(measured) FILTER (WHERE age = 1) AS latest,
                median(measured) FILTER (WHERE age > 1) AS own,
                count(*) FILTER (WHERE age > 1) AS before
            FROM aged WHERE age <= $runs + 1 GROUP BY host, test_id
        )
        SELECT host, test_id, latest, own, before, unit, lower FROM judged
        WHERE before >= $min_runs AND own > 0
            AND CASE WHEN lower THEN latest > own * (1 + $limit) ELSE latest < own * (1 - $limit) END
        ORDER BY host, test_id
        """,
        _parameters(runs=runs, limit=limit, min_runs=MIN_OWN_RUNS, host=host),
    ).fetchall()
    return [Drop(h, t, float(latest), float(own), int(n), unit, bool(lower)) for h, t, latest, own, n, unit, lower in rows]


def declines(connection: Any, runs: int, limit: float, host: str | None = None) -> list[Decline]:
    """Values that fell steadily over the last `runs` runs: a fitted line losing more than `limit`."""
    rows = connection.execute(
        f"""
        WITH {AGED},
        recent AS (
            SELECT *, lag(measured) OVER (PARTITION BY host, test_id ORDER BY started_at, run_id) AS previous
            FROM aged WHERE age <= $runs
        ),
        fitted AS (
            SELECT host, test_id, any_value(unit) AS unit, bool_or(lower) AS lower, count(*) AS n,
                regr_slope(measured, -age) AS slope, regr_r2(measured, -age) AS r2, avg(measured) AS mean,
                count(*) FILTER (WHERE CASE WHEN lower THEN measured > previous ELSE measured < previous END) AS worse_steps,
                list(measured ORDER BY started_at, run_id) AS values
            FROM recent GROUP BY host, test_id
        )
        SELECT host, test_id, values, slope, r2, unit FROM fitted
        WHERE n >= $min_runs AND mean > 0 AND r2 >= $r2 AND worse_steps >= $steps * (n - 1)
            AND CASE WHEN lower THEN slope * (n - 1) > $limit * (mean - slope * (n - 1) / 2)
                     ELSE -slope * (n - 1) > $limit * (mean - slope * (n - 1) / 2) END
        ORDER BY host, test_id
        """,
        _parameters(runs=runs, limit=limit, min_runs=MIN_DECLINE_RUNS, r2=DECLINE_R2, steps=DECLINE_STEPS_DOWN, host=host),
    ).fetchall()
    return [Decline(h, t, [float(v) for v in values], float(slope), float(r2), unit) for h, t, values, slope, r2, unit in rows]


def cohort_changes(connection: Any, field: str) -> list[CohortValue]:
    """For hosts whose `field` (a software or firmware version) changed, each value's fleet median
    before and after the change (each host's last change; each side the host's median of its runs
    on that version), with each host's own before and after."""
    assert field in VERSIONS, field  # a column name: never text from outside
    rows = connection.execute(
        f"""
        WITH seq AS (
            SELECT run_id, host, started_at, {field} AS version,
                lag({field}) OVER (PARTITION BY host ORDER BY started_at, run_id) AS previous
            FROM runs
        ),
        change AS (
            SELECT host, previous AS before, version AS after, started_at AS changed_at FROM seq
            WHERE previous IS NOT NULL AND version IS NOT NULL AND previous <> version
            QUALIFY row_number() OVER (PARTITION BY host ORDER BY started_at DESC) = 1
        ),
        side AS (
            SELECT c.host, c.before, c.after, s.run_id, s.started_at >= c.changed_at AS after_side
            FROM change c JOIN seq s ON s.host = c.host
            WHERE (s.started_at < c.changed_at AND s.version = c.before) OR (s.started_at >= c.changed_at AND s.version = c.after)
        ),
        v AS ({VALUES}),
        per_host AS (
            SELECT side.host, side.before, side.after, v.test_id, any_value(v.unit) AS unit, bool_or(v.lower) AS lower,
                median(v.measured) FILTER (WHERE NOT side.after_side) AS b, median(v.measured) FILTER (WHERE side.after_side) AS a
            FROM side JOIN v USING (run_id) GROUP BY ALL
        )
        SELECT before, after, test_id, any_value(unit), bool_or(lower), list((host, b, a) ORDER BY host), median(b), median(a)
        FROM per_host WHERE b IS NOT NULL AND a IS NOT NULL GROUP BY before, after, test_id
        ORDER BY before, after, test_id
        """,
        _parameters(),
    ).fetchall()
    return [
        CohortValue(field, before, after, test, unit, bool(lower), [(h, float(b), float(a)) for h, b, a in hosts], float(mb), float(ma))
        for before, after, test, unit, lower, hosts, mb, ma in rows
    ]


def value_history(connection: Any, host: str) -> list[tuple[str, str, float, str, dict[str, str | None]]]:
    """Every run's value of `host`: (test id, run start, value, unit, its software), oldest first."""
    rows = connection.execute(
        """
        SELECT x.test_id, strftime(r.started_at AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ'), x.measured, coalesce(x.unit, ''),
            r.driver, r.cuda_driver, r.nccl, r.torch, r.vbios, r.profile
        FROM results x JOIN runs r USING (run_id)
        WHERE r.host = $host AND x.measured IS NOT NULL AND isfinite(x.measured) AND list_contains($checks, x.check_name)
        ORDER BY x.test_id, r.started_at, r.run_id
        """,
        {"host": host, "checks": HISTORY_CHECKS},
    ).fetchall()
    names = ("driver", "cuda_driver", "nccl", "torch", "vbios", "profile")
    return [(t, at, float(value), unit, dict(zip(names, rest, strict=True))) for t, at, value, unit, *rest in rows]
