"""cluster-results.json and node-results.json as `gpu-accept cluster` wrote them before a cluster
run was a results.json record (run_record.py): read only, as the run records they are now
(`run_record.of_older_cluster_record`), so that runs archived then still read."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuaccept.facts.cluster import ClusterFacts
from gpuaccept.facts.record import Record
from gpuaccept.facts.verdict import Verdict

CLUSTER_KIND: Literal["gpu-accept cluster"] = "gpu-accept cluster"


class ClusterRecord(Record):
    """An earlier cluster run: the cluster's facts and every verdict on them."""

    kind: Literal["gpu-accept cluster"] = CLUSTER_KIND
    facts: ClusterFacts
    summary: dict[str, int] = Field(default_factory=dict)  # how many verdicts of each outcome, for people: never judged by
    verdicts: list[Verdict]
