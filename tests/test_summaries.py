"""Reports that cannot mislead: failures named once by cause and root causes first, transient and
marginal values counted, every host of a fleet judged against its own profile, heat maps coloured
against the floors. Read from real 4xH200 runs (examples/results/), healthy and with
NCCL_P2P_DISABLE=1, and from facts recorded on that machine."""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from gpuaccept.cli import main as cli
from gpuaccept.facts import save_facts
from gpuaccept.facts.run_record import RunRecord, TestRecord, load_results
from gpuaccept.facts.verdict import AtLeast
from gpuaccept.report.charts import FAIL, MARGINAL, UNJUDGED
from gpuaccept.report.fleet import read_suites, write_runs_junit
from gpuaccept.report.html import render_html
from gpuaccept.report.summary import summary_lines
from tests.helpers import EXAMPLES, ROOT, example_facts, mutated, with_verdict, with_verdicts

RESULTS = ROOT / "examples" / "results"
HEALTHY = RESULTS / "h200x4.json"
NO_P2P = RESULTS / "h200x4-nccl-p2p-disabled.json"


def gpu_accept(*args):
    return subprocess.run([sys.executable, "-m", "gpuaccept", *args], capture_output=True, text=True, timeout=300)


def summary_of(stdout: str) -> list[str]:
    """The lines after the summary's heading; pytest's closing line without its padding of "=",
    which is as wide as the terminal less its text (the run's time among it)."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "gpu-accept summary" in line)
    return [line.strip("= ") if line.startswith("=") else line for line in lines[start + 1:]]


def written(tmp_path, name: str, record: RunRecord) -> str:
    path = tmp_path / name
    path.write_text(record.to_json())
    return str(path)


def on_host(record: RunRecord, host: str) -> RunRecord:
    """The run as if made on `host`: a fleet is hosts, and one host's runs are one host."""
    return record.model_copy(update={"environment": record.environment.model_copy(update={"host": host})})


# -- the terminal: one line per cause, root causes first ---------------------------------------------


@pytest.mark.slow
def test_facts_without_measurements_name_each_cause_once(tmp_path):
    done = gpu_accept("run", "--profile", "h200-4-nvswitch", "--facts", str(EXAMPLES / "h200x4.json"), "--reports", str(tmp_path))
    # no value failed; what these facts lack could not be judged: could not judge, area by area
    assert done.returncode == 2, done.stdout + done.stderr
    record = "(record them with `gpu-accept record --measure --profile h200-4-nvswitch`) (profile h200-4-nvswitch)"
    summary = summary_of(done.stdout)
    assert summary[:8] == [
        "COULD NOT JUDGE: 249 test(s) could not judge, none failed; not checked: health, nccl, copies, ddp, compute, telemetry",
        "partly checked: health — the facts hold no health readings; the facts hold no kernel log reading (144 test(s) not judged); "
        "4 judged",
        "not checked: nccl — the facts hold no NCCL sweep; the facts hold no pairwise sweep (36 test(s) not judged)",
        "not checked: copies — the facts hold no copy bandwidth (30 test(s) not judged)",
        "not checked: ddp — the facts hold no DDP sweep (3 test(s) not judged)",
        "not checked: compute — the facts hold no per-GPU loads (24 test(s) not judged)",
        "not checked: telemetry — the facts hold no telemetry (12 test(s) not judged)",
        "249 test(s) did not pass, 8 cause(s), root causes first:",
    ]
    causes = summary[8:-1]
    assert len(causes) == 8 and all(line.startswith("  ERROR  ") for line in causes)
    assert causes[2:4] == [
        f"  ERROR  30 tests: could not be established: the facts hold no NCCL sweep {record}; "
        "test_busbw[all_reduce-256MiB, all_reduce-1GiB and 13 more], "
        "test_collective_correct[all_reduce-256MiB, all_reduce-1GiB and 13 more]",
        f"  ERROR  6 tests: could not be established: the facts hold no pairwise sweep {record}; "
        "test_pair_busbw[gpu0-gpu1, gpu0-gpu2 and 4 more]",
    ]
    # 22 skipped: what the profile asks nothing of (no NIC, CPU or NUMA affinity, no NVLS, no baseline,
    # no limit on corrected ECC errors)
    assert summary[-1] == "69 passed, 22 skipped, 249 errors in " + done.stdout.rsplit(" in ", 1)[1].strip("= \n")
    # each cause's message said once: pytest's own failure section and short summary would say every one of the 249 again
    assert done.stdout.count("could not be established: the facts hold no") == 8
    assert "short test summary" not in done.stdout and "= FAILURES =" not in done.stdout
    assert len(done.stdout.splitlines()) < 40
    # every test keeps its own line where one test is read: JUnit and results.json
    tests = {t.id: t for t in load_results(tmp_path / "results.json").tests}
    message = tests["test_pair_busbw[gpu2-gpu3]"].message
    assert message == f"could not be established: gpu2-gpu3: the facts hold no pairwise sweep {record}"


