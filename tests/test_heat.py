"""A burn-in judged while hot, on a real 4-minute burn-in of a lent H200 (`tests/data/facts/h200x1-burnin.json`,
its telemetry at 1 Hz and its 8 rounds of sustained load), healthy and made sick: a GPU that throttles once
hot, one that stays cool enough never to settle, one that cannot reach its power, one with no power reading."""

from __future__ import annotations

import pytest

from gpuaccept.checks import burnin as burnin_checks
from gpuaccept.checks import heat
from gpuaccept.checks.verdict import Outcome
from gpuaccept.facts import load_facts
from gpuaccept.facts.measurements import GemmResult, Measurements, MemtestResult
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.facts.telemetry import BurnIn, BurnInRound, Telemetry, TelemetrySample
from gpuaccept.profile import ProfileCatalog, load_profile
from tests.helpers import DATA, example_facts, write
from tests.telemetry_nvml import HW_SLOWDOWN

CATALOG = ProfileCatalog.with_shipped()
H200 = CATALOG.load("h200-1")
BURNIN = DATA / "facts" / "h200x1-burnin.json"


@pytest.fixture(scope="module")
def recorded() -> Facts:
    return load_facts(BURNIN)


def _samples(facts: Facts, change) -> Facts:
    assert facts.telemetry is not None
    samples = [change(s) for s in facts.telemetry.samples]
    return facts.model_copy(update={"telemetry": facts.telemetry.model_copy(update={"samples": samples})})


def _rounds(facts: Facts, change) -> Facts:
    assert facts.burnin is not None
    return facts.model_copy(update={"burnin": facts.burnin.model_copy(update={"rounds": [change(r) for r in facts.burnin.rounds]})})


def _gemm_scaled(burnin_round: BurnInRound, factor: float) -> BurnInRound:
    sweep = burnin_round.measurements.compute
    assert sweep is not None
    results = [r.model_copy(update={"tflops": r.tflops * factor}) if isinstance(r, GemmResult) else r for r in sweep.results]
    return burnin_round.model_copy(update={"measurements": Measurements(compute=sweep.model_copy(update={"results": results}))})


def test_the_recorded_h200_burn_in_reaches_steady_state_keeps_its_throughput_and_draws_its_power(recorded):
    steady = heat.thermal_steady_state(H200, recorded, 0)
    assert steady.outcome is Outcome.PASSED and steady.measured == 64.9, steady.message
    assert "temperature slope 0.75 °C/min over 60 s (steady below 1); 59-63 °C from then on" in steady.message
    hot = heat.hot_gemm_throughput(H200, recorded, 0)
    assert hot.outcome is Outcome.PASSED and hot.context["cool_round"] == 1 and len(hot.context["hot_rounds"]) == 5, hot.message
    assert "power median 692 W of 700 W; temperature 59-62 °C (slowdown 89 °C); clock events: sw_power_cap" in hot.message
    power = heat.power_under_load(H200, recorded, 0)
    assert power.outcome is Outcome.PASSED and power.measured == pytest.approx(98.9, abs=0.05), power.message
    assert power.expected == ">= 90 %"
    alone = heat.power_within_best(H200, recorded, 0)
    assert alone.outcome is Outcome.NOT_APPLICABLE and "no sibling" in alone.message


def test_a_gpu_that_throttles_once_hot_fails_naming_its_power_temperature_and_clock_events(recorded):
    load_began = 60.0  # the rounds after the first minute: hot, and slowed by hardware as a failing cooler would
    throttled = _rounds(recorded, lambda r: _gemm_scaled(r, 0.7) if r.started_s > load_began else r)

    def slowed(s: TelemetrySample) -> TelemetrySample:
        return s.model_copy(update={"clock_event_reasons": HW_SLOWDOWN, "temperature_c": 88}) if s.t_s > 70 else s

    sick = _samples(throttled, slowed)
    verdict = heat.hot_gemm_throughput(H200, sick, 0)
    assert verdict.outcome is Outcome.FAILED, verdict.message
    assert verdict.message.startswith("gpu0: GEMM at thermal steady state 496")
    assert "< 642.5 TFLOP/s" in verdict.message and "of round 1's 713.9 TFLOP/s" in verdict.message
    assert "temperature 88-88 °C (slowdown 89 °C); clock events: hw_slowdown" in verdict.message
    # the burn-in's own floor (594) still judges every round: the hot test is what names the heat
    assert verdict.context["hot_tflops"] and all(v < 520 for v in verdict.context["hot_tflops"])


