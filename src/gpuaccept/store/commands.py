"""The store's command line: `gpu-accept store add|info`, `report fleet --db`, `report history`.

Kept apart from cli.py, which only wires them in: cli.py calls `add_commands` when it builds its parser.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuaccept.errors import EXIT_CHECK_FAILED, EXIT_OK, EXIT_USAGE, GpuAcceptError, OptionError, shown
from gpuaccept.files import write_atomically
from gpuaccept.outcomes import worst_exit_code
from gpuaccept.outputs import refuse_overlaps


def _say(text: str, *, err: bool = False) -> None:
    """A line for the terminal: host names and messages from results files shown escaped, never acted on."""
    print(shown(text), file=sys.stderr if err else sys.stdout)

HISTORY_RUNS = 10  # runs a host's own median and a fitted decline look back over
COHORT_SHOWN = 5  # hosts named under a cohort change, the most changed first


def add_commands(commands: Any, report_commands: Any, fleet: Any, path: Callable[[str], Path]) -> None:
    store = commands.add_parser(
        "store", help="the results store: every run of a fleet in one database file",
        description="The results store: every run of a fleet in one DuckDB file, which report fleet --db and report "
        "history read (docs/fleet.md).",
    )
    store_commands = store.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    add = store_commands.add_parser(
        "add", help="add results.json files to the store (a run added twice is one run; files in already are not read)",
        description="Add results.json files to the store, created where missing: a run added twice is one run, and a "
        "file already in it is not read again.",
    )
    add.add_argument("results", nargs="+", help="results.json files, of finished or killed runs")
    add.add_argument("--db", type=path, required=True, help="the store (created where missing)")
    add.add_argument("--workers", type=int, help="processes reading files (default: one per core)")
    add.set_defaults(handler=_store_add)
    info = store_commands.add_parser(
        "info", help="what the store holds: schema version, runs, hosts, first and last run",
        description="What the store holds: its schema version, how many runs of how many hosts, the first and the last "
        "run.",
    )
    info.add_argument("--db", type=path, required=True, help="the store to read")
    info.set_defaults(handler=_store_info)

    fleet.add_argument("--db", type=path, help="the store whose runs are judged (with results files: its runs and theirs)")
    fleet.add_argument("--html", type=path, help="also write the fleet page: hosts x test families, each host's history a click away")

    history = report_commands.add_parser(
        "history",
        help="drops, steady declines and cohort changes across driver, CUDA, NCCL, torch and VBIOS versions, from the store",
        description="Every host's values over its last runs in the store: a drop below its own median, a steady decline, "
        "and what a change of driver, CUDA, NCCL, torch or VBIOS did to the hosts that took it. Exit 1 when anything is "
        "found, 0 otherwise, 2 when the store cannot be read (docs/fleet.md).",
    )
    history.add_argument("--db", type=path, required=True, help="the store to read (gpu-accept store add)")
    history.add_argument("--runs", type=int, default=HISTORY_RUNS, help=f"runs looked back over (default {HISTORY_RUNS})")
    history.add_argument("--max-regression", default="5%", help="how far worse than its own median a value may go (default 5%%)")
    history.add_argument("--host", help="only this host, or this cluster by its name (cohort changes are the fleet's)")
    history.add_argument("--show", metavar="HOST", help="print every run's values of HOST (a host, or a cluster by its name), with its "
                         "software, and nothing else")
    history.add_argument("--json", type=path, dest="json_output", help="also write every finding, each host's before/after, as JSON")
    history.set_defaults(handler=_report_history)


def _store_add(args: argparse.Namespace, extra: list[str]) -> int:
    from gpuaccept.store.ingest import add_files

    if args.workers is not None and args.workers < 1:
        raise OptionError("--workers must be 1 or more")
    refuse_overlaps([("", path) for path in args.results], [("--db", args.db), *_beside(args.db)])
    report = add_files(args.db, list(args.results), args.workers)
    for line in report.problems:
        _say(f"gpu-accept: {line}", err=True)
    _say(
        f"{args.db}: {len(report.added)} run(s) added, {len(report.replaced)} replaced by a fuller file, "
        f"{report.already} already in, {report.unchanged} file(s) unchanged since added"
        + (f", {len(report.problems)} file(s) could not be read" if report.problems else "")
    )
    return EXIT_USAGE if report.problems else EXIT_OK


def _beside(db: Path) -> list[tuple[str, Path]]:
    """The files a store keeps beside itself: its lock, and DuckDB's write-ahead log."""
    return [("--db", db.with_name(db.name + suffix)) for suffix in (".lock", ".wal")]


def _store_info(args: argparse.Namespace, extra: list[str]) -> int:
    from gpuaccept.store.db import SCHEMA_VERSION, open_for_reading

    with open_for_reading(args.db) as connection:
        columns = {row[0] for row in connection.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs'"
        ).fetchall()}
        cluster = "nodes IS NOT NULL" if "nodes" in columns else "false"  # a store before version 4 holds no cluster's run
        runs, hosts, clusters, first, last = connection.execute(
            f"SELECT count(*), count(DISTINCT host) FILTER (WHERE NOT ({cluster})), count(DISTINCT host) FILTER (WHERE {cluster}), "
            "strftime(min(started_at) AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ'), "
            "strftime(max(started_at) AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ') FROM runs"
        ).fetchone()
        results = connection.execute("SELECT count(*) FROM results").fetchone()[0]
    of_clusters = f" and {clusters} cluster(s)" if clusters else ""
    _say(f"{args.db}: schema version {SCHEMA_VERSION}, {runs} run(s) of {hosts} host(s){of_clusters}, {results} test result(s)")
    if runs:
        _say(f"first run {first}, last run {last}")
    return EXIT_OK