@pytest.mark.slow
def test_a_missing_gpu_is_named_before_the_links_and_pairs_it_fails(tmp_path):
    from tests.test_checks import without_gpu3

    three = tmp_path / "three.json"
    save_facts(mutated(example_facts("h200x4"), without_gpu3), three)
    done = gpu_accept("run", "--profile", "h200-4-nvswitch", "--facts", str(three), "--reports", str(tmp_path / "reports"),
                      "-q", "-p", "no:randomly", "-k", "not bandwidth and not ddp")
    assert done.returncode == 1, done.stdout + done.stderr
    summary = summary_of(done.stdout)
    failures = [line for line in summary if line.startswith(("  FAILED", "  ERROR"))]
    # the suites run alphabetically (nccl before topology): the summary goes by cause, the missing GPU first
    assert failures[0].startswith(
        "  FAILED test_gpu_count: vm: found 3 GPU(s), expected 4 (3 GPU(s) under test, CUDA_VISIBLE_DEVICES=0,1,2, "
        "4 in the machine; hidden by CUDA_VISIBLE_DEVICES: NVML GPU 3 (NVIDIA H200, bus "
    )
    # then every test of gpu3, which follows from it
    follow = summary[summary.index(failures[0]) + 1]
    assert follow.startswith("         and ") and " test(s) that follow from it: test_gpu_model[gpu3], " in follow
    assert "test_link_type[gpu0-gpu3, gpu1-gpu3 and 1 more]" in follow
    assert "test_p2p_capability[gpu0-gpu3, gpu1-gpu3 and 4 more], test_p2p_cuda_agrees[gpu0-gpu3, gpu1-gpu3 and 4 more]" in follow
    # what these facts lack of every GPU is a cause of its own, after it
    assert any("the facts hold no NCCL sweep" in line for line in failures[1:])
    # the HTML: the cause first, what follows from it under it, then the other causes
    page = (tmp_path / "reports" / "report.html").read_text()
    section = page[page.index("id='causes'"):page.index("id='coverage'")]
    caused = ("<b>test_gpu_count</b>", "<td>test_gpu_model[gpu3]</td>", "<td>test_link_type[gpu0-gpu3]</td>",
              "<td>test_p2p_capability[gpu0-gpu3]</td>", "<span>test_busbw[all_reduce-256MiB]</span>")
    order = [section.index(part) for part in caused]
    assert order == sorted(order)


def test_failures_of_a_real_run_come_by_layer():
    lines = summary_lines(load_results(NO_P2P).tests)
    failures = [line for line in lines if line.startswith("  FAILED")]
    # the run recorded its DDP tests first; NCCL is the layer below
    assert lines[0] == "25 test(s) did not pass, root causes first:"
    assert failures[0].startswith("  FAILED test_busbw[all_reduce-256MiB]: all_reduce 256 MiB: busbw 27.87 GB/s < 315 GB/s (")
    assert failures[15].startswith("  FAILED test_pair_busbw[gpu0-gpu1]: gpu0-gpu1: send/receive 22.9 GB/s < 261.2 GB/s (")
    assert failures[-1].startswith("  FAILED test_ddp_scaling[4gpu-bs8]: 4gpu-bs8: scaling efficiency 0.4981 < 0.8036 (")
    assert len(failures) == 25  # different values: no two share a cause


