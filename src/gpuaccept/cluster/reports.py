"""A cluster run's reports, written as a run of one host's are: its results.json record (facts/
run_record.py, with the cluster's facts and every node), JUnit, HTML and the terminal's lines, by the
same writers (report/results.py, junit.py, html.py). Global rank 0 writes cluster-results.json,
cluster-junit.xml and cluster-report.html; each node's local rank 0 its node-results.json, the record
of its own tests. A verdict is a test case named as a suite's (`test_rdma_ports[node1]`,
`test_cluster_busbw[all_reduce-1GiB]`); one that is not applicable is a skipped test with its reason:
a node without an RDMA adapter says so rather than passing or failing.

A cluster is named, in its record's `environment.host` (what the results store and its history key
a run by), by the name its user gives (`gpu-accept cluster --name`) or else by its nodes' hosts, as
Slurm writes a node list (`gpu[07-09,12]`).
"""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from gpuaccept import __version__, outcomes
from gpuaccept.checks.verdict import Verdict
from gpuaccept.facts.cluster import ClusterFacts
from gpuaccept.facts.run_record import (
    Environment,
    LiveMachine,
    RunInfo,
    RunProfile,
    RunRecord,
    cluster_test,
    facts_of_cluster_run,
)
from gpuaccept.facts.run_verdict import in_progress
from gpuaccept.files import write_atomically
from gpuaccept.profile.model import Profile
from gpuaccept.report.html import render_html
from gpuaccept.report.metrics import render_run_metrics
from gpuaccept.report.results import ResultsWriter, run_moment, unwritten

CLUSTER_RESULTS = "cluster-results.json"
CLUSTER_JUNIT = "cluster-junit.xml"
CLUSTER_HTML = "cluster-report.html"
NODE_RESULTS = "node-results.json"


def cluster_name(hosts: Sequence[str]) -> str:
    """The nodes' hosts as Slurm writes a node list: gpu07, gpu08, gpu09, gpu12 -> `gpu[07-09,12]`;
    a host named twice (nodes of one machine) once, the groups in the order their hosts first come."""
    groups: dict[tuple[str, int], list[int]] = {}  # (prefix, digits) -> numbers; (host, -1) for a host without a number
    for host in dict.fromkeys(hosts):
        match = re.fullmatch(r"(.*?)(\d+)", host)
        if match:
            groups.setdefault((match.group(1), len(match.group(2))), []).append(int(match.group(2)))
        else:
            groups[(host, -1)] = []
    return ",".join(_node_list(prefix, width, numbers) for (prefix, width), numbers in groups.items())


def _node_list(prefix: str, width: int, numbers: list[int]) -> str:
    if width < 0:
        return prefix
    if len(numbers) == 1:
        return f"{prefix}{numbers[0]:0{width}d}"
    ranges: list[list[int]] = []
    for number in sorted(numbers):
        if ranges and number == ranges[-1][-1] + 1:
            ranges[-1].append(number)
        else:
            ranges.append([number])
    spans = [f"{r[0]:0{width}d}" + (f"-{r[-1]:0{width}d}" if len(r) > 1 else "") for r in ranges]
    return f"{prefix}[{','.join(spans)}]"


def run_info(profile: Profile, started_at: str) -> RunInfo:
    return RunInfo(
        started_at=started_at, id=uuid.uuid4().hex, tool_version=__version__, command=list(sys.argv), facts_source=LiveMachine(),
        profile=RunProfile(name=profile.name, path=str(profile.path), sha256=profile.sha256),
    )


def started(run: RunInfo, name: str, cluster: ClusterFacts, host: str) -> RunRecord:
    """The record of a cluster run (or of one node's part of it, `cluster` then holding that node)
    that holds no test yet; `host` is where it is written."""
    return RunRecord(
        format="gpu-accept-results", version=1, complete=False, cluster=cluster, run=run,
        environment=Environment.of_cluster(name, cluster), facts=facts_of_cluster_run(host, run.started_at, run.tool_version),
        tests=[],
    )


def _ended(record: RunRecord, verdicts: list[Verdict]) -> tuple[RunRecord, int]:
    """The record with its tests, complete, and the exit status pytest would give its tests: 1 where one
    did not pass (a failure or an error), else 0; the verdict is then decided from them as a run's is."""
    tests = [cluster_test(verdict) for verdict in verdicts]
    status = outcomes.EXIT_FAILED if any(test.did_not_pass for test in tests) else outcomes.EXIT_PASSED
    return record.with_tests(tests), status


def finished(record: RunRecord, verdicts: list[Verdict], complete: bool = True) -> RunRecord:
    """The record with these verdicts as its tests and its verdict decided from them, as a run's
    end decides it; `complete` False for a record written before the run's end (it says could not
    judge unless a check failed, which is what stands should the run never end)."""
    tests, status = _ended(record, verdicts)
    run = tests.run.model_copy(update={"finished_at": run_moment() if complete else None, "exit_status": status if complete else None})
    ended = tests.model_copy(update={"run": run, "complete": complete})
    return ended.model_copy(update={"verdict": ended.judged()})


def write_node(path: Path, record: RunRecord, verdicts: list[Verdict], complete: bool) -> None:
    """One node's node-results.json: its own tests; `complete` at the run's end (before it waits on any
    other node it is written not complete, and a node whose job never ends keeps that)."""
    write_atomically(path, finished(record, verdicts, complete).to_json())


def write_cluster(out: Path, record: RunRecord, verdicts: list[Verdict], metrics: Path | None = None) -> tuple[RunRecord, list[str]]:
    """The cluster's reports, by the writer of every run's (report/results.py): its verdict decided once
    from its tests, then the HTML (and the metrics where asked), the JUnit file and results.json,
    which names any report not written. Returns the record as written and why any file could not be."""
    tests, status = _ended(record, verdicts)
    writer = ResultsWriter(tests, out / CLUSTER_RESULTS, [out / CLUSTER_JUNIT], idle_s=None)

    def other_reports(ended: RunRecord) -> list[str]:
        not_written = unwritten(write_atomically, out / CLUSTER_HTML, render_html(ended))
        if metrics is not None:
            not_written += unwritten(write_atomically, metrics, render_run_metrics(METRICS_COMMAND, ended.recorded_verdict(), ended))
        return not_written

    written = writer.finish(status, other_reports=other_reports)
    return written, writer.write_errors


METRICS_COMMAND = "cluster"  # the `command` label of a cluster run's metrics


def write_in_progress(metrics: Path, name: str, profile: str, began: str) -> None:
    """The run's metrics while it goes on: in progress, could not judge (report/metrics.py)."""
    write_atomically(metrics, render_run_metrics(METRICS_COMMAND, in_progress(host=name, profile=profile, started_at=began), None))


def lines(verdicts: list[Verdict]) -> list[str]:
    """One line a verdict, the outcome first, then a summary: what the rank printing it shows."""
    tests = [cluster_test(verdict) for verdict in verdicts]
    out = [f"{outcomes.SHOWN[test.outcome]} {test.id}: {test.verdict.message if test.verdict else ''}" for test in tests]
    tally = {outcome: sum(1 for test in tests if test.outcome == outcome) for outcome in ("passed", "failed", "error", "skipped")}
    out.append(f"{tally['passed']} passed, {tally['failed']} failed, {tally['error']} errors, {tally['skipped']} skipped")
    return out
