"""Burn-in and telemetry on CPU: the sampler driven by a replayed NVML, the telemetry files every
process of a session reads, the telemetry and worst-round checks (a hardware slowdown fails that GPU
only), the burn-in driver's rounds and its end by a signal, levels, and the HTML telemetry charts."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import time
from pathlib import Path

import pytest

from gpuaccept.burnin.driver import BurninDriver
from gpuaccept.checks import burnin as burnin_checks
from gpuaccept.checks import telemetry as telemetry_checks
from gpuaccept.checks.verdict import Outcome
from gpuaccept.facts.measurements import ComputeSweep, Measurements, StepFailure
from gpuaccept.facts.record import Unavailable
from gpuaccept.facts.telemetry import BurnIn, BurnInRound, LoadWindow, Telemetry
from gpuaccept.measure.drills import NO_DRILLS
from gpuaccept.probe.nvml import ReplayNvml
from gpuaccept.probe.telemetry import TelemetrySampler
from gpuaccept.profile import ProfileCatalog, load_profile
from gpuaccept.report.html import render_html
from gpuaccept.stages.sustained import LoadRound
from gpuaccept.stages.telemetry import LOADS_FILE, TELEMETRY_FILE, read_telemetry, record_load
from gpuaccept.vocabulary.steps import CollectiveKey
from gpuaccept.vocabulary.telemetry import parse_duration, reason_names, show_duration
from tests.helpers import ROOT, example_facts, write
from tests.telemetry_nvml import HW_SLOWDOWN, SW_POWER_CAP, sample, telemetry, telemetry_recording


def h200x4_profile():
    return ProfileCatalog.with_shipped().load("h200-4-nvswitch")


def facts_with(telemetry_: Telemetry | None = None, burnin: BurnIn | None = None):
    return example_facts("h200x4").model_copy(update={"telemetry": telemetry_, "burnin": burnin})


# -- vocabulary -----------------------------------------------------------------------------------------


def test_durations_and_reasons_read_as_people_write_them():
    assert parse_duration("30m") == 1800 and parse_duration("90s") == 90 and parse_duration("2h") == 7200 and parse_duration("45") == 45
    for bad in ("30 minutes", "-5m", "0s", ""):
        with pytest.raises(ValueError):
            parse_duration(bad)
    assert show_duration(1830) == "30m30s" and show_duration(42.4) == "42s" and show_duration(7260) == "2h01m"
    assert reason_names(0x1 | 0x8 | 0x80) == ["gpu_idle", "hw_slowdown", "hw_power_brake_slowdown"]
    assert reason_names(0x1000) == ["0x1000"]


# -- the sampler, through the NVML door -------------------------------------------------------------------


def test_the_sampler_reads_every_gpu_from_a_replayed_nvml_and_keeps_not_supported(tmp_path):
    recording = telemetry_recording(tmp_path / "nvml.json", slowdown_gpu=2)
    limits, moments = [], []
    sampler = TelemetrySampler(
        lambda: ReplayNvml.from_file(recording), [(0, 0), (1, 1), (2, 2), (3, 3)], 0.05, limits.extend, moments.append
    )
    sampler.start()
    deadline = time.monotonic() + 30
    while len(moments) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    sampler.stop()
    assert sampler.error == "" and len(moments) >= 3
    first = moments[0]
    assert [s.gpu for s in first] == [0, 1, 2, 3]
    assert first[0].sm_clock_mhz == 1980 and first[0].power_w == 452.0 and first[0].temperature_c == 45
    assert first[2].clock_event_reasons == SW_POWER_CAP | HW_SLOWDOWN and first[1].clock_event_reasons == SW_POWER_CAP
    hbm = first[0].memory_temperature_c
    assert isinstance(hbm, Unavailable) and hbm.unavailable == "not_supported"  # never 0
    assert [limit.slowdown_temperature_c for limit in limits] == [89] * 4 and limits[0].power_limit_w == 700.0
    assert all(later[0].t_s > earlier[0].t_s for earlier, later in itertools.pairwise(moments))


def test_a_sampler_without_nvml_says_why_and_samples_nothing():
    def no_driver():
        raise RuntimeError("no NVIDIA driver found")

    moments: list = []
    sampler = TelemetrySampler(no_driver, [(0, 0)], 0.05, lambda limits: None, moments.append)
    sampler.start()
    sampler.stop()
    assert moments == [] and "no NVIDIA driver found" in sampler.error


def test_a_live_run_whose_telemetry_could_not_start_errs_on_every_telemetry_test(tmp_path, monkeypatch):
    from gpuaccept.stages import telemetry as session_telemetry

    def no_nvml():
        raise RuntimeError("NVML could not start: Driver Not Loaded")

    monkeypatch.setattr(session_telemetry, "nvml_of_this_machine", no_nvml)
    log = session_telemetry.TelemetryLog(tmp_path, example_facts("h200x4"), 0.05)
    log.start()
    log.stop()
    record_load(tmp_path, "compute", log.sampler.started, log.sampler.started + 30.0)
    found = read_telemetry(tmp_path)  # what a pytest-xdist worker reads: the reason is in the file
    assert found is not None and found.samples == [] and found.not_sampled == "NVML could not start: Driver Not Loaded"
    profile, facts = h200x4_profile(), facts_with(found)
    for check in (telemetry_checks.clock_slowdown, telemetry_checks.max_temperature, telemetry_checks.sm_clock_under_load):
        verdict = check(profile, facts, 1)
        assert verdict.outcome is Outcome.ERROR, verdict
        assert verdict.message.startswith("gpu1: telemetry could not be sampled: NVML could not start: Driver Not Loaded")


def test_a_sampler_stuck_opening_nvml_leaves_a_series_whose_tests_err(tmp_path, monkeypatch):
    import threading

    from gpuaccept.stages import telemetry as session_telemetry

    released = threading.Event()

    def stuck_driver():
        released.wait(30)  # a driver call that does not return
        raise RuntimeError("gave up")

    monkeypatch.setattr(session_telemetry, "nvml_of_this_machine", stuck_driver)
    log = session_telemetry.TelemetryLog(tmp_path, example_facts("h200x4"), 1.0)
    log.start()
    try:
        record_load(tmp_path, "nccl", log.sampler.started + 1.0, log.sampler.started + 31.0)
        found = read_telemetry(tmp_path)
        assert found is not None and found.samples == [] and found.not_sampled == ""
        verdict = telemetry_checks.max_temperature(h200x4_profile(), facts_with(found), 2)
        assert verdict.outcome is Outcome.ERROR and "the sampler stopped" in verdict.message
    finally:
        released.set()
        log.stop()


def test_loads_long_enough_to_sample_without_a_sample_are_an_error_not_a_skip():
    profile = h200x4_profile()
    stalled = facts_with(telemetry([sample(0.5, 0)], loads=((2.0, 32.0),)))  # one sample, before a 30 s load
    verdict = telemetry_checks.clock_slowdown(profile, stalled, 0)
    assert verdict.outcome is Outcome.ERROR
    assert "no telemetry sample of gpu0 was taken while a stage loaded the GPUs (1 load stage(s), 30 s)" in verdict.message
    assert "the sampler stopped" in verdict.message
    brief = facts_with(telemetry([sample(0.5, 0)], loads=((2.0, 2.8),)))  # a load shorter than a period
    assert telemetry_checks.clock_slowdown(profile, brief, 0).outcome is Outcome.NOT_APPLICABLE


def test_telemetry_files_give_one_series_with_load_windows_and_drop_a_cut_line(tmp_path):
    header = {"started": 1000.0, "started_at": "2026-11-22T23:00:00+00:00", "period_s": 1.0,
              "limits": [{"gpu": 0, "slowdown_temperature_c": 89, "max_sm_clock_mhz": 1980, "power_limit_w": 700.0}]}
    lines = [json.dumps(header)] + [json.dumps({"sample": sample(t, 0).model_dump(mode="json")}) for t in (0.0, 1.0)]
    (tmp_path / TELEMETRY_FILE).write_text("\n".join(lines) + '\n{"sample": {"t_s": 2.0, "gp', encoding="utf-8")
    record_load(tmp_path, "copies", 1000.5, 1001.5)
    (tmp_path / LOADS_FILE).open("a").write('{"stage": "nc')
    found = read_telemetry(tmp_path)
    assert found is not None and [s.t_s for s in found.samples] == [0.0, 1.0]
    assert found.loads == [LoadWindow(stage="copies", started_s=0.5, ended_s=1.5)]
    assert found.under_load(found.samples[1]) and not found.under_load(found.samples[0])
    assert read_telemetry(tmp_path / "none") is None


# -- telemetry checks ------------------------------------------------------------------------------------


def test_hardware_slowdown_for_long_enough_fails_that_gpu_only():
    profile = h200x4_profile()
    samples = [sample(t, g) for t in range(100) for g in range(4) if g != 2]
    # gpu2: 2 of 100 samples under load in hardware slowdown (2% > 1%); more slowdown outside the load is not counted
    samples += [sample(t, 2, SW_POWER_CAP | (HW_SLOWDOWN if t in (10, 11) else 0)) for t in range(100)]
    samples += [sample(t, 2, HW_SLOWDOWN) for t in range(300, 310)]
    facts = facts_with(telemetry(samples, loads=((0.0, 99.5),)))
    verdicts = {g: telemetry_checks.clock_slowdown(profile, facts, g) for g in range(4)}
    assert [v.outcome for v in verdicts.values()] == [Outcome.PASSED, Outcome.PASSED, Outcome.FAILED, Outcome.PASSED]
    failed = verdicts[2]
    assert failed.measured == 2.0 and failed.criterion.model_dump(mode="json") == {"op": "<=", "limit": 1.0, "unit": "%"}
    assert failed.message.startswith("gpu2: clock slowdown (hardware, thermal, power brake) 2 % > 1 % (2 of 100 samples under load")
    assert "hw_slowdown" in failed.message and "profile h200-4-nvswitch" in failed.message
    # software power capping is how a loaded GPU runs: gpu0 spent every sample in it and passed
    assert verdicts[0].measured == 0.0


def test_one_slowdown_sample_within_the_share_passes():
    samples = [sample(t, 0, HW_SLOWDOWN if t == 5 else SW_POWER_CAP) for t in range(200)]
    verdict = telemetry_checks.clock_slowdown(h200x4_profile(), facts_with(telemetry(samples, gpus=1)), 0)
    assert verdict.outcome is Outcome.PASSED and verdict.measured == 0.5


def test_telemetry_checks_skip_with_the_reason_where_there_is_nothing_to_judge():
    profile = h200x4_profile()
    # facts that hold no telemetry where the profile asks for loads to sample it under: could not judge
    none = telemetry_checks.clock_slowdown(profile, facts_with(None), 0)
    assert none.outcome is Outcome.ERROR and none.missing == "the facts hold no telemetry"
    unloaded = telemetry_checks.clock_slowdown(profile, facts_with(telemetry([sample(1, 0)], loads=())), 0)
    assert unloaded.outcome is Outcome.NOT_APPLICABLE and "while a stage loaded the GPUs" in unloaded.message
    not_supported = Unavailable(unavailable="not_supported", detail="x: NOT_SUPPORTED")
    unsupported = sample(1, 0).model_copy(update={"clock_event_reasons": not_supported})
    skipped = telemetry_checks.clock_slowdown(profile, facts_with(telemetry([unsupported])), 0)
    assert skipped.outcome is Outcome.NOT_APPLICABLE and "not supported" in skipped.message
    no_floor = ProfileCatalog.with_shipped().load("rtx4090-2-pcie")  # GeForce: no clock floor stated
    clocks = telemetry_checks.sm_clock_under_load(no_floor, facts_with(telemetry([sample(1, 0)])), 0)
    assert clocks.outcome is Outcome.NOT_APPLICABLE and "sets no burnin.min_sm_clock_mhz" in clocks.message


def test_temperature_against_nvml_slowdown_and_clocks_against_the_profile(tmp_path):
    profile = h200x4_profile()
    hot = facts_with(telemetry([sample(t, 0, temperature=70 + t) for t in range(25)]))
    verdict = telemetry_checks.max_temperature(profile, hot, 0)
    assert verdict.outcome is Outcome.FAILED and verdict.measured == 94
    assert "hottest GPU temperature 94 °C > 88 °C (NVML's slowdown temperature" in verdict.message  # reaching 89 slows it
    cool = telemetry_checks.max_temperature(profile, facts_with(telemetry([sample(t, 0) for t in range(5)])), 0)
    assert cool.outcome is Outcome.PASSED
    floor = write(tmp_path / "p.yaml", "schema: 1\nextends: h200-4-nvswitch\nburnin: {min_sm_clock_mhz: 1700}\n")
    clocked = load_profile(floor, ProfileCatalog.with_shipped().base_folders() + [floor.parent])
    slow = facts_with(telemetry([sample(t, 0, sm=1400) for t in range(5)]))
    verdict = telemetry_checks.sm_clock_under_load(clocked, slow, 0)
    assert verdict.outcome is Outcome.FAILED and "SM clock under load 1400 MHz < 1700 MHz" in verdict.message
    # gpu0 idle at 345 MHz for most of a stage's window (under -n 2, waiting while gpu1's longer load
    # runs): its idle samples do not count, its busy ones at 1980 MHz do (seen on a lent 2xH200)
    waiting = [sample(t, 0, sm=1980) for t in range(4)] + [sample(t, 0, sm=345, busy=0) for t in range(4, 20)]
    passed = telemetry_checks.sm_clock_under_load(clocked, facts_with(telemetry(waiting)), 0)
    assert passed.outcome is Outcome.PASSED and passed.measured == 1980
    assert "median of 4 samples 50%+ busy, lowest 1980 MHz" in passed.message
    idle = telemetry_checks.sm_clock_under_load(clocked, facts_with(telemetry([sample(t, 0, sm=345, busy=0) for t in range(5)])), 0)
    assert idle.outcome is Outcome.NOT_APPLICABLE and "at least 50% busy" in idle.message


# -- burn-in values over rounds ----------------------------------------------------------------------------


def _round(index: int, busbw: float) -> BurnInRound:
    sweep = example_facts("h200x4-measured").measurements.collectives
    assert sweep is not None
    results = [r.model_copy(update={"busbw_GBps": busbw}) for r in sweep.results]
    return BurnInRound(
        index=index, started_s=60.0 * (index - 1), wall_s=30.0, stages=["nccl"],
        measurements=Measurements(collectives=sweep.model_copy(update={"results": results})),
    )


def test_a_burn_in_value_fails_when_two_rounds_miss_and_one_round_alone_is_transient():
    profile = h200x4_profile()
    case = next(c for c in burnin_checks.burnin_cases(profile) if c.id == "busbw-all_reduce-1GiB")
    healthy = BurnIn(duration_s=300, elapsed_s=300, ended="deadline", rounds=[_round(1, 354.0), _round(2, 352.5), _round(3, 355.0)])
    passed = burnin_checks.over_rounds(profile, facts_with(burnin=healthy), case)
    assert passed.outcome is Outcome.PASSED and passed.measured == 354.0 and not passed.transient
    assert passed.context["burnin_values"] == [354.0, 352.5, 355.0] and passed.context["burnin_worst_round"] == 2
    # one round dipped, the others held: one sample, not a failure, but said
    dipped = healthy.model_copy(update={"rounds": [_round(1, 354.0), _round(2, 120.0), _round(3, 355.0)]})
    one_off = burnin_checks.over_rounds(profile, facts_with(burnin=dipped), case)
    assert one_off.outcome is Outcome.PASSED and one_off.transient and one_off.measured == 354.0
    assert "round 2 alone missed" in one_off.message and "rounds 1, 2, 3: 354, 120, 355 GB/s" in one_off.message
    # two rounds dipped: confirmed, and the better of the two misses is the value judged
    twice = healthy.model_copy(update={"rounds": [_round(1, 354.0), _round(2, 120.0), _round(3, 150.0)]})
    failed = burnin_checks.over_rounds(profile, facts_with(burnin=twice), case)
    assert failed.outcome is Outcome.FAILED and failed.measured == 150.0
    assert "[deciding: round 3; rounds 1, 2, 3: 354, 120, 150 GB/s]" in failed.message
    # fabric rounds between the load's rounds: the rounds that measured the value are named by number
    apart = healthy.model_copy(update={"rounds": [_round(2, 354.0), _round(4, 120.0), _round(6, 150.0)]})
    apart_verdict = burnin_checks.over_rounds(profile, facts_with(burnin=apart), case)
    assert "[deciding: round 6; rounds 2, 4, 6: 354, 120, 150 GB/s]" in apart_verdict.message
    # a single round decides alone
    single = healthy.model_copy(update={"rounds": [_round(1, 120.0)]})
    assert burnin_checks.over_rounds(profile, facts_with(burnin=single), case).outcome is Outcome.FAILED
    missing = burnin_checks.over_rounds(profile, facts_with(burnin=None), case)
    assert missing.outcome is Outcome.ERROR
    ids = [c.id for c in burnin_checks.burnin_cases(profile)]
    assert "local_copy-gpu0" in ids and "pair_busbw-gpu0-gpu1" in ids and "p2p_copy-gpu3-gpu0" in ids


def _round_where(index: int, change) -> BurnInRound:
    """A healthy round (354 GB/s everywhere) whose collective sweep `change` alters."""
    healthy = _round(index, 354.0)
    sweep = healthy.measurements.collectives
    assert sweep is not None
    return healthy.model_copy(update={"measurements": Measurements(collectives=change(sweep))})


def test_wrong_data_or_a_hung_step_in_one_burn_in_round_decides_at_once():
    profile = h200x4_profile()
    cases = {c.id: c for c in burnin_checks.burnin_cases(profile)}
    one_gib = CollectiveKey(collective="all_reduce", size_bytes=1 << 30)

    def wrong(sweep):
        return sweep.model_copy(update={"results": [r.model_copy(update={"wrong": 1024}) for r in sweep.results]})

    def hung(sweep):
        kept = [r for r in sweep.results if r.key != one_gib]
        failure = StepFailure(step="all_reduce 1 GiB", reason="timeout", message="all_reduce 1 GiB: no progress in 20 s", keys=[one_gib])
        return sweep.model_copy(update={"results": kept, "failures": [failure]})

    def dropped(sweep):
        return sweep.model_copy(update={"results": [r for r in sweep.results if r.key != one_gib]})

    for change, case, outcome in (
        (wrong, "collective_correct-all_reduce-1GiB", Outcome.FAILED),
        (hung, "busbw-all_reduce-1GiB", Outcome.FAILED),
        (dropped, "busbw-all_reduce-1GiB", Outcome.ERROR),
    ):
        rounds = [_round(1, 354.0), _round_where(2, change), _round(3, 355.0), _round(4, 353.0)]
        burnin = BurnIn(duration_s=300, elapsed_s=300, ended="deadline", rounds=rounds)
        verdict = burnin_checks.over_rounds(profile, facts_with(burnin=burnin), cases[case])
        assert verdict.outcome is outcome and not verdict.transient, (case, verdict.message)
        assert "deciding: round 2; rounds 1, 2, 3, 4:" in verdict.message
    healthy = BurnIn(duration_s=300, elapsed_s=300, ended="deadline", rounds=[_round(i, 354.0) for i in (1, 2, 3)])
    assert burnin_checks.over_rounds(profile, facts_with(burnin=healthy), cases["collective_correct-all_reduce-1GiB"]).outcome is (
        Outcome.PASSED
    )


# -- the driver ----------------------------------------------------------------------------------------


class FakeStore:
    """Stands in for MeasurementStore: each stage 'takes' its time on a fake clock."""

    def __init__(self, clock, interrupt_at: int | None = None):
        self.folder = clock.folder
        self.clock = clock
        self.ran: list[tuple[float, str]] = []
        self.loads: list[str] = []
        self.interrupt_at = interrupt_at
        self.drills = NO_DRILLS  # the run's drills, as MeasurementStore holds them

    def measure_stage(self, stage, facts, profile):
        if self.interrupt_at is not None and len(self.ran) == self.interrupt_at:
            raise KeyboardInterrupt("signal 15")
        self.ran.append((self.clock.now, stage))
        self.clock.now += {"copies": 20.0, "nccl": 40.0}[stage]
        return Measurements()

    def stage_ran(self, stage, began, facts):
        self.loads.append(stage)


class FakeClock:
    def __init__(self, folder: Path):
        self.folder = folder
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeLoad:
    """Stands in for SustainedLoad on the fake clock: runs until its duration is spent, a round every 30 s;
    records which fabric stages ran beside it."""

    def __init__(self, clock: FakeClock, spec, gpus, duration_s, **_):
        self.clock, self.gpus, self.duration_s = clock, gpus, duration_s
        self.began = 0.0
        self.beside: list[float] = []
        self.stopped = self.closed = False

    def start(self) -> None:
        self.began = self.clock.now

    @property
    def running(self) -> bool:
        return not self.stopped and self.clock.now < self.began + self.duration_s

    def stop(self) -> None:
        self.stopped = True

    def wait(self) -> None:
        self.clock.now = max(self.clock.now, self.began + self.duration_s) if not self.stopped else self.clock.now

    @contextlib.contextmanager
    def fabric_beside(self):
        self.beside.append(self.clock.now)
        yield

    def rounds(self) -> list[LoadRound]:
        ended = min(self.clock.now, self.began + self.duration_s)
        count = max(1, int((ended - self.began) // 30))
        sweep = ComputeSweep(backend="cuda", torch_version="2.11", gpus=self.gpus, wall_s=30.0, results=[])
        return [LoadRound(i, self.began + 30 * (i - 1), self.began + 30 * i, sweep) for i in range(1, count + 1)]

    def close(self) -> None:
        self.closed = True


def _driver(tmp_path, duration_s, interrupt_at=None, profile_text="schema: 1\nextends: h200-4-nvswitch\nburnin: {fabric_interval: 2m}\n",
            sustained=False):
    path = write(tmp_path / "p.yaml", profile_text)
    profile = load_profile(path, ProfileCatalog.with_shipped().base_folders())
    if not sustained:  # the schedule of the copies and the fabric alone
        profile = dataclasses.replace(profile, spec=profile.spec.model_copy(update={"compute": None}))
    clock = FakeClock(tmp_path)
    store = FakeStore(clock, interrupt_at)
    lines: list[str] = []
    loads: list[FakeLoad] = []

    def start_load(*args, **kwargs):
        loads.append(FakeLoad(clock, *args, **kwargs))
        return loads[-1]

    driver = BurninDriver(
        store, example_facts("h200x4"), profile, duration_s, say=lines.append, clock=clock, sleep=clock.sleep,  # type: ignore[arg-type]
        start_load=start_load,  # type: ignore[arg-type]
    )
    return driver, store, lines, loads


def test_without_a_sustained_load_the_fabric_stages_run_at_their_interval_until_the_deadline(tmp_path):
    driver, store, lines, loads = _driver(tmp_path, 300)
    burnin = driver.run()
    assert store.ran == [(0.0, "copies"), (20.0, "nccl"), (120.0, "copies"), (140.0, "nccl"), (240.0, "copies"), (260.0, "nccl")]
    assert not loads and burnin.load_started_s is None
    assert burnin.ended == "deadline" and [r.stages for r in burnin.rounds] == [["copies", "nccl"]] * 3
    assert not any(r.beside_load for r in burnin.rounds)
    assert "gpu-accept: burn-in: nccl stage; 2m20s of 5m00s done, 2m40s left" in lines
    assert lines[-1] == "gpu-accept: burn-in done: 3 round(s) in 5m00s of 5m00s"
    assert json.loads((tmp_path / "burnin.json").read_text())["ended"] == "deadline"


def test_the_sustained_load_follows_the_fabric_at_rest_and_the_fabric_runs_again_beside_it(tmp_path):
    driver, store, lines, loads = _driver(tmp_path, 300, sustained=True)
    burnin = driver.run()
    (load,) = loads
    # the fabric once at rest (0-60 s), then the load for what is left of the duration, the fabric beside it every 2 minutes
    assert load.began == 60.0 and load.duration_s == 240.0 and load.closed
    assert load.beside == [120.0, 240.0] and [at for at, stage in store.ran if stage == "copies"] == [0.0, 120.0, 240.0]
    assert burnin.load_started_s == 60.0 and burnin.load_ended_s == 300.0 and store.loads == ["sustained"]
    fabric = [r for r in burnin.rounds if r.stages == ["copies", "nccl"]]
    assert [r.beside_load for r in fabric] == [False, True, True]
    load_rounds = [r for r in burnin.rounds if r.stages == ["compute"]]
    assert len(load_rounds) == 8 and load_rounds[0].started_s == 60.0
    # numbered in the order they began
    assert [r.index for r in burnin.rounds] == list(range(1, 12))
    assert [r.started_s for r in burnin.rounds] == sorted(r.started_s for r in burnin.rounds)
    assert "gpu-accept: burn-in: copies stage beside the sustained load; 2m00s of 5m00s done, 3m00s left" in lines


def test_a_signal_ends_the_load_and_keeps_what_ran(tmp_path):
    driver, _, lines, loads = _driver(tmp_path, 3600, interrupt_at=3, sustained=True)
    burnin = driver.run()
    assert burnin.ended == "interrupted" and loads[0].stopped and loads[0].closed
    # the fabric at rest, then beside the load its copy stage finished and the signal came in its NCCL stage
    fabric = [r for r in burnin.rounds if "compute" not in r.stages]
    assert [(r.stages, r.beside_load) for r in fabric] == [(["copies", "nccl"], False), (["copies"], True)]
    assert any(r.stages == ["compute"] for r in burnin.rounds)
    assert lines[-1].startswith("gpu-accept: burn-in ended by a signal:")


def test_a_burn_in_of_fabric_stages_only_waits_for_them_instead_of_spinning(tmp_path):
    driver, store, _, _ = _driver(tmp_path, 300)
    driver.profile = dataclasses.replace(driver.profile, spec=driver.profile.spec.model_copy(update={"copies": None}))
    sleeps: list[float] = []
    clock_sleep = driver.sleep
    driver.sleep = lambda seconds: (sleeps.append(seconds), clock_sleep(seconds))  # type: ignore[func-returns-value]
    driver.run()
    assert store.ran == [(0.0, "nccl"), (120.0, "nccl"), (240.0, "nccl")]
    assert len(sleeps) <= 3  # one wait until each next round, and one until the end


# -- the HTML report --------------------------------------------------------------------------------------


def test_the_report_plots_telemetry_per_gpu_and_each_round(tmp_path):
    from gpuaccept.facts.run_record import load_results

    record = load_results(ROOT / "examples" / "results" / "h200x4.json")
    samples = [sample(t, g, temperature=50 + t % 7) for t in range(30) for g in range(4)]
    burnin = BurnIn(duration_s=120, elapsed_s=130, ended="deadline", rounds=[_round(1, 354.0), _round(2, 350.0)])
    facts = facts_with(telemetry(samples), burnin)
    page = render_html(record.model_copy(update={"facts": facts}))
    for chart in ("telemetry-sm-clock-mhz", "telemetry-temperature-c", "telemetry-power-w", "burnin-round-0"):
        assert f"id='{chart}'" in page or f'id="{chart}"' in page, chart
    assert "id='telemetry'" in page and "NVML slowdown 89" in page
    assert "telemetry-memory-temperature-c" not in page  # not supported: no line drawn at 0
    from tests.report_page import Page, traces

    charts = Page(page).charts()
    # one time unit for the whole run (130 s of burn-in: minutes), and each round drawn as a point
    assert {charts[c]["layout"]["xaxis"]["title"]["text"] for c in ("telemetry-sm-clock-mhz", "burnin-round-0")} == {
        "time since start (min)"
    }
    assert all(trace["mode"] == "lines+markers" for trace in traces(charts["burnin-round-0"], "series"))
    assert "<div class='grid wide'>" in page  # the telemetry cards share the page's width
    plain = render_html(record)
    assert "id='telemetry'" not in plain


# -- the command line --------------------------------------------------------------------------------------


def test_a_bad_duration_is_one_line_and_exit_2_before_anything_runs(capsys, tmp_path):
    from gpuaccept.cli import main

    assert main(["burn-in", "--duration", "5 minutes", "--reports", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "gpu-accept: --duration '5 minutes' is not a duration: write a number with s, m or h (90s, 30m, 2h)"
    ]
    assert main(["run", "--duration", "5m", "--reports", str(tmp_path)]) == 2
    assert "only a burn-in has a duration (--level burn-in, not standard)" in capsys.readouterr().err
    facts = str(ROOT / "examples" / "facts" / "h200x4-measured.json")
    assert main(["run", "--facts", facts, "--level", "burn-in", "--duration", "30s", "--reports", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "gpu-accept: --duration 30s: recorded facts are judged on the rounds they hold; nothing runs (leave out --facts)"
    ]
    bad_profile = write(tmp_path / "p.yaml", "schema: 1\nextends: h200-4-nvswitch\nburnin: {duration: 30 minutes}\n")
    from gpuaccept.errors import ProfileError

    with pytest.raises(ProfileError) as error:
        load_profile(bad_profile, ProfileCatalog.with_shipped().base_folders())
    assert any("burnin.duration" in line for line in error.value.lines())


def test_a_load_round_is_said_done_once_every_gpu_has_finished_it_whichever_finishes_last(tmp_path):
    # each GPU's worker says it finished a round on a thread of its own, in any order: the line that
    # says the round is done (what a person, or a script that stops the burn-in then, reads) waits
    # for the last of them, the machine's last GPU or not
    driver, _, lines, _ = _driver(tmp_path, 300, sustained=True)
    for gpu in (3, 0, 2):
        driver._round_done(gpu, 1)
    assert not any("load round 1 done" in line for line in lines)  # gpu1's round 1 still runs
    driver._round_done(0, 2)
    driver._round_done(1, 1)
    assert [line for line in lines if "load round" in line] == [lines[-1]] and "load round 1 done" in lines[-1]
    for gpu in (3, 2, 1):
        driver._round_done(gpu, 2)
    assert sum("load round 2 done" in line for line in lines) == 1
