"""DDP: the GPT workload trained on gloo with 2 processes, and the checks on its numbers."""

import pytest

from gpuaccept.checks import ddp
from gpuaccept.checks.verdict import Outcome
from gpuaccept.errors import ProfileError
from gpuaccept.facts.measurements import DdpResult, DdpSweep, Measurements, StepFailure
from gpuaccept.measure.gpt import build
from gpuaccept.profile import load_profile
from gpuaccept.profile.spec import ProfileSpec
from gpuaccept.stages.fabric import ddp_plan, run_ddp_stage
from gpuaccept.vocabulary.gpt import PRESETS, GptDims
from gpuaccept.vocabulary.steps import DdpKey, ddp_case, parse_ddp_case
from tests.helpers import example_facts, write

TINY = {
    "schema": 1,
    "gpus": {"count": 2, "model": "x"},
    "ddp": {
        "model": "tiny", "dtype": "float32", "world_sizes": [1, 2], "batches": [2, 8], "warmup_steps": 1, "steps": 2,
        "min_efficiency": {"2gpu-bs8": 0.01}, "max_exposed_comm": {"2gpu-bs8": 1.0}, "nvlink_ab": {"2gpu-bs8": 0.01},
    },
}


@pytest.mark.slow
def test_gloo_ddp_runs_every_world_size_and_batch_and_the_ab_arm():
    pytest.importorskip("torch")
    spec = ProfileSpec.model_validate(TINY)
    events: list[dict] = []
    sweep, without = run_ddp_stage(spec, 2, backend="gloo", on_event=events.append)
    assert sweep.failures == [] and without.failures == []
    _, ab_ready = [event for event in events if event["event"] == "ready"]
    scaling_began = min(event["time"] for event in events if event["event"] == "start")
    # the A/B arm's workers set up with the scaling arm (every rank of them before the scaling arm
    # measured), and held while it measured
    assert ab_ready["environment"]["NCCL_P2P_DISABLE"] == "1" and ab_ready["time"] < scaling_began
    assert without.phases["held"] > 0 and without.phases["start-up: prepare"] > 0  # the model built before the hold
    # where the preparation went: the worlds' groups, the model, its first step (what a process pays once)
    parts = {part: without.phases[f"start-up: prepare: {part}"] for part in ("groups", "model", "first step")}
    # the parts lie inside the preparation; each is rounded apart (to 0.1 ms, the whole to 1 ms)
    assert parts["model"] > 0 and parts["first step"] > 0 and sum(parts.values()) <= without.phases["start-up: prepare"] + 0.001, parts
    # where the scaling arm's time went, world by world
    assert {"DDP on 2 GPUs: wrap", "DDP on 2 GPUs: bs8: warm-up", "DDP on 2 GPUs: bs8: timed",
            "DDP on 2 GPUs: bs8: timed without sync", "step: DDP on 1 GPU"} <= set(sweep.phases)
    assert sorted(r.case for r in sweep.results) == ["1gpu-bs2", "1gpu-bs8", "2gpu-bs2", "2gpu-bs8"]
    assert all(r.samples_per_s_per_gpu > 0 and r.step_s > 0 for r in sweep.results)
    assert sweep.result(1, 8).no_sync_step_s is None and sweep.result(2, 8).no_sync_step_s > 0
    assert [r.case for r in without.results] == ["2gpu-bs8"]
    assert without.p2p_disabled and without.environment["NCCL_P2P_DISABLE"] == "1"
    assert sweep.parameters == sum(p.numel() for p in build(PRESETS["tiny"]).parameters())  # counted on the model itself


