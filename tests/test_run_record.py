"""results.json as one typed record: its published schema, which real runs of every age and a fresh
run meet; verdicts exactly as the checks record them; a run written as it goes at a cost that grows
with its tests, not their square; and a killed run read back whole from its journal."""

from __future__ import annotations

import json
import tarfile
import time
from pathlib import Path

import jsonschema
import pytest

from gpuaccept.errors import InputFileError
from gpuaccept.facts.run_record import (
    JOURNAL_SUFFIX,
    FactsFile,
    LiveMachine,
    RunInfo,
    RunProfile,
    RunRecord,
    TestRecord,
    journal_of,
    load_results,
    results_json_schema,
)
from gpuaccept.facts.verdict import NoCriterion, Outcome, Verdict
from gpuaccept.report import junit as junit_writer
from gpuaccept.report import results as results_writer
from gpuaccept.report.results import ResultsWriter
from gpuaccept.resources import shipped_dir
from tests.helpers import EXAMPLES, ROOT, example_facts, results_data, run_record

SCHEMA = ROOT / "schemas" / "results.schema.json"
EXAMPLE_RESULTS = sorted((ROOT / "examples" / "results").glob("*.json"))
BENCH_RUNS = sorted((ROOT / "bench" / "runs").glob("*/*.tar.gz"))


def bench_results(folder: Path) -> list[Path]:
    """Every results.json kept in bench/runs' archives: runs of the releases before this record."""
    found = []
    for archive in BENCH_RUNS:
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                if Path(member.name).name == "results.json":  # a single-node run's (not cluster-/node-results.json)
                    target = folder / archive.name.removesuffix(".tar.gz") / member.name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(tar.extractfile(member).read())
                    found.append(target)
    return found


# -- the schema -------------------------------------------------------------------------------------------


def test_the_published_schema_is_current():
    assert json.loads(SCHEMA.read_text()) == results_json_schema(), "run: gpu-accept report schema > schemas/results.schema.json"


@pytest.mark.slow  # reads every run kept in bench/runs' archives
def test_real_results_of_every_age_read_and_meet_the_schema(tmp_path):
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    runs = EXAMPLE_RESULTS + bench_results(tmp_path)
    assert len(runs) >= 40
    for path in runs:
        record = load_results(path)
        assert record.summary.total == len(record.tests)
        # a run judged live, or a replay of facts a live run recorded (the derived-profile runs judge
        # each recorded fault again by --profile auto): never a record that names no machine
        source = record.run.facts_source
        assert record.run.live or isinstance(source, FactsFile), f"{path}: {source}"
    # the schema describes what is written now: older files meet it once read (a step failure
    # recorded before failures named their keys gains them in the reader); on the examples and on
    # one run of each archive (each file takes a while)
    first_of_each = (next((p for p in runs if archive.name.removesuffix(".tar.gz") in p.parts), None) for archive in BENCH_RUNS)
    checked = EXAMPLE_RESULTS + [path for path in first_of_each if path is not None]
    for path in checked:
        as_read = load_results(path).model_dump(mode="json", by_alias=True)
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(as_read)]
        assert not errors, f"{path}: {errors[:3]}"


def test_a_fresh_run_meets_the_schema(pytester, tmp_path):
    suites = shipped_dir("suites")
    results = tmp_path / "results.json"
    pytester.runpytest(
        str(suites), "-c", str(suites / "pytest.ini"), "--rootdir", str(suites), "--profile", "h200-4-nvswitch",
        "--facts", str(EXAMPLES / "h200x4-measured.json"), "--results", str(results), "-k", "inventory or busbw",
    )
    document = json.loads(results.read_text())
    jsonschema.validate(document, json.loads(SCHEMA.read_text()))
    record = load_results(results)
    assert record.complete and record.run.exit_status == 0
    assert record.run.facts_source == FactsFile(path=str(EXAMPLES / "h200x4-measured.json"))
    assert document["run"]["facts_source"] == str(EXAMPLES / "h200x4-measured.json")  # as files always said it
    busbw = next(t for t in record.tests if t.id == "test_busbw[all_reduce-1GiB]").verdict
    assert busbw.criterion.op == ">=" and busbw.better == "higher" and busbw.limit == 326.0 and busbw.context["peak_GBps"] > 0