def test_one_slow_hot_round_among_good_ones_is_not_a_throttled_gpu(recorded):
    slowest = max(r.index for r in recorded.burnin.rounds)  # type: ignore[union-attr]
    one = _rounds(recorded, lambda r: _gemm_scaled(r, 0.5) if r.index == slowest else r)
    verdict = heat.hot_gemm_throughput(H200, one, 0)
    assert verdict.outcome is Outcome.PASSED, verdict.message


def test_a_gpu_still_heating_when_the_load_ends_could_not_be_judged_hot(recorded):
    rising = _samples(recorded, lambda s: s.model_copy(update={"temperature_c": 30 + int(s.t_s / 6)}))  # 10 °C a minute
    for check in (heat.thermal_steady_state, heat.hot_gemm_throughput):
        verdict = check(H200, rising, 0)
        assert verdict.outcome is Outcome.ERROR, verdict.message
        said = "did not reach thermal steady state in the 240 s sustained load (still rising 9.9 °C/min over the last 60 s"
        assert said in verdict.message
        assert "burn in longer" in verdict.message


def test_a_gpu_that_settles_only_in_the_last_round_has_no_hot_round_to_judge(recorded):
    # heating 10 °C a minute for 3 minutes, flat after: steady at 232 s, after the last round (from 210 s) began
    late = _samples(recorded, lambda s: s.model_copy(update={"temperature_c": 30 + int(min(s.t_s, 180) / 6)}))
    steady = heat.thermal_steady_state(H200, late, 0)
    assert steady.outcome is Outcome.PASSED and steady.measured == 231.9
    hot = heat.hot_gemm_throughput(H200, late, 0)
    assert hot.outcome is Outcome.ERROR and "no round of the sustained load began after gpu0 reached thermal steady state" in hot.message


def test_power_far_below_the_limit_fails_and_power_not_read_could_not_be_judged(recorded):
    capped = _samples(recorded, lambda s: s.model_copy(update={"power_w": 420.0}))
    verdict = heat.power_under_load(H200, capped, 0)
    assert verdict.outcome is Outcome.FAILED, verdict.message
    assert verdict.message.startswith("gpu0: power under the sustained load 60 % < 90 %"), verdict.message
    unread = _samples(recorded, lambda s: s.model_copy(update={"power_w": Unavailable(unavailable="not_supported", detail="power_mw(0)")}))
    verdict = heat.power_under_load(H200, unread, 0)
    assert verdict.outcome is Outcome.ERROR and "NVML gives no power reading" in verdict.message


def test_power_is_judged_while_the_products_ran_alone_not_during_memory_tests_or_the_fabric_beside_the_load(recorded):
    # a fabric stage beside the load from 100 s to 200 s, drawing the GPU down to half its limit there:
    # more than half of the settled samples, which the median must not be taken over
    beside = BurnInRound(index=9, started_s=100.0, wall_s=100.0, stages=["nccl"], measurements=Measurements(), beside_load=True)
    offset = recorded.burnin.offset_on(recorded.telemetry)  # type: ignore[union-attr]
    with_fabric = recorded.model_copy(update={"burnin": recorded.burnin.model_copy(  # type: ignore[union-attr]
        update={"rounds": [*recorded.burnin.rounds, beside]})})  # type: ignore[union-attr]
    drawn_down = _samples(with_fabric, lambda s: s.model_copy(update={"power_w": 350.0}) if 100 <= s.t_s - offset <= 200 else s)
    verdict = heat.power_under_load(H200, drawn_down, 0)
    assert verdict.outcome is Outcome.PASSED and verdict.measured == pytest.approx(98.9, abs=0.1), verdict.message
    assert "while its products ran alone" in verdict.message
    # the same samples with no fabric round there: the GPU itself drew half its limit under its products
    assert heat.power_under_load(H200, _samples(recorded, lambda s: s.model_copy(update={"power_w": 350.0})
                                                 if 100 <= s.t_s - offset <= 200 else s), 0).outcome is Outcome.FAILED


