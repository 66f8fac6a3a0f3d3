"""Fabric checks: floors, the physical peak, hung steps, wrong results, weak pairs."""

from gpuaccept.checks import fabric
from gpuaccept.checks.peaks import collective_peak, pair_peak, pcie_peak
from gpuaccept.checks.verdict import Outcome
from gpuaccept.facts.measurements import (
    CollectiveResult,
    CollectiveSweep,
    CopyResult,
    CopySweep,
    Measurements,
    PairResult,
    PairSweep,
    StepFailure,
)
from gpuaccept.profile import load_profile
from gpuaccept.vocabulary.steps import CollectiveKey
from tests.helpers import example_facts, write

PROFILE_TEXT = """
    schema: 1
    extends: bases/hgx-h200
    gpus: {count: 4}
    nccl:
      busbw:
        all_reduce: {1GiB: 336, 4GiB: 345}
    pairwise: {concurrent: true, min_busbw: 300}
    copies: {p2p_min: 375, p2p_bidirectional_min: 700, host_to_device_min: 50, device_to_host_min: 50}
"""


def profile(tmp_path):
    from gpuaccept.resources import shipped_dir

    return load_profile(write(tmp_path / "p.yaml", PROFILE_TEXT), [shipped_dir("profiles")])


def collective(size_bytes, nominal, busbw, wrong=0):
    return CollectiveResult(
        collective="all_reduce", size_bytes=size_bytes, nominal_size=nominal, dtype="bfloat16", ranks=4, warmup=5,
        iterations=20, time_us=4546.3, algbw_GBps=busbw / 1.5, busbw_GBps=busbw, wrong=wrong,
    )


def with_measurements(**parts):
    facts = example_facts("h200x4")
    return facts.model_copy(update={"measurements": Measurements(**parts)})


def sweep(results, failures=()):
    return CollectiveSweep(backend="nccl", nccl_version="2.28.9", torch_version="2.11.0", ranks=4, environment={}, wall_s=5.0,
                           results=results, failures=list(failures))


def test_busbw_above_the_floor_passes_with_its_share_of_the_nvlink_peak(tmp_path):
    facts = with_measurements(collectives=sweep([collective(1 << 30, "1GiB", 354.27)]))
    verdict = fabric.busbw(profile(tmp_path), facts, ("all_reduce", "1GiB"))
    assert verdict.outcome is Outcome.PASSED
    assert verdict.measured == 354.27 and verdict.expected == ">= 336 GB/s" and verdict.unit == "GB/s"
    assert verdict.context["peak_GBps"] == 478.12 and verdict.context["percent_of_peak"] == 74.1
    assert "74% of 478.1 GB/s NVLink 4.0, 18 x 26.5625 GB/s peak" in verdict.message


def test_busbw_below_the_floor_names_collective_size_measured_and_expected(tmp_path):
    facts = with_measurements(collectives=sweep([collective(1 << 30, "1GiB", 28.45)]))
    verdict = fabric.busbw(profile(tmp_path), facts, ("all_reduce", "1GiB"))
    assert verdict.outcome is Outcome.FAILED
    assert verdict.message.startswith("all_reduce 1 GiB: busbw 28.45 GB/s < 336 GB/s (6% of 478.1 GB/s")


def test_a_hung_size_fails_its_tests_with_the_timeout(tmp_path):
    message = "all_reduce 4 GiB did not finish within 60 s"
    hung = StepFailure(step="all_reduce 4 GiB", reason="timeout", message=message, keys=[CollectiveKey("all_reduce", 4 << 30)])
    facts = with_measurements(collectives=sweep([collective(1 << 30, "1GiB", 354.0)], [hung]))
    p = profile(tmp_path)
    assert fabric.busbw(p, facts, ("all_reduce", "1GiB")).outcome is Outcome.PASSED
    for check in (fabric.busbw, fabric.collective_correct):
        verdict = check(p, facts, ("all_reduce", "4GiB"))
        assert verdict.outcome is Outcome.FAILED
        assert verdict.message == "all_reduce 4 GiB: all_reduce 4 GiB did not finish within 60 s (profile p)"


def test_wrong_elements_fail_the_correctness_test(tmp_path):
    facts = with_measurements(collectives=sweep([collective(1 << 30, "1GiB", 354.0, wrong=3)]))
    verdict = fabric.collective_correct(profile(tmp_path), facts, ("all_reduce", "1GiB"))
    assert verdict.outcome is Outcome.FAILED and "result check: 3 wrong elements, expected 0 wrong elements" in verdict.message


def test_facts_without_measurements_are_an_error_never_a_pass(tmp_path):
    verdict = fabric.busbw(
        profile(tmp_path), example_facts("h200x4").model_copy(update={"measurements": Measurements()}), ("all_reduce", "1GiB")
    )
    assert verdict.outcome is Outcome.ERROR and "the facts hold no NCCL sweep" in verdict.message