# -- the record ------------------------------------------------------------------------------------------


def test_every_verdict_the_checks_give_is_recorded_exactly():
    from tests.verdicts import CATALOG, SUBJECTS

    count = 0
    for path in sorted(EXAMPLES.glob("*-measured.json")):
        facts = example_facts(path.stem)
        for profile in CATALOG.load_all():
            for subjects, checks in SUBJECTS:
                for check in checks:
                    for subject in subjects(profile):
                        verdict = check(profile, facts) if subject is None else check(profile, facts, subject)
                        as_data = json.loads(json.dumps(verdict.as_data()))
                        assert Verdict.from_data(verdict.as_data()).as_data() == as_data
                        assert Verdict.from_data(as_data).criterion == verdict.criterion
                        count += 1
    assert count > 3000


def test_an_older_verdict_reads_with_what_it_did_not_record():
    data = results_data(EXAMPLE_RESULTS[0])
    assert "criterion" not in data["tests"][0]["verdict"] and "chosen_because" not in data["run"]["profile"]
    data["summary"] = {"passed": 1}  # a summary that does not add up: the tests decide
    record = run_record(data)
    verdict = record.tests[0].verdict
    assert verdict.criterion == NoCriterion() and verdict.better is None and verdict.attempts == [] and not verdict.transient
    # its limit read from the rule it wrote as text (">= 0.6653"), so that its charts still draw the floor
    assert verdict.expected == ">= 0.6653" and verdict.limit == 0.6653 and record.run.profile.chosen_because == ""
    assert verdict.area == "" and verdict.gpus == [] and verdict.root is None and not verdict.headline
    assert record.summary.total == len(record.tests) and record.summary.passed == sum(t.outcome == "passed" for t in record.tests)


@pytest.mark.parametrize(
    "change, expected",
    [
        (
            lambda d: d["tests"][3].update(outcome="ok"),
            "{path}: tests[3].outcome: Input should be 'passed', 'failed', 'error' or 'skipped' (got 'ok')",
        ),
        (lambda d: d["run"].pop("profile"), "{path}: run.profile: required key is missing"),
        (
            lambda d: d["tests"][0]["verdict"].update(colour="red"),
            "{path}: tests[0].verdict.colour: Extra inputs are not permitted (got 'red')",
        ),
        (lambda d: d.update(version=2), "{path}: version: results version 2 is not 1"),
        (
            lambda d: d["facts"]["cuda"].update(device_count="x" * 1000),  # one line, the input cut, no union branches
            "{path}: facts.cuda.device_count: Input should be a valid integer (got '" + "x" * 56 + "...)",
        ),
    ],
    ids=["outcome", "missing", "unknown-key", "version", "wrong-kind-in-the-facts"],
)
def test_a_results_file_that_does_not_fit_is_one_line_naming_the_key(tmp_path, change, expected):
    data = results_data(EXAMPLE_RESULTS[0])
    change(data)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputFileError) as caught:
        load_results(path)
    assert caught.value.lines() == [expected.format(path=path)]


def test_facts_source_is_live_or_a_file_also_one_named_live(tmp_path):
    record = load_results(EXAMPLE_RESULTS[0])
    assert record.run.facts_source == LiveMachine() and str(record.run.facts_source) == "live"
    named_live = record.model_copy(update={"run": record.run.model_copy(update={"facts_source": FactsFile(path="live")})})
    path = tmp_path / "results.json"
    path.write_text(named_live.to_json())
    assert json.loads(path.read_text())["run"]["facts_source"] == "./live"
    assert load_results(path).run.facts_source == FactsFile(path="./live")


