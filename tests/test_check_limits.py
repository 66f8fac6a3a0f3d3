"""Each check's limit, tested right at its edge: a value just over it fails with the value and the
limit in the message, one just inside passes. These are the faults a review made in the checks
(a limit loosened, a reading left out, a rule skipped) that the other tests did not notice."""

from __future__ import annotations

import pytest

from gpuaccept.checks import ddp, fabric, health, telemetry, topology
from gpuaccept.checks.verdict import Outcome
from gpuaccept.facts import load_facts
from gpuaccept.facts.telemetry import Telemetry
from gpuaccept.probe.health import (
    AGGREGATE,
    EVENT_DOUBLE_BIT_ECC,
    NVLINK_CRC_DATA,
    NVLINK_CRC_FLIT,
    RETIRED_DBE,
    RETIRED_SBE,
    SRAM,
    UNCORRECTED,
    Field,
)
from gpuaccept.profile import ProfileCatalog
from tests.health_data import healthy_h200x2, with_health
from tests.helpers import DATA, example_facts, mutated
from tests.telemetry_nvml import sample
from tests.telemetry_nvml import telemetry as telemetry_of

CATALOG = ProfileCatalog.with_shipped()
H200X2 = CATALOG.load("h200-2-nvswitch")  # nvlink_crc_max_per_s 100, sram_uncorrected_max 0, retired_pages_max 62
H200X4 = CATALOG.load("h200-4-nvswitch")  # pairwise min_busbw 253.5, max_exposed_comm 4gpu-bs8 0.263, min_sm_clock_mhz 1340


def on_both_gpus(check, facts):
    return check(H200X2, facts, 0), check(H200X2, facts, 1)


# -- health, through the NVML door of the healthy 2xH200 recording ------------------------------------


def test_nvlink_crc_errors_over_the_rate_fail_that_link_and_just_under_passes():
    after = healthy_h200x2()
    # flit and data CRC errors count together: 6001 in 60 s is 100.017 a second, 5999 is 99.983
    after.answer("nvlink_error_counter", 0, 5, NVLINK_CRC_FLIT, value=4000)
    after.answer("nvlink_error_counter", 0, 5, NVLINK_CRC_DATA, value=2001)
    after.answer("nvlink_error_counter", 1, 5, NVLINK_CRC_FLIT, value=4000)
    after.answer("nvlink_error_counter", 1, 5, NVLINK_CRC_DATA, value=1999)
    facts = with_health(healthy_h200x2(), after, seconds=60)
    over = health.nvlink_errors_during_run(H200X2, facts, (0, 5))
    assert over.outcome is Outcome.FAILED and over.measured == 100.017
    assert over.message == (
        "gpu0-link5: NVLink CRC error rate 100.02 errors/s > 100 errors/s (start -> after nccl, 60 s, profile h200-2-nvswitch)"
    )
    under = health.nvlink_errors_during_run(H200X2, facts, (1, 5))
    assert under.outcome is Outcome.PASSED and "NVLink CRC error rate 99.983" in under.message
    failed = [link for link in health.gpu_links(H200X2) if not health.nvlink_errors_during_run(H200X2, facts, link).ok]
    assert failed == [(0, 5)]


def test_a_double_bit_ecc_event_during_the_run_fails_its_gpu_only():
    after = healthy_h200x2()
    after.answer("event_wait", value={"nvml_index": 1, "type": EVENT_DOUBLE_BIT_ECC, "data": 0})
    facts = with_health(healthy_h200x2(), after)
    assert [(event.gpu, event.kind) for event in facts.health.events] == [(1, "double_bit_ecc")]
    gpu0, gpu1 = on_both_gpus(health.xid_during_run, facts)
    assert gpu0.outcome is Outcome.PASSED and gpu0.measured == 0
    assert gpu1.outcome is Outcome.FAILED and gpu1.measured == 1
    # no XID number decides here: a double-bit ECC event is critical by its kind
    assert gpu1.message.startswith("gpu1: critical XID / ECC events during the run 1 critical events > 0 critical events (double bit ecc (")


