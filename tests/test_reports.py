"""Reports: results.json (valid even after a kill), JUnit of one shape, HTML, fleet JUnit and
outliers, baselines, profiles from a golden machine. The run they read is a real CPU run of the
live path."""

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from gpuaccept.cli import main as cli
from gpuaccept.errors import InputFileError
from gpuaccept.facts.run_record import RunRecord, load_results
from gpuaccept.profile import ProfileCatalog, load_profile
from gpuaccept.report.charts import FAIL
from gpuaccept.report.fleet import read_suites, write_fleet_junit, write_runs_junit
from gpuaccept.report.html import render_html
from gpuaccept.report.results import IDLE_S
from gpuaccept.resources import shipped_dir
from tests.helpers import DATA, EXAMPLES, ROOT, needs_torch, write
from tests.live_cpu import gpu_accept_run
from tests.report_page import Page, traces, values

pytestmark = needs_torch


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """One live run that several tests read. Under xdist (`-n N`) the first worker to ask makes it and
    the others wait for it and read it, from the folder all workers share: a run made again on each
    worker would cost as much as the tests that read it."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        folder = tmp_path_factory.mktemp("cpu-run")
        done = gpu_accept_run(folder, "--save-baseline", str(folder / "baseline.json"))
    else:
        shared = tmp_path_factory.getbasetemp().parent
        folder, saved = shared / "cpu-run", shared / "cpu-run.json"
        with open(shared / "cpu-run.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if saved.exists():
                done = subprocess.CompletedProcess(**json.loads(saved.read_text()))
            else:
                folder.mkdir()
                done = gpu_accept_run(folder, "--save-baseline", str(folder / "baseline.json"))
                said = {"args": done.args, "returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
                saved.write_text(json.dumps(said))
    # CUDA peer access cannot be read on a CPU: those values could not be established (exit 2), nothing failed
    assert done.returncode == 2, done.stdout + done.stderr
    return folder, done


@pytest.mark.slow
def test_results_json_holds_facts_verdicts_environment_and_timings(cpu_run):
    folder, _ = cpu_run
    document = load_results(folder / "reports" / "results.json")
    # pytest's own status counts an error as a failure; the outcome policy says could not judge
    assert document.complete is True and document.run.exit_status == 1 and document.exit_code() == 2
    assert document.run.profile.name == "cpu" and len(document.run.profile.sha256) == 64
    environment = document.environment
    assert environment.gpu_count == 4 and environment.driver == "580.159.04" and environment.torch.startswith("2.")
    assert environment.gpus[0].uuid.startswith("GPU-") and environment.gpus[0].serial
    tests = {t.id: t for t in document.tests}
    busbw = tests["test_busbw[all_reduce-64KiB]"]
    assert busbw.outcome == "passed" and busbw.duration_s >= 0
    assert busbw.verdict.measured > 0 and busbw.verdict.expected == ">= 0.0001 GB/s"
    assert busbw.verdict.criterion.op == ">=" and busbw.verdict.limit == 0.0001 and busbw.verdict.better == "higher"
    assert tests["test_p2p_cuda_agrees[gpu0-gpu1]"].outcome == "error"
    assert document.summary.error == 12 and document.summary.failed == 0 and document.summary.total == len(document.tests)
    measured = document.facts.measurements
    assert measured.collectives.wall_s > 0 and len(measured.ddp.results) == 2
    assert not (folder / "reports" / "results.json.journal").exists()  # a finished run leaves results.json alone


@pytest.mark.slow
def test_terminal_summary_lists_failures_first_then_key_values(cpu_run):
    folder, done = cpu_run
    summary = done.stdout[done.stdout.index("gpu-accept summary"):]
    assert summary.index("test(s) did not pass") < summary.index("busbw:") < summary.index("ddp_scaling:")
    # the twelve pairs share one cause: it is named once, with the tests it failed
    assert (
        "  ERROR  12 tests: could not be established: CUDA peer access could not be read: not installed (no CUDA driver: "
        in summary
    ) and ") (profile cpu); test_p2p_cuda_agrees[gpu0-gpu1, gpu0-gpu2 and 10 more]\n" in summary
    assert summary.count("CUDA peer access could not be read") == 1
    assert "expected >= 0.0001 GB/s" in summary
    # a run that did not pass is no picture of a healthy machine
    assert (
        f"baseline not saved to {folder / 'baseline.json'}: 12 test(s) did not pass (test_p2p_cuda_agrees[gpu0-gpu1], "
        "test_p2p_cuda_agrees[gpu0-gpu2], test_p2p_cuda_agrees[gpu0-gpu3] and 9 more); a baseline is a picture of a healthy machine"
    ) in summary
    assert not (folder / "baseline.json").exists()


@pytest.mark.slow
def test_html_report_has_every_section_with_its_numbers(cpu_run):
    folder, _ = cpu_run
    page = (folder / "reports" / "report.html").read_text()
    assert page == render_html(load_results(folder / "reports" / "results.json"))
    parsed = Page(page)
    assert {"summary", "status", "causes", "coverage", "links", "busbw", "pairs", "pair-matrix", "ddp", "tests"} <= parsed.ids()
    assert "COULD NOT JUDGE: 12 test(s) could not judge, none failed; not checked: p2p" in page
    charts = parsed.charts()
    busbw = [figure for chart_id, figure in charts.items() if chart_id.startswith("busbw-")]
    assert sum(len(values(figure, "measured")) for figure in busbw) == 3  # one point per measured size
    assert sum(len(values(figure, "floor")) for figure in busbw) == 3  # each size's floor, from its criterion
    assert len(values(charts["ddp-efficiency"], "floor")) == 1  # and the DDP floor
    assert sum(len(traces(figure, "peak")) for figure in busbw) == 2  # one chart per collective, each with the NVLink peak
    assert parsed.count("td", **{"class": "heat"}) == 12  # 4x4 pair matrix less the diagonal
    assert len(values(charts["ddp-efficiency"], "efficiency")) == 2  # DDP efficiency on 1 and 2 GPUs
    # self-contained: nothing is fetched, plotly.js is inlined once
    assert not [attrs for _, attrs in parsed.found if "src" in attrs or "href" in attrs]
    assert parsed.plotly_bundles() == 1


def when_quiet(results, quiet_s: float, after: str, timeout_s: float = 120) -> RunRecord:
    """The record of a run once it holds the tests of suite module `after` and has held the same
    tests for `quiet_s`: the run is in a long step (a measurement stage, the all_reduce made to hang)."""
    deadline, last, since = time.monotonic() + timeout_s, None, time.monotonic()
    while time.monotonic() < deadline:
        try:
            record = load_results(results)
        except InputFileError:  # not written yet
            record = None
        held = [t.nodeid for t in record.tests] if record is not None else None
        if held != last:
            last, since = held, time.monotonic()
        elif held and any(t.module == after for t in record.tests) and time.monotonic() - since >= quiet_s:
            return record
        time.sleep(0.1)
    raise AssertionError(f"the run never held tests for {quiet_s} s")


def junit_shape(junit) -> tuple[list[str], dict[str, tuple]]:
    """A JUnit file's structure: the suite's property names, and per test case its elements and
    property names (values left out)."""
    (suite,) = junit.getroot().findall("testsuite")
    cases = {
        case.get("name"): (tuple(child.tag for child in case), tuple(p.get("name") for p in case.iterfind("properties/property")))
        for case in suite.iter("testcase")
    }
    return [p.get("name") for p in suite.iterfind("properties/property")], cases


def workers_of(launcher: int) -> list[int]:
    """The measurement workers a launcher started (their environment names it), alive now."""
    mark = f"GPUACCEPT_LAUNCHER_PID={launcher}".encode()
    found = []
    for process in Path("/proc").iterdir():
        try:
            if process.name.isdigit() and mark in (process / "environ").read_bytes().split(b"\0"):
                found.append(int(process.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


@pytest.mark.slow
def test_a_killed_run_leaves_valid_results_and_junit_of_what_finished(cpu_run, tmp_path):
    from lxml import etree

    # the all_reduce at 256 KiB hangs (and would until its 30 s limit): kill the run in it, the
    # suites before test_nccl.py done (those after test_ddp.py's stage: the inventory)
    run = gpu_accept_run(tmp_path, "-p", "no:randomly", env={"GPUACCEPT_INJECT_HANG": "all_reduce 256 KiB"}, wait=False)
    results = tmp_path / "reports" / "results.json"
    when_quiet(results, 3 * IDLE_S, after="test_inventory")
    hung = workers_of(run.pid)
    assert hung, "the measurement workers of the hung step"
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=30)
    # nothing was left to stop them: they notice their launcher is gone, and end (within a heartbeat)
    deadline = time.monotonic() + 30
    while workers_of(run.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not workers_of(run.pid), f"workers outlived their launcher: {workers_of(run.pid)}"
    document = load_results(results)  # valid, whatever the moment of the kill
    assert document.complete is False and document.tests
    # the file alone is valid too: JSON of the published schema, holding every test that finished
    raw = json.loads(results.read_text())
    jsonschema.validate(raw, json.loads((ROOT / "schemas" / "results.schema.json").read_text()))
    assert [t["nodeid"] for t in raw["tests"]] == [t.nodeid for t in document.tests]
    junit = etree.parse(str(tmp_path / "reports" / "junit.xml"))
    assert etree.XMLSchema(etree.parse(str(DATA / "junit.xsd"))).validate(junit)
    assert [case.get("name") for case in junit.iter("testcase")] == [t.id for t in document.tests]
    # JUnit of the same shape as the finished run's: elements and property names, per test case
    killed_suite, killed_cases = junit_shape(junit)
    finished_suite, finished_cases = junit_shape(etree.parse(str(cpu_run[0] / "reports" / "junit.xml")))
    assert killed_suite == finished_suite and "complete" in killed_suite and "facts_source" in killed_suite
    assert killed_cases == {name: finished_cases[name] for name in killed_cases}
    # verdicts that passed, that the profile made not applicable, and tests it left out
    assert {("properties",), ("properties", "skipped"), ("skipped",)} <= {elements for elements, _ in killed_cases.values()}


@pytest.mark.slow
def test_sigterm_ends_the_run_with_its_reports_written(tmp_path):
    run = gpu_accept_run(tmp_path, env={"GPUACCEPT_INJECT_HANG": "all_reduce 256 KiB"}, wait=False)
    results = tmp_path / "reports" / "results.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (results.exists() and load_results(results).tests):
        time.sleep(0.2)
    run.send_signal(signal.SIGTERM)
    output, _ = run.communicate(timeout=60)
    assert run.returncode == 2, output  # interrupted: not a verdict on the machine
    document = load_results(results)
    assert document.complete is True and document.run.exit_status == 2
    assert document.verdict is not None and document.verdict.exit_code == 2 and document.verdict.stopped == ["interrupted by SIGTERM"]
    ET.parse(tmp_path / "reports" / "junit.xml")


def test_sigterm_landing_where_python_keeps_no_line_ends_the_run_interrupted_by_either_entry(tmp_path):
    # tests/interrupted_report.py: SIGTERM as the run's handler takes it, in a frame stopped where
    # no line number is kept; pytest's own report of it used to raise (exit 1, a traceback)
    facts = EXAMPLES / "h200x4-measured.json"
    done = gpu_accept_run(tmp_path / "cli", "--facts", str(facts), "-p", "tests.interrupted_report", profile="h200-4-nvswitch")
    output = done.stdout + done.stderr
    assert done.returncode == 2, output  # interrupted: not a verdict on the machine, nor a crash of ours
    assert "Traceback" not in output and "COULD NOT JUDGE: interrupted by SIGTERM" in output
    document = load_results(tmp_path / "cli" / "reports" / "results.json")
    assert document.complete is True and document.run.exit_status == 2 and document.verdict.stopped == ["interrupted by SIGTERM"]
    # a plain pytest run of the suites ends as pytest ends an interrupted session
    results = tmp_path / "plain" / "results.json"
    plain = subprocess.run(
        [sys.executable, "-m", "pytest", "suites", "-q", "-p", "tests.interrupted_report", "--profile", "h200-4-nvswitch",
         "--facts", str(facts), "--results", str(results)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "GPUACCEPT_NVML_REPLAY": str(DATA / "nvml" / "h200x4.json")},
    )
    assert plain.returncode == 2, plain.stdout + plain.stderr
    assert "Traceback" not in plain.stdout + plain.stderr and "KeyboardInterrupt: signal 15" in plain.stdout
    assert load_results(results).run.exit_status == 2


@pytest.mark.slow
def test_baseline_gates_a_later_run(cpu_run, tmp_path):
    from gpuaccept.facts import load_facts
    from gpuaccept.report.baseline import save_baseline

    folder, _ = cpu_run
    # the CPU run fails the CUDA checks (and so would not save one): its measured values, kept as they are
    save_baseline(folder / "measured.json", load_facts(folder / "reports" / "facts.json"), "cpu")
    baseline = json.loads((folder / "measured.json").read_text())
    keys = {v["key"] for v in baseline["values"]}
    assert {"busbw-all_reduce-64KiB", "pair_busbw-gpu0-gpu1", "ddp_efficiency-2gpu-bs4", "ddp_throughput-1gpu-bs4"} <= keys
    # the same values judged again pass (replayed: live CPU timings would make this a test of the
    # machine's load), and, having passed, save their own baseline
    again = tmp_path / "again.json"
    replay = ("--facts", str(folder / "reports" / "facts.json"))
    done = gpu_accept_run(
        tmp_path / "same", *replay, "-k", "no_regression", "--baseline", str(folder / "measured.json"), "--max-regression", "1%",
        "--save-baseline", str(again),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(keys)} passed" in done.stdout
    assert f"saved {len(keys)} measured values as a baseline to {again}" in done.stdout
    assert {v["key"] for v in json.loads(again.read_text())["values"]} == keys
    # a baseline whose all_reduce was far faster: that value regressed, and the machine differs
    for value in baseline["values"]:
        if value["key"] == "busbw-all_reduce-64KiB":
            value["value"] *= 1000
    baseline["machine"]["driver"] = "575.57.08"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(baseline))
    done = gpu_accept_run(tmp_path / "slower", *replay, "-k", "no_regression", "--baseline", str(edited), "--max-regression", "99%")
    assert done.returncode == 1
    results = load_results(tmp_path / "slower" / "reports" / "results.json")
    failed = [t for t in results.tests if t.outcome == "failed"]
    assert [t.id for t in failed] == ["test_no_regression[busbw-all_reduce-64KiB]"]
    assert "baseline" in failed[0].message and "at most 99% worse allowed" in failed[0].message
    # other software is the point of the check: a note in the summary, not a Python warning
    summary = done.stdout[done.stdout.index("gpu-accept summary"):]
    assert f"note: baseline {edited} was saved with other software or on another host: driver 575.57.08 -> 580.159.04" in summary
    assert "Warning" not in done.stdout


@pytest.mark.slow
def test_profile_from_the_golden_machine_passes_its_own_facts(cpu_run, tmp_path, capsys):
    folder, _ = cpu_run
    target = tmp_path / "golden.yaml"
    # the live run could not read CUDA peer access on a CPU (errors): no golden run, as baseline save says
    assert cli(["profile", "init", "--from", str(folder / "reports" / "results.json"), "--name", "golden"]) == 2
    assert "test(s) did not pass (test_p2p_cuda_agrees[" in capsys.readouterr().err
    # its facts judged without those tests: a run that passed, made a profile of
    judged = gpu_accept_run(tmp_path / "judged", "--facts", str(folder / "reports" / "facts.json"), "-k", "not p2p_cuda",
                            profile=folder / "cpu.yaml")
    assert judged.returncode == 0, judged.stdout[-3000:]
    results = str(tmp_path / "judged" / "reports" / "results.json")
    assert cli(["profile", "init", "--from", results, "--margin", "0.5", "--name", "golden", "-o", str(target)]) == 0
    text = target.read_text()
    assert " 1 run " in text and "x (0.5 - spread 0.0%) = " in text
    profile = load_profile(target, [shipped_dir("profiles")])
    measured = load_results(folder / "reports" / "results.json").facts.measurements
    first = measured.collectives.results[0]
    floor = profile.spec.nccl.busbw[first.collective][first.nominal_size]
    assert floor == pytest.approx(first.busbw_GBps * 0.5, rel=1e-3, abs=1e-4)
    done = gpu_accept_run(tmp_path, "--facts", str(folder / "reports" / "facts.json"), "-k", "not p2p_cuda", profile=target)
    assert done.returncode == 0, done.stdout[-3000:]


def test_fleet_junit_and_outliers(tmp_path):
    import random

    from bench.fleet import host_document

    paths = []
    for index in range(8):
        path = tmp_path / f"node{index}.json"
        path.write_text(json.dumps(host_document(index, 6, random.Random(index))))  # node0007 has a slow pair
        paths.append(str(path))
    from gpuaccept.store.fleet import fleet_database, hosts_of, outliers_of

    with fleet_database(paths, workers=1) as connection:
        hosts, outliers = hosts_of(connection), outliers_of(connection, 0.1)
    assert {o.host for o in outliers} == {"node0007"}
    assert {o.test for o in outliers} == {"test_p2p_copy[gpu1-gpu5]", "test_p2p_copy[gpu5-gpu1]", "test_pair_busbw[gpu1-gpu5]"}
    assert all(o.message.startswith(f"node0007: {o.test} ") and "below the fleet median" in o.message for o in outliers)
    target = tmp_path / "fleet.xml"
    cases = write_fleet_junit(hosts, target, outliers)
    from lxml import etree

    document = etree.parse(str(target))
    assert etree.XMLSchema(etree.parse(str(DATA / "junit.xsd"))).validate(document)
    suites = document.findall("testsuite")
    # one case per host, one per outlier: never every test of every host
    assert [s.get("name") for s in suites] == ["fleet hosts", "fleet outliers"]
    assert [c.get("name") for c in suites[0].findall("testcase")] == [f"node{i:04d}" for i in range(8)]
    assert int(document.getroot().get("tests")) == cases == 8 + 3 == sum(len(s.findall("testcase")) for s in suites)
    for suite in suites:
        names = [c.get("name") for c in suite.findall("testcase")]
        assert len(names) == len(set(names)), "JUnit consumers key test cases by name"
    failure = suites[-1].find("testcase/failure").get("message")
    assert "GB/s" in failure and "fleet median" in failure  # value and reference in the message


def test_fleet_command_exit_codes(tmp_path, capsys):
    import random

    from bench.fleet import host_document

    paths = []
    for index in range(5):
        path = tmp_path / f"n{index}.json"
        path.write_text(json.dumps(host_document(index, 2, random.Random(index))))
        paths.append(str(path))
    assert cli(["report", "fleet", *paths]) == 0
    assert cli(["report", "junit", *paths, "-o", str(tmp_path / "f.xml")]) == 0
    assert write_runs_junit(read_suites(paths), tmp_path / "g.xml") == 5 * 62  # every test of every host
    broken = tmp_path / "broken.json"
    broken.write_text("{\"format\": \"something else\"}")
    assert cli(["report", "fleet", *paths, str(broken)]) == 2
    assert "not a gpu-accept results file" in capsys.readouterr().err


def test_html_of_a_real_4xh200_run():
    document = load_results(ROOT / "examples" / "results" / "h200x4.json")
    page = render_html(document)
    parsed = Page(page)
    assert "PASS: every check passed" in page
    charts = parsed.charts()
    busbw = [figure for chart_id, figure in charts.items() if chart_id.startswith("busbw-")]
    assert sum(len(values(figure, "measured")) for figure in busbw) == 15  # 5 collectives x 3 sizes
    assert parsed.count("td", **{"class": "heat"}) == 12 + 16  # pairwise matrix; peer copies with the diagonal
    assert len(values(charts["ddp-efficiency"], "efficiency")) == 6  # DDP: 3 world sizes x 2 batches in that run
    assert "NCCL 2.28.9" in page and "peak 478.12" in page
    ddp_table = page[page.index("id='ddp'"):].split("</table>")[0]
    # 4gpu-bs8 in that run: 124.3 samples/s per GPU, exposed 0.093 of a step, 71.0 without P2P, 1.750x
    row = ddp_table[ddp_table.index("<td>4gpu-bs8</td>"):].split("</tr>")[0]
    assert ">124.3<" in row and ">0.874 " in row and ">0.093 " in row and ">71.0<" in row and ">1.750x " in row and "(&gt;= 1.568 x)" in row


def test_html_marks_the_ddp_settings_that_failed():
    page = render_html(load_results(ROOT / "examples" / "results" / "h200x4-nccl-p2p-disabled.json"))
    ddp_table = page[page.index("id='ddp'"):].split("</table>")[0]
    row = ddp_table[ddp_table.index("<td>4gpu-bs8</td>"):].split("</tr>")[0]
    assert f"style='color:{FAIL}'>0.498 <span class='small'>(&gt;= 0.8036)</span>" in row


def test_a_baseline_from_several_runs_allows_what_its_runs_varied_by(tmp_path):
    from gpuaccept.checks.baseline import no_regression
    from gpuaccept.checks.verdict import Outcome
    from gpuaccept.facts.measurements import CopyResult, CopySweep, Measurements
    from gpuaccept.report.baseline import load_baseline, save_baseline
    from tests.helpers import example_facts

    def with_bidirectional(value):
        result = CopyResult(what="p2p_bidirectional", gpus=(0, 1), size_bytes=1 << 30, iterations=10, GBps=value, wrong=0)
        copies = CopySweep(wall_s=1.0, results=[result])
        return example_facts("h200x2").model_copy(update={"measurements": Measurements(copies=copies)})

    runs = [with_bidirectional(v) for v in (652.8, 700.0, 779.8)]  # as measured on 2xH200
    save_baseline(tmp_path / "b.json", runs[0], "h200-2-nvswitch", runs[1:])
    baseline = load_baseline(tmp_path / "b.json")
    metric = baseline.metrics["p2p_bidirectional-gpu0-gpu1"]
    assert metric.value == 700.0 and metric.spread == round((779.8 - 652.8) / 700.0, 4)
    key = "p2p_bidirectional-gpu0-gpu1"
    profile = ProfileCatalog.with_shipped().load("h200-2-nvswitch")
    assert no_regression(profile, with_bidirectional(620.0), key, baseline, 0.05).outcome is Outcome.PASSED
    slow = no_regression(profile, with_bidirectional(400.0), key, baseline, 0.05)
    # twice 18.1% would allow 36% worse: the spread earns at most the 25% cap
    assert slow.outcome is Outcome.FAILED
    assert "at most 25% worse allowed (twice the 18.1% its baseline runs varied by, capped at 25%)" in slow.message


DISK_FULL = """
    import errno, os
    from gpuaccept.files import OutputError
    from gpuaccept.report import baseline, junit, results

    first, last = (int(n) for n in os.environ["DISK_FULL_WRITES"].split("-"))
    written, finish = results.write_atomically, results.ResultsWriter.finish
    rewrites = [0]  # of results.json while the run goes on (junit.xml is written after it); the end is one more
    ending = [False]

    def full(path, text):
        rewrites[0] += str(path).endswith("results.json") and not ending[0]
        if first <= rewrites[0] <= last:  # the disk fills up mid-run, and is freed (or not) before its end
            raise OutputError(f"{path}: cannot write it ({os.strerror(errno.ENOSPC)})")
        written(path, text)

    def finishing(self, *args, **kwargs):  # the end writes the other reports, JUnit, then results.json
        rewrites[0] += 1
        ending[0] = True
        return finish(self, *args, **kwargs)

    results.write_atomically = junit.write_atomically = baseline.write_atomically = full
    results.ResultsWriter.finish = finishing
