"""A failed step names the keys of the values it leaves without a number, and a check finds its
value's failure by key, never by the step's label; facts recorded before failures named keys are
given them once, as they are read (facts.migration), and judged as they were then."""

from __future__ import annotations

import json
import tarfile

import pytest

from gpuaccept.checks import fabric
from gpuaccept.checks.verdict import Outcome
from gpuaccept.errors import FactsError
from gpuaccept.facts import parse_facts
from gpuaccept.facts.measurements import CollectiveSweep, Measurements, PairSweep, StepFailure
from gpuaccept.facts.migration import WholeStep
from gpuaccept.importers import import_files
from gpuaccept.profile import ProfileCatalog
from gpuaccept.stages.store import MeasurementStore
from gpuaccept.vocabulary.steps import CollectiveKey, DdpKey, PairKey
from tests.helpers import ROOT, cuda_sees_only, example_facts, mutated
from tests.verdicts import SUBJECTS

CATALOG = ProfileCatalog.with_shipped()
H200X4 = CATALOG.load("h200-4-nvswitch")
H200X2 = CATALOG.load("h200-2-nvswitch")

# Runs on lent H200 machines whose steps failed, recorded when failures named only their step's
# label: (tarball, member, profile it was judged against then, the shipped profile to judge it now)
EARLIER_RUNS = [
    ("2026-11-22/h200x2-drills.tar.gz", "hidden/results.json", "h200-2-nvswitch", H200X2),  # 1 of 2 GPUs visible
    ("2026-11-22/h200x2-drills.tar.gz", "stop/results.json", "h200-2-nvswitch", H200X2),  # a copy worker stopped
    ("2026-11-22/h200x2-final-drills.tar.gz", "stop/results.json", "h200-2-nvswitch", H200X2),
    ("2026-11-21/h200x4-faults-shipped.tar.gz", "hang/results.json", "hang", H200X4),  # all_reduce 1 GiB hung
]


def _results(tarball: str, member: str) -> dict:
    with tarfile.open(ROOT / "bench" / "runs" / tarball) as archive:
        extracted = archive.extractfile(member)
        assert extracted is not None
        return json.load(extracted)


def _verdicts(profile, facts) -> dict[tuple[str, str], dict]:
    found = {}
    for subjects, checks in SUBJECTS:
        for check in checks:
            for subject in subjects(profile):
                record = (check(profile, facts) if subject is None else check(profile, facts, subject)).as_data()
                found[(record["check"], record["subject"])] = record
    return found


@pytest.mark.parametrize("tarball, member, judged_against, profile", EARLIER_RUNS, ids=lambda value: str(value))
def test_failures_recorded_by_label_fail_the_tests_they_failed_then(tarball, member, judged_against, profile):
    document = _results(tarball, member)
    assert all("keys" not in failure for sweep in document["facts"]["measurements"].values()
               if isinstance(sweep, dict) for failure in sweep.get("failures", []))
    facts = parse_facts(json.dumps(document["facts"]), member)
    now = _verdicts(profile, facts)
    decided_by_a_failure = [test["verdict"] for test in document["tests"] if (test.get("verdict") or {}).get("context", {}).get("reason")]
    assert decided_by_a_failure
    for then in decided_by_a_failure:
        judged = now[(then["check"], then["subject"])]
        assert (judged["outcome"], judged["context"]["reason"]) == (then["outcome"], then["context"]["reason"])
        assert judged["message"] == then["message"].replace(f"(profile {judged_against})", f"(profile {profile.name})")


def _facts_with(measurements: dict):
    """The 2xH200 recording with these measurements, as JSON written before failures named keys."""
    return mutated(example_facts("h200x2"), lambda data: data.update(measurements=measurements))


def _sweep(**fields) -> dict:
    return {"backend": "nccl", "nccl_version": "2.28.9", "torch_version": "2.11.0", "ranks": 2, "environment": {}, "wall_s": 1.0,
            "results": [], **fields}


def _ddp_sweep(p2p_disabled: bool, failures: list[dict]) -> dict:
    return {"backend": "nccl", "nccl_version": None, "torch_version": "", "model": {}, "parameters": 1, "dtype": "bfloat16",
            "warmup_steps": 3, "steps": 10, "p2p_disabled": p2p_disabled, "environment": {}, "wall_s": 0.0, "results": [],
            "failures": failures}


def _old(step: str, message: str, reason: str = "timeout") -> dict:
    return {"step": step, "reason": reason, "message": message}


