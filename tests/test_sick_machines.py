"""A real 2xH200 recording (health snapshots after every stage, memory test) made sick by taking
evidence away: evidence the profile asks for that is missing is a failure or "could not judge",
never a pass."""

from __future__ import annotations

import json

from gpuaccept.checks import compute, health
from gpuaccept.checks.health.snapshots import NO_SNAPSHOT_AFTER_LOAD
from gpuaccept.checks.verdict import Outcome
from gpuaccept.facts import parse_facts
from gpuaccept.profile import ProfileCatalog
from tests.helpers import DATA

RECORDED = DATA / "facts" / "h200x2-health-measured.json"
PROFILE = ProfileCatalog.with_shipped().load("h200-2-nvswitch")


def sick(change):
    data = json.loads(RECORDED.read_text(encoding="utf-8"))
    change(data)
    return parse_facts(json.dumps(data), "sick.json")


def test_the_recording_passes_what_the_sick_variants_take_away():
    healthy = sick(lambda data: None)
    assert health.ecc_errors_during_run(PROFILE, healthy, 1).outcome is Outcome.PASSED
    assert health.row_remapping(PROFILE, healthy, 1).outcome is Outcome.PASSED
    assert health.nvlink_errors_during_run(PROFILE, healthy, (1, 5)).outcome is Outcome.PASSED
    assert compute.memtest(PROFILE, healthy, 1).outcome is Outcome.PASSED


def test_a_gpu_without_any_health_snapshot_could_not_be_judged():
    def drop_gpu1(data):
        data["health"]["snapshots"] = [s for s in data["health"]["snapshots"] if s["gpu"] != 1]

    facts = sick(drop_gpu1)
    # the VBIOS and the kernel log's XIDs are read elsewhere than in the snapshots: they are still judged
    elsewhere = (health.vbios_consistent, health.xid_since_boot)
    from_snapshots = [check for check in health.STATE_CHECKS + health.RUN_CHECKS if check not in elsewhere]
    verdicts = [check(PROFILE, facts, 1) for check in from_snapshots]
    asked = [verdict for verdict in verdicts if "the profile sets no" not in verdict.message]
    assert len(asked) == len(from_snapshots) - 2
    for verdict in asked:
        assert verdict.outcome is Outcome.ERROR, verdict.message
        assert "no health snapshot of this GPU, though the facts hold those of gpu0" in verdict.message
    assert health.nvlink_errors_during_run(PROFILE, facts, (1, 0)).outcome is Outcome.ERROR
    assert health.row_remapping(PROFILE, facts, 0).outcome is Outcome.PASSED


def test_an_nvlink_whose_counters_vanish_after_the_load_could_not_be_judged():
    def drop_link5_after_compute(data):
        last = [s for s in data["health"]["snapshots"] if s["gpu"] == 1][-1]
        last["nvlink_errors"] = [link for link in last["nvlink_errors"] if link["link"] != 5]

    facts = sick(drop_link5_after_compute)
    verdict = health.nvlink_errors_during_run(PROFILE, facts, (1, 5))
    assert verdict.outcome is Outcome.ERROR
    assert "gpu1-link5: error counters read at 'start' but not at 'after compute'" in verdict.message
    assert health.nvlink_errors_during_run(PROFILE, facts, (1, 4)).outcome is Outcome.PASSED


def test_only_the_start_snapshot_after_a_load_leaves_the_nvlinks_unjudged_not_skipped():
    def keep_the_start_only(data):
        data["health"]["snapshots"] = [s for s in data["health"]["snapshots"] if s["label"] == "start"]

    verdict = health.nvlink_errors_during_run(PROFILE, sick(keep_the_start_only), (0, 3))
    assert verdict.outcome is Outcome.ERROR and NO_SNAPSHOT_AFTER_LOAD in verdict.message


def test_a_memory_test_that_tested_nothing_fails():
    def nothing_tested(data):
        memtest = next(r for r in data["measurements"]["compute"]["results"] if r["load"] == "memtest" and r["gpu"] == 1)
        memtest.update(bytes_tested=0, passes_done=0, seconds=0.0)

    verdict = compute.memtest(PROFILE, sick(nothing_tested), 1)
    assert verdict.outcome is Outcome.FAILED
    assert "memory test tested nothing: 0 passes < 1 pass (0 GiB of" in verdict.message


def test_a_gpu_whose_telemetry_is_not_supported_throughout_the_load_while_the_others_answer_could_not_be_judged():
    from gpuaccept.checks import telemetry as telemetry_checks
    from gpuaccept.facts.record import Unavailable
    from tests.helpers import example_facts
    from tests.telemetry_nvml import sample, telemetry

    not_supported = Unavailable(unavailable="not_supported", detail="NOT_SUPPORTED")
    blind = {"clock_event_reasons": not_supported, "temperature_c": not_supported, "sm_clock_mhz": not_supported}
    samples = [sample(t, gpu).model_copy(update=blind if gpu == 2 else {}) for t in range(10) for gpu in range(4)]
    facts = example_facts("h200x4").model_copy(update={"telemetry": telemetry(samples)})
    profile = ProfileCatalog.with_shipped().load("h200-4-nvswitch")
    for check in (telemetry_checks.clock_slowdown, telemetry_checks.max_temperature):
        assert check(profile, facts, 1).outcome is Outcome.PASSED
        verdict = check(profile, facts, 2)
        assert verdict.outcome is Outcome.ERROR, verdict.message
        assert "not supported (NOT_SUPPORTED), though gpu0, gpu1, gpu3 gave it" in verdict.message
    everywhere = [s.model_copy(update=blind) for s in samples]
    skipped = telemetry_checks.clock_slowdown(profile, facts.model_copy(update={"telemetry": telemetry(everywhere)}), 2)
    assert skipped.outcome is Outcome.NOT_APPLICABLE  # no GPU of the machine gives it: a VM's NVML, not a sick GPU


def test_a_gpu_the_machine_lacks_is_not_a_telemetry_that_could_not_be_sampled():
    """A 2-GPU machine judged against a 4-GPU profile: the absent GPUs' telemetry tests say the GPU is
    not there (test_gpu_count fails it, the cause of theirs), not that the sampler stopped."""
    from gpuaccept.checks import telemetry as telemetry_checks
    from tests.helpers import example_facts
    from tests.telemetry_nvml import sample, telemetry

    four = example_facts("h200x4")
    two = four.model_copy(update={"gpus": four.gpus[:2], "telemetry": telemetry([sample(t, gpu) for t in range(10) for gpu in range(2)])})
    profile = ProfileCatalog.with_shipped().load("h200-4-nvswitch")
    for check in (telemetry_checks.clock_slowdown, telemetry_checks.max_temperature, telemetry_checks.sm_clock_under_load):
        assert check(profile, two, 1).outcome is Outcome.PASSED
        absent = check(profile, two, 3)
        assert absent.outcome is Outcome.ERROR and "GPU not present (2 GPU(s) under test)" in absent.message
        assert absent.missing == "gpu3 is not present" and absent.gpus == [3]
