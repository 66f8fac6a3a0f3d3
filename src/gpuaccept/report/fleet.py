"""Many machines at once: every host judged against its own profile (a host whose run failed a test
fails the fleet); where a profile has hosts enough, the hosts whose measured values sit far below
the fleet's median (burn-in batches, where no baseline exists yet); transient and marginal values
per host. What is judged comes from one engine, store/fleet.py: results files and the results
store are both asked in SQL (DuckDB), each host's latest run as a HostResults, the outliers found
there by the rule written here (MEDIAN_CHECKS, MEDIAN_HOSTS); this module says what it means.

Fleet JUnit is one test case per host (its verdict, its failures named in the message) and one per
outlier value: 10,000 hosts stay a few MB. Every test of every host is each host's own junit.xml,
and `gpu-accept report junit` (one testsuite per results file, every test case) where one file is wanted.
"""

from __future__ import annotations

import os
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gpuaccept.errors import GpuAcceptError, InputFileError
from gpuaccept.facts.cluster_record import CLUSTER_KIND
from gpuaccept.facts.run_record import RunRecord, load_results
from gpuaccept.files import read_input_bytes
from gpuaccept.outcomes import EXIT_FAILED, exit_code, stopped_by_pytest
from gpuaccept.report import cluster_view
from gpuaccept.report.junit import Counts, Suite, failing_suite, fleet_host_suite, suite, write_junit, xml_attribute
from gpuaccept.vocabulary.checks import checks_where

# the checks whose values a fleet compares, and those of them better lower, as the checks declare them
# (vocabulary/checks.json): for the store's rows, which hold a check's name only, and for results
# written before verdicts said which way their value improves
OLDER_RESULTS_LOWER_IS_BETTER = set(checks_where(fleet=True, better="lower"))
MEDIAN_CHECKS = set(checks_where(fleet=True))
MEDIAN_HOSTS = 3  # fewer hosts of a profile have no median to speak of: one slow host of two is half the fleet
FAILURES_SHOWN = 3  # failures named per host, root causes first
TRANSIENTS_SHOWN = 3  # transient test ids named per host


@dataclass(frozen=True)
class HostResults:
    """What the fleet report needs of one host's latest run (store/fleet.py reads it)."""

    path: str  # the results file it was read from
    host: str
    profile: str
    complete: bool
    counts: Counts  # its tests, failures, errors and skips
    failures: tuple[tuple[str, str], ...] = ()  # (test id, message) of the first tests that did not pass, root causes first
    transients: tuple[str, ...] = ()  # tests that passed only when measured again, with their attempts
    marginal: int = 0  # tests that passed within the profile's marginal band of their limit
    exit_status: int | None = None  # pytest's, as the run recorded it (exit_status_of); None until the run ended
    families: dict[str, str] | None = None  # test family (test_nccl) -> its worst state, for the fleet page
    stopped: tuple[str, ...] = ()  # what kept the run from judging beside its tests, as its verdict recorded

    @property
    def not_judged(self) -> str:
        """Why the run could not judge the machine beside its tests (its verdict says), or ''."""
        reasons = self.stopped or stopped_by_pytest(self.exit_status)  # the store keeps pytest's status alone
        return f"could not judge: {'; '.join(reasons)}" if reasons else ""

    @property
    def failed(self) -> int:
        return self.counts.failures + self.counts.errors

    @property
    def outcome(self) -> str:
        """`failed` where a check failed or the run did not end or judge (as before), `error` where its
        values could only not be established (outcomes.py), else `passed`."""
        if self.counts.failures or not self.complete or self.not_judged:
            return "failed"
        return "error" if self.counts.errors else "passed"

    @property
    def label(self) -> str:
        return f"{self.host} ({self.path})"

    def verdict_line(self) -> str | None:
        """One line where this host fails its own profile: how many tests did not pass, and the first."""
        if not self.failed and self.complete and not self.not_judged:
            return None
        said = [] if self.complete else ["run incomplete (stopped before its end)"]
        said += [self.not_judged] if self.not_judged else []
        stopped = ", ".join(said) + (", " if said and self.failed else "")
        if not self.failed:
            return f"FAIL {self.label}: {stopped}"
        shown = "; ".join(f"{test_id}: {message}" for test_id, message in self.failures)
        more = self.failed - len(self.failures)
        return f"FAIL {self.label}: {stopped}{self.failed} test(s) did not pass: {shown}" + (f"; and {more} more" if more > 0 else "")


def exit_status_of(record: RunRecord) -> int | None:
    """A run's exit status as its record holds it (None until the run ended): what the fleet reads of it."""
    return record.run.exit_status


@dataclass(frozen=True)
class RunSuite:
    """One results file as `report junit` writes it: every test case of its run."""

    path: str
    host: str
    suite: Suite


