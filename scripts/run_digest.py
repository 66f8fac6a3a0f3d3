"""One line per run from results.json files: outcome, wall time, where the time went, and every
value that was measured again (with its attempts), transient or marginal. For session logs.

    python scripts/run_digest.py runs/*/results.json
"""

from __future__ import annotations

import datetime
import sys

from gpuaccept.facts.run_record import RunInfo, load_results


def _seconds(run: RunInfo) -> float | None:
    if not run.finished_at:
        return None
    return (datetime.datetime.fromisoformat(run.finished_at) - datetime.datetime.fromisoformat(run.started_at)).total_seconds()


def digest(path: str) -> list[str]:
    record = load_results(path)  # a killed run's journal merged in
    run, summary, measured = record.run, record.summary, record.facts.measurements
    walls = []
    sweeps = {
        "copies": measured.copies, "collectives": measured.collectives, "ddp": measured.ddp, "ddp_without_p2p": measured.ddp_without_p2p,
    }
    for name, sweep in sweeps.items():
        if sweep is not None:
            walls.append(f"{name} {sweep.wall_s:.1f}s")
    rounds = [f"{r.stage}: {', '.join(str(key) for key in r.keys)} ({r.wall_s:.1f}s)" for r in measured.rounds]
    counts = f"passed {summary.passed} failed {summary.failed} error {summary.error} skipped {summary.skipped}"
    wall = _seconds(run)
    lines = [
        f"{path}: exit {run.exit_status}, {counts}, wall {wall:.0f}s" if wall is not None else f"{path}: incomplete, {counts}",
        f"  stages: {'; '.join(walls) or 'none'}; profile {run.profile.name}"
        + (f" (auto: {run.profile.chosen_because})" if run.profile.chosen_because else ""),
    ]
    if rounds:
        lines.append("  measured again: " + " | ".join(rounds))
    if measured.unconfirmed:
        lines.append("  not measured again (time spent): " + ", ".join(measured.unconfirmed))
    for test in record.tests:
        verdict = test.verdict
        marks = [mark for mark in ("transient", "marginal") if verdict is not None and getattr(verdict, mark)]
        if test.did_not_pass:
            lines.append(f"  {test.outcome.upper()} {test.id}: {test.message}")
        elif marks and verdict is not None:
            lines.append(f"  {'/'.join(marks)} {test.id}: {verdict.message}")
    return lines


if __name__ == "__main__":
    for results in sys.argv[1:]:
        print("\n".join(digest(results)))