def test_a_test_that_raised_is_grouped_and_points_to_its_traceback():
    raised = [
        TestRecord(id=f"test_busbw[{case}]", nodeid=f"test_nccl.py::test_busbw[{case}]", outcome="error",
                   message="RuntimeError: NCCL stage could not start")
        for case in ("all_reduce-256MiB", "all_reduce-1GiB", "all_reduce-4GiB")
    ]
    assert summary_lines(raised) == [
        "not checked: nccl — 3 test(s) not judged",
        "3 test(s) did not pass, 1 cause(s), root causes first:",
        "  ERROR  3 tests: RuntimeError: NCCL stage could not start; test_busbw[all_reduce-256MiB, all_reduce-1GiB and 1 more]",
        "3 of them ended without a verdict (an exception in the suite or a fixture): run again with --tb=short for the traceback",
    ]


# -- transient and marginal values ---------------------------------------------------------------------


def flagged_run() -> RunRecord:
    document = load_results(HEALTHY)
    document = with_verdict(document, "test_busbw[all_reduce-1GiB]", transient=True, attempts=[301.2, 353.35])
    document = with_verdict(document, "test_p2p_copy[gpu0-gpu1]", transient=True, attempts=[310.0, 350.1, 394.97])
    return with_verdict(document, "test_pair_busbw[gpu2-gpu3]", marginal=True)


def test_transient_and_marginal_values_are_counted_in_the_summary():
    lines = summary_lines(flagged_run().tests)
    assert lines[0] == (
        "2 value(s) passed only when measured again (transient): test_p2p_copy[gpu0-gpu1] (attempts 310, 350.1, 395 GB/s), "
        "test_busbw[all_reduce-1GiB] (attempts 301.2, 353.4 GB/s)"
    )
    assert lines[1] == (
        "1 value(s) marginal, passed within the profile's marginal band of the limit: "
        "test_pair_busbw[gpu2-gpu3] (288.4 GB/s, expected >= 261.2 GB/s)"
    )
    # results.json of older runs has neither key: nothing to count, nothing to fail on
    assert not any("transient" in line or "marginal" in line for line in summary_lines(load_results(HEALTHY).tests))


def test_transient_and_marginal_values_are_counted_in_the_html_header():
    header = render_html(flagged_run()).split("<h2")[0]
    assert "<span id='count-transient' title='missed at first, passed when measured again'><b>2</b> transient</span>" in header
    assert "<b>1</b> marginal</span>" in header
    older = render_html(load_results(HEALTHY)).split("<h2")[0]
    assert "<b>0</b> transient</span>" in older and "<b>0</b> marginal</span>" in older


# -- fleet: every host against its profile --------------------------------------------------------------


