"""A cluster run's reports: cluster-results.json (the cluster's facts and every verdict), a JUnit
file whose test cases read like the single-node ones (`test_rdma_ports[node1]`,
`test_cluster_busbw[all_reduce-1GiB]`), each node's node-results.json, and the lines printed.

A verdict that is not applicable is a skipped test case with its reason: a node without an RDMA
adapter says so rather than passing or failing.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from gpuaccept import outcomes
from gpuaccept.checks.verdict import Outcome, Verdict
from gpuaccept.facts.cluster import ClusterFacts, NodeFacts
from gpuaccept.facts.cluster_record import ClusterRecord, NodeRecord
from gpuaccept.facts.record import Record
from gpuaccept.files import write_atomically
from gpuaccept.report.junit import junit_xml, verdict_suite

CLUSTER_RESULTS = "cluster-results.json"
CLUSTER_JUNIT = "cluster-junit.xml"
CLUSTER_HTML = "cluster-report.html"
NODE_RESULTS = "node-results.json"


def test_id(verdict: Verdict) -> str:
    return f"test_{verdict.check}[{verdict.subject}]"


def counts(verdicts: list[Verdict]) -> dict[str, int]:
    counted = Counter(verdict.outcome.value for verdict in verdicts)
    return {outcome.value: counted.get(outcome.value, 0) for outcome in Outcome}


def exit_code(verdicts: list[Verdict]) -> int:
    """The outcome policy's (outcomes.py): 1 a check failed; else 2 a value could not be judged; else 0."""
    return outcomes.exit_code(verdict.outcome for verdict in verdicts)


def cluster_record(facts: ClusterFacts, verdicts: list[Verdict]) -> ClusterRecord:
    return ClusterRecord(facts=facts, summary=counts(verdicts), verdicts=list(verdicts))


def node_record(node: NodeFacts, verdicts: list[Verdict], profile: str) -> NodeRecord:
    return NodeRecord(
        profile=profile, node=node, summary=counts(verdicts), verdicts=list(verdicts)
    )


def write_json(path: Path, record: Record) -> None:
    write_atomically(path, json.dumps(record.model_dump(mode="json"), indent=2) + "\n")


def junit(verdicts: list[Verdict], name: str) -> str:
    """The cluster's JUnit file, through the writer of every other JUnit file of this tool."""
    return junit_xml([verdict_suite(name, verdicts, {})], name)


def lines(verdicts: list[Verdict]) -> list[str]:
    """One line a verdict, the outcome first, then a summary: what the rank printing it shows."""
    out = [f"{outcomes.SHOWN[verdict.outcome.value]} {test_id(verdict)}: {verdict.message}" for verdict in verdicts]
    tally = counts(verdicts)
    out.append(f"{tally['passed']} passed, {tally['failed']} failed, {tally['error']} errors, {tally['not_applicable']} skipped")
    return out