@pytest.mark.slow
def test_gloo_ddp_trains_each_gradient_accumulation_setting_and_on_a_subgroup():
    pytest.importorskip("torch")
    spec = ProfileSpec.model_validate(
        {**TINY, "gpus": {"count": 3, "model": "x"},
         "ddp": {**TINY["ddp"], "world_sizes": [1, 2, 3], "batches": [2], "accumulation": [1, 3],
                 "min_efficiency": {"2gpu-bs2-acc3": 0.01}, "max_exposed_comm": {}, "nvlink_ab": {}}}
    )
    sweep, without = run_ddp_stage(spec, 3, backend="gloo")  # world 2 trains on a subgroup of the 3 ranks
    assert sweep.failures == [] and without is None
    assert sorted(r.case for r in sweep.results) == [f"{w}gpu-bs2{acc}" for w in (1, 2, 3) for acc in ("", "-acc3")]
    accumulated = sweep.result(2, 2, 3)
    assert accumulated.accumulation == 3 and accumulated.no_sync_step_s > 0
    assert accumulated.samples_per_s_per_gpu * accumulated.step_s == pytest.approx(6)  # batch 2 in each of 3 micro-steps


@pytest.mark.slow  # builds the model: imports torch
def test_the_gpt_parameter_count_formula_matches_the_model():
    torch = pytest.importorskip("torch")

    shape = GptDims(layers=3, d_model=48, heads=4, vocab=100, seq_len=16)
    model = build(shape)
    assert sum(p.numel() for p in model.parameters()) == shape.parameters()
    assert model(torch.randint(0, 100, (2, 16))).shape == (2, 16, 100)


def test_plans_per_world_size_and_the_ab_arm_only_where_asked():
    spec = ProfileSpec.model_validate(TINY)
    plan = ddp_plan(spec, 2)
    assert [(s.world, s.batches, s.no_sync) for s in plan.steps] == [(1, [2, 8], True), (2, [2, 8], True)]
    ab = ddp_plan(spec, 2, without_p2p=True)
    assert [(s.world, s.batches, s.no_sync) for s in ab.steps] == [(2, [8], False)]
    assert [s.label for s in plan.steps] == ["DDP on 1 GPU", "DDP on 2 GPUs"]


def _result(world, batch, rate, no_sync=None):
    return DdpResult(world=world, batch=batch, accumulation=1, step_s=batch / rate, no_sync_step_s=no_sync, samples_per_s_per_gpu=rate,
                     tokens_per_s_per_gpu=rate * 512, parameters=604_000_000)


def _sweep(results, p2p_disabled=False, failures=()):
    return DdpSweep(backend="nccl", nccl_version="2.28.9", torch_version="2.11.0", model={}, parameters=604_000_000, dtype="bfloat16",
                    warmup_steps=3, steps=10, p2p_disabled=p2p_disabled, environment={}, wall_s=9.0, results=results,
                    failures=list(failures))


PROFILE = """
    schema: 1
    extends: bases/hgx-h200
    gpus: {count: 4}
    ddp:
      model: gpt2-medium
      world_sizes: [1, 2, 4]
      batches: [8]
      min_efficiency: {4gpu-bs8: 0.85}
      max_exposed_comm: {4gpu-bs8: 0.15}
      nvlink_ab: {4gpu-bs8: 2.5}
"""


def _profile(tmp_path):
    from gpuaccept.resources import shipped_dir

    return load_profile(write(tmp_path / "ddp.yaml", PROFILE), [shipped_dir("profiles")])


def test_efficiency_exposed_communication_and_the_ab_from_measured_numbers(tmp_path):
    # the reference 4xH200 numbers: 170.4 samples/s per GPU alone, 152.5 on four, 51.4 without P2P
    measured = Measurements(
        ddp=_sweep([_result(1, 8, 170.4), _result(4, 8, 152.5, no_sync=8 / 160.0)]),
        ddp_without_p2p=_sweep([_result(4, 8, 51.4)], p2p_disabled=True),
    )
    facts = example_facts("h200x4").model_copy(update={"measurements": measured})
    profile = _profile(tmp_path)
    efficiency = ddp.scaling(profile, facts, "4gpu-bs8")
    assert efficiency.outcome is Outcome.PASSED and efficiency.measured == pytest.approx(0.89495, abs=1e-5)
    exposed = ddp.exposed_communication(profile, facts, "4gpu-bs8")
    assert exposed.outcome is Outcome.PASSED and exposed.measured == pytest.approx(0.046875)
    speedup = ddp.nvlink_speedup(profile, facts, "4gpu-bs8")
    assert speedup.outcome is Outcome.PASSED and speedup.measured == pytest.approx(2.96693, abs=1e-5)


