"""One line per run from results.json files: outcome, wall time, where the time went, and every
value that was measured again (with its attempts), transient or marginal. For session logs.

    python scripts/run_digest.py runs/*/results.json
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path


def _seconds(run: dict) -> float | None:
    began, ended = run.get("started_at"), run.get("finished_at")
    if not began or not ended:
        return None
    return (datetime.datetime.fromisoformat(ended) - datetime.datetime.fromisoformat(began)).total_seconds()


def digest(path: str) -> list[str]:
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    run, summary = document["run"], document.get("summary", {})
    measured = document.get("facts", {}).get("measurements") or {}
    walls = []
    for name in ("copies", "collectives", "ddp", "ddp_without_p2p"):
        if measured.get(name):
            walls.append(f"{name} {measured[name]['wall_s']:.1f}s")
    rounds = [f"{r['stage']}: {', '.join(r['keys'])} ({r['wall_s']:.1f}s)" for r in measured.get("rounds", [])]
    counts = " ".join(f"{k} {summary.get(k, 0)}" for k in ("passed", "failed", "error", "skipped"))
    wall = _seconds(run)
    lines = [
        f"{path}: exit {run.get('exit_status')}, {counts}, wall {wall:.0f}s" if wall is not None else f"{path}: incomplete, {counts}",
        f"  stages: {'; '.join(walls) or 'none'}; profile {run['profile']['name']}"
        + (f" (auto: {run['profile']['chosen_because']})" if run["profile"].get("chosen_because") else ""),
    ]
    if rounds:
        lines.append("  measured again: " + " | ".join(rounds))
    if measured.get("unconfirmed"):
        lines.append("  not measured again (time spent): " + ", ".join(measured["unconfirmed"]))
    for test in document.get("tests", []):
        verdict = test.get("verdict") or {}
        marks = [mark for mark in ("transient", "marginal") if verdict.get(mark)]
        if test["outcome"] in ("failed", "error"):
            lines.append(f"  {test['outcome'].upper()} {test['id']}: {test.get('message', '')}")
        elif marks:
            lines.append(f"  {'/'.join(marks)} {test['id']}: {verdict.get('message', '')}")
    return lines


if __name__ == "__main__":
    for results in sys.argv[1:]:
        print("\n".join(digest(results)))
