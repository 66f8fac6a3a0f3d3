"""The cluster view of a cluster run's results: nodes x tests, the slow node marked.

One row a node, one column a check of the nodes; a cell is the worst outcome of that check on
that node (a node's GPUs each have a GPU-NIC affinity verdict). The localization's named nodes
carry SLOW. Below the grid, the job's own values (those its checks declare fleet values: busbw and
DDP over every node). Which verdict goes where is read from what its check declares and from its
subject, never from the check's name. Text for terminals; report.html's cluster section for people
(report/html.py); both read the record as written, and never the hardware.
"""

from __future__ import annotations

from typing import Any

from gpuaccept.errors import shown
from gpuaccept.facts.cluster import ClusterFacts, LocalizationFacts
from gpuaccept.facts.run_record import RunRecord
from gpuaccept.facts.verdict import Verdict

_WORST = ("error", "failed", "passed", "not_applicable")  # the first found in a cell wins
_CELL = {"passed": "pass", "failed": "FAIL", "error": "ERROR", "not_applicable": "skip", None: "-"}


def _node_of(verdict: Verdict, cluster: ClusterFacts) -> int | None:
    """The node a verdict's subject names (`node1`, `node1-gpu0`), None for one of the whole job."""
    for node in cluster.nodes:
        prefix = f"node{node.node}"  # the subject of a node's checks, as checks/cluster.py's node_key writes it
        if verdict.subject == prefix or verdict.subject.startswith(prefix + "-"):
            return node.node
    return None


def node_checks(record: RunRecord) -> list[str]:
    """The checks of the nodes, in the order judged: those whose verdicts name a node and are not
    the job's fleet values."""
    cluster = _cluster(record)
    return list(dict.fromkeys(
        v.check for v in record.verdicts() if not v.in_fleet and _node_of(v, cluster) is not None
    ))


def job_values(record: RunRecord) -> list[Verdict]:
    """The job's own values: the verdicts whose checks declare them fleet values (compared over the
    cluster's runs), as busbw and DDP over every node are."""
    return [v for v in record.verdicts() if v.in_fleet]


def _cluster(record: RunRecord) -> ClusterFacts:
    if record.cluster is None:
        raise ValueError("cluster: the results of one host, not of a cluster run")
    return record.cluster


def grid(record: RunRecord) -> list[dict[str, Any]]:
    """One row a node: its index, host, each node check's worst outcome, and whether it was named slow."""
    cluster = _cluster(record)
    found = localization(record)
    slow = set(found.slow) if found is not None else set()
    columns = node_checks(record)
    placed = [(v, _node_of(v, cluster)) for v in record.verdicts()]
    rows = []
    for node in cluster.nodes:
        cells: dict[str, str | None] = {}
        for check in columns:
            outcomes = {v.outcome for v, at in placed if at == node.node and v.check == check}
            cells[check] = next((outcome for outcome in _WORST if outcome in outcomes), None)
        rows.append({"node": node.node, "host": node.host, "cells": cells, "slow": node.node in slow})
    return rows


def localization(record: RunRecord) -> LocalizationFacts | None:
    """The localization that followed a miss; None where nothing missed, or it could not run."""
    found = _cluster(record).localization
    return found if isinstance(found, LocalizationFacts) else None


def text(record: RunRecord) -> str:
    rows, columns = grid(record), node_checks(record)
    header = ["node", "host", *columns, "localization"]
    table = [header] + [  # a host's name shown as one line shows it: a line break in it makes no row of its own
        [f"node{row['node']}", shown(row["host"]), *(_CELL[row["cells"][check]] for check in columns), "SLOW" if row["slow"] else ""]
        for row in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in table]
    lines += [shown(f"{_CELL[verdict.outcome]:5} {verdict.message}") for verdict in job_values(record)]
    return "\n".join(lines) + "\n"


def section(record: RunRecord) -> dict[str, Any] | None:
    """report.html's cluster section (report/html.py): the grid, the job's values, the localization;
    None for the run of one host."""
    if record.cluster is None:
        return None
    columns = node_checks(record)
    found = localization(record)
    located = None
    if found is not None:
        located = {
            "reason": found.reason,
            "trials": [
                {"state": "passed" if t.passed else "failed", "round": t.round, "nodes": ", ".join(f"node{n}" for n in t.nodes),
                 "alone": t.alone, "value": f"{t.value_GBps:.4g}"}
                for t in found.trials
            ],
        }
    rows = [
        {**row, "cells": [{"state": row["cells"][check] or "none", "text": _CELL[row["cells"][check]]} for check in columns]}
        for row in grid(record)
    ]
    return {
        "world": record.cluster.world, "backend": record.cluster.backend, "header": ("node", "host", *columns, "localization"),
        "rows": rows, "job": [{"outcome": str(v.outcome.value), "message": v.message} for v in job_values(record)],
        "localization": located,
    }