def report_fleet(args: argparse.Namespace, tolerance: float, paths: list[str]) -> int:
    """`report fleet`: the latest run of each host, of the results files given, of the store (--db),
    or of both, judged by one engine (store/fleet.py); any cluster-results.json given shown beside."""
    from gpuaccept.report.fleet import is_cluster_results, judge_fleet, read_cluster, write_fleet_junit
    from gpuaccept.store.fleet import fleet_database, hosts_of, outliers_of

    if not paths and args.db is None:
        raise OptionError("report fleet: give results files, --db STORE, or both")
    clusters = [read_cluster(path) for path in paths if is_cluster_results(path)]
    single = [path for path in paths if not any(cluster.path == path for cluster in clusters)]
    if args.html is not None and not single and args.db is None:
        raise OptionError("--html: the fleet page draws hosts; a cluster-results.json holds none (give the hosts' results.json or --db)")
    hosts, verdict = [], None
    if single or args.db is not None:
        with fleet_database(single, args.db) as connection:
            hosts = hosts_of(connection)
            if not hosts:
                raise GpuAcceptError(f"{args.db}: the store holds no run")
            verdict = judge_fleet(hosts, tolerance, outliers_of(connection, tolerance))
            if args.html is not None:
                from gpuaccept.report.fleet_page import render_fleet_page
                from gpuaccept.store.page import page_data

                write_atomically(args.html, render_fleet_page(page_data(connection, hosts, verdict.outliers, tolerance)))
    for line in verdict.lines if verdict else []:
        _say(line)
    for cluster in clusters:
        for line in cluster.lines():
            _say(line)
    if args.output:
        write_fleet_junit(hosts, args.output, verdict.outliers if verdict else None, clusters)
    if args.html is not None:
        _say(f"wrote {args.html}")
    return worst_exit_code([verdict.exit_code if verdict else EXIT_OK, *(cluster.exit_code for cluster in clusters)])


def _report_history(args: argparse.Namespace, extra: list[str]) -> int:
    from gpuaccept.report.baseline import parse_percent
    from gpuaccept.store import history
    from gpuaccept.store.db import open_for_reading

    try:
        limit = parse_percent(args.max_regression)
    except ValueError as error:
        raise OptionError(f"--max-regression {error}") from None
    if args.runs < 2:
        raise OptionError("--runs must be 2 or more")
    refuse_overlaps([("--db", args.db), *_beside(args.db)], [("--json", args.json_output)])
    with open_for_reading(args.db) as connection:
        if args.show:
            return _show_host(connection, args.show)
        drops = history.drops(connection, args.runs, limit, args.host)
        declines = history.declines(connection, args.runs, limit, args.host)
        cohorts = [change for field in history.VERSIONS for change in history.cohort_changes(connection, field)]
        hosts, runs = connection.execute("SELECT count(DISTINCT host), count(*) FROM runs").fetchone()
    worse = [c for c in cohorts if c.worse_by(limit)]
    for drop in drops:
        _say(f"DROP {drop.message}")
    for decline in declines:
        _say(f"DECLINE {decline.message}")
    by_cohort: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    for change in cohorts:
        by_cohort[(change.field, change.before, change.after)].append(change)
    for (field, before, after), changes in by_cohort.items():
        moved = [c for c in changes if c.worse_by(limit)]
        count = max(len(c.hosts) for c in changes)
        _say(f"cohort {field} {before} -> {after}: {count} host(s), {len(changes)} value(s), {len(moved)} worse by more than {limit:.0%}")
        for change in sorted(moved, key=lambda c: -abs(c.change)):
            _say(f"  COHORT {change.message}")
            own = sorted(change.hosts, key=lambda h: (h[2] - h[1]) / h[1] if h[1] else 0.0, reverse=change.lower)
            for host, b, a in own[:COHORT_SHOWN]:
                _say(f"    {host}: {b:g} -> {a:g} {change.unit} ({(a - b) / b:+.1%})" if b else f"    {host}: {b:g} -> {a:g}")
    _say(
        f"{hosts} host(s), {runs} run(s): {len(drops)} drop(s) below a host's own median, {len(declines)} steady decline(s), "
        f"{len(worse)} cohort value(s) worse by more than {limit:.0%} (last {args.runs} runs)"
    )
    if args.json_output:
        found = {
            "drops": [{**d.__dict__, "change": d.change, "message": d.message} for d in drops],
            "declines": [{**d.__dict__, "fitted_change": d.fitted_change, "message": d.message} for d in declines],
            "cohorts": [{**c.__dict__, "change": c.change, "worse": c.worse_by(limit), "message": c.message} for c in cohorts],
        }
        write_atomically(args.json_output, json.dumps(found, indent=1) + "\n")
    return EXIT_CHECK_FAILED if drops or declines or worse else EXIT_OK


def _show_host(connection: Any, host: str) -> int:
    from gpuaccept.store.history import value_history

    rows = value_history(connection, host)
    if not rows:
        raise GpuAcceptError(f"no measured value of host {host!r} in the store")
    current = None
    for test, at, value, unit, software in rows:
        if test != current:
            _say(test)
            current = test
        said = " ".join(f"{k}={v}" for k, v in software.items() if v)
        _say(f"  {at}  {value:g} {unit}  {said}")
    return EXIT_OK