def test_memory_tests_at_the_end_of_their_rounds_are_left_out_of_the_power_median(recorded):
    # rounds 4-8 (90-240 s) each ending in a 30-s memory test drawing 80 W: most of the settled
    # samples, each test's own stretch is left out and the median stays the products'
    first_test = next(r for r in recorded.burnin.rounds[0].measurements.compute.results if isinstance(r, MemtestResult))  # type: ignore[union-attr]
    long_test = first_test.model_copy(update={"seconds": 30.0})

    def tested(r: BurnInRound) -> BurnInRound:
        sweep = r.measurements.compute
        assert sweep is not None
        results = [*sweep.results, long_test]
        return r.model_copy(update={"measurements": Measurements(compute=sweep.model_copy(update={"results": results}))})

    with_tests = _rounds(recorded, lambda r: tested(r) if r.index >= 4 else r)
    offset = recorded.burnin.offset_on(recorded.telemetry)  # type: ignore[union-attr]
    idle = _samples(with_tests, lambda s: s.model_copy(update={"power_w": 80.0}) if s.t_s - offset >= 90.5 else s)
    verdict = heat.power_under_load(H200, idle, 0)
    assert verdict.outcome is Outcome.PASSED and verdict.measured == pytest.approx(98.9, abs=0.2), verdict.message
    # the same samples with no memory test there: the GPU drew 80 W under its products
    assert heat.power_under_load(H200, _samples(recorded, lambda s: s.model_copy(update={"power_w": 80.0})
                                                 if s.t_s - offset >= 90.5 else s), 0).outcome is Outcome.FAILED


def test_a_burn_in_too_short_to_show_its_products_alone_could_not_judge_power_and_asks_for_longer():
    # a real 40-s burn-in of a lent 2xH200 with its fabric stages beside the load every 20 s: once the
    # load settled, the GPUs ran NCCL beside their products and then their memory tests (power 330-690 W)
    drill = load_facts(DATA / "facts" / "h200x2-burnin-40s-drill.json")
    profile = CATALOG.load("h200-2-nvswitch")
    for gpu in (0, 1):
        verdict = heat.power_under_load(profile, drill, gpu)
        assert verdict.outcome is Outcome.ERROR, verdict.message
        assert "fewer than 5 power samples while its products ran alone" in verdict.message and "burn in longer" in verdict.message


def test_a_gpu_that_draws_less_power_than_its_siblings_fails_naming_it(tmp_path, recorded):
    assert recorded.telemetry is not None
    # the recorded H200 as two GPUs: gpu1 a copy of gpu0 that reaches only 75% of its power
    twin = [s.model_copy(update={"gpu": 1, "power_w": s.power_w * 0.75 if isinstance(s.power_w, float) else s.power_w})
            for s in recorded.telemetry.samples]
    limits = [*recorded.telemetry.limits, recorded.telemetry.limits[0].model_copy(update={"gpu": 1})]
    telemetry = recorded.telemetry.model_copy(update={"samples": [*recorded.telemetry.samples, *twin], "limits": limits})
    two = example_facts("h200x2-measured").model_copy(update={"telemetry": telemetry, "burnin": recorded.burnin})
    profile = load_profile(write(tmp_path / "p.yaml", "schema: 1\nextends: h200-2-nvswitch\n"), CATALOG.base_folders())
    assert heat.power_within_best(profile, two, 0).outcome is Outcome.PASSED
    weak = heat.power_within_best(profile, two, 1)
    assert weak.outcome is Outcome.FAILED, weak.message
    assert weak.message.startswith("gpu1: power under the sustained load 74.16 % < 88.99 %"), weak.message
    assert "at most 10% below the best GPU, gpu0 at 98.9% of its limit" in weak.message


def test_facts_without_a_sustained_load_are_not_judged_hot_and_a_load_without_telemetry_errs(recorded):
    older = example_facts("h200x4-measured")
    # the profile asks for the per-GPU loads a burn-in sustains: facts without that load could not judge it
    steady = heat.thermal_steady_state(H200, older, 0)
    assert steady.outcome is Outcome.ERROR and steady.missing == "the facts hold no sustained load"
    untimed = recorded.model_copy(update={"telemetry": None})
    assert heat.hot_gemm_throughput(H200, untimed, 0).outcome is Outcome.ERROR
    unsampled = recorded.model_copy(update={"telemetry": Telemetry(started_at=recorded.telemetry.started_at, period_s=1.0,  # type: ignore[union-attr]
                                                                   not_sampled="NVML Shared Library Not Found")})
    verdict = heat.power_under_load(H200, unsampled, 0)
    assert verdict.outcome is Outcome.ERROR and "NVML Shared Library Not Found" in verdict.message