def _read_suite(path: str) -> RunSuite:
    record = load_results(Path(path))
    return RunSuite(path, record.environment.host, suite(record, None, {"results_file": path}))


def read_suites(paths: list[str], workers: int | None = None) -> list[RunSuite]:
    """Each file's testsuite, read by one process per core."""
    if not paths:
        raise GpuAcceptError("no results files given")
    workers = workers or min(len(paths), os.cpu_count() or 1)
    if workers <= 1 or len(paths) < 8:
        return [_read_suite(p) for p in paths]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(_read_suite, paths, chunksize=max(1, len(paths) // (workers * 8))))


def _names(runs: list[RunSuite]) -> list[str]:
    """Each run's testsuite name: a host with two results files (a rerun) is told apart by the file name."""
    seen: dict[str, int] = defaultdict(int)
    for run in runs:
        seen[run.host] += 1
    return [run.host if seen[run.host] == 1 else f"{run.host} ({Path(run.path).name})" for run in runs]


def write_runs_junit(runs: list[RunSuite], target: Path) -> int:
    """`report junit`: one JUnit file holding every test case of every run, a testsuite per results file."""
    suites = [run.suite if name == run.host else _renamed(run.suite, run.host, name) for run, name in zip(runs, _names(runs), strict=True)]
    return write_junit(Path(target), suites, "gpu-accept fleet").tests


def write_fleet_junit(
    hosts: list[HostResults], target: Path, outliers: list[Outlier] | None = None, clusters: list[ClusterResults] | None = None
) -> int:
    """Fleet JUnit: a test case per host (failed where it did not pass its profile, its failures
    named), a test case per outlier value, then a testsuite per cluster run."""
    cases = [(host.host, host.profile, host.verdict_line(), _host_properties(host), host.outcome) for host in hosts]
    suites = [fleet_host_suite("fleet hosts", cases, {"hosts": str(len(hosts))})]
    if outliers:
        found = [(outlier.host, f"fleet_median[{outlier.test}]", outlier.message) for outlier in outliers]
        suites.append(failing_suite("fleet outliers", found, {"hosts": str(len(hosts))}))
    suites += [cluster.suite for cluster in clusters or []]
    return write_junit(Path(target), suites, "gpu-accept fleet").tests


def _host_properties(host: HostResults) -> dict[str, str]:
    return {
        "results_file": host.path, "profile": host.profile, "tests": str(host.counts.tests), "failed": str(host.failed),
        "skipped": str(host.counts.skipped), "transient": str(len(host.transients)), "marginal": str(host.marginal),
        "complete": str(host.complete).lower(), "exit_status": "" if host.exit_status is None else str(host.exit_status),
    }


# how a cluster run's results begin: a record's `cluster` comes before its run (facts/run_record.py),
# and before those records an earlier cluster-results.json began with its kind
CLUSTER_BEGINS = ('"cluster": {', f'"kind": "{CLUSTER_KIND}",')


def is_cluster_results(path: str) -> bool:
    """Whether `path` holds a cluster run's results (gpu-accept cluster's cluster-results.json): its
    first bytes say so (no whole read). A pipe (`<(...)`) is not looked into: what this read took,
    the whole read would miss."""
    if not os.path.isfile(path):
        return False
    try:
        head = read_input_bytes(path, 256).decode("utf-8", errors="replace")
    except OSError:
        return False  # reading it as a results.json says what is wrong with it
    return any(begins in head for begins in CLUSTER_BEGINS)


@dataclass(frozen=True)
class ClusterResults:
    """A cluster run among a fleet's files: its nodes x tests view, its tests as a testsuite."""

    path: str
    record: RunRecord
    suite: Suite

    @property
    def label(self) -> str:
        nodes = len(self.record.cluster.nodes) if self.record.cluster is not None else 0
        return f"cluster {self.record.environment.host} of {nodes} nodes, profile {self.record.run.profile.name} ({self.path})"

    @property
    def errors(self) -> int:
        return int(self.suite.counts.errors)

    @property
    def failed(self) -> int:
        return int(self.suite.counts.failures + self.suite.counts.errors)

    @property
    def exit_code(self) -> int:
        """The run's recorded verdict's: 1 where a check failed, else 2 where it could not judge, else 0."""
        return self.record.exit_code()

    def lines(self) -> list[str]:
        shown = [test for test in self.record.tests if test.did_not_pass][:FAILURES_SHOWN]
        named = "; ".join(f"{test.id}: {test.message}" for test in shown)
        verdict = f"FAIL {self.label}: {self.failed} test(s) did not pass: {named}" if self.failed else f"PASS {self.label}"
        return [verdict, *("  " + row for row in cluster_view.text(self.record).splitlines())]


def read_cluster(path: str) -> ClusterResults:
    """A cluster run's results, read by the one reader of every run's (a results.json record, or an
    earlier cluster-results.json read as one), its tests a testsuite by the one JUnit writer."""
    try:
        record = load_results(path)
        if record.cluster is None:
            raise ValueError("cluster: the run of one host, not of a cluster")
        name = f"cluster {record.environment.host} ({Path(path).name})"
        whole = suite(record, name, {"results_file": path, "world": str(record.cluster.world)})
        cluster_view.text(record)  # what the fleet report shows of it: damage found here, not halfway through the report
    except InputFileError as error:  # the reader's own words: the key and what is wrong with it
        first = error.problems[0]
        said = f"{first.path}: {first.message}" if first.path else first.message
        raise GpuAcceptError(f"{path}: not a readable cluster-results.json ({said})") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
        said = "nested too deeply" if isinstance(error, RecursionError) else f"{type(error).__name__}: {error}"
        if type(error) is ValueError:
            said = str(error)
        raise GpuAcceptError(f"{path}: not a readable cluster-results.json ({said})") from None
    return ClusterResults(path, record, whole)


def _renamed(whole: Suite, host: str, name: str) -> Suite:
    return Suite(whole.xml.replace(f'name="{xml_attribute(host)}"', f'name="{xml_attribute(name)}"', 1), whole.counts)


@dataclass(frozen=True)
class Outlier:
    path: str
    host: str
    test: str
    measured: float
    median: float
    unit: str
    hosts: int

    @property
    def deviation(self) -> float:
        return (self.measured - self.median) / self.median if self.median else 0.0

    @property
    def message(self) -> str:
        side = "below" if self.measured < self.median else "above"
        unit = f" {self.unit}" if self.unit else ""
        return (
            f"{self.host}: {self.test} {self.measured:g}{unit} is {abs(self.deviation):.0%} {side} the fleet median "
            f"{self.median:g}{unit} ({self.hosts} hosts)"
        )


def small_fleets(hosts: list[HostResults]) -> list[str]:
    """The profiles with too few hosts for a median, one line each."""
    per_profile: dict[str, int] = defaultdict(int)
    for host in hosts:
        per_profile[host.profile] += 1
    return [
        f"profile {profile}: {count} host(s), too few for a fleet median; each host judged against its profile only"
        for profile, count in sorted(per_profile.items())
        if count < MEDIAN_HOSTS
    ]


def transient_lines(hosts: list[HostResults]) -> list[str]:
    """Hosts by how many values passed only when measured again: a server with many is worth a look."""
    flagged = sorted((h for h in hosts if h.transients), key=lambda h: (-len(h.transients), h.host, h.path))
    if not flagged:
        return []
    lines = ["transient values by host (passed only when measured again; a server with many is worth a look):"]
    for host in flagged:
        more = len(host.transients) - TRANSIENTS_SHOWN
        shown = ", ".join(host.transients[:TRANSIENTS_SHOWN]) + (f" and {more} more" if more > 0 else "")
        marginal = f", {host.marginal} marginal" if host.marginal else ""
        lines.append(f"  {host.label}: {len(host.transients)} transient{marginal}: {shown}")
    return lines


@dataclass(frozen=True)
class FleetVerdict:
    lines: list[str]
    outliers: list[Outlier]
    failed_hosts: list[HostResults]

    @property
    def passed(self) -> bool:
        return not self.outliers and not self.failed_hosts

    @property
    def exit_code(self) -> int:
        """The outcome policy's (outcomes.py): 1 where a host failed a check or is an outlier (or its
        run did not end or judge, as before); else 2 where a host's values could not be established; else 0."""
        if self.outliers:
            return EXIT_FAILED
        return exit_code(host.outcome for host in self.failed_hosts)


def judge_fleet(hosts: list[HostResults], tolerance: float, outliers: list[Outlier]) -> FleetVerdict:
    """Every host against its own profile, then against the median of its profile's fleet (the
    outliers, found in SQL by store/fleet.py: values more than `tolerance` worse than the median of
    the same test across MEDIAN_HOSTS or more hosts of one profile)."""
    failed = [host for host in hosts if host.verdict_line()]
    lines = small_fleets(hosts)
    lines += [outlier.message for outlier in outliers]
    lines += [host.verdict_line() for host in failed]
    lines += transient_lines(hosts)
    flagged = len({o.path for o in outliers})
    lines.append(
        f"{len(hosts)} host(s), {len(failed)} did not pass their profile, {len(outliers)} value(s) more than {tolerance:.0%} worse "
        f"than the fleet median on {flagged} host(s)"
    )
    return FleetVerdict(lines, outliers, failed)