# -- writing a run as it goes ----------------------------------------------------------------------------


def started(facts_name: str = "h200x4-measured") -> RunRecord:
    facts = example_facts(facts_name)
    run = RunInfo(
        started_at="2026-11-23T10:00:00+00:00", tool_version="0.1.0", command=["gpu-accept", "run"], facts_source=LiveMachine(),
        profile=RunProfile(name="h200-4-nvswitch", path="profiles/h200-4-nvswitch.yaml", sha256="0" * 64),
    )
    return RunRecord.started(run, facts)


def a_test(index: int) -> TestRecord:
    subject = f"gpu{index % 4}-gpu{(index + 1) % 4}"
    verdict = {
        "check": "p2p_copy", "subject": subject, "outcome": "failed" if index % 7 == 0 else "passed", "measured": 390.0 + index % 10,
        "expected": ">= 366 GB/s", "criterion": {"op": ">=", "limit": 366.0, "unit": "GB/s"}, "better": "higher", "unit": "GB/s",
        "marginal": False, "attempts": [], "transient": False, "final": False, "message": f"{subject}: p2p 390 GB/s (profile p)",
        "profile": "p", "context": {"peak_GBps": 478.12},
    }
    return TestRecord(
        id=f"test_p2p_copy[{index}]", nodeid=f"test_bandwidth.py::test_p2p_copy[{index}]", outcome=verdict["outcome"],
        duration_s=0.0002, message="" if verdict["outcome"] == "passed" else verdict["message"], verdict=Verdict.from_data(verdict),
    )


def bytes_written_for(tests: int, folder: Path, monkeypatch) -> tuple[int, int, int]:
    """(bytes written, files rewritten, bytes of the files at the end) for a run of `tests` tests."""
    written = {"bytes": 0, "rewrites": 0}
    rewrite, append = results_writer.write_atomically, results_writer._append

    def counted_rewrite(path, text):
        written["bytes"] += len(text.encode("utf-8"))
        written["rewrites"] += 1
        rewrite(path, text)

    def counted_append(journal, line):
        written["bytes"] += len(line.encode("utf-8"))
        append(journal, line)

    monkeypatch.setattr(results_writer, "write_atomically", counted_rewrite)
    monkeypatch.setattr(junit_writer, "write_atomically", counted_rewrite)
    monkeypatch.setattr(results_writer, "_append", counted_append)
    writer = ResultsWriter(started("h200x1"), folder / "results.json", [folder / "junit.xml"], idle_s=None)
    for index in range(tests):
        writer.add_test(a_test(index))
    writer.finish(0)
    final = (folder / "results.json").stat().st_size + (folder / "junit.xml").stat().st_size
    return written["bytes"], written["rewrites"], final


def test_writing_n_tests_costs_bytes_in_proportion_to_n(tmp_path, monkeypatch):
    small = bytes_written_for(250, tmp_path / "small", monkeypatch)
    large = bytes_written_for(2000, tmp_path / "large", monkeypatch)
    # every byte written is a journal line or a rewrite no larger than the journal since the last:
    # at most a few times what the files hold at the end, whatever the number of tests
    for written, _, final in (small, large):
        assert written < 5 * final
    # the bytes per test stay the same with eight times the tests (rewriting results.json after every
    # test, as before, they grew eightfold: 2000 tests wrote over a gigabyte for a 2.4 MB file)
    assert large[0] / 2000 < 1.25 * small[0] / 250
    assert large[1] < 2 * small[1]  # rewrites grow with the logarithm of the tests


