"""The per-GPU loads without starting a process: their keys, plans and limits, the checks on made-up
results, the store's per-GPU files and confirmation rounds, and the locks that keep a fabric stage
away from per-GPU ones (checked by trying locks without waiting, never by timing)."""

from __future__ import annotations

import pytest

from gpuaccept.checks import compute
from gpuaccept.checks.verdict import Outcome
from gpuaccept.facts.measurements import ComputeSweep, GemmResult, HbmResult, Measurements, MemtestResult, StepFailure
from gpuaccept.profile import load_profile
from gpuaccept.stages.compute import compute_plan, visible_gpu
from gpuaccept.stages.locks import Busy, GpuLocks
from gpuaccept.stages.registry import STAGES
from gpuaccept.stages.store import MeasurementStore
from gpuaccept.vocabulary.steps import LoadKey, parse_step_key
from tests.helpers import example_facts, write

PROBED = example_facts("h200x4-measured").model_copy(update={"measurements": Measurements()})

PROFILE_TEXT = """
    schema: 1
    extends: bases/hgx-h200
    gpus: {count: 4}
    compute:
      gemm: {size: 8192, min_tflops: 660, within_best: 0.1}
      hbm: {size: 1GiB, copy_min: 3850, triad_min: 3030}
      memtest: {fraction: 0.9, time_cap_s: 30}
"""


@pytest.fixture
def profile(tmp_path):
    from gpuaccept.resources import shipped_dir

    return load_profile(write(tmp_path / "loads.yaml", PROFILE_TEXT), [shipped_dir("profiles")])


def gemm(
    gpu: int, tflops: float = 750.0, mismatches: int = 0, nonfinite: int = 0, reference_wrong: int = 0,
    reference_max_error: float | None = 0.003,
) -> GemmResult:
    return GemmResult(
        gpu=gpu, size=8192, dtype="bfloat16", repeats=50, verify_repeats=3, time_us=2 * 8192**3 / tflops / 1e6,
        tflops=tflops, mismatches=mismatches, nonfinite=nonfinite, reference_wrong=reference_wrong,
        reference_elements=65536, reference_max_error=reference_max_error,
    )


def hbm(gpu: int, what: str, GBps: float, wrong: int = 0) -> HbmResult:
    return HbmResult(load=what, gpu=gpu, size_bytes=1 << 30, iterations=20, time_us=500.0, GBps=GBps, wrong=wrong)


def memtest(gpu: int, mismatches: int = 0) -> MemtestResult:
    return MemtestResult(
        gpu=gpu, bytes_tested=120 << 30, free_bytes=139 << 30, total_bytes=140 << 30, chunk_bytes=256 << 20,
        passes_planned=36, passes_done=9, mismatches=mismatches, capped=True, seconds=30.2,
    )


def healthy(gpu: int, **gemm_changes) -> list:
    return [gemm(gpu, **gemm_changes), hbm(gpu, "hbm_copy", 4279.0), hbm(gpu, "hbm_triad", 4100.0), memtest(gpu)]


def sweep(results: list, gpus: list[int] | None = None, failures: list[StepFailure] | None = None) -> ComputeSweep:
    return ComputeSweep(
        backend="cuda", torch_version="2.11.0", gpus=gpus if gpus is not None else sorted({r.gpu for r in results}),
        wall_s=40.0, results=results, failures=failures or [],
    )


def facts_with(compute_sweep: ComputeSweep | None):
    return PROBED.model_copy(update={"measurements": Measurements(compute=compute_sweep)})


CHECKS = [compute.gemm_throughput, compute.gemm_within_best, compute.gemm_correct, compute.hbm_copy, compute.hbm_triad, compute.memtest]


def failed_tests(profile, facts) -> set[str]:
    return {
        f"{check.__name__}[gpu{gpu}]"
        for check in CHECKS
        for gpu in range(4)
        if check(profile, facts, gpu).outcome is not Outcome.PASSED
    }