# -- burn-in values beside the load, and values measured in some rounds only ---------------------------


def _collective_round(index: int, busbw: float, beside: bool, wrong: int = 0) -> BurnInRound:
    sweep = example_facts("h200x4-measured").measurements.collectives
    assert sweep is not None
    results = [r.model_copy(update={"busbw_GBps": busbw, "wrong": wrong}) for r in sweep.results]
    return BurnInRound(index=index, started_s=60.0 * index, wall_s=30.0, stages=["nccl"], beside_load=beside,
                       measurements=Measurements(collectives=sweep.model_copy(update={"results": results})))


def test_bandwidth_beside_the_load_is_shown_not_judged_and_its_wrong_data_still_fails():
    profile = CATALOG.load("h200-4-nvswitch")
    cases = {c.id: c for c in burnin_checks.burnin_cases(profile)}
    # at rest 354 GB/s; beside the sustained load the products take their share: 160 GB/s
    rounds = [_collective_round(1, 354.0, False), _collective_round(2, 160.0, True), _collective_round(3, 165.0, True)]
    burnin = BurnIn(duration_s=300, elapsed_s=300, ended="deadline", rounds=rounds)
    facts = example_facts("h200x4").model_copy(update={"burnin": burnin})
    busbw = burnin_checks.over_rounds(profile, facts, cases["busbw-all_reduce-1GiB"])
    assert busbw.outcome is Outcome.PASSED and busbw.measured == 354.0, busbw.message
    assert "beside the sustained load (not judged): 160, 165 GB/s" in busbw.message
    wrong = burnin.model_copy(update={"rounds": [*rounds[:2], _collective_round(3, 165.0, True, wrong=7)]})
    verdict = burnin_checks.over_rounds(profile, facts.model_copy(update={"burnin": wrong}), cases["collective_correct-all_reduce-1GiB"])
    assert verdict.outcome is Outcome.FAILED, verdict.message
    only_beside = burnin.model_copy(update={"rounds": rounds[1:]})
    verdict = burnin_checks.over_rounds(profile, facts.model_copy(update={"burnin": only_beside}), cases["busbw-all_reduce-1GiB"])
    assert verdict.outcome is Outcome.ERROR and "ran beside the sustained load: no unloaded value" in verdict.message


def test_the_memory_test_is_judged_over_the_rounds_that_ran_it(recorded):
    assert recorded.burnin is not None
    case = next(c for c in burnin_checks.burnin_cases(H200) if c.id == "memtest-gpu0")
    verdict = burnin_checks.over_rounds(H200, recorded, case)
    # one of the 8 rounds ran the memory test (its interval is 5 minutes): that round decides, the others do not count
    assert verdict.outcome is Outcome.PASSED and verdict.context["burnin_rounds"] == [1], verdict.message
    without = recorded.burnin.model_copy(update={"rounds": recorded.burnin.rounds[1:]})
    missing = burnin_checks.over_rounds(H200, recorded.model_copy(update={"burnin": without}), case)
    assert missing.outcome is Outcome.ERROR and "no burn-in round measured load/memtest/gpu0" in missing.message


def test_a_burn_in_cut_short_by_a_signal_is_not_judged_hot_and_says_why(recorded):
    assert recorded.burnin is not None
    # the signal came 20 s into the load: no steady state, no round at it, no power once settled
    cut = recorded.burnin.model_copy(update={"ended": "interrupted", "load_ended_s": 20.0, "rounds": recorded.burnin.rounds[:1]})
    facts = recorded.model_copy(update={"burnin": cut})
    for check in (heat.thermal_steady_state, heat.hot_gemm_throughput):
        verdict = check(H200, facts, 0)
        # the profile asked for it and the load was cut short: could not judge, never a skip
        assert verdict.outcome is Outcome.ERROR, verdict.message
        assert "ended by a signal after 20 s of sustained load: thermal steady state not reached" in verdict.message
        assert verdict.missing == "the facts hold no whole sustained load (the burn-in was ended by a signal)"
    # the same burn-in run to its deadline, had it stopped there, could not be judged: an error, not a skip
    short = facts.model_copy(update={"burnin": cut.model_copy(update={"ended": "deadline"})})
    assert heat.thermal_steady_state(H200, short, 0).outcome is Outcome.ERROR