def test_a_killed_run_is_read_whole_from_its_journal(tmp_path):
    results = tmp_path / "results.json"
    writer = ResultsWriter(started("h200x1"), results, [tmp_path / "junit.xml"], idle_s=None)
    for index in range(40):
        writer.add_test(a_test(index))
    # killed here: never finished. The file alone holds what its last rewrite held; with the journal, every test
    on_disk = json.loads(results.read_text())
    assert on_disk["complete"] is False and len(on_disk["tests"]) < 40
    record = load_results(results)
    assert not record.complete and [t.id for t in record.tests] == [a_test(i).id for i in range(40)]
    assert record.summary.total == 40 and record.summary.failed == 6
    # a line cut by the kill is left out; a line the last rewrite holds already is kept once
    journal = journal_of(results)
    assert journal.name == "results.json" + JOURNAL_SUFFIX
    first = json.dumps({"test": on_disk["tests"][0]}) + "\n"
    journal.write_text(journal.read_text() + first + '{"test": {"id": "test_cut')
    assert [t.id for t in load_results(results).tests] == [t.id for t in record.tests]
    # a journal of another run (a run started here and killed at once) is not this one's
    other = json.loads(journal.read_text().splitlines()[0])
    other["run"]["started_at"] = "2026-11-23T11:00:00+00:00"
    journal.write_text(json.dumps(other) + "\n" + journal.read_text().split("\n", 1)[1])
    assert len(load_results(results).tests) == len(on_disk["tests"])
    # a damaged line inside the journal is named
    journal.write_text('{"test": {"id": 7}}\n')
    with pytest.raises(InputFileError, match=rf"^{journal}:1: test.id: Input should be a valid string"):
        load_results(results)


def test_the_journal_holds_the_facts_as_the_stages_measure(tmp_path):
    results = tmp_path / "results.json"
    probed = example_facts("h200x4")
    writer = ResultsWriter(started("h200x4").with_facts(probed), results, idle_s=None)
    writer.add_test(a_test(0), probed)
    measured = example_facts("h200x4-measured")
    writer.add_test(a_test(1), measured)  # a stage has measured since
    record = load_results(results)
    assert record.facts == measured and record.environment.nccl == "2.28.9"
    writer.finish(1, measured)
    assert not journal_of(results).exists() and load_results(results).complete


def test_the_end_of_a_run_never_waits_on_a_wake_up_that_a_signal_took(tmp_path, monkeypatch):
    # SIGTERM arrives as a KeyboardInterrupt anywhere in the main thread: a notify can go unsent and
    # a lock stay held (a `with` block's __exit__ skipped). The writer's thread still ends, and the
    # end writes the whole record.
    monkeypatch.setattr(ResultsWriter, "END_WAIT_S", 0.5)
    results = tmp_path / "results.json"
    writer = ResultsWriter(started(), results, idle_s=60)
    writer.add_test(a_test(0))
    monkeypatch.setattr(writer._changed, "notify", lambda n=1: None)  # the wake-up the signal took
    began = time.monotonic()
    writer.finish(1)
    assert time.monotonic() - began < 10
    assert load_results(results).complete and len(load_results(results).tests) == 1

    held = ResultsWriter(started(), tmp_path / "held.json", idle_s=0.01)
    held.add_test(a_test(0))
    held._changed.acquire()  # left held by the main thread, as a skipped __exit__ leaves it
    try:
        time.sleep(0.05)  # the thread woke for the test and waits for the lock
        began = time.monotonic()
        held.finish(1)
        assert time.monotonic() - began < 10
    finally:
        held._changed.release()
    assert load_results(tmp_path / "held.json").complete


def test_a_quiet_run_has_its_tests_in_results_and_junit_within_the_idle_time(tmp_path):
    results, junit = tmp_path / "results.json", tmp_path / "junit.xml"
    writer = ResultsWriter(started(), results, [junit], idle_s=0.05)
    try:
        for index in range(3):  # too few for a rewrite by size: the journal alone holds them
            writer.add_test(a_test(index))
        # the idle flush writes results.json, then junit.xml: wait for both (a loaded machine may be
        # read between the two)
        def flushed() -> bool:
            return (
                results.exists() and len(json.loads(results.read_text())["tests"]) == 3
                and junit.exists() and junit.read_text().count("<testcase ") == 3
            )

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not flushed():
            time.sleep(0.02)
        assert len(json.loads(results.read_text())["tests"]) == 3
        assert junit.read_text().count("<testcase ") == 3
    finally:
        writer.finish(1)