def test_load_keys_read_back_from_their_strings():
    for text in ("load/gemm/gpu0", "load/hbm_copy/gpu3", "load/hbm_triad/gpu1", "load/memtest/gpu12"):
        key = parse_step_key(text)
        assert isinstance(key, LoadKey) and str(key) == text and key.stage == "compute"
    for bad in ("load/gemm/gpu0-gpu1", "load/fft/gpu0", "load/gemm"):
        with pytest.raises(ValueError, match="is not a step key"):
            parse_step_key(bad)


def test_a_healthy_machine_passes_every_load_check(profile):
    facts = facts_with(sweep([r for gpu in range(4) for r in healthy(gpu)]))
    assert failed_tests(profile, facts) == set()
    verdict = compute.gemm_throughput(profile, facts, 2)
    # the profile's 3% marginal band puts the marginal line inside the criterion
    assert verdict.criterion.model_dump(mode="json") == {"op": ">=", "limit": 660, "marginal_minimum": 679.8, "unit": "TFLOP/s"}
    assert verdict.measured == 750.0
    assert verdict.message.startswith("gpu2: GEMM 750 TFLOP/s (bfloat16 8192x8192x8192")


def test_a_slow_gpu_fails_its_own_throughput_and_within_best_tests_only(profile):
    results = [r for gpu in (0, 2, 3) for r in healthy(gpu)] + healthy(1, tflops=420.0)
    facts = facts_with(sweep(results))
    assert failed_tests(profile, facts) == {"gemm_throughput[gpu1]", "gemm_within_best[gpu1]"}
    verdict = compute.gemm_within_best(profile, facts, 1)
    assert verdict.criterion.limit == pytest.approx(675.0)  # 10% below the best GPU's 750
    assert "gpu1: GEMM 420 TFLOP/s < 675 TFLOP/s (at most 10% below the best GPU, gpu0 at 750 TFLOP/s" in verdict.message


def test_a_gpu_within_ten_percent_of_the_best_passes_and_one_just_outside_fails(profile):
    results = [r for gpu in (0, 1) for r in healthy(gpu)] + healthy(2, tflops=700.0) + healthy(3, tflops=674.0)
    facts = facts_with(sweep(results))
    assert compute.gemm_within_best(profile, facts, 2).outcome is Outcome.PASSED
    assert compute.gemm_within_best(profile, facts, 3).outcome is Outcome.FAILED
    assert compute.gemm_throughput(profile, facts, 3).outcome is Outcome.PASSED  # above its floor all the same


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ({"mismatches": 1}, "1 element(s) differing from the first result"),
        ({"nonfinite": 4}, "4 NaN/Inf"),
        ({"nonfinite": 4, "reference_wrong": 4, "reference_max_error": None}, "largest error not a number: the block held NaN or Inf"),
        ({"reference_wrong": 2}, "2 of 65536 outside the float32 reference's tolerance"),
    ],
)
def test_a_wrong_gemm_result_fails_correctness_naming_the_gpu_and_is_final(profile, fault, said):
    results = [r for gpu in (0, 1, 3) for r in healthy(gpu)] + healthy(2, **fault)
    facts = facts_with(sweep(results))
    assert failed_tests(profile, facts) == {"gemm_correct[gpu2]"}
    verdict = compute.gemm_correct(profile, facts, 2)
    assert verdict.final and verdict.message.startswith("gpu2: GEMM result check: ") and said in verdict.message
    assert verdict.criterion.model_dump(mode="json") == {"op": "==", "value": 0, "unit": "wrong elements"}


def test_memory_and_bandwidth_faults_fail_their_own_tests(profile):
    results = [r for gpu in (0, 1) for r in healthy(gpu)]
    results += [gemm(2), hbm(2, "hbm_copy", 3000.0), hbm(2, "hbm_triad", 4100.0), memtest(2)]
    results += [gemm(3), hbm(3, "hbm_copy", 4279.0), hbm(3, "hbm_triad", 4100.0, wrong=5), memtest(3, mismatches=17)]
    facts = facts_with(sweep(results))
    assert failed_tests(profile, facts) == {"hbm_copy[gpu2]", "hbm_triad[gpu3]", "memtest[gpu3]"}
    assert compute.hbm_copy(profile, facts, 2).message.startswith("gpu2: HBM copy 3000.0 GB/s < 3850.0 GB/s (1 GiB arrays")
    mem = compute.memtest(profile, facts, 3)
    assert mem.final and mem.measured == 17 and "9 of 36 passes in 30.2 s (time cap 30 s)" in mem.message