"""


@pytest.mark.slow
# results.json is written whole at the start, once by size while the run goes on (the second write),
# and at the end: the disk fills up at the second
@pytest.mark.parametrize(("writes", "code"), [("2-2", 0), ("2-999999", 2)], ids=["freed-before-the-end", "full-to-the-end"])
def test_a_disk_that_fills_up_mid_run_is_one_line_and_an_honest_exit(tmp_path, writes, code):
    shim = write(tmp_path / "shim" / "sitecustomize.py", DISK_FULL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(shim.parent), os.environ.get("PYTHONPATH")])),
           "DISK_FULL_WRITES": writes}
    reports = tmp_path / "reports"
    done = subprocess.run(
        [sys.executable, "-m", "gpuaccept", "run", "--profile", "h200-4-nvswitch", "--facts", str(EXAMPLES / "h200x4-measured.json"),
         "--reports", str(reports), "--save-baseline", str(reports / "base.json"), "-p", "no:randomly"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == code, output
    assert "Traceback" not in output and "INTERNALERROR" not in output
    said = [line for line in output.splitlines() if "No space left on device" in line]
    assert said[0].startswith(f"gpu-accept: {reports}/") and "the run goes on and tries again at its end" in said[0]
    if code == 0:  # written whole at the end: every test (the standard level's 340), and no journal left
        record = load_results(reports / "results.json")
        assert record.complete and len(record.tests) == 340 and not (reports / "results.json.journal").exists()
        assert len(said) == 1 and (reports / "base.json").is_file()
    else:  # each report named, at the time and in the summary
        assert f"{reports}/junit.xml: cannot write it" in said[0]
        unwritten = [line for line in said[1:] if line.startswith("report not written: ")]
        named = [line.split(": ")[1] for line in unwritten]
        # in the order the end wrote them: results.json last, its verdict naming the others
        assert named == [str(reports / "base.json"), str(reports / "junit.xml"), str(reports / "results.json")], output
        verdict = json.loads((reports / "verdict.json").read_text())
        assert verdict["exit_code"] == 2 and [line.split(": ")[1] for line in verdict["stopped"]] == named


def test_a_damaged_file_among_eight_read_in_parallel_is_named_as_when_read_alone(tmp_path, capsys):
    from gpuaccept.store.fleet import FilesNotRead, fleet_database

    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "gpu-accept-results", "version": 1}')
    assert cli(["report", "fleet", str(bad)]) == 2
    alone = capsys.readouterr().err
    # eight files and more are read by a process pool: the error crosses back as its problems
    copies = [tmp_path / f"host{i}.json" for i in range(7)]
    for copy in copies:
        copy.write_bytes((ROOT / "examples" / "results" / "h200x4.json").read_bytes())
    with pytest.raises(FilesNotRead) as pooled, fleet_database([str(bad), *map(str, copies)], workers=2):  # two workers whatever the cores
        pass
    assert [f"gpu-accept: {line}" for line in pooled.value.lines()] == alone.splitlines()
    assert alone.startswith(f"gpu-accept: {bad}: complete: required key is missing")
