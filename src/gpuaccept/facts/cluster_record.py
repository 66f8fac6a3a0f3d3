"""cluster-results.json and node-results.json as typed records: what `gpu-accept cluster` writes
(cluster/reports.py) and what the cluster view and the fleet report read (report/), one shape for
both, as results.json is one (run_record.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationError

from gpuaccept.facts.cluster import ClusterFacts, NodeFacts
from gpuaccept.facts.record import Record
from gpuaccept.facts.verdict import Verdict

CLUSTER_KIND: Literal["gpu-accept cluster"] = "gpu-accept cluster"
NODE_KIND: Literal["gpu-accept cluster node"] = "gpu-accept cluster node"


class ClusterRecord(Record):
    """A cluster run: the cluster's facts and every verdict on them."""

    kind: Literal["gpu-accept cluster"] = CLUSTER_KIND
    facts: ClusterFacts
    summary: dict[str, int] = Field(default_factory=dict)  # how many verdicts of each outcome, for people: never judged by
    verdicts: list[Verdict]


class NodeRecord(Record):
    """One node of a cluster run: what it read of itself and the verdicts on it."""

    kind: Literal["gpu-accept cluster node"] = NODE_KIND
    profile: str
    node: NodeFacts
    summary: dict[str, int] = Field(default_factory=dict)
    verdicts: list[Verdict]


def parse_cluster_record(text: str) -> ClusterRecord:
    """cluster-results.json's text as its record. Raises ValueError, its message the first problem
    and where it is (`facts.nodes.0.host: Field required`)."""
    try:
        return ClusterRecord.model_validate_json(text)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"{where}: {first['msg']}" if where else first["msg"]) from None