def test_a_hung_load_fails_its_gpu_by_name_and_no_measurement_is_an_error(profile):
    hung = StepFailure(step="GEMM on gpu1", reason="timeout", message="GEMM on gpu1 did not finish within 20 s", keys=[LoadKey("gemm", 1)])
    results = [r for gpu in range(4) for r in healthy(gpu) if not (gpu == 1 and isinstance(r, GemmResult))]
    facts = facts_with(sweep(results, failures=[hung]))
    assert failed_tests(profile, facts) == {"gemm_throughput[gpu1]", "gemm_within_best[gpu1]", "gemm_correct[gpu1]"}
    assert compute.gemm_throughput(profile, facts, 1).message == "gpu1: GEMM on gpu1 did not finish within 20 s (profile loads)"
    assert compute.gemm_within_best(profile, facts, 0).outcome is Outcome.PASSED  # the best of those measured
    # facts recorded before the compute stage could not judge what the profile asks of the loads:
    # never passed, never skipped
    nothing = compute.memtest(profile, facts_with(None), 0)
    assert nothing.outcome is Outcome.ERROR and nothing.missing == "the facts hold no per-GPU loads"
    assert "gpu0: the facts hold no per-GPU loads (recorded without the compute stage; " in nothing.message


def test_a_profile_without_floors_asks_nothing(tmp_path):
    from gpuaccept.resources import shipped_dir

    text = PROFILE_TEXT.replace(", min_tflops: 660, within_best: 0.1", ", min_tflops: null, within_best: null").replace(
        ", copy_min: 3850, triad_min: 3030", ", copy_min: null, triad_min: null"
    )
    bare = load_profile(write(tmp_path / "bare.yaml", text), [shipped_dir("profiles")])
    facts = facts_with(sweep([r for gpu in range(4) for r in healthy(gpu)]))
    for check in (compute.gemm_throughput, compute.gemm_within_best, compute.hbm_copy, compute.hbm_triad):
        assert check(bare, facts, 0).outcome is Outcome.NOT_APPLICABLE
    assert compute.gemm_correct(bare, facts, 0).outcome is Outcome.PASSED


def test_each_gpu_gets_its_own_plan_and_sees_only_its_gpu(profile):
    plan = compute_plan(profile.spec, 3)
    assert [str(key) for step in plan.steps for key in step.keys] == [
        "load/gemm/gpu3", "load/hbm_copy/gpu3", "load/hbm_triad/gpu3", "load/memtest/gpu3",
    ]
    gemm_step, _, memtest_step = plan.steps
    # at the floor's pace (660 TFLOP/s) the 5 + 500 + 3 + 2 products of 8192^3 take 0.85 s, with 50
    # times slack 42.5 s; the memory test stops itself at its cap, and gets a minute more
    assert gemm_step.timeout_s == pytest.approx(510 * 2 * 8192**3 / 660e12 * 50) and memtest_step.timeout_s == 90.0
    assert compute_plan(profile.spec.model_copy(update={"compute": profile.spec.compute.model_copy(update={
        "gemm": profile.spec.compute.gemm.model_copy(update={"repeats": 50})})}), 3).steps[0].timeout_s == 20.0  # the minimum
    only = compute_plan(profile.spec, 3, only={LoadKey("hbm_triad", 3)})
    assert [step.kind for step in only.steps] == ["hbm"]
    assert visible_gpu({}, 2) == "2"
    assert visible_gpu({"CUDA_VISIBLE_DEVICES": "4,5,6,7"}, 2) == "6"


