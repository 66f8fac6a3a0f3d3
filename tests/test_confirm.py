"""Confirm before failing: a miss is measured again, only its own step, and the best attempt decides.

The stage runs are replaced by the real 4xH200 measurements with chosen values changed, so every
case here is exact; the real workers' `only` subsets run on gloo in test_measure_gloo.py.
"""

from __future__ import annotations

import pytest

from gpuaccept.checks import ddp, fabric
from gpuaccept.checks.verdict import Outcome
from gpuaccept.facts.measurements import Measurements
from gpuaccept.profile import ProfileCatalog
from gpuaccept.stages import store as store_module
from gpuaccept.stages.store import MeasurementStore
from gpuaccept.vocabulary.steps import DdpKey, parse_step_key
from tests.helpers import example_facts

PROFILE = ProfileCatalog.with_shipped().load("h200-4-nvswitch")
MEASURED = example_facts("h200x4-measured")
PROBED = MEASURED.model_copy(update={"measurements": Measurements()})
CASE = ("all_reduce", "256MiB")  # floor 307.4 GB/s in the profile
KEY = parse_step_key("collective/all_reduce/256MiB")


def nccl_with(busbw: float | None = None, wrong: int = 0) -> Measurements:
    """The real NCCL stage's measurements, all_reduce 256 MiB at `busbw` (and `wrong` elements)."""
    sweep = MEASURED.measurements.collectives
    results = []
    for result in sweep.results:
        if result.key == KEY:
            result = result.model_copy(update={"busbw_GBps": busbw or result.busbw_GBps, "wrong": wrong})
        results.append(result)
    return Measurements(collectives=sweep.model_copy(update={"results": results}), pairwise=MEASURED.measurements.pairwise)


class FakeStages:
    """Stands in for the stage runs: hands out prepared measurements, records what was asked."""

    def __init__(self, *answers: Measurements):
        self.answers = list(answers)
        self.asked: list[set[str] | None] = []

    def __call__(self, stage, facts, profile, gpus, only=None, attempt=0):
        self.asked.append(only)
        return self.answers.pop(0)


def measure(tmp_path, monkeypatch, stages: FakeStages, stage: str = "nccl", confirm: int = 2):
    store = MeasurementStore(tmp_path, live=True, confirm=confirm)
    monkeypatch.setattr(store, "_measure", stages)
    return store.with_stage(stage, PROBED, PROFILE)


def test_a_one_off_dip_is_measured_again_and_passes_as_transient(tmp_path, monkeypatch):
    stages = FakeStages(nccl_with(289.9), nccl_with(336.1))
    facts = measure(tmp_path, monkeypatch, stages)
    assert stages.asked == [None, {KEY}]  # only the step that missed was measured again
    verdict = fabric.busbw(PROFILE, facts, CASE)
    assert verdict.outcome is Outcome.PASSED and verdict.transient
    assert verdict.attempts == [289.9, 336.1]
    assert "[attempts: 289.9, 336.1 GB/s; transient: passed only when measured again]" in verdict.message
    other = fabric.busbw(PROFILE, facts, ("all_reduce", "1GiB"))
    assert other.outcome is Outcome.PASSED and other.attempts == [] and not other.transient


def test_a_persistent_miss_still_fails_with_every_attempt_in_its_message(tmp_path, monkeypatch):
    stages = FakeStages(nccl_with(289.9), nccl_with(291.0), nccl_with(288.2))
    facts = measure(tmp_path, monkeypatch, stages)
    assert stages.asked == [None, {KEY}, {KEY}]
    verdict = fabric.busbw(PROFILE, facts, CASE)
    assert verdict.outcome is Outcome.FAILED and not verdict.transient
    assert verdict.measured == 291.0  # the best attempt decides
    assert verdict.message.startswith("all_reduce 256 MiB: busbw 291 GB/s < 307.4 GB/s")
    assert "[attempts: 289.9, 291, 288.2 GB/s]" in verdict.message
    assert [r.keys for r in facts.measurements.rounds] == [[KEY], [KEY]]


def test_a_miss_far_below_its_floor_is_a_fault_and_fails_at_once(tmp_path, monkeypatch):
    stages = FakeStages(nccl_with(28.0))  # NCCL_P2P_DISABLE=1 territory: not a dip
    facts = measure(tmp_path, monkeypatch, stages)
    assert stages.asked == [None] and facts.measurements.rounds == []
    assert fabric.busbw(PROFILE, facts, CASE).outcome is Outcome.FAILED