def test_a_failure_without_keys_is_given_them_from_its_label_once_as_read():
    facts = _facts_with({
        "collectives": _sweep(failures=[_old("all_reduce 1 GiB", "all_reduce 1 GiB did not finish within 37 s")]),
        "pairwise": {"backend": "nccl", "concurrent": True, "wall_s": 1.0, "results": [],
                     "failures": [_old("pairwise send/receive 256 MiB", "pairwise send/receive 256 MiB not run: x", "not_run")]},
        "copies": {"wall_s": 1.0, "results": [], "failures": [_old("copy bandwidth 1 GiB", "start-up: rank 0 stopped responding")]},
        "ddp": _ddp_sweep(False, [_old("DDP on 4 GPUs", "DDP on 4 GPUs not run: 2 GPU(s) under test", "not_run")]),
        "ddp_without_p2p": _ddp_sweep(True, [_old("DDP on 4 GPUs", "DDP on 4 GPUs not run: 2 GPU(s) under test", "not_run")]),
    })
    measured = facts.measurements
    keys = {name: [str(key) for failure in getattr(measured, name).failures for key in failure.keys]
            for name in ("collectives", "pairwise", "copies", "ddp", "ddp_without_p2p")}
    assert keys == {"collectives": ["collective/all_reduce/1GiB"], "pairwise": ["pair/*"], "copies": ["copy/*"],
                    "ddp": ["ddp/4gpu-*"], "ddp_without_p2p": ["ddp_without_p2p/4gpu-*"]}
    # the label named a whole step: every pair, every copy, every setting of the world size in its arm
    (pairwise,) = measured.pairwise.failures
    assert pairwise.keys == [WholeStep("pair")]
    assert measured.pairwise.failure(PairKey(2, 7)) is pairwise
    (arm,) = measured.ddp_without_p2p.failures
    assert arm.covers(DdpKey(4, 2, 4, without_p2p=True))
    assert not arm.covers(DdpKey(4, 8)) and not arm.covers(DdpKey(2, 8, without_p2p=True))
    # written back with its keys, it reads as the same facts
    assert parse_facts(facts.model_dump_json(), "again") == facts


def test_a_failure_without_keys_whose_label_tells_no_step_is_refused_naming_where():
    facts = example_facts("h200x2").model_dump(mode="json")
    facts["measurements"] = {"collectives": _sweep(failures=[_old("start-up", "start-up did not finish")])}
    with pytest.raises(FactsError) as refused:
        parse_facts(json.dumps(facts), "old.json")
    assert "old.json: measurements.collectives.failures: " in str(refused.value)
    assert "a failure of step 'start-up' names no keys" in str(refused.value)


def test_a_failure_is_found_by_its_keys_whatever_its_label_says(monkeypatch):
    # a label reworded since the failure was recorded (or by whoever wrote it) changes nothing
    hung = StepFailure(step="the big all-reduce", reason="timeout", message="the big all-reduce hung",
                       keys=[CollectiveKey("all_reduce", 1 << 30)])
    facts = example_facts("h200x4-measured")
    sweep = facts.measurements.collectives
    results = [result for result in sweep.results if str(result.key) != "collective/all_reduce/1GiB"]
    facts = facts.model_copy(update={"measurements": facts.measurements.model_copy(
        update={"collectives": sweep.model_copy(update={"results": results, "failures": [hung]})})})
    monkeypatch.setattr(fabric, "collective_label", lambda collective, size: f"{collective} of {size} bytes")
    verdicts = {case: fabric.busbw(H200X4, facts, case) for case in fabric.busbw_cases(H200X4)}
    failed = {case: verdict for case, verdict in verdicts.items() if not verdict.ok}
    assert list(failed) == [("all_reduce", "1GiB")]
    assert failed[("all_reduce", "1GiB")].message == "all_reduce of 1073741824 bytes: the big all-reduce hung (profile h200-4-nvswitch)"


def test_a_pairwise_failure_fails_the_pairs_it_covers_not_the_sweeps_first_failure():
    measured = example_facts("h200x4-measured").measurements
    sweep = measured.pairwise
    lost = StepFailure(step="pairwise send/receive 256 MiB", reason="crashed", message="pairwise send/receive 256 MiB: rank 3 exited",
                       keys=[PairKey(1, 3), PairKey(2, 3)])
    kept = [result for result in sweep.results if tuple(result.gpus) not in ((1, 3), (2, 3))]
    facts = example_facts("h200x4").model_copy(update={"measurements": Measurements(
        pairwise=PairSweep(backend=sweep.backend, concurrent=True, wall_s=1.0, results=kept, failures=[lost]))})
    outcomes = {pair: fabric.pair_busbw(H200X4, facts, pair).outcome for pair in H200X4.gpu_pairs()}
    assert [pair for pair, outcome in outcomes.items() if outcome is not Outcome.PASSED] == [(1, 3), (2, 3)]


