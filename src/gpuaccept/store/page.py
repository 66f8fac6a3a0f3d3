"""What the fleet page shows, read from the store: each host's state per test family (the worst of
failed, outlier, not judged, transient, marginal, passed; skipped where the profile asked nothing of
it), and its history a click away.

A host's history is drawn per test family as the family's worst value in each of its last runs,
relative to the fleet's median of that value today (1.0 = the median): one line per family, the
software of each run beside it. A few numbers per run, so 10,000 hosts fit one page. Each host's
history sits in its own row: the page never looks a host up by its name.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from gpuaccept.report.fleet import HostResults, Outlier
from gpuaccept.store.history import HISTORY_CHECKS, VALUES, _parameters

PAGE_RUNS = 10  # runs of each host's history drawn on the page
RANK = {"failed": 5, "outlier": 4, "not_judged": 3, "transient": 2, "marginal": 1, "passed": 0, "skipped": -1}


def page_data(connection: Any, hosts: list[HostResults], outliers: list[Outlier], tolerance: float) -> dict[str, Any]:
    """`connection` must hold the temporary `latest` table that store/fleet.py's hosts_of made."""
    family_of = dict(connection.execute("SELECT DISTINCT test_id, coalesce(family, '') FROM results JOIN latest USING (run_id)").fetchall())
    states = {host.host: dict(host.families or {}) for host in hosts}
    for outlier in outliers:
        family = family_of.get(outlier.test, "fleet")
        own = states[outlier.host]
        if RANK["outlier"] > RANK.get(own.get(family, "passed"), 0):
            own[family] = "outlier"
    families = sorted({family for own in states.values() for family in own})
    outlier_lines: dict[str, list[str]] = defaultdict(list)
    for outlier in outliers:
        outlier_lines[outlier.host].append(outlier.message)
    history = _history(connection)
    rows = [
        {
            "host": host.host, "profile": host.profile, "history": history.get(host.host),
            "states": [states[host.host].get(f, "") for f in families],
            "failed": host.failed, "transient": len(host.transients), "marginal": host.marginal, "outliers": len(outlier_lines[host.host]),
            "why": ([host.verdict_line()] if host.verdict_line() else []) + outlier_lines[host.host][:5],
        }
        for host in hosts
    ]
    return {
        "families": families, "hosts": rows, "tolerance": tolerance,
        "checks": HISTORY_CHECKS,
        "summary": {"hosts": len(hosts), "failed": sum(1 for h in hosts if h.verdict_line()), "outliers": len(outliers)},
    }


def _history(connection: Any) -> dict[str, dict[str, Any]]:
    rows = connection.execute(
        f"""
        WITH v AS ({VALUES}),
        recent AS (
            SELECT * FROM runs QUALIFY row_number() OVER (PARTITION BY host ORDER BY started_at DESC, run_id) <= $runs
        ),
        median_now AS (
            SELECT v.test_id, l.profile, median(v.measured) AS m FROM v JOIN latest l USING (run_id) GROUP BY ALL
        )
        SELECT r.host, r.run_id, strftime(r.started_at AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M'), r.driver, coalesce(x.family, ''),
            min(CASE WHEN v.lower THEN m.m / v.measured ELSE v.measured / m.m END)
        FROM recent r JOIN v USING (run_id) JOIN results x ON x.run_id = v.run_id AND x.test_id = v.test_id
            JOIN median_now m ON m.test_id = v.test_id AND m.profile = r.profile
        WHERE m.m > 0 AND v.measured > 0
        GROUP BY ALL ORDER BY r.host, 3, r.run_id, 5  -- each family in its order: the same runs draw the same page
        """,
        _parameters(runs=PAGE_RUNS),
    ).fetchall()
    history: dict[str, dict[str, Any]] = {}
    for host, run_id, at, driver, family, ratio in rows:
        own = history.setdefault(host, {"runs": [], "series": {}, "ids": []})
        if not own["ids"] or own["ids"][-1] != run_id:
            own["ids"].append(run_id)
            own["runs"].append([at, driver or ""])
        series = own["series"].setdefault(family, [])
        series.extend([None] * (len(own["runs"]) - 1 - len(series)))
        series.append(round(float(ratio), 4))
    for own in history.values():
        del own["ids"]
        for series in own["series"].values():
            series.extend([None] * (len(own["runs"]) - len(series)))
    return history