def test_one_uncorrected_sram_error_fails_against_a_limit_of_zero():
    start = healthy_h200x2()
    for gpu in (0, 1):
        # the one field of NVML's SRAM ECC status the probe reads (the lent H200s answered 0)
        start.answer("sram_ecc_status", gpu, value={"bThresholdExceeded": 0})
    start.answer("memory_error_counter", 1, UNCORRECTED, AGGREGATE, SRAM, value=1)
    gpu0, gpu1 = on_both_gpus(health.sram_ecc, with_health(start))
    assert gpu0.outcome is Outcome.PASSED and gpu0.measured == 0
    assert gpu1.outcome is Outcome.FAILED and gpu1.measured == 1
    assert gpu1.criterion.model_dump(mode="json") == {"op": "<=", "limit": 0, "unit": "errors"}
    assert gpu1.message == "gpu1: SRAM uncorrected ECC errors (aggregate) 1 errors > 0 errors (profile h200-2-nvswitch)"


def test_retired_pages_count_single_and_double_bit_pages_together():
    start = healthy_h200x2()  # the lent H200s answer not supported: these stand for a GPU that retires pages
    for gpu, (sbe, dbe) in {0: (10, 52), 1: (10, 60)}.items():
        start.answer("retired_pages", gpu, RETIRED_SBE, value=sbe)
        start.answer("retired_pages", gpu, RETIRED_DBE, value=dbe)
        start.answer("retired_pages_pending", gpu, value=0)
    gpu0, gpu1 = on_both_gpus(health.retired_pages, with_health(start))
    assert gpu0.outcome is Outcome.PASSED and gpu0.measured == 62  # at the limit
    assert gpu1.outcome is Outcome.FAILED and gpu1.measured == 70
    assert gpu1.message == "gpu1: retired pages 70 pages > 62 pages (SBE 10, DBE 60) (profile h200-2-nvswitch)"


@pytest.mark.parametrize(
    ("check", "query", "args", "threshold", "what"),
    [
        (health.gpu_temperature, "temperature", (), 89, "GPU temperature (after nccl) {} °C > 88 °C (NVML slowdown threshold 89 °C)"),
        (
            health.memory_temperature, "field_value", (Field.MEMORY_TEMP, 0), 95,
            "HBM temperature (after nccl) {} °C > 94 °C (NVML memory max temperature 95 °C)",
        ),
    ],
    ids=["gpu", "hbm"],
)
def test_a_temperature_at_nvmls_threshold_fails_one_degree_below_passes(check, query, args, threshold, what):
    after = healthy_h200x2()  # the thresholds are read at the start: 89 °C slowdown, 95 °C HBM max
    after.answer(query, 0, *args, value=threshold - 1)
    after.answer(query, 1, *args, value=threshold)
    gpu0, gpu1 = on_both_gpus(check, with_health(healthy_h200x2(), after))
    assert gpu0.outcome is Outcome.PASSED and gpu0.measured == threshold - 1
    assert gpu1.outcome is Outcome.FAILED and gpu1.measured == threshold
    assert gpu1.message == f"gpu1: hottest {what.format(threshold)} (profile h200-2-nvswitch)"


# -- measurements: faults made from the facts recorded on a 4xH200 --------------------------------------


def test_a_pair_whose_data_arrived_wrong_fails_however_fast_it_was():
    def wrong_on_gpu0_gpu2(data):
        next(r for r in data["measurements"]["pairwise"]["results"] if r["gpus"] == [0, 2])["wrong"] = 5

    facts = mutated(example_facts("h200x4-measured"), wrong_on_gpu0_gpu2)
    verdicts = {pair: fabric.pair_busbw(H200X4, facts, pair) for pair in H200X4.gpu_pairs()}
    assert [pair for pair, verdict in verdicts.items() if not verdict.ok] == [(0, 2)]
    wrong = verdicts[(0, 2)]
    assert wrong.outcome is Outcome.FAILED and wrong.final  # wrong data is never noise: not measured again
    # judged on the wrong count (its speed, 304.7 GB/s, met the 253.5 GB/s floor: not the value that failed)
    assert wrong.measured == 5 and wrong.expected == "== 0 wrong elements"
    assert wrong.message == "gpu0-gpu2: 5 elements arrived wrong in the send/receive check (profile h200-4-nvswitch)"