def test_a_stage_that_cannot_run_fails_every_value_of_it_by_key(tmp_path):
    one_gpu = mutated(example_facts("h200x4"), lambda d: d.update(gpus=d["gpus"][:1], links=[], p2p=[]) or cuda_sees_only(d, 1))
    facts = MeasurementStore(tmp_path, live=True).with_stage("nccl", one_gpu, H200X4)
    collectives = facts.measurements.collectives
    assert all(len(failure.keys) == 1 for failure in collectives.failures)
    assert {str(key) for failure in facts.measurements.pairwise.failures for key in failure.keys} == {
        f"pair/gpu{a}-gpu{b}" for a in range(4) for b in range(a + 1, 4)
    }
    for case in fabric.busbw_cases(H200X4):
        for check in (fabric.busbw, fabric.collective_correct):
            assert check(H200X4, facts, case).context["reason"] == "not_run"
    for pair in H200X4.gpu_pairs():
        assert "not run: needs at least 2 GPUs; 1 under test" in fabric.pair_busbw(H200X4, facts, pair).message


def test_an_imported_log_cut_short_names_each_size_it_lacks():
    imported = ROOT / "tests" / "data" / "imports" / "rtx5090-2-nccl-tests-all_reduce_perf-crashed.txt"
    sweep: CollectiveSweep = import_files([imported]).facts.measurements.collectives
    assert sweep.failures and all(
        [str(key) for key in failure.keys] == [f"collective/all_reduce/{failure.step.split(' ', 1)[1].replace(' ', '')}"]
        for failure in sweep.failures
    )


def test_a_one_gpu_profile_without_fabric_sections_runs_the_nccl_stage_as_nothing(tmp_path):
    # the health suite's during-run checks ask for every stage; on a 1-GPU profile (no nccl, no
    # pairwise section) the NCCL stage has no step to fail, and asking for it must not raise
    h100 = CATALOG.load("h100-1")
    assert h100.spec.nccl is None and h100.spec.pairwise is None
    facts = MeasurementStore(tmp_path, live=True).with_stage("nccl", example_facts("h100x1"), h100)
    assert facts.measurements.collectives is None and facts.measurements.pairwise is None


def test_a_value_a_worker_measured_as_nan_fails_its_key_and_keeps_the_others():
    from gpuaccept.measure.launch import _Attempt, _take
    from gpuaccept.measure.plan import HbmStep
    from gpuaccept.vocabulary.steps import LoadKey

    step = HbmStep(gpu=1, size_bytes=1024, warmup=1, iterations=2, timeout_s=5)
    attempt = _Attempt()
    record = {"load": "hbm_copy", "gpu": 1, "size_bytes": 1024, "iterations": 2, "wrong": 0}
    _take(step, {"key": "load/hbm_copy/gpu1", **record, "time_us": 0.0, "GBps": float("inf")}, attempt)
    _take(step, {"key": "load/hbm_triad/gpu1", **record, "load": "hbm_triad", "time_us": 2.0, "GBps": 1.5}, attempt)
    assert list(attempt.values) == [LoadKey("hbm_triad", 1)]
    [refused] = attempt.refused
    assert refused.keys == [LoadKey("hbm_copy", 1)] and refused.reason == "not_a_number"
    assert refused.message == "HBM bandwidth on gpu1: the worker measured GBps = inf for load/hbm_copy/gpu1, not a finite number"
    # its test could not judge (exit 2): a measurement that gave no number is no evidence against the GPU
    from gpuaccept.checks import compute
    from gpuaccept.facts.measurements import ComputeSweep, HbmResult

    triad = HbmResult(**{**attempt.values[LoadKey("hbm_triad", 1)], "load": "hbm_triad"})
    sweep = ComputeSweep(backend="cuda", torch_version="2.11", gpus=[1], wall_s=1.0, results=[triad], failures=[refused])
    facts = example_facts("h200x2").model_copy(update={"measurements": Measurements(compute=sweep)})
    profile = ProfileCatalog.with_shipped().load("h200-2-nvswitch")
    verdict = compute.hbm_copy(profile, facts, 1)
    assert verdict.outcome is Outcome.ERROR and verdict.message.startswith("gpu1: HBM bandwidth on gpu1: the worker measured GBps = inf")
