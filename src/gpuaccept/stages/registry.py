"""The four measurement stages, in the order a full run measures them. Everything that goes over
the stages (the store, the burn-in, `gpu-accept record --measure`, the summary's confirmation lines)
goes over this table."""

from __future__ import annotations

from pathlib import Path

from gpuaccept.facts import Facts
from gpuaccept.facts.machine import CudaFacts
from gpuaccept.facts.measurements import Measurements
from gpuaccept.measure.plan import Plan
from gpuaccept.profile.spec import ProfileSpec
from gpuaccept.stages.compute import compute_not_run, compute_stage_plans, run_compute_stage
from gpuaccept.stages.fabric import (
    copy_plan,
    ddp_stage_plans,
    nccl_not_run,
    nccl_stage_plan,
    plan_ranks,
    run_copy_stage,
    run_ddp_stage,
    run_nccl_stage,
)
from gpuaccept.stages.stage import Stage, StageRun
from gpuaccept.stages.sustained import SustainedLoad


def _nccl_plans(spec: ProfileSpec, run: StageRun) -> list[tuple[Plan, int]]:
    """The NCCL stage's plan: its workers write NCCL's set-up lines into the run's folder (none
    without one: the stage then makes a temporary one as it runs)."""
    logs = _nccl_logs(run)
    ranks = run.facts.gpu_count
    return _some([(nccl_stage_plan(spec, ranks, logs, only=run.only, drills=run.drills), ranks)]) if logs is not None else []


def _nccl_logs(run: StageRun) -> Path | None:
    return run.scratch / "nccl-logs" if run.scratch is not None else None


def _copy_plans(spec: ProfileSpec, run: StageRun) -> list[tuple[Plan, int]]:
    return _some([(copy_plan(spec, run.facts.gpu_count, only=run.only, drills=run.drills), 1)])


def _ddp_plans(spec: ProfileSpec, run: StageRun) -> list[tuple[Plan, int]]:
    arms = ddp_stage_plans(spec, run.facts.gpu_count, only=run.only, drills=run.drills)
    return [(arm, plan_ranks(arm)) for arm in arms if arm is not None]


def _uses_cuda(facts: Facts) -> bool:
    return isinstance(facts.cuda, CudaFacts) and facts.cuda.device_count > 0


def _compute_plans(spec: ProfileSpec, run: StageRun) -> list[tuple[Plan, int]]:
    gpus = [gpu for gpu in run.gpus if gpu < run.facts.gpu_count]
    plans = compute_stage_plans(spec, gpus, only=run.only, drills=run.drills, require_cuda=_uses_cuda(run.facts))
    return [(plan, 1) for _, plan in sorted(plans.items())]


def _some(plans: list[tuple[Plan | None, int]]) -> list[tuple[Plan, int]]:
    return [(plan, ranks) for plan, ranks in plans if plan is not None]


def _run_nccl(spec: ProfileSpec, run: StageRun) -> Measurements:
    collectives, pairwise = run_nccl_stage(
        spec, run.facts.gpu_count, on_event=run.on_event, only=run.only, drills=run.drills, pool=run.pool,
        logs=_nccl_logs(run),
    )
    return Measurements(collectives=collectives, pairwise=pairwise)


def _run_copies(spec: ProfileSpec, run: StageRun) -> Measurements:
    copies = run_copy_stage(spec, run.facts.gpu_count, on_event=run.on_event, only=run.only, drills=run.drills, pool=run.pool)
    return Measurements(copies=copies)


def _run_ddp(spec: ProfileSpec, run: StageRun) -> Measurements:
    sweep, without_p2p = run_ddp_stage(
        spec, run.facts.gpu_count, on_event=run.on_event, only=run.only, drills=run.drills, pool=run.pool
    )
    return Measurements(ddp=sweep, ddp_without_p2p=without_p2p)


def _run_compute(spec: ProfileSpec, run: StageRun) -> Measurements:
    sweep = run_compute_stage(
        spec, run.gpus, on_event=run.on_event, only=run.only, require_cuda=_uses_cuda(run.facts), drills=run.drills, pool=run.pool
    )
    return Measurements(compute=sweep)


def _fewer_than_two(facts: Facts, gpus: list[int]) -> str | None:
    return f"needs at least 2 GPUs; {facts.gpu_count} under test" if facts.gpu_count < 2 else None


def _gpus_missing(facts: Facts, gpus: list[int]) -> str | None:
    """A GPU the profile expects but the machine lacks is not loaded: its tests fail saying so."""
    return f"{facts.gpu_count} GPU(s) under test" if any(gpu >= facts.gpu_count for gpu in gpus) else None


NCCL = Stage(
    name="nccl", title="NCCL stage", per_gpu=False, asked=lambda spec: spec.nccl is not None or spec.pairwise is not None,
    plans=_nccl_plans, run=_run_nccl, where=lambda facts, gpus: f"on {facts.gpu_count} GPUs",
    cannot_run=_fewer_than_two, not_run=nccl_not_run,
    beside_load=True,
)
COPIES = Stage(
    name="copies", title="copy stage", per_gpu=False, asked=lambda spec: spec.copies is not None,
    plans=_copy_plans, run=_run_copies, where=lambda facts, gpus: f"on {facts.gpu_count} GPU(s)", beside_load=True,
)
# the burn-in loops the per-GPU loads and the fabric; DDP training is the standard run's
DDP = Stage(
    name="ddp", title="DDP stage", per_gpu=False, asked=lambda spec: spec.ddp is not None,
    plans=_ddp_plans, run=_run_ddp, where=lambda facts, gpus: f"on up to {facts.gpu_count} GPU(s)",
)
COMPUTE = Stage(
    name="compute", title="compute stage", per_gpu=True, asked=lambda spec: spec.compute is not None,
    plans=_compute_plans, run=_run_compute, where=lambda facts, gpus: "on " + ", ".join(f"gpu{gpu}" for gpu in gpus),
    cannot_run=_gpus_missing, not_run=compute_not_run, tests_free_memory=True,
    # a burn-in's sustained load is the profile's GEMM, with its HBM and memory test between products
    sustain=SustainedLoad, asked_in_burnin=lambda spec: spec.compute is not None and spec.compute.gemm is not None,
)

# the order a standard run's suites first ask for them (test_bandwidth, test_compute, test_ddp,
# test_nccl), which a test that needs every stage follows too: the session sets the stages up ahead
# in this order (stages/store.py), so a test that asked otherwise would find the wrong one ready
STAGES: dict[str, Stage] = {stage.name: stage for stage in (COPIES, COMPUTE, DDP, NCCL)}