def test_confirm_0_judges_the_first_measurement(tmp_path, monkeypatch):
    stages = FakeStages(nccl_with(289.9))
    facts = measure(tmp_path, monkeypatch, stages, confirm=0)
    assert stages.asked == [None]
    verdict = fabric.busbw(PROFILE, facts, CASE)
    assert verdict.outcome is Outcome.FAILED and verdict.attempts == []


def test_wrong_data_in_any_attempt_fails_and_no_repeat_undoes_it(tmp_path, monkeypatch):
    stages = FakeStages(nccl_with(289.9), nccl_with(336.1, wrong=3))
    facts = measure(tmp_path, monkeypatch, stages)
    correct = fabric.collective_correct(PROFILE, facts, CASE)
    assert correct.outcome is Outcome.FAILED and correct.final and correct.attempts == [0, 3]
    assert fabric.busbw(PROFILE, facts, CASE).outcome is Outcome.PASSED


def test_repeats_stop_when_the_stage_time_for_them_is_spent(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "MIN_CONFIRM_BUDGET_S", 0.0)

    class Slow(FakeStages):
        def __call__(self, *args, **kwargs):
            answer = super().__call__(*args, **kwargs)
            if kwargs.get("only"):
                store_module.time.sleep(0.05)  # longer than the stage itself (wall 9.0 s is replaced below)
            return answer

    quick = nccl_with(289.9)
    quick = quick.model_copy(update={"collectives": quick.collectives.model_copy(update={"wall_s": 0.01}), "pairwise": None})
    stages = Slow(quick, nccl_with(290.0))
    facts = measure(tmp_path, monkeypatch, stages)
    assert len(facts.measurements.rounds) == 1 and facts.measurements.unconfirmed == [KEY]
    assert fabric.busbw(PROFILE, facts, CASE).outcome is Outcome.FAILED


def ddp_with(efficiency_world4: float | None = None, without_p2p_world4: float | None = None) -> Measurements:
    measured = MEASURED.measurements

    def changed(sweep, value):
        if value is None:
            return sweep
        return sweep.model_copy(update={"results": [
            r.model_copy(update={"samples_per_s_per_gpu": value}) if r.world == 4 else r for r in sweep.results
        ]})

    one = measured.ddp.result(1, 8).samples_per_s_per_gpu
    scaling = changed(measured.ddp, efficiency_world4 * one if efficiency_world4 else None)
    return Measurements(ddp=scaling, ddp_without_p2p=changed(measured.ddp_without_p2p, without_p2p_world4))


def test_a_ddp_miss_measures_its_world_again_and_the_ab_measures_both_arms(tmp_path, monkeypatch):
    with_p2p = MEASURED.measurements.ddp.result(4, 8).samples_per_s_per_gpu
    first = ddp_with(efficiency_world4=0.70, without_p2p_world4=with_p2p / 1.40)  # floors 0.721 and 1.4337x
    stages = FakeStages(first, ddp_with(), ddp_with())
    facts = measure(tmp_path, monkeypatch, stages, stage="ddp")
    assert stages.asked[1] == {DdpKey(4, 8), DdpKey(4, 8, without_p2p=True)}
    scaling = ddp.scaling(PROFILE, facts, "4gpu-bs8")
    assert scaling.outcome is Outcome.PASSED and scaling.transient and scaling.attempts[0] == pytest.approx(0.70)
    speedup = ddp.nvlink_speedup(PROFILE, facts, "4gpu-bs8")
    assert speedup.outcome is Outcome.PASSED and speedup.transient and len(speedup.attempts) == 2
    assert len(stages.asked) == 2  # everything passed after one round: no second


def test_a_baseline_judges_the_attempt_the_verdict_took_not_the_dip_before_it(tmp_path, monkeypatch):
    from gpuaccept.checks.baseline import no_regression
    from gpuaccept.report.baseline import Baseline, Metric, measured_values

    facts = measure(tmp_path, monkeypatch, FakeStages(nccl_with(250.0), nccl_with(336.1)))
    key = "busbw-all_reduce-256MiB"
    assert measured_values(facts)[key].value == 336.1  # the first attempt was 250
    before = Baseline(path="base.json", machine={}, metrics={key: Metric(key, 340.0, "GB/s")})
    verdict = no_regression(PROFILE, facts, key, before, 0.05)
    assert verdict.outcome is Outcome.PASSED and verdict.measured == 336.1