def test_fabric_registration_completed_with_an_error_status_fails_that_gpu():
    facts = mutated(example_facts("h200x4"), lambda data: data["gpus"][2]["fabric"].update(status=999))  # NVML_ERROR_UNKNOWN
    verdicts = [topology.fabric_state(H200X4, facts, gpu) for gpu in range(4)]
    assert [verdict.outcome for verdict in verdicts] == [Outcome.PASSED, Outcome.PASSED, Outcome.FAILED, Outcome.PASSED]
    assert verdicts[2].measured == "completed"
    assert verdicts[2].message == (
        "gpu2: fabric registration completed with NVML error status 999, expected success (profile h200-4-nvswitch)"
    )


def with_exposed_share(share: float):
    """The recorded 4xH200 facts with the 4-GPU batch-8 step spending `share` of 100 ms in communication."""

    def change(data):
        result = next(r for r in data["measurements"]["ddp"]["results"] if (r["world"], r["batch"]) == (4, 8))
        result.update(step_s=0.1, no_sync_step_s=0.1 * (1 - share))

    return mutated(example_facts("h200x4-measured"), change)


def test_exposed_communication_just_over_the_profiles_maximum_fails_just_under_passes():
    over = ddp.exposed_communication(H200X4, with_exposed_share(0.264), "4gpu-bs8")
    assert over.outcome is Outcome.FAILED and over.measured == pytest.approx(0.264)
    # the criterion says where the profile's marginal line (its 3% band) was
    assert over.criterion.model_dump(mode="json") == {"op": "<=", "limit": 0.263, "marginal_maximum": 0.25511, "unit": ""}
    assert over.message.startswith("4gpu-bs8: exposed communication 0.264 > 0.263 (step 100.0 ms, 73.6 ms without gradient all-reduce)")
    under = ddp.exposed_communication(H200X4, with_exposed_share(0.262), "4gpu-bs8")
    assert under.outcome is Outcome.PASSED and under.measured == pytest.approx(0.262) and under.marginal


def busy_samples(clocks: list[int]) -> Telemetry:
    """One sample a second of gpu0 fully busy at each SM clock, all inside one nccl load."""
    samples = [sample(float(t), 0, reasons=0, sm=clock) for t, clock in enumerate(clocks)]
    return telemetry_of(samples, loads=((0.0, float(len(clocks))),), gpus=1)


def test_the_sm_clock_under_load_is_judged_on_the_median_of_the_busy_samples():
    # four of five samples under the 1340 MHz floor, one at full boost: the median (1200) fails it
    facts = example_facts("h200x4").model_copy(update={"telemetry": busy_samples([900, 1100, 1200, 1300, 1980])})
    verdict = telemetry.sm_clock_under_load(H200X4, facts, 0)
    assert verdict.outcome is Outcome.FAILED and verdict.measured == 1200
    assert verdict.message == (
        "gpu0: SM clock under load 1200 MHz < 1340 MHz (median of 5 samples 50%+ busy, lowest 900 MHz) (profile h200-4-nvswitch)"
    )


# -- the healthy recorded 2xH200: exactly which health tests pass and which the machine cannot answer ----

RECORDED = DATA / "facts" / "h200x2-health-measured.json"
# Hopper remaps rows instead of retiring pages (NVML: not supported); the shipped profile sets no
# limit on corrected ECC errors. Every other health test of both GPUs and all 36 links passes.
NOT_APPLICABLE_ON_THE_RECORDING = {"retired_pages", "ecc_corrected", "ecc_corrected_during_run"}


def test_the_recorded_healthy_machine_passes_every_health_test_but_the_ones_it_cannot_answer():
    facts = load_facts(RECORDED)
    checks = health.STATE_CHECKS + health.RUN_CHECKS
    found = {(check.__name__, f"gpu{gpu}"): check(H200X2, facts, gpu).outcome for check in checks for gpu in (0, 1)}
    expected = {
        (name, gpu): Outcome.NOT_APPLICABLE if name in NOT_APPLICABLE_ON_THE_RECORDING else Outcome.PASSED for name, gpu in found
    }
    assert len(found) == 2 * 21 and found == expected
    links = health.gpu_links(H200X2)
    assert links == [(gpu, link) for gpu in (0, 1) for link in range(18)]
    assert {link: health.nvlink_errors_during_run(H200X2, facts, link).outcome for link in links} == dict.fromkeys(links, Outcome.PASSED)
