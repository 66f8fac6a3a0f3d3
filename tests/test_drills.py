"""The fault drills: read once from the environment into one record, carried in the plan, kept in
the facts' environment (docs/drills.md)."""

import pytest

from gpuaccept.errors import GpuAcceptError
from gpuaccept.measure.drills import NO_DRILLS, Drills, names_gpu
from gpuaccept.measure.plan import CollectiveStep, Plan
from tests.helpers import example_facts

EVERY_DRILL = {
    "GPUACCEPT_INJECT_HANG": "all_gather 64 KiB",
    "GPUACCEPT_INJECT_WRONG": "collective/all_reduce/1GiB",
    "GPUACCEPT_INJECT_DIP": "all_reduce 1 GiB",
    "GPUACCEPT_INJECT_SLOW": "0.5",
    "GPUACCEPT_INJECT_SLOW_GEMM": "gpu1",
    "GPUACCEPT_INJECT_CORRUPT_GEMM": "gpu2, gpu3",
    "GPUACCEPT_INJECT_MEMTEST_FLIP": "gpu3",
}


def test_every_drill_variable_is_read_into_the_record_and_given_back_as_the_environment_records_it():
    drills = Drills.from_environment({**EVERY_DRILL, "NCCL_DEBUG": "INFO"})
    assert drills.hang == "all_gather 64 KiB" and drills.slow_s == 0.5 and drills.corrupt_gemm == ("gpu2", "gpu3")
    assert drills.environment() == {**EVERY_DRILL, "GPUACCEPT_INJECT_CORRUPT_GEMM": "gpu2,gpu3"}
    assert names_gpu(drills.corrupt_gemm, 3) and not names_gpu(drills.corrupt_gemm, 1)


def test_no_variable_no_drill_and_nothing_recorded():
    drills = Drills.from_environment({"GPUACCEPT_INJECT_HANG": "", "PATH": "/bin"})
    assert drills == NO_DRILLS and drills.environment() == {}
    facts = example_facts("h200x4")
    assert drills.recorded_in(facts) is facts


def test_a_drill_is_kept_in_the_facts_environment_beside_what_the_probe_saw():
    facts = example_facts("h200x4")
    recorded = Drills.from_environment({"GPUACCEPT_INJECT_SLOW_GEMM": "gpu1"}).recorded_in(facts)
    assert recorded.environment == dict(sorted({**facts.environment, "GPUACCEPT_INJECT_SLOW_GEMM": "gpu1"}.items()))


def test_a_dip_is_in_the_first_attempt_only():
    drills = Drills.from_environment(EVERY_DRILL)
    assert drills.for_attempt(0) == drills
    again = drills.for_attempt(1)
    assert again.dip is None and again.model_copy(update={"dip": drills.dip}) == drills


def test_the_plan_carries_the_drills_to_the_workers_as_json():
    step = CollectiveStep(collective="all_reduce", size_bytes=1 << 30)
    plan = Plan(steps=[step], drills=Drills.from_environment(EVERY_DRILL))
    assert Plan.model_validate_json(plan.model_dump_json()).drills == plan.drills
    assert Plan(steps=[step]).drills == NO_DRILLS


def test_a_slow_drill_that_is_not_a_number_is_one_line_naming_the_variable():
    with pytest.raises(GpuAcceptError, match=r"^GPUACCEPT_INJECT_SLOW='fast': not a number of seconds$"):
        Drills.from_environment({"GPUACCEPT_INJECT_SLOW": "fast"})


def test_the_html_report_says_at_the_top_that_a_drill_was_on():
    from gpuaccept.facts.run_record import load_results
    from gpuaccept.report.html import render_html
    from tests.helpers import EXAMPLES

    record = load_results(EXAMPLES.parent / "results" / "h200x4.json")
    assert "id='drills'" not in render_html(record)
    drilled = Drills.from_environment({"GPUACCEPT_INJECT_SLOW_GEMM": "gpu1"}).recorded_in(record.facts)
    page = render_html(record.model_copy(update={"facts": drilled}))
    assert "fault drills were on (docs/drills.md): GPUACCEPT_INJECT_SLOW_GEMM=gpu1" in page
