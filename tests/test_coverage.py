"""Nothing unchecked looks healthy: facts that lack what the profile asks for could not judge it (one
rule, outcomes.py), every view says by area what was not checked, and causes come first: a GPU that
is missing or that someone else's process loads is named as the cause of what it fails.

Judged on a real 2xH200 recording (tests/data/facts/h200x2-health-measured.json) with a competing
GEMM load written into it as a lent machine showed one (FIELD-NOTES: busbw about half, gpu2's local
copy 844 of 2128 GB/s, DDP 0.39), and on the 4xH200 facts with a GPU taken away."""

from __future__ import annotations

import functools
import json
import xml.etree.ElementTree as ET

import pytest

from gpuaccept.checks.declare import declared_checks
from gpuaccept.checks.verdict import Outcome
from gpuaccept.facts import Facts, parse_facts
from gpuaccept.facts.coverage import coverage, root_causes
from gpuaccept.facts.run_record import RunRecord, TestRecord, load_results
from gpuaccept.outcomes import outcome_of_missing
from gpuaccept.profile import Profile, ProfileCatalog
from gpuaccept.report.html import render_html
from gpuaccept.report.junit import junit_xml, suite
from gpuaccept.report.metrics import render_metrics
from gpuaccept.report.slurm import drain_reason
from gpuaccept.report.summary import summary_lines
from gpuaccept.vocabulary.areas import AREAS
from tests.helpers import DATA, ROOT, example_facts, mutated, older_example_facts
from tests.verdicts import SUBJECTS

CATALOG = ProfileCatalog.with_shipped()
H200X2 = CATALOG.load("h200-2-nvswitch")
RECORDED = json.loads((DATA / "facts" / "h200x2-health-measured.json").read_text(encoding="utf-8"))
NOT_RECORDED = ("telemetry", "burn-in")  # that recording predates the telemetry and was no burn-in


def judged_tests(profile: Profile, facts: Facts, areas_left_out: tuple[str, ...] = NOT_RECORDED) -> list[TestRecord]:
    """Every suite test these facts give, as a run records it."""
    found = []
    for subjects, checks in SUBJECTS:
        for check in checks:
            if check.declaration.area in areas_left_out:
                continue
            for subject in subjects(profile):
                verdict = check(profile, facts) if subject is None else check(profile, facts, subject)
                test_id = check.declaration.test_id(subject)
                outcome = {"passed": "passed", "failed": "failed", "error": "error", "not_applicable": "skipped"}[verdict.outcome.value]
                found.append(TestRecord(
                    id=test_id, nodeid=f"test_{check.declaration.module}.py::{test_id}", outcome=outcome,
                    message="" if outcome == "passed" else verdict.message, verdict=verdict,
                ))
    return found


@functools.cache
def a_run() -> RunRecord:
    """A finished run's record, its tests and facts to be replaced."""
    return load_results(ROOT / "examples" / "results" / "h200x4.json")


def record_of(tests: list[TestRecord], facts: Facts) -> RunRecord:
    return a_run().with_facts(facts).with_tests(tests)


def gemm_load_on_gpu1(data: dict) -> None:
    """What a competing GEMM process on gpu1 does to a 2xH200 run: there at the start, its GPU's own
    loads and copies slowed, every collective and the DDP setting on both GPUs slowed."""
    start = next(s for s in data["health"]["snapshots"] if s["gpu"] == 1 and s["label"] == "start")
    start["compute_processes"] = [{"pid": 7684, "used_memory_bytes": 2**33, "name": "python3 scripts/gemm_load.py --gpu 1"}]
    measured = data["measurements"]

    def slowed(result: dict, share: float, *values: str) -> None:
        for key in ("time_us", "step_s", "no_sync_step_s"):
            if result.get(key) is not None:
                result[key] /= share
        for key in values:
            if key in result:
                result[key] *= share

    for result in measured["collectives"]["results"] + measured["pairwise"]["results"]:
        slowed(result, 0.55, "busbw_GBps", "algbw_GBps")
    for result in measured["copies"]["results"]:
        if 1 in result["gpus"]:
            slowed(result, 0.4, "GBps")
    for result in measured["compute"]["results"]:
        if result["gpu"] == 1:
            slowed(result, 0.4, "tflops", "GBps")
    for result in measured["ddp"]["results"]:
        if result["world"] == 2:
            slowed(result, 0.45, "samples_per_s_per_gpu", "tokens_per_s_per_gpu")


# -- the one rule ----------------------------------------------------------------------------------------


def test_the_rule_is_one_rule_a_skip_only_for_what_the_profile_does_not_ask():
    assert outcome_of_missing(asked=True) is Outcome.ERROR and outcome_of_missing(asked=False) is Outcome.NOT_APPLICABLE
    # the 4xH200 facts recorded before health readings, per-GPU loads and telemetry: every check of what
    # they lack could not judge, named by what is missing; what the profile asks nothing of is skipped
    facts = older_example_facts("h200x4-measured")
    profile = CATALOG.load("h200-4-nvswitch")
    tests = judged_tests(profile, facts, areas_left_out=("burn-in",))
    lacking = {t.verdict.missing for t in tests if t.outcome == "error" and t.verdict is not None}
    assert lacking == {
        "the facts hold no health readings", "the facts hold no kernel log reading", "the facts hold no per-GPU loads",
        "the facts hold no telemetry",
    }
    skipped = {t.message.split(": ", 1)[1] for t in tests if t.outcome == "skipped"}
    assert all("the profile" in why for why in skipped), skipped