def test_a_new_run_does_not_take_in_the_journal_a_killed_one_left(tmp_path):
    results = tmp_path / "results.json"
    killed = ResultsWriter(started(), results, idle_s=None)
    for index in range(5):
        killed.add_test(a_test(index))
    ResultsWriter(started().model_copy(update={"run": started().run.model_copy(update={"started_at": "2026-11-23T12:00:00+00:00"})}),
                  results, idle_s=None)
    assert load_results(results).tests == []


@pytest.mark.parametrize(
    "evidence",
    [
        {"peak_GBps": 478.12, "ranks": 4, "note": "x", "ok": True, "none": None, "rounds": [1, 2, [3]]},
        {"pairs": (0, 1), "nested": {"t": ((1, 2), (3, 4))}},  # tuples: lists in the file
        {"by_gpu": {0: 1.5, 1: 2.5}, "flags": {True: 1, None: 2}},  # keys that are not text: text in the file
        {"path": Path("/x/y"), "outcome": Outcome.PASSED, "nan": float("nan")},  # objects as their text; an enum as its value
    ],
    ids=["plain", "tuples", "keys", "objects"],
)
def test_a_verdicts_evidence_is_held_as_the_file_will_read_it_back(evidence):
    from gpuaccept.facts.verdict import _as_json

    held = _as_json(evidence)
    read_back = json.loads(json.dumps(evidence, default=str))
    assert json.dumps(held, sort_keys=True) == json.dumps(read_back, sort_keys=True)
    assert repr(held) == repr(read_back)  # the same types too: no tuple, no enum left


def test_a_complete_results_file_is_read_without_its_journal(tmp_path, monkeypatch):
    # a finished run holds every test in its file: a journal beside it (2 GB of it, left by a crash of
    # another tool, or planted) is not read, whatever it holds
    import gpuaccept.facts.run_record as run_record

    results = tmp_path / "results.json"
    results.write_text((ROOT / "examples" / "results" / "h200x4.json").read_text(encoding="utf-8"), encoding="utf-8")
    journal = journal_of(results)
    with open(journal, "wb") as planted:
        planted.truncate(2 << 30)  # sparse: two gigabytes that take no disk
    read = []
    monkeypatch.setattr(run_record, "read_input_text", lambda path, *a: read.append(Path(path)) or Path(path).read_text())
    record = load_results(results)
    assert record.complete and len(record.tests) == 206 and read == [results]


def test_results_json_is_written_last_with_a_verdict_that_names_every_report_not_written(tmp_path):
    results, junit = tmp_path / "results.json", tmp_path / "junit.xml"
    junit.mkdir()  # a folder where the JUnit file goes: it cannot be written
    writer = ResultsWriter(started("h200x1"), results, [junit], idle_s=None)
    writer.add_test(TestRecord(id="test_gpu_count", nodeid="test_inventory.py::test_gpu_count", outcome="passed"))
    record = writer.finish(0, other_reports=lambda record: ["report.html: cannot write it (No space left on device)"])
    verdict = record.verdict
    assert verdict is not None and verdict.exit_code == 2 and verdict.failed == [] and verdict.not_judged == []
    assert verdict.stopped[0] == "report not written: report.html: cannot write it (No space left on device)"
    assert verdict.stopped[1].startswith(f"report not written: {junit}: ") and len(verdict.stopped) == 2
    assert load_results(results).verdict == verdict  # what the run exits with is what it recorded
    # pytest saw a pass: recorded as pytest records an interrupted run, never read as a pass by older readers
    assert record.run.exit_status == 2 and writer.write_errors == [line.removeprefix("report not written: ") for line in verdict.stopped]
