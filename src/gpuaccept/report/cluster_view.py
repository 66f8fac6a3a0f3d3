"""The cluster view of a cluster-results.json: nodes x tests, the slow node marked.

One row a node, one column a check of the nodes; a cell is the worst outcome of that check on
that node (a node's GPUs each have a GPU-NIC affinity verdict). The localization's named nodes
carry SLOW. Below the grid, the collectives over the whole job. Text for terminals, HTML for
people; both read the record as written, and never the hardware.
"""

from __future__ import annotations

from typing import Any

from gpuaccept.errors import shown
from gpuaccept.facts.cluster import LocalizationFacts
from gpuaccept.facts.cluster_record import ClusterRecord
from gpuaccept.report.templating import templates

NODE_CHECKS = ("rdma_ports", "rdma_rate", "gpu_nic_affinity", "gpudirect_rdma", "nccl_transport")
_WORST = ("error", "failed", "passed", "not_applicable")  # the first found in a cell wins
_CELL = {"passed": "pass", "failed": "FAIL", "error": "ERROR", "not_applicable": "skip", None: "-"}


def grid(record: ClusterRecord) -> list[dict[str, Any]]:
    """One row a node: its index, host, each node check's worst outcome, and whether it was named slow."""
    found = _localization(record)
    slow = set(found.slow) if found is not None else set()
    rows = []
    for node in record.facts.nodes:
        prefix = f"node{node.node}"
        cells: dict[str, str | None] = {}
        for check in NODE_CHECKS:
            outcomes = {
                v.outcome for v in record.verdicts
                if v.check == check and (v.subject == prefix or v.subject.startswith(prefix + "-"))
            }
            cells[check] = next((outcome for outcome in _WORST if outcome in outcomes), None)
        rows.append({"node": node.node, "host": node.host, "cells": cells, "slow": node.node in slow})
    return rows


def _localization(record: ClusterRecord) -> LocalizationFacts | None:
    """The localization that followed a miss; None where nothing missed, or it could not run."""
    found = record.facts.localization
    return found if isinstance(found, LocalizationFacts) else None


def text(record: ClusterRecord) -> str:
    rows = grid(record)
    header = ["node", "host", *NODE_CHECKS, "localization"]
    table = [header] + [  # a host's name shown as one line shows it: a line break in it makes no row of its own
        [f"node{row['node']}", shown(row["host"]), *(_CELL[row["cells"][check]] for check in NODE_CHECKS), "SLOW" if row["slow"] else ""]
        for row in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in table]
    for verdict in record.verdicts:
        if verdict.check == "cluster_busbw":
            lines.append(shown(f"{_CELL[verdict.outcome]:5} {verdict.message}"))
    return "\n".join(lines) + "\n"


def page(record: ClusterRecord) -> str:
    """The view as a page, rendered by report/templating.py's one rule: every name in it is text."""
    found = _localization(record)
    localization = None
    if found is not None:
        localization = {
            "reason": found.reason,
            "trials": [
                {"state": "passed" if t.passed else "failed", "round": t.round, "nodes": ", ".join(f"node{n}" for n in t.nodes),
                 "alone": t.alone, "value": f"{t.value_GBps:.4g}"}
                for t in found.trials
            ],
        }
    rows = [
        {**row, "cells": [{"state": row["cells"][check] or "none", "text": _CELL[row["cells"][check]]} for check in NODE_CHECKS]}
        for row in grid(record)
    ]
    rendered: str = templates().get_template("cluster.html.j2").render(
        profile=record.facts.profile, world=record.facts.world, header=("node", "host", *NODE_CHECKS, "localization"), rows=rows,
        collectives=[{"outcome": str(v.outcome.value), "message": v.message} for v in record.verdicts if v.check == "cluster_busbw"],
        localization=localization,
    )
    return rendered