# -- coverage by area --------------------------------------------------------------------------------------


def test_coverage_names_each_area_not_checked_and_why():
    facts = older_example_facts("h200x4-measured")  # recorded before health readings, per-GPU loads and telemetry
    tests = judged_tests(CATALOG.load("h200-4-nvswitch"), facts, areas_left_out=("burn-in",))
    areas = {area.area: area for area in coverage(tests)}
    assert list(areas) == [area for area in AREAS if area in areas]  # in area order
    assert areas["compute"].state == "not checked" and areas["compute"].why == ["the facts hold no per-GPU loads"]
    assert areas["compute"].line() == "not checked: compute — the facts hold no per-GPU loads (24 test(s) not judged)"
    assert areas["nccl"].state == "checked" and areas["nccl"].line() == ""
    # vbios_consistent reads the inventory: health is partly checked, never healthy
    assert areas["health"].state == "partly checked" and areas["health"].judged == 4
    left_out = coverage([t for t in tests if t.verdict is not None and t.verdict.area != "compute"], {"compute": 24})
    assert {a.area: a for a in left_out}["compute"].line() == "not checked: compute — not selected (-k, -m or test ids): 24 test(s)"


def test_every_view_of_a_run_says_what_it_did_not_check():
    facts = older_example_facts("h200x4-measured")  # recorded before health readings, per-GPU loads and telemetry
    record = record_of(judged_tests(CATALOG.load("h200-4-nvswitch"), facts, areas_left_out=("burn-in",)), facts)
    assert record.exit_code() == 2
    lines = summary_lines(record.tests)
    assert "not checked: telemetry — the facts hold no telemetry (12 test(s) not judged)" in lines
    page = render_html(record)
    assert "COULD NOT JUDGE: 180 test(s) could not judge, none failed; not checked: health, compute, telemetry" in page
    assert "<li>not checked: compute — the facts hold no per-GPU loads (24 test(s) not judged)</li>" in page
    assert "id='coverage'" in page and "PASS" not in page.split("id='status'")[1].split("</div>")[0]
    properties = {p.get("name"): p.get("value") for p in ET.fromstring(junit_xml([suite(record)], "x")).iter("property")}
    assert properties["coverage.telemetry"] == "not checked: 0 passed, 0 failed, 12 not judged, 0 skipped (the facts hold no telemetry)"
    metrics = render_metrics([record])
    run = 'command="fleet",host="vm"'
    assert f'gpu_accept_area_checked{{area="compute",{run},profile="h200-4-calibrated"}} 0' in metrics
    assert f'gpu_accept_area_checked{{area="nccl",{run},profile="h200-4-calibrated"}} 1' in metrics
    assert f'gpu_accept_area_tests{{area="compute",{run},outcome="error",profile="h200-4-calibrated"}} 24' in metrics
    # the run's verdict record, which every integration reads, names the areas not checked
    assert "not checked: compute — the facts hold no per-GPU loads (24 test(s) not judged)" in record.judged().not_checked
    # results.json holds the coverage as data, read back as written
    again = RunRecord.model_validate_json(record.to_json())
    assert again.coverage == record.coverage and [a.state for a in again.coverage if a.area == "compute"] == ["not checked"]


# -- causes first ----------------------------------------------------------------------------------------


def test_a_competing_load_on_one_gpu_is_named_the_cause_of_what_it_slowed():
    facts = parse_facts(json.dumps(mutated(parse_facts(json.dumps(RECORDED), "r"), gemm_load_on_gpu1).model_dump(mode="json")), "x")
    tests = judged_tests(H200X2, facts)
    failed = {t.id for t in tests if t.outcome == "failed"}
    assert "test_no_other_compute_process[gpu1]" in failed and "test_local_copy[gpu0]" not in failed
    groups = root_causes(tests)
    root = groups[0]
    assert root.root == "test_no_other_compute_process[gpu1]" and root.outcome == "failed"
    # everything that failed follows from it: its GPU's loads and copies, every collective, DDP
    assert set(root.followers) == failed - {root.root}
    assert {"test_gemm_throughput[gpu1]", "test_hbm_copy[gpu1]", "test_local_copy[gpu1]", "test_p2p_copy[gpu0-gpu1]",
            "test_busbw[all_reduce-256MiB]", "test_pair_busbw[gpu0-gpu1]", "test_ddp_scaling[2gpu-bs8]"} <= set(root.followers)
    assert len(groups) == 1
    record = record_of(tests, facts)
    assert record.causes == groups
    # the terminal: the root, then what follows from it in one line
    lines = summary_lines(tests)
    at = next(i for i, line in enumerate(lines) if line.startswith("  FAILED test_no_other_compute_process[gpu1]: "))
    assert lines[at + 1].startswith(f"         and {len(root.followers)} test(s) that follow from it: test_")
    # JUnit: each follower names its cause
    cases = {case.get("name"): case for case in ET.fromstring(junit_xml([suite(record)], "x")).iter("testcase")}
    cause = {p.get("name"): p.get("value") for p in cases["test_busbw[all_reduce-1GiB]"].iter("property")}["cause"]
    assert cause == "test_no_other_compute_process[gpu1]"
    assert {p.get("name"): p.get("value") for p in cases["test_no_other_compute_process[gpu1]"].iter("property")}["cause"] == ""
    # the drain reason names the root cause first
    assert drain_reason(record.judged()).startswith("test_no_other_compute_process[gpu1] test_busbw[")
    assert record.judged().failed[0] == "test_no_other_compute_process[gpu1]"
    # the HTML: the cause first, its followers under it
    page = render_html(record)
    section = page[page.index("id='causes'"):page.index("id='coverage'")]
    assert section.index("<b>test_no_other_compute_process[gpu1]</b>") < section.index("<td>test_busbw[all_reduce-256MiB]</td>")
    assert f"{len(root.followers)} test(s) follow from it" in section