class FakeLoads:
    """Stands in for the compute stage: healthy results for the GPUs asked, a slow gpu1 at first."""

    def __init__(self, slow_first: float | None = None, slow_always: bool = False):
        self.asked: list[tuple[list[int] | None, set | None]] = []
        self.slow_first = slow_first
        self.slow_always = slow_always  # measured again, still slow: a GPU that is slow, not a dip

    def __call__(self, stage, facts, profile, gpus, only=None, attempt=0):
        assert stage.name == "compute"
        self.asked.append((gpus, only))
        results = []
        for gpu in gpus:
            slow = gpu == 1 and self.slow_first and (attempt == 0 or self.slow_always)
            tflops = self.slow_first if slow else 750.0
            results += healthy(gpu, tflops=tflops) if only is None else [gemm(gpu, tflops=tflops)]
        return Measurements(compute=sweep(results, gpus=gpus))


def test_the_first_ask_loads_every_gpu_at_once_and_none_twice(tmp_path, monkeypatch, profile):
    store = MeasurementStore(tmp_path, live=True)
    loads = FakeLoads()
    monkeypatch.setattr(store, "_measure", loads)
    one = store.with_stage("compute", PROBED, profile, [2])  # one GPU's test asks first: every GPU is loaded
    assert loads.asked == [([0, 1, 2, 3], None)]
    assert sorted(path.name for path in tmp_path.glob("compute-*.json")) == ["compute-gpu0-gpu1-gpu2-gpu3.json"]
    assert one.measurements.compute.result(LoadKey("gemm", 2)).tflops == 750.0
    every = store.with_stage("compute", PROBED, profile)
    assert loads.asked == [([0, 1, 2, 3], None)]  # nothing measured twice
    assert every.measurements.compute.gpus == [0, 1, 2, 3] and failed_tests(profile, every) == set()
    assert store.collected().compute.gpus == [0, 1, 2, 3]


def test_a_gpu_slower_than_its_siblings_loaded_beside_them_fails_its_own_tests_only(tmp_path, monkeypatch, profile):
    store = MeasurementStore(tmp_path, live=True)
    monkeypatch.setattr(store, "_measure", FakeLoads(slow_first=350.0, slow_always=True))  # a competing GEMM on gpu1
    facts = store.with_stage("compute", PROBED, profile, [0])
    assert failed_tests(profile, facts) == {"gemm_throughput[gpu1]", "gemm_within_best[gpu1]"}
    assert compute.gemm_throughput(profile, facts, 1).attempts == [350.0, 350.0, 350.0]  # measured again twice, alone


def test_a_gemm_dip_is_measured_again_beside_its_siblings_and_passes_as_transient_on_its_gpu_only(tmp_path, monkeypatch, profile):
    store = MeasurementStore(tmp_path, live=True)
    loads = FakeLoads(slow_first=600.0)  # below the 660 floor, by less than a dip may be
    monkeypatch.setattr(store, "_measure", loads)
    facts = store.with_stage("compute", PROBED, profile)
    # every GPU at once, then the GEMM again on every GPU, as gpu1's was first measured beside its
    # siblings' loads; only gpu1's kept
    assert loads.asked == [([0, 1, 2, 3], None), ([0, 1, 2, 3], {LoadKey("gemm", gpu) for gpu in range(4)})]
    (again,) = facts.measurements.rounds
    assert again.keys == [LoadKey("gemm", 1)] and [r.key for r in again.measurements.compute.results] == [LoadKey("gemm", 1)]
    verdict = compute.gemm_throughput(profile, facts, 1)
    assert verdict.outcome is Outcome.PASSED and verdict.transient and verdict.attempts == [600.0, 750.0]
    assert compute.gemm_throughput(profile, facts, 0).attempts == []


