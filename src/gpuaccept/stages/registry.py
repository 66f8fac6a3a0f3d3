"""The four measurement stages, in the order a full run measures them. Everything that goes over
the stages (the store, the burn-in, `gpu-accept record --measure`, the summary's confirmation lines)
goes over this table."""

from __future__ import annotations

from gpuaccept.facts import Facts
from gpuaccept.facts.model import CudaFacts, Measurements
from gpuaccept.measure.plan import Plan
from gpuaccept.profile.spec import ProfileSpec
from gpuaccept.stages.compute import compute_not_run, compute_plan, run_compute_stage
from gpuaccept.stages.fabric import (
    copy_plan,
    ddp_plan,
    ddp_worker_sets,
    nccl_not_run,
    nccl_plan,
    run_copy_stage,
    run_ddp_stage,
    run_nccl_stage,
)
from gpuaccept.stages.stage import Stage, StageRun


def _nccl_plans(spec: ProfileSpec, run: StageRun) -> list[Plan]:
    return _some([nccl_plan(spec, run.facts.gpu_count, only=run.only, drills=run.drills)])


def _copy_plans(spec: ProfileSpec, run: StageRun) -> list[Plan]:
    return _some([copy_plan(spec, run.facts.gpu_count, only=run.only, drills=run.drills)])


def _ddp_plans(spec: ProfileSpec, run: StageRun) -> list[Plan]:
    arms = [False, True] if spec.ddp is not None and spec.ddp.nvlink_ab else [False]
    return _some([ddp_plan(spec, run.facts.gpu_count, without_p2p=arm, only=run.only, drills=run.drills) for arm in arms])


def _compute_plans(spec: ProfileSpec, run: StageRun) -> list[Plan]:
    return _some([compute_plan(spec, gpu, run.only, run.drills) for gpu in run.gpus])


def _some(plans: list[Plan | None]) -> list[Plan]:
    return [plan for plan in plans if plan is not None]


def _run_nccl(spec: ProfileSpec, run: StageRun) -> Measurements:
    collectives, pairwise = run_nccl_stage(
        spec, run.facts.gpu_count, on_event=run.on_event, only=run.only, drills=run.drills, pool=run.pool
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
    cuda = isinstance(run.facts.cuda, CudaFacts) and run.facts.cuda.device_count > 0
    sweep = run_compute_stage(
        spec, run.gpus, on_event=run.on_event, only=run.only, require_cuda=cuda, drills=run.drills, pool=run.pool
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
    worker_sets=lambda spec, facts, gpus: [facts.gpu_count],
    cannot_run=_fewer_than_two, not_run=nccl_not_run,
    in_burnin="fabric",
)
COPIES = Stage(
    name="copies", title="copy stage", per_gpu=False, asked=lambda spec: spec.copies is not None,
    plans=_copy_plans, run=_run_copies, where=lambda facts, gpus: f"on {facts.gpu_count} GPU(s)", in_burnin="fabric",
    worker_sets=lambda spec, facts, gpus: [1],  # one process that sees every GPU
)
# the burn-in loops the per-GPU loads and the fabric; DDP training is the standard run's
DDP = Stage(
    name="ddp", title="DDP stage", per_gpu=False, asked=lambda spec: spec.ddp is not None,
    plans=_ddp_plans, run=_run_ddp, where=lambda facts, gpus: f"on up to {facts.gpu_count} GPU(s)",
    worker_sets=lambda spec, facts, gpus: ddp_worker_sets(spec, facts.gpu_count),
)
COMPUTE = Stage(
    name="compute", title="compute stage", per_gpu=True, asked=lambda spec: spec.compute is not None,
    plans=_compute_plans, run=_run_compute, where=lambda facts, gpus: "on " + ", ".join(f"gpu{gpu}" for gpu in gpus),
    worker_sets=lambda spec, facts, gpus: [1 for gpu in gpus if gpu < facts.gpu_count],  # one a GPU
    cannot_run=_gpus_missing, not_run=compute_not_run,
    # a burn-in's sustained load is the profile's GEMM, with its HBM and memory test between products
    in_burnin="load", asked_in_burnin=lambda spec: spec.compute is not None and spec.compute.gemm is not None,
)

STAGES: dict[str, Stage] = {stage.name: stage for stage in (NCCL, COPIES, DDP, COMPUTE)}