def test_the_weak_pair_is_named(tmp_path):
    results = [
        PairResult(
            gpus=(a, b), size_bytes=1 << 28, iterations=10, time_us=700.0, busbw_GBps=120.0 if (a, b) == (1, 3) else 380.0, wrong=0, round=0
        )
        for a in range(4)
        for b in range(a + 1, 4)
    ]
    facts = with_measurements(pairwise=PairSweep(backend="nccl", concurrent=True, wall_s=1.0, results=results))
    p = profile(tmp_path)
    verdicts = {pair: fabric.pair_busbw(p, facts, pair) for pair in p.gpu_pairs()}
    assert [pair for pair, v in verdicts.items() if not v.ok] == [(1, 3)]
    assert verdicts[(1, 3)].message.startswith("gpu1-gpu3: send/receive 120 GB/s < 300 GB/s (25% of 478.1 GB/s")


def test_copy_checks_use_the_pcie_peak_for_host_copies(tmp_path):
    results = [
        CopyResult(what="host_to_device", gpus=(g,), size_bytes=1 << 30, iterations=10, GBps=55.5 if g else 26.0, wrong=0) for g in range(4)
    ]
    facts = with_measurements(copies=CopySweep(wall_s=1.0, results=results))
    p = profile(tmp_path)
    slow = fabric.host_to_device(p, facts, 0)
    assert slow.outcome is Outcome.FAILED and slow.message.startswith(
        "gpu0: host to device 26 GB/s < 50 GB/s (41% of 63.0 GB/s PCIe gen5 x16 peak)"
    )
    assert fabric.host_to_device(p, facts, 1).outcome is Outcome.PASSED
    missing = fabric.device_to_host(p, facts, 1)
    assert missing.outcome is Outcome.FAILED and "not measured" in missing.message


def test_a_copy_made_beside_the_other_pairs_of_its_round_is_judged_alone_and_says_so(tmp_path):
    rounds = [[(0, 3), (1, 2)], [(0, 2), (1, 3)], [(0, 1), (2, 3)]]
    round_of = {pair: index for index, pairs in enumerate(rounds) for pair in pairs}
    results = [
        CopyResult(what="p2p", gpus=(a, b), size_bytes=1 << 30, iterations=10, GBps=200.0 if (a, b) == (2, 1) else 390.0, wrong=0,
                   round=round_of[(min(a, b), max(a, b))])
        for a in range(4) for b in range(4) if a != b
    ]
    facts = with_measurements(copies=CopySweep(wall_s=1.0, results=results))
    p = profile(tmp_path)
    verdicts = {pair: fabric.p2p_copy(p, facts, pair) for pair in results_pairs(results)}
    assert [pair for pair, v in verdicts.items() if v.outcome is not Outcome.PASSED] == [(2, 1)]  # not (1, 2), its round's other way
    # copied at once with the other pair of its round, in the same direction: 2->1 beside 3->0
    assert "at once with gpu3-gpu0" in verdicts[(2, 1)].message and verdicts[(2, 1)].context["round"] == 0
    assert "at once with gpu0-gpu3" in verdicts[(1, 2)].message


def test_a_copy_alone_in_its_round_says_nothing_of_other_copies(tmp_path):
    results = [
        CopyResult(what="p2p", gpus=pair, size_bytes=1 << 30, iterations=10, GBps=390.0, wrong=0, round=0) for pair in ((0, 1), (1, 0))
    ]
    facts = with_measurements(copies=CopySweep(wall_s=1.0, results=results))
    verdict = fabric.p2p_copy(profile(tmp_path), facts, (0, 1))
    assert verdict.outcome is Outcome.PASSED and "at once" not in verdict.message and "round" not in verdict.context


def results_pairs(results):
    return [tuple(result.gpus) for result in results]


def test_peaks_from_recorded_facts():
    facts = example_facts("h200x4")
    assert collective_peak(facts).GBps == 18 * 26.5625
    assert pair_peak(facts, 0, 3).GBps == 18 * 26.5625
    assert round(pcie_peak(facts.gpus[0]).GBps, 2) == 63.02
    assert collective_peak(example_facts("h200x1")).what == "PCIe gen5 x16"


def test_a_machine_with_one_gpu_left_fails_every_nccl_test_saying_why(tmp_path):
    from gpuaccept.stages.store import MeasurementStore
    from tests.helpers import cuda_sees_only, mutated

    def one_gpu(d):
        d["gpus"] = d["gpus"][:1]
        d["links"], d["p2p"] = [], []
        cuda_sees_only(d, 1)

    facts = mutated(example_facts("h200x4"), one_gpu)
    p = profile(tmp_path)
    measured = MeasurementStore(tmp_path, live=True).with_stage("nccl", facts, p)
    verdict = fabric.busbw(p, measured, ("all_reduce", "1GiB"))
    assert verdict.outcome is Outcome.FAILED
    assert verdict.message.startswith("all_reduce 1 GiB: all_reduce 1 GiB not run: needs at least 2 GPUs; 1 under test")
    assert "not run: needs at least 2 GPUs" in fabric.pair_busbw(p, measured, (0, 1)).message