def test_under_xdist_a_worker_loads_the_gpus_no_other_holds_and_reads_the_others(tmp_path, monkeypatch, profile):
    first, second = MeasurementStore(tmp_path, live=True), MeasurementStore(tmp_path, live=True)  # two xdist workers
    loads = FakeLoads()
    monkeypatch.setattr(first, "_measure", loads)
    monkeypatch.setattr(second, "_measure", loads)
    with second.locks.gpu(1):  # the second worker loads gpu1 now
        first.with_stage("compute", PROBED, profile, [0])
        assert loads.asked == [([0, 2, 3], None)]  # the rest at once, gpu1 left to its holder
        second._load(STAGES["compute"], PROBED, profile, [1])
    assert loads.asked == [([0, 2, 3], None), ([1], None)]
    facts = first.with_stage("compute", PROBED, profile, [1])  # gpu1 is read, not loaded again
    assert loads.asked == [([0, 2, 3], None), ([1], None)] and facts.measurements.compute.gpus == [1]
    assert first.collected().compute.gpus == [0, 1, 2, 3]


def test_per_gpu_stages_share_the_machine_and_a_fabric_stage_waits_for_all_of_them(tmp_path):
    locks, other = GpuLocks(tmp_path), GpuLocks(tmp_path)  # two xdist workers: two open files each
    with locks.gpu(0):
        with other.gpu(1, wait=False):
            pass  # another GPU's loads run beside gpu0's
        with pytest.raises(Busy), other.gpu(0, wait=False):
            pass  # never two on one GPU
        with pytest.raises(Busy), other.fabric(wait=False):
            pass  # no fabric stage while a GPU is loaded
    with locks.fabric():
        with pytest.raises(Busy), other.gpu(3, wait=False):
            pass  # no per-GPU stage while a fabric stage runs
        with pytest.raises(Busy), other.fabric(wait=False):
            pass  # and no two fabric stages at once
    with other.gpu(0, wait=False), locks.gpu(1, wait=False):
        pass  # every lock released: free again


class RecordingLocks:
    """The store's locks, recording which are held whenever a stage measures."""

    def __init__(self):
        self.held: list[str] = []
        self.seen: list[tuple[str, ...]] = []

    def _holding(self, name):
        import contextlib

        @contextlib.contextmanager
        def hold():
            self.held.append(name)
            try:
                yield
            finally:
                self.held.remove(name)

        return hold()

    def fabric(self, wait=True):
        return self._holding("machine, alone")

    def gpu(self, index, wait=True):
        return self._holding(f"machine, shared; gpu{index}, alone")

    def free_gpus(self, indices):
        import contextlib

        @contextlib.contextmanager
        def hold():
            with self._holding(f"machine, shared; {', '.join(f'gpu{index}' for index in indices)}, each alone"):
                yield list(indices)

        return hold()


def test_the_store_measures_fabric_stages_alone_and_each_gpu_under_its_own_lock(tmp_path, monkeypatch, profile):
    store = MeasurementStore(tmp_path, live=True)
    store.locks = locks = RecordingLocks()

    def measure(stage, facts, profile, gpus, only=None, attempt=0):
        locks.seen.append((stage.name, *locks.held))
        return FakeLoads()(stage, facts, profile, gpus, only, attempt) if stage.name == "compute" else Measurements()

    monkeypatch.setattr(store, "_measure", measure)
    store.with_stage("copies", PROBED, profile)
    store.with_stage("compute", PROBED, profile, [1])
    assert locks.seen == [("copies", "machine, alone"), ("compute", "machine, shared; gpu0, gpu1, gpu2, gpu3, each alone")]


def test_the_store_loads_nothing_for_a_gpu_not_under_test_or_a_profile_without_loads(tmp_path, monkeypatch, profile):
    store = MeasurementStore(tmp_path, live=True)
    loads = FakeLoads()
    monkeypatch.setattr(store, "_measure", loads)
    facts = store.with_stage("compute", PROBED, profile, [5])  # a 4-GPU machine: no gpu5 to load
    assert loads.asked == [([0, 1, 2, 3], None)]  # the machine's own GPUs, at once
    verdict = compute.gemm_correct(profile, facts, 5)
    assert verdict.outcome is Outcome.FAILED and verdict.message == "gpu5: gpu5 not loaded: 4 GPU(s) under test (profile loads)"
    bare = profile.__class__(profile.name, profile.path, profile.spec.model_copy(update={"compute": None}))
    assert store.with_stage("compute", PROBED, bare, [0]) is PROBED and loads.asked == [([0, 1, 2, 3], None)]