def test_a_slow_setting_fails_naming_world_size_batch_measured_and_expected(tmp_path):
    measured = Measurements(ddp=_sweep([_result(1, 8, 170.4), _result(4, 8, 51.4)]))
    facts = example_facts("h200x4").model_copy(update={"measurements": measured})
    verdict = ddp.scaling(_profile(tmp_path), facts, "4gpu-bs8")
    assert verdict.outcome is Outcome.FAILED
    assert verdict.message.startswith("4gpu-bs8: scaling efficiency 0.3016 < 0.85 (51.4 samples/s per GPU on 4 GPUs, 170.4 on 1")


def test_a_hung_world_size_fails_its_settings(tmp_path):
    hung = StepFailure(step="DDP on 4 GPUs", reason="timeout", message="DDP on 4 GPUs did not finish within 180 s", keys=[DdpKey(4, 8)])
    facts = example_facts("h200x4").model_copy(update={"measurements": Measurements(ddp=_sweep([_result(1, 8, 170.4)], failures=[hung]))})
    verdict = ddp.scaling(_profile(tmp_path), facts, "4gpu-bs8")
    assert verdict.outcome is Outcome.FAILED and "DDP on 4 GPUs did not finish within 180 s" in verdict.message


def test_no_p2p_profile_skips_the_ab(tmp_path):
    from gpuaccept.resources import shipped_dir

    text = PROFILE.replace("extends: bases/hgx-h200", "extends: bases/rtx4090").replace("gpus: {count: 4}", "gpus: {count: 4}")
    profile = load_profile(write(tmp_path / "pcie.yaml", text), [shipped_dir("profiles")])
    verdict = ddp.nvlink_speedup(profile, example_facts("h200x4"), "4gpu-bs8")
    assert verdict.outcome is Outcome.NOT_APPLICABLE and "P2P is not supported" in verdict.message


def test_case_names_round_trip():
    assert ddp_case(4, 2, 4) == "4gpu-bs2-acc4" and parse_ddp_case("4gpu-bs2-acc4") == (4, 2, 4)
    assert parse_ddp_case(ddp_case(8, 16)) == (8, 16, 1)


@pytest.mark.parametrize(
    "change, message",
    [
        ("world_sizes: [2, 4]", "must include 1"),
        ("world_sizes: [1, 8]", "8 GPUs asked for; the profile has 4"),
        ("min_efficiency: {3gpu-bs8: 0.85}", "3 GPUs is not among world_sizes [1, 2, 4]"),
        ("min_efficiency: {4gpu-bs16: 0.85}", "batch 16 is not among batches [8]"),
        ("min_efficiency: {4gpu-bs8: 2.0}", "less than or equal to 1 "),
        ("min_efficiency: {4gpus-bs8: 0.85}", "should match pattern"),
    ],
)
def test_ddp_settings_are_validated(tmp_path, change, message):
    key = change.split(":")[0]
    text = "\n".join(f"      {change}" if line.strip().startswith(key + ":") else line for line in PROFILE.splitlines())
    with pytest.raises(ProfileError, match=message.replace("[", r"\[").replace("]", r"\]")):
        from gpuaccept.resources import shipped_dir

        load_profile(write(tmp_path / "bad.yaml", text), [shipped_dir("profiles")])


@pytest.mark.slow
def test_measuring_a_setting_again_trains_only_that_setting_and_arm():
    pytest.importorskip("torch")
    spec = ProfileSpec.model_validate(TINY)
    sweep, without = run_ddp_stage(spec, 2, backend="gloo", only={DdpKey(2, 8, without_p2p=True)})
    assert sweep is None and [r.case for r in without.results] == ["2gpu-bs8"] and without.p2p_disabled
    plan = ddp_plan(spec, 2, only={DdpKey(2, 2)})
    assert [(s.world, s.batches, s.accumulation) for s in plan.steps] == [(2, [2], [1])]