def test_a_missing_gpu_is_the_cause_of_every_check_of_it():
    from tests.test_checks import without_gpu3

    three = mutated(example_facts("h200x4"), without_gpu3)
    tests = judged_tests(CATALOG.load("h200-4-nvswitch"), three, areas_left_out=("burn-in",))
    groups = root_causes(tests)
    assert groups[0].root == "test_gpu_count"
    gpu_count = next(t for t in tests if t.id == "test_gpu_count")
    assert gpu_count.verdict is not None and gpu_count.verdict.gpus == [3] and gpu_count.verdict.root == "absent_gpus"
    followers = set(groups[0].followers)
    assert {"test_gpu_model[gpu3]", "test_link_type[gpu0-gpu3]", "test_p2p_capability[gpu3-gpu0]", "test_row_remapping[gpu3]",
            "test_gemm_throughput[gpu3]", "test_clock_slowdown[gpu3]"} <= followers
    # every check of gpu3 follows from it, and no check of the GPUs that are there; what these facts lack
    # of every GPU (no NCCL sweep, no pairwise sweep) would be lacking with gpu3 there too: its own cause
    of_gpu3 = {t.id for t in tests if t.did_not_pass and t.verdict is not None and 3 in t.verdict.gpus} - {"test_gpu_count"}
    lacking = {
        t.id for t in tests if t.verdict is not None and t.verdict.missing.startswith("the facts hold no") and t.verdict.gpus != [3]
    }
    assert followers == of_gpu3 - lacking and "test_busbw[all_reduce-1GiB]" in of_gpu3 & lacking
    sweep = next(group for group in groups if "test_busbw[all_reduce-1GiB]" in group.tests)
    assert sweep.root is None and sweep.text.startswith("the facts hold no NCCL sweep")
    # its health tests could not judge (the GPU is not there to read), their cause named: never skipped
    absent = next(t for t in tests if t.id == "test_row_remapping[gpu3]")
    assert absent.outcome == "error" and absent.verdict is not None and absent.verdict.missing == "gpu3 is not present"


# -- declarations carry what writers need ------------------------------------------------------------


@pytest.mark.parametrize("declared", declared_checks(), ids=lambda declared: declared.declaration.name)
def test_every_declared_check_is_in_every_writers_view(declared):
    """A verdict of each declared check carries its area, so that coverage, the causes and the writers
    place it: a check whose area no writer knows, or that coverage leaves out, fails here."""
    declaration = declared.declaration
    assert declaration.area in AREAS
    profile = CATALOG.load("h200-4-nvswitch")
    subjects = declaration.subjects.of(profile) or [None]
    facts = example_facts("h200x4-measured")
    subject = subjects[0]
    if declaration.subjects.fixture == "burnin_case" or declaration.name == "no_regression":
        # judged over a burn-in's rounds or against a baseline, neither of which these facts hold:
        # its verdict as the declaration makes it of any the check gives
        verdict = declared.declared(declared.judge(profile).error("x", "not judged"), profile, subject)
    else:
        verdict = declared(profile, facts) if subject is None else declared(profile, facts, subject)
    assert verdict.area == declaration.area and verdict.headline == declaration.headline
    test_id = declaration.test_id(subject)
    test = TestRecord(id=test_id, nodeid=f"test_x.py::{test_id}", outcome="error", message=verdict.message,
                      verdict=verdict.model_copy(update={"outcome": Outcome.ERROR}))
    # coverage, the terminal, JUnit and the HTML all place it in its area
    assert [area.area for area in coverage([test])] == [declaration.area]
    assert any(line.startswith(f"not checked: {declaration.area} — ") for line in summary_lines([test]))
    record = record_of([test], example_facts("h200x4"))  # facts without measurements: a page without charts
    assert f'name="coverage.{declaration.area}"' in junit_xml([suite(record)], "x")
    assert f"<td>{declaration.area}</td>" in render_html(record)