def test_fleet_of_two_judges_each_host_against_its_profile(tmp_path, capsys):
    healthy = written(tmp_path, "vm1.json", on_host(load_results(HEALTHY), "vm1"))
    no_p2p = written(tmp_path, "vm2.json", on_host(load_results(NO_P2P), "vm2"))
    assert cli(["report", "fleet", healthy, no_p2p, "-o", str(tmp_path / "fleet.xml")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "profile h200-4-calibrated: 2 host(s), too few for a fleet median; each host judged against its profile only"
    assert lines[1].startswith(
        f"FAIL vm2 ({no_p2p}): 25 test(s) did not pass: test_busbw[all_reduce-256MiB]: all_reduce 256 MiB: busbw 27.87 GB/s < 315 GB/s ("
    )
    assert "; test_busbw[all_reduce-1GiB]: all_reduce 1 GiB: busbw 28.01 GB/s < 326.8 GB/s (" in lines[1]
    assert lines[1].endswith("(profile h200-4-calibrated); and 22 more")
    assert lines[2:] == ["2 host(s), 1 did not pass their profile, 0 value(s) more than 10% worse than the fleet median on 0 host(s)"]
    # the fleet JUnit carries the host's failures too
    from lxml import etree

    root = etree.parse(str(tmp_path / "fleet.xml")).getroot()
    assert root.get("tests") == "2" and root.get("failures") == "1"  # a test case per host
    failure = root.findall("testsuite/testcase/failure")[0]
    assert failure.get("message") == lines[1]  # the host's verdict, its first failures named


def test_a_hosts_latest_run_judges_it_whichever_came_first_on_the_command_line(tmp_path, capsys):
    """Both example runs are of host vm, the one without P2P three minutes later: one host, judged by that run;
    dated before the healthy run, it is history and the host passes."""
    assert cli(["report", "fleet", str(NO_P2P), str(HEALTHY)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "profile h200-4-calibrated: 1 host(s), too few for a fleet median; each host judged against its profile only"
    assert lines[1].startswith(f"FAIL vm ({NO_P2P}): 25 test(s) did not pass: ")
    assert lines[2] == "1 host(s), 1 did not pass their profile, 0 value(s) more than 10% worse than the fleet median on 0 host(s)"
    no_p2p = load_results(NO_P2P)
    a_day_before = no_p2p.run.model_copy(update={"started_at": "2026-11-20T06:55:46+00:00"})
    earlier = written(tmp_path, "earlier.json", no_p2p.model_copy(update={"run": a_day_before}))
    assert cli(["report", "fleet", str(HEALTHY), earlier]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("1 host(s), 0 did not pass their profile")


def test_fleet_of_healthy_hosts_passes_and_an_incomplete_run_fails(tmp_path, capsys):
    healthy = load_results(HEALTHY)
    assert cli(["report", "fleet", str(HEALTHY), written(tmp_path, "again.json", on_host(healthy, "vm2"))]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        "2 host(s), 0 did not pass their profile, 0 value(s) more than 10% worse than the fleet median on 0 host(s)"
    ]
    stopped = written(tmp_path, "stopped.json", on_host(healthy, "vm2").model_copy(update={"complete": False}))
    assert cli(["report", "fleet", str(HEALTHY), stopped]) == 1
    assert f"FAIL vm2 ({stopped}): run incomplete (stopped before its end)" in capsys.readouterr().out.splitlines()


def test_a_results_file_named_twice_is_one_host_of_the_fleet(tmp_path, capsys):
    link = tmp_path / "same.json"
    link.symlink_to(HEALTHY)
    copy = tmp_path / "copy.json"
    copy.write_bytes(HEALTHY.read_bytes())  # the same run in another file: one run
    assert cli(["report", "fleet", str(HEALTHY), str(HEALTHY), str(link), str(copy), "-o", str(tmp_path / "fleet.xml")]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[-1].startswith("1 host(s), 0 did not pass their profile")
    assert err.splitlines() == [
        f"gpu-accept: note: {HEALTHY} is {HEALTHY} again: read once", f"gpu-accept: note: {link} is {HEALTHY} again: read once"
    ]


@pytest.mark.slow
def test_a_results_file_given_through_a_pipe_is_read_whole():
    import subprocess
    import sys

    done = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m gpuaccept report fleet <(cat "{HEALTHY}")'], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("1 host(s), 0 did not pass their profile")


def test_fleet_fails_a_host_whose_run_could_not_judge(tmp_path, capsys):
    healthy = load_results(HEALTHY)
    for status, said in ((5, "no test was judged"), (2, "interrupted (a signal, or a burn-in cut short)")):
        unjudged = on_host(healthy, "vm2").model_copy(update={"run": healthy.run.model_copy(update={"exit_status": status})})
        path = written(tmp_path, f"status{status}.json", unjudged)
        assert cli(["report", "fleet", str(HEALTHY), path]) == 1
        assert f"FAIL vm2 ({path}): could not judge: {said} (exit status {status})" in capsys.readouterr().out.splitlines()


def test_fleet_reads_why_a_run_could_not_judge_from_its_recorded_verdict(tmp_path, capsys):
    healthy = load_results(HEALTHY)
    stopped = ["the burn-in was cut short by a signal: 3 round(s) in 4m10s of 2h00m00s"]
    # as the run decided and recorded it at its end: its verdict, and pytest's status made 2 beside it
    cut = on_host(healthy, "vm2")
    cut = cut.model_copy(update={"verdict": cut.judged(stopped), "run": cut.run.model_copy(update={"exit_status": 2})})
    assert cut.exit_code() == 2 and healthy.exit_code() == 0
    path = written(tmp_path, "cut.json", cut)
    assert cli(["report", "fleet", str(HEALTHY), path]) == 1
    assert f"FAIL vm2 ({path}): could not judge: {stopped[0]}" in capsys.readouterr().out.splitlines()
    # the same from a store, which keeps what the verdict said
    db = tmp_path / "fleet.duckdb"
    assert cli(["store", "add", "--db", str(db), str(HEALTHY), path]) == 0
    capsys.readouterr()
    assert cli(["report", "fleet", "--db", str(db)]) == 1
    assert f"FAIL vm2 ({path}): could not judge: {stopped[0]}" in capsys.readouterr().out.splitlines()


def test_fleet_lists_hosts_by_transient_count(tmp_path, capsys):
    healthy = load_results(HEALTHY)
    once = with_verdict(healthy, "test_busbw[all_reduce-1GiB]", transient=True, attempts=[301.2, 353.35])
    twice = with_verdict(once, "test_p2p_copy[gpu0-gpu1]", transient=True, attempts=[310.0, 394.97])
    runs = (("node1", healthy), ("node2", once), ("node3", twice))
    paths = [written(tmp_path, f"{name}.json", on_host(record, name)) for name, record in runs]
    assert cli(["report", "fleet", *paths]) == 0  # a transient is a pass: worth a look, not a failure
    assert capsys.readouterr().out.splitlines() == [
        "transient values by host (passed only when measured again; a server with many is worth a look):",
        f"  node3 ({paths[2]}): 2 transient: test_busbw[all_reduce-1GiB] (attempts 301.2, 353.4 GB/s), "
        "test_p2p_copy[gpu0-gpu1] (attempts 310, 395 GB/s)",
        f"  node2 ({paths[1]}): 1 transient: test_busbw[all_reduce-1GiB] (attempts 301.2, 353.4 GB/s)",
        "3 host(s), 0 did not pass their profile, 0 value(s) more than 10% worse than the fleet median on 0 host(s)",
    ]


def test_fleet_of_three_keeps_the_median_check(tmp_path, capsys):
    # still above its floor: passes its profile, not its fleet
    slow = with_verdict(load_results(HEALTHY), "test_pair_busbw[gpu1-gpu3]", measured=200.0)
    same = written(tmp_path, "same.json", on_host(load_results(HEALTHY), "vm2"))
    paths = [str(HEALTHY), same, written(tmp_path, "slow.json", on_host(slow, "vm3"))]
    assert cli(["report", "fleet", *paths]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "vm3: test_pair_busbw[gpu1-gpu3] 200 GB/s is 35% below the fleet median 305.9 GB/s (3 hosts)",
        "3 host(s), 0 did not pass their profile, 1 value(s) more than 10% worse than the fleet median on 1 host(s)",
    ]


def test_report_junit_writes_every_test_of_every_run(tmp_path, capsys):
    assert write_runs_junit(read_suites([str(HEALTHY), str(NO_P2P)], workers=1), tmp_path / "g.xml") == 206 + 25
    assert cli(["report", "junit", str(HEALTHY), str(NO_P2P), "-o", str(tmp_path / "h.xml")]) == 0
    assert capsys.readouterr().out == f"wrote {tmp_path / 'h.xml'}: 1 host(s), 2 run(s), 231 test cases\n"


# -- heat maps against the floors -------------------------------------------------------------------------


class Cells(HTMLParser):
    def __init__(self, table_id: str):
        super().__init__()
        self.table_id, self.inside, self.cells = table_id, False, []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.inside = attrs.get("id") == self.table_id
        elif tag == "td" and self.inside and attrs.get("class") == "heat":
            self.cells.append(attrs)

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False


def heat_cells(page: str, table_id: str) -> list[dict]:
    parser = Cells(table_id)
    parser.feed(page)
    return parser.cells


def background(cell: dict) -> str:
    return re.search(r"background:([^;]+)", cell["style"]).group(1)


def green_share(colour: str) -> float:
    """How far a passing cell's green is from the floor's (0) to the peak's (1)."""
    from gpuaccept.report.charts import PASS_AT_FLOOR, PASS_AT_PEAK

    red = int(re.match(r"rgb\((\d+),", colour).group(1))
    return (PASS_AT_FLOOR[0] - red) / (PASS_AT_FLOOR[0] - PASS_AT_PEAK[0])


def test_pair_cells_of_the_p2p_disabled_run_are_red_and_of_the_healthy_run_green():
    broken = heat_cells(render_html(load_results(NO_P2P)), "pair-matrix")
    assert len(broken) == 12 and {(c["data-verdict"], background(c)) for c in broken} == {("failed", FAIL)}
    healthy = heat_cells(render_html(load_results(HEALTHY)), "pair-matrix")
    assert len(healthy) == 12 and {c["data-verdict"] for c in healthy} == {"passed"}
    assert all(background(c).startswith("rgb(") for c in healthy)
    copies = heat_cells(render_html(load_results(HEALTHY)), "p2p-matrix")
    assert len(copies) == 16 and {c["data-verdict"] for c in copies} == {"passed"}  # the diagonal judged as local copies


def test_heat_cells_sit_between_their_floor_and_the_peak():
    document = load_results(HEALTHY)
    floor = AtLeast(261.2, "GB/s").model_dump()  # as runs record it now
    document = with_verdicts(document, lambda test: test.verdict is not None and test.verdict.check == "pair_busbw", criterion=floor)
    document = with_verdict(document, "test_pair_busbw[gpu0-gpu1]", marginal=True)
    document = with_verdict(document, "test_pair_busbw[gpu0-gpu2]", outcome="failed")
    document = document.with_tests([t for t in document.tests if t.id != "test_pair_busbw[gpu1-gpu3]"])
    cells = heat_cells(render_html(document), "pair-matrix")
    # row by row: gpu0-gpu1, gpu0-gpu2, gpu0-gpu3, gpu1-gpu0, ...; the matrix is symmetric
    state = {(row, column): cell for (row, column), cell in zip([(i, j) for i in range(4) for j in range(4) if i != j], cells, strict=True)}
    assert state[(0, 1)]["data-verdict"] == "marginal" and background(state[(0, 1)]) == MARGINAL
    assert state[(2, 0)]["data-verdict"] == "failed" and background(state[(2, 0)]) == FAIL
    assert state[(1, 3)]["data-verdict"] == "none" and background(state[(3, 1)]) == UNJUDGED
    # gpu2-gpu3 ran 288.35 GB/s against a floor of 261.2 and a 478.12 peak: light green, an eighth of the way
    share = green_share(background(state[(2, 3)]))
    assert abs(share - (288.35 - 261.2) / (478.12 - 261.2)) < 0.01
    assert state[(2, 3)]["title"] == "288.4 GB/s, passed (floor 261.2, peak 478.1)"


def test_heat_maps_carry_a_legend():
    page = render_html(load_results(HEALTHY))
    assert page.count("<div class='legend heat-legend'>") == 2  # pairs, copies
    legend = page[page.index("<div class='legend heat-legend'>"):].split("</div>")[0]
    legends = ("below the floor (failed)", "passed within the marginal band", "from the floor (light) to the physical peak (dark)",
               "no verdict")
    for text in legends:
        assert text in legend
