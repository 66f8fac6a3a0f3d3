"""The results store: runs in once each, damaged files named, concurrent writers queued; the fleet
judged from the store as from files; history, drift and cohort changes found, healthy noise silent."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from lxml import etree

from bench.fleet import host_document
from gpuaccept.cli import main as cli
from gpuaccept.store import history
from gpuaccept.store.db import open_for_reading
from gpuaccept.store.ingest import add_files
from tests import browser

DATA = Path(__file__).parent / "data"


def run_document(
    index: int, day: int, gpus: int = 2, driver: str = "580.95", scale=None, seed: int | None = None, every_family: bool = False
) -> dict:
    """Host `index`'s run on `day` (one run a day), with `scale(test_id, value) -> value` applied to its values;
    with `every_family`, the ten test families of a full run, three of which nothing judged."""
    document = host_document(index, gpus, random.Random(seed if seed is not None else index * 1000 + day))
    if every_family:
        document["tests"] += unjudged_families(document["environment"]["host"], gpus)
    document["run"]["started_at"] = f"2026-10-{day + 1:02d}T08:00:00+00:00"
    document["run"]["finished_at"] = f"2026-10-{day + 1:02d}T08:05:00+00:00"
    document["environment"]["driver"] = driver
    if scale:
        for test in document["tests"]:
            verdict = test["verdict"]
            if verdict and isinstance(verdict["measured"], float):
                verdict["measured"] = round(scale(test["id"], verdict["measured"]), 3)
    return document


def unjudged_families(host: str, gpus: int) -> list[dict]:
    """The health suite passed; the per-GPU loads, the telemetry and the baseline gate skipped, as the
    store of a real fleet holds them from runs of facts that lacked them (node0009's telemetry could
    not judge, as such a run's now does)."""
    def test(module: str, name: str, subject: str, outcome: str, message: str = "") -> dict:
        test_id = f"{name}[{subject}]"
        verdict = None if outcome == "skipped" else {
            "check": name.removeprefix("test_"), "subject": subject, "outcome": outcome, "measured": 0 if outcome == "passed" else None,
            "expected": "<= 0 processes", "unit": "processes", "message": f"{subject}: {message}", "profile": "h200-8-nvswitch",
        }
        return {"id": test_id, "nodeid": f"{module}.py::{test_id}", "outcome": outcome, "duration_s": 0.001, "message": message,
                "verdict": verdict}

    tests = []
    for gpu in range(gpus):
        tests.append(test("test_health", "test_no_other_compute_process", f"gpu{gpu}", "passed"))
        tests.append(test("test_compute", "test_gemm_throughput", f"gpu{gpu}", "skipped", "the profile sets no compute.gemm.min_tflops"))
        if host == "node0009":
            tests.append(test("test_telemetry", "test_clock_slowdown", f"gpu{gpu}", "error", "the facts hold no telemetry"))
        else:
            tests.append(test("test_telemetry", "test_clock_slowdown", f"gpu{gpu}", "skipped", "the facts hold no telemetry"))
    tests.append(test("test_baseline", "test_no_regression", "none", "skipped", "no --baseline given"))
    return tests


def written(folder: Path, name: str, document: dict) -> str:
    path = folder / name
    path.write_text(json.dumps(document))
    return str(path)


def fleet_files(folder: Path, hosts: int, gpus: int = 2) -> list[str]:
    return [written(folder, f"node{i}.json", run_document(i, 0, gpus)) for i in range(hosts)]


# -- store add ---------------------------------------------------------------------------------------------------


def test_a_run_added_twice_is_one_run_and_files_in_already_are_not_read(tmp_path, capsys):
    paths = fleet_files(tmp_path, 3)
    db = tmp_path / "fleet.db"
    assert cli(["store", "add", *paths, "--db", str(db)]) == 0
    copy = written(tmp_path, "copy-of-node0.json", json.loads(Path(paths[0]).read_text()))  # the same run, another file
    assert cli(["store", "add", *paths, copy, "--db", str(db)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(": 3 run(s) added, 0 replaced by a fuller file, 0 already in, 0 file(s) unchanged since added")
    assert out[1].endswith(": 0 run(s) added, 0 replaced by a fuller file, 1 already in, 3 file(s) unchanged since added")
    with open_for_reading(db) as connection:
        assert connection.execute("SELECT count(*), count(DISTINCT run_id) FROM runs").fetchone() == (3, 3)
        assert connection.execute("SELECT count(*) FROM results").fetchone()[0] == 3 * 62


def test_a_damaged_file_is_named_in_one_line_and_the_others_go_in(tmp_path, capsys):
    paths = fleet_files(tmp_path, 2)
    damaged = tmp_path / "damaged.json"
    damaged.write_text('{"format": "gpu-accept-results", "version": 1, "complete": tr')
    assert cli(["store", "add", paths[0], str(damaged), paths[1], "--db", str(tmp_path / "f.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"gpu-accept: {damaged}:1: invalid JSON") and "Traceback" not in err[0]
    with open_for_reading(tmp_path / "f.db") as connection:
        assert connection.execute("SELECT count(*) FROM runs").fetchone()[0] == 2


def test_a_killed_run_goes_in_and_its_finished_file_replaces_it(tmp_path):
    whole = run_document(0, 0)
    killed = json.loads(json.dumps(whole))
    killed.update(complete=False, tests=whole["tests"][:20])
    killed["run"].update(finished_at=None, exit_status=None)
    db = tmp_path / "f.db"
    first = add_files(db, [written(tmp_path, "killed.json", killed)], workers=1)
    assert len(first.added) == 1
    second = add_files(db, [written(tmp_path, "results.json", whole)], workers=1)
    assert second.replaced == first.added
    with open_for_reading(db) as connection:
        assert connection.execute("SELECT count(*), bool_and(complete), sum(tests) FROM runs").fetchone() == (1, True, 62)
        assert connection.execute("SELECT count(*) FROM results").fetchone()[0] == 62
    # and the killed file again does not take the finished run's place
    assert add_files(db, [str(tmp_path / "killed.json")], workers=1).replaced == []


def test_a_store_of_a_newer_schema_or_no_store_at_all_is_one_line_exit_2(tmp_path, capsys):
    db = tmp_path / "f.db"
    add_files(db, fleet_files(tmp_path, 1), workers=1)
    connection = duckdb.connect(str(db))
    connection.execute("UPDATE schema_version SET version = 99")
    connection.close()
    assert cli(["report", "fleet", "--db", str(db)]) == 2
    assert cli(["store", "add", str(tmp_path / "node0.json"), "--db", str(db)]) == 2
    other = tmp_path / "other.db"
    duckdb.connect(str(other)).execute("CREATE TABLE t (x INTEGER)").close()
    assert cli(["report", "history", "--db", str(other)]) == 2
    not_a_db = tmp_path / "notes.txt"
    not_a_db.write_text("hello")
    assert cli(["report", "fleet", "--db", str(not_a_db)]) == 2
    assert cli(["report", "fleet", "--db", str(tmp_path / "missing.db")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 5 and all(line.startswith("gpu-accept: ") for line in err)
    assert "schema version 99 is newer than this gpu-accept reads (4)" in err[1]
    assert "no such results store" in err[4]


@pytest.mark.slow
def test_concurrent_store_adds_queue_and_every_run_is_in_once(tmp_path):
    """Four `store add` at once on one new store, overlapping: each waits for the lock in turn."""
    paths = fleet_files(tmp_path, 12)
    db = tmp_path / "fleet.db"
    shares = [paths[0:6], paths[3:9], paths[6:12], paths[::2]]
    started = [
        subprocess.Popen([sys.executable, "-m", "gpuaccept", "store", "add", *share, "--db", str(db), "--workers", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for share in shares
    ]
    outputs = [process.communicate(timeout=300) for process in started]
    assert [process.returncode for process in started] == [0, 0, 0, 0], outputs
    with open_for_reading(db) as connection:
        assert connection.execute("SELECT count(*), count(DISTINCT run_id), count(DISTINCT host) FROM runs").fetchone() == (12, 12, 12)
        per_run = connection.execute("SELECT count(*) FROM results GROUP BY run_id").fetchall()
        assert per_run == [(62,)] * 12
        assert connection.execute("SELECT count(*) FROM files").fetchone()[0] == 12
    # and it opens for writing as it should: every file known, none read again
    report = add_files(db, paths, workers=1)
    assert (report.added, report.already, report.unchanged, report.problems) == ([], 0, 12, [])


# -- the fleet from the store --------------------------------------------------------------------------------------


def test_the_fleet_from_the_store_is_judged_as_the_fleet_from_files(tmp_path, capsys):
    paths = [written(tmp_path, f"node{i}.json", host_document(i, 6, random.Random(i))) for i in range(8)]  # node0007: a slow pair
    failing = json.loads(Path(paths[2]).read_text())
    failing["tests"][0].update(outcome="failed", message="node0002: gpu_count 5 < 6")
    failing["run"]["exit_status"] = 1
    Path(paths[2]).write_text(json.dumps(failing))
    assert cli(["report", "fleet", *paths, "-o", str(tmp_path / "files.xml")]) == 1
    from_files = capsys.readouterr().out
    db = tmp_path / "fleet.db"
    assert cli(["store", "add", *paths, "--db", str(db)]) == 0
    capsys.readouterr()
    assert cli(["report", "fleet", "--db", str(db), "-o", str(tmp_path / "store.xml"), "--html", str(tmp_path / "fleet.html")]) == 1
    from_store = capsys.readouterr().out
    assert from_store.splitlines()[:-1] == from_files.splitlines()
    assert "FAIL node0002" in from_store and "node0007: test_pair_busbw[gpu1-gpu5]" in from_store
    document = etree.parse(str(tmp_path / "store.xml"))
    assert etree.XMLSchema(etree.parse(str(DATA / "junit.xsd"))).validate(document)
    hosts, outliers = document.findall("testsuite")
    assert len(hosts.findall("testcase")) == 8 and len(outliers.findall("testcase")) == 3
    assert hosts.find("testcase[@name='node0002']/failure").get("message").startswith("FAIL node0002")
    assert Path(tmp_path / "files.xml").read_text() == Path(tmp_path / "store.xml").read_text()
    page = (tmp_path / "fleet.html").read_text()
    assert '"host":"node0007"' in page and '"outlier"' in page


def four_days_of_four_hosts(folder: Path) -> list[list[str]]:
    """Four hosts, one run a day for four days, each day's files in a list: node0001 failed a test on
    day 1 and passed since; node0003's pairs are 30% slow on the last day only."""
    days = []
    for day in range(4):
        paths = []
        for index in range(4):
            slow = index == 3 and day == 3
            document = run_document(index, day, scale=(lambda test_id, value: value * 0.7 if "pair_busbw" in test_id else value)
                                    if slow else None)
            if index == 1 and day == 1:
                document["tests"][0].update(outcome="failed", message="node0001: gpu_count 1 < 2")
                document["run"]["exit_status"] = 1
            paths.append(written(folder, f"node{index}-day{day}.json", document))
        days.append(paths)
    return days


def test_four_runs_each_of_four_hosts_are_four_hosts_reported_alike_from_files_and_from_the_store(tmp_path, capsys):
    """Each host's latest run counts, whichever order its files come in, and the median is of hosts: the
    same runs as files, as a store, and as a store of the first three days with the last day's files
    (or with every file: a run in both is one run) give the same lines, the same fleet JUnit and the
    same page."""
    days = four_days_of_four_hosts(tmp_path)
    every = [path for paths in reversed(days) for path in paths]  # the latest first: order does not decide
    reports = {}
    for name, arguments in (("files", every), ("store", ["--db", str(tmp_path / "all.db")]),
                            ("store and files", [*days[3], "--db", str(tmp_path / "before.db")]),
                            ("store and files it holds", [*every, "--db", str(tmp_path / "before.db")])):  # a run in both is one
        if name == "store":
            add_files(tmp_path / "all.db", every, workers=1)
        elif name == "store and files":
            add_files(tmp_path / "before.db", [path for paths in days[:3] for path in paths], workers=1)
        junit, page = tmp_path / f"{name}.xml", tmp_path / "fleet.html"
        assert cli(["report", "fleet", *arguments, "-o", str(junit), "--html", str(page)]) == 1
        reports[name] = (capsys.readouterr().out, junit.read_text(), page.read_text())
    lines = reports["files"][0].splitlines()
    pair = "test_pair_busbw[gpu0-gpu1]"
    assert lines[0].startswith(f"node0003: {pair} ") and lines[0].endswith(" (4 hosts)")
    assert lines[1:] == [
        "4 host(s), 0 did not pass their profile, 1 value(s) more than 10% worse than the fleet median on 1 host(s)",
        f"wrote {tmp_path / 'fleet.html'}",
    ]
    assert reports["store"] == reports["files"] == reports["store and files"] == reports["store and files it holds"]
    document = etree.parse(str(tmp_path / "files.xml"))
    assert [case.get("name") for case in document.findall("testsuite[@name='fleet hosts']/testcase")] == [f"node{i:04d}" for i in range(4)]
    assert {case.find("properties/property[@name='results_file']").get("value") for case in document.iter("testcase")
            if case.find("properties") is not None} == set(days[3])
    page = json.loads(re.search(r'<script type="application/json" id="fleet-data">(.*?)</script>', reports["files"][2], re.S).group(1))
    assert page["summary"] == {"hosts": 4, "failed": 0, "outliers": 1}
    assert [len(row["history"]["runs"]) for row in page["hosts"]] == [4, 4, 4, 4]  # the history is every run of each host
    with open_for_reading(tmp_path / "before.db") as connection:  # files reported with a store are not added to it
        assert connection.execute("SELECT count(*), (SELECT count(*) FROM files) FROM runs").fetchone() == (12, 12)


@pytest.mark.parametrize("source", ["store", "files"])
def test_the_fleet_reads_which_way_a_value_improves_from_a_store_and_from_files(tmp_path, source):
    """A share of time lost to communication: the host far above the median is the outlier, where
    the verdict says lower is better and in results written before verdicts said; where higher is
    better, the one more than 10% below the median. Files are asked by the store's SQL."""
    from gpuaccept.store.fleet import fleet_database, hosts_of, outliers_of

    for better, outlier in (("lower", "node0002"), (None, "node0002"), ("higher", "node0000")):
        folder = tmp_path / str(better)
        folder.mkdir()
        paths = []
        for index, value in enumerate((0.08, 0.09, 0.30)):
            document = run_document(index, 0)
            verdict = {"check": "ddp_exposed_comm", "subject": "2gpu-bs8", "outcome": "passed", "measured": value, "expected": "",
                       "unit": "", "message": "", "profile": "h200-8-nvswitch", "context": {}}
            if better is not None:  # None: results written before verdicts carried `better`
                verdict["better"] = better
            document["tests"] = [{"id": "test_ddp_exposed_comm[2gpu-bs8]", "nodeid": "test_ddp.py::x", "outcome": "passed",
                                  "verdict": verdict}]
            paths.append(written(folder, f"n{index}.json", document))
        if source == "store":
            add_files(folder / "f.db", paths, workers=1)
        with fleet_database(paths if source == "files" else [], folder / "f.db" if source == "store" else None) as connection:
            hosts_of(connection)
            assert [o.host for o in outliers_of(connection, 0.1)] == [outlier], better


def test_a_healthy_fleet_from_the_store_exits_0(tmp_path):
    db = tmp_path / "f.db"
    add_files(db, fleet_files(tmp_path, 4), workers=1)
    assert cli(["report", "fleet", "--db", str(db)]) == 0


# -- history -------------------------------------------------------------------------------------------------------


def noisy(rng: random.Random):
    """Run-to-run noise as measured on the lent machines (bench/README.md): busbw within 1.9% at
    256 MiB-1 GiB and 7.6% at 4 GiB, copies and DDP within 1-2%."""
    def scale(test_id: str, value: float) -> float:
        spread = 0.076 if "4GiB" in test_id else 0.019
        return value * (1 + rng.uniform(-spread / 2, spread / 2))
    return scale


def history_store(tmp_path: Path, hosts: int, days: int, changed=None, driver=None, every_family: bool = False) -> Path:
    """`hosts` hosts, a run a day, healthy noise; `changed(host, day, test_id, value)` bends values."""
    rng = random.Random(11)
    paths = []
    for day in range(days):
        for host in range(hosts):
            base = noisy(rng)

            def scale(test_id, value, host=host, day=day, base=base):
                value = base(test_id, value)
                return changed(host, day, test_id, value) if changed else value

            name = f"h{host}-d{day}.json"
            document = run_document(host, day, scale=scale, driver=driver(host, day) if driver else "580.95", every_family=every_family)
            paths.append(written(tmp_path, name, document))
    db = tmp_path / "history.db"
    assert not add_files(db, paths, workers=1).problems
    return db


def findings(db: Path, runs: int = 10, limit: float = 0.05):
    with open_for_reading(db) as connection:
        cohorts = [c for field in history.VERSIONS for c in history.cohort_changes(connection, field)]
        return history.drops(connection, runs, limit), history.declines(connection, runs, limit), cohorts


def test_a_healthy_noisy_history_raises_nothing(tmp_path, capsys):
    db = history_store(tmp_path, hosts=6, days=12)
    drops, declines, cohorts = findings(db)
    assert drops == [] and declines == [] and cohorts == []
    assert cli(["report", "history", "--db", str(db)]) == 0
    said = "0 drop(s) below a host's own median, 0 steady decline(s), 0 cohort value(s) worse by more than 5% (last 10 runs)"
    assert capsys.readouterr().out.strip().endswith(said)


def test_a_step_down_in_the_latest_run_is_found_against_the_hosts_own_median(tmp_path, capsys):
    def step(host, day, test_id, value):
        return value * 0.85 if host == 2 and day == 9 and test_id == "test_busbw[all_reduce-1GiB]" else value

    db = history_store(tmp_path, hosts=4, days=10, changed=step)
    drops, declines, _ = findings(db)
    assert [(d.host, d.test) for d in drops] == [("node0002", "test_busbw[all_reduce-1GiB]")]
    assert -0.17 < drops[0].change < -0.13 and drops[0].runs == 9
    assert declines == []
    assert cli(["report", "history", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert "DROP node0002: test_busbw[all_reduce-1GiB] " in out and "GB/s in its latest run is 1" in out and "below its own median" in out


def test_a_steady_decline_is_found_with_its_fitted_slope_and_values(tmp_path):
    def drift(host, day, test_id, value):  # gpu1's copies lose 1.2% a run: 11% over 10 runs, no run 5% below the one before
        return value * (1 - 0.012 * day) if host == 1 and test_id == "test_local_copy[gpu1]" else value

    db = history_store(tmp_path, hosts=4, days=10, changed=drift)
    _, declines, _ = findings(db)
    assert [(d.host, d.test) for d in declines] == [("node0001", "test_local_copy[gpu1]")]
    decline = declines[0]
    assert len(decline.values) == 10 and decline.values[0] > decline.values[-1]
    assert -0.13 < decline.fitted_change < -0.09 and decline.r2 > 0.9
    assert "drifts -1" in decline.message and "GB/s a run" in decline.message


def test_a_driver_update_that_slowed_a_collective_is_a_cohort_change(tmp_path, capsys):
    def driver(host, day):
        return "590.12" if day >= 5 and host < 5 else "580.95"

    def slower(host, day, test_id, value):
        return value * 0.9 if driver(host, day) == "590.12" and test_id.startswith("test_busbw[all_reduce") else value

    db = history_store(tmp_path, hosts=6, days=9, changed=slower, driver=driver)
    _, _, cohorts = findings(db)
    worse = sorted(c.test for c in cohorts if c.worse_by(0.05))
    assert worse == ["test_busbw[all_reduce-1GiB]", "test_busbw[all_reduce-256MiB]", "test_busbw[all_reduce-4GiB]"]
    one = next(c for c in cohorts if c.test == "test_busbw[all_reduce-1GiB]")
    assert (one.field, one.before, one.after, len(one.hosts)) == ("driver", "580.95", "590.12", 5)
    assert -0.12 < one.change < -0.08
    assert all(-0.12 < (a - b) / b < -0.08 for _, b, a in one.hosts)  # each host's own before and after
    assert not any(c.worse_by(0.05) for c in cohorts if not c.test.startswith("test_busbw[all_reduce"))
    assert cli(["report", "history", "--db", str(db), "--json", str(tmp_path / "h.json")]) == 1
    out = capsys.readouterr().out
    assert "cohort driver 580.95 -> 590.12: 5 host(s)" in out
    assert "COHORT driver 580.95 -> 590.12: test_busbw[all_reduce-1GiB] median -1" in out and "over 5 hosts" in out
    saved = json.loads((tmp_path / "h.json").read_text())
    assert len([c for c in saved["cohorts"] if c["worse"]]) == 3


def test_a_driver_update_that_changed_nothing_raises_nothing(tmp_path):
    db = history_store(tmp_path, hosts=6, days=9, driver=lambda host, day: "590.12" if day >= 5 else "580.95")
    drops, declines, cohorts = findings(db)
    assert cohorts and not any(c.worse_by(0.05) for c in cohorts)
    assert drops == [] and declines == []


def test_a_hosts_history_shows_every_run_with_its_software(tmp_path, capsys):
    db = history_store(tmp_path, hosts=1, days=3, driver=lambda host, day: "590.12" if day == 2 else "580.95")
    assert cli(["report", "history", "--db", str(db), "--show", "node0000"]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index("test_busbw[all_reduce-1GiB]")
    assert out[at + 1].startswith("  2026-10-01T08:00:00Z  ") and "driver=580.95" in out[at + 1] and "torch=2.11.0+cu130" in out[at + 1]
    assert "driver=590.12" in out[at + 3]


# -- the fleet page in a real browser ------------------------------------------------------------------------------


def page_store(tmp_path: Path) -> Path:
    """A fleet with something of everything: a failed host, an outlier, a drifting GPU, a driver update."""
    def bend(host, day, test_id, value):
        if host == 3 and test_id == "test_p2p_copy[gpu0-gpu1]":
            return value * 0.7  # an outlier against the fleet median
        if host == 5 and test_id == "test_local_copy[gpu1]":
            return value * (1 - 0.015 * day)  # a decline
        return value

    db = history_store(
        tmp_path, hosts=12, days=8, changed=bend, driver=lambda host, day: "590.12" if day >= 4 else "580.95", every_family=True
    )
    failed = run_document(7, 8, driver="590.12", every_family=True)
    failed["tests"][0].update(outcome="failed", message="node0007: gpu_count 1 < 2 (profile h200-8-nvswitch)")
    failed["run"]["exit_status"] = 1
    assert not add_files(db, [written(tmp_path, "failed.json", failed)], workers=1).problems
    return db


@pytest.mark.slow
@pytest.mark.browser
def test_headless_chromium_draws_the_fleet_page_and_a_hosts_history(tmp_path):
    db = page_store(tmp_path)
    page = tmp_path / "fleet.html"
    assert cli(["report", "fleet", "--db", str(db), "--html", str(page)]) == 1
    # measured in the window a 1400-px screen gives it: the page and its history panel beside the table
    fit = "<script>const d = document.getElementById('detail').getBoundingClientRect(); document.body.dataset.fit = " \
          "[document.documentElement.scrollWidth, innerWidth, Math.round(d.right), Math.round(d.top)].join(' ')</script></body>"
    measured = tmp_path / "measured.html"
    measured.write_text(page.read_text().replace("</body>", fit))
    dom = browser.dom(measured, tmp_path, window="1400,800")
    rows = re.findall(r'<tr class="host" data-n="\d+"><td>(node\d+)</td>', dom)
    assert len(rows) == 12 and rows[0] == "node0007"  # the worst first: the failed host, then the outliers
    assert rows[1:4] == ["node0003", "node0005", "node0009"]  # the outliers, then the host whose telemetry could not judge
    assert dom.count('class="cell failed"') == 1 and dom.count('class="cell outlier"') == 2
    # ten families, as a real run gives; what nothing judged is never painted as passed
    families = re.findall(r'<th class="family" data-key="family:\d+" title="(test_\w+)"', dom)
    assert len(families) == 10
    cells = re.findall(r'<td class="cell (\w+)" title="(test_\w+): ', dom)
    states = {family: {state for state, of in cells if of == family} for family in families}
    assert states["test_compute"] == states["test_baseline"] == {"skipped"}
    assert states["test_telemetry"] == {"skipped", "not_judged"} and states["test_health"] == {"passed"}
    width, window, right, top = map(int, re.search(r'data-fit="([\d ]+)"', dom)[1].split())
    assert width <= window == 1400 and right <= 1400 and top < 200, (width, right, top)
    detail = dom[dom.index('id="detail"'):]
    assert "<b>node0007</b>" in detail and "<polyline" in detail and "gpu_count 1 &lt; 2" in detail
    shot = tmp_path / "fleet.png"
    browser.screenshot(page, tmp_path, shot)
    assert shot.stat().st_size > 10_000
