"""The fabric stages a profile asks for: plans to run, and their outcomes as facts.

- the NCCL stage: every collective and size the profile has a floor for, then the pairwise
  exchange, in one set of workers (one NCCL initialization), one rank per GPU under test;
- the copy stage: copy-engine bandwidth in a single process that sees every GPU.
"""

from __future__ import annotations

import contextlib
import os
from typing import Callable

from gpuaccept.facts.model import (
    CollectiveResult,
    CollectiveSweep,
    CopyResult,
    CopySweep,
    DdpResult,
    DdpSweep,
    PairResult,
    PairSweep,
    StepFailure,
    parse_ddp_case,
)
from gpuaccept.measure.gpt import PRESETS, GptShape
from gpuaccept.measure.launch import Outcome, Workers, run_plan
from gpuaccept.measure.plan import CollectiveStep, CopyStep, DdpStep, PairwiseStep, Plan
from gpuaccept.measure.sizes import format_size, parse_size
from gpuaccept.profile.spec import ProfileSpec

COPY_KINDS = {
    "p2p_min": "p2p",
    "p2p_bidirectional_min": "p2p_bidirectional",
    "local_min": "local",
    "host_to_device_min": "host_to_device",
    "device_to_host_min": "device_to_host",
}


def nccl_plan(spec: ProfileSpec, backend: str = "auto") -> Plan | None:
    steps: list = []
    if spec.nccl is not None:
        nccl = spec.nccl
        for collective, sizes in nccl.busbw.items():
            for size in sorted({parse_size(text) for text in sizes}):
                steps.append(
                    CollectiveStep(
                        collective=collective,
                        size_bytes=size,
                        dtype=nccl.dtype,
                        warmup=nccl.warmup,
                        iterations=nccl.iterations,
                        timeout_s=nccl.timeout_s,
                    )
                )
    if spec.pairwise is not None:
        pairwise = spec.pairwise
        steps.append(
            PairwiseStep(
                size_bytes=parse_size(pairwise.size),
                dtype=pairwise.dtype,
                warmup=pairwise.warmup,
                iterations=pairwise.iterations,
                concurrent=pairwise.concurrent,
                timeout_s=pairwise.timeout_s,
            )
        )
    return Plan(steps=steps, backend=backend) if steps else None


def copy_plan(spec: ProfileSpec) -> Plan | None:
    copies = spec.copies
    if copies is None:
        return None
    what = [kind for key, kind in COPY_KINDS.items() if getattr(copies, key) is not None]
    if not what:
        return None
    step = CopyStep(
        size_bytes=parse_size(copies.size), warmup=copies.warmup, iterations=copies.iterations, what=what, timeout_s=copies.timeout_s
    )
    return Plan(steps=[step])


def run_nccl_stage(
    spec: ProfileSpec, ranks: int, *, backend: str = "auto", env=None, on_event: Callable[[dict], None] | None = None
) -> tuple[CollectiveSweep | None, PairSweep | None]:
    plan = nccl_plan(spec, backend)
    if plan is None:
        return None, None
    outcome = run_plan(plan, ranks, env=env, on_event=on_event)
    ready = outcome.ready or {}
    collectives, collective_failures = [], []
    pairs, pair_failures = [], []
    for index, step in enumerate(plan.steps):
        failure = outcome.failures.get(index)
        if isinstance(step, CollectiveStep):
            if failure:
                collective_failures.append(StepFailure(step=failure.step, reason=failure.reason, message=failure.message))
            elif index in outcome.results:
                collectives.append(CollectiveResult(nominal_size=format_size(step.size_bytes), **outcome.results[index]))
        else:
            if failure:
                pair_failures.append(StepFailure(step=failure.step, reason=failure.reason, message=failure.message))
            elif index in outcome.results:
                pairs = [PairResult(**{**r, "gpus": tuple(r["gpus"])}) for r in outcome.results[index]]
    backend_used = ready.get("backend", backend)
    collective_sweep = None
    if spec.nccl is not None:
        collective_sweep = CollectiveSweep(
            backend=backend_used,
            nccl_version=ready.get("nccl"),
            torch_version=ready.get("torch", ""),
            ranks=ranks,
            environment=ready.get("environment", {}),
            wall_s=outcome.wall_s,
            results=collectives,
            failures=collective_failures,
        )
    pair_sweep = None
    if spec.pairwise is not None:
        pair_sweep = PairSweep(
            backend=backend_used, concurrent=spec.pairwise.concurrent, wall_s=outcome.wall_s, results=pairs, failures=pair_failures
        )
    return collective_sweep, pair_sweep


def run_copy_stage(spec: ProfileSpec, *, env=None, on_event: Callable[[dict], None] | None = None) -> CopySweep | None:
    plan = copy_plan(spec)
    if plan is None:
        return None
    outcome: Outcome = run_plan(plan, 1, env=env, on_event=on_event)
    results = [CopyResult(**{**r, "gpus": tuple(r["gpus"])}) for r in outcome.results.get(0, [])]
    failures = [StepFailure(step=f.step, reason=f.reason, message=f.message) for f in outcome.failures.values()]
    return CopySweep(wall_s=outcome.wall_s, results=results, failures=failures)


def ddp_shape(spec: ProfileSpec) -> GptShape:
    ddp = spec.ddp
    dims = dict(PRESETS[ddp.model]) if isinstance(ddp.model, str) else ddp.model.model_dump()
    if ddp.seq_len is not None:
        dims["seq_len"] = ddp.seq_len
    return GptShape(**dims)


def ddp_plan(spec: ProfileSpec, ranks: int, *, without_p2p: bool = False, backend: str = "auto") -> Plan | None:
    """One step per world size. The A/B arm trains only the settings `nvlink_ab` names."""
    ddp = spec.ddp
    if ddp is None:
        return None
    shape = ddp_shape(spec)
    if without_p2p:
        cases = [parse_ddp_case(case) for case in ddp.nvlink_ab]
        worlds = sorted({world for world, _, _ in cases if world <= ranks})
        settings = {world: sorted({(b, a) for w, b, a in cases if w == world}) for world in worlds}
    else:
        worlds = sorted(w for w in ddp.world_sizes if w <= ranks)
        settings = {world: [(b, a) for b in ddp.batches for a in ddp.accumulation] for world in worlds}
    steps = []
    for world in worlds:
        batches = sorted({b for b, _ in settings[world]})
        accumulation = sorted({a for _, a in settings[world]})
        steps.append(
            DdpStep(
                world=world,
                layers=shape.layers,
                d_model=shape.d_model,
                heads=shape.heads,
                vocab=shape.vocab,
                seq_len=shape.seq_len,
                dtype=ddp.dtype,
                batches=batches,
                accumulation=accumulation,
                warmup_steps=ddp.warmup_steps,
                steps=ddp.steps,
                no_sync=not without_p2p,
                timeout_s=ddp.timeout_s,
            )
        )
    return Plan(steps=steps, backend=backend) if steps else None


def run_ddp_stage(
    spec: ProfileSpec, ranks: int, *, backend: str = "auto", env=None, on_event: Callable[[dict], None] | None = None
) -> tuple[DdpSweep | None, DdpSweep | None]:
    """The scaling sweep, and where the profile asks for it, the same settings without P2P."""
    if spec.ddp is None:
        return None, None
    base_env = dict(os.environ if env is None else env)
    ab_plan = ddp_plan(spec, ranks, without_p2p=True, backend=backend) if spec.ddp.nvlink_ab else None
    ab_env = {**base_env, "NCCL_P2P_DISABLE": "1"}
    # the A/B arm's workers import torch while the scaling arm trains: one start-up less to wait for
    with Workers(_plan_ranks(ab_plan), ab_env) if ab_plan else contextlib.nullcontext() as ab_workers:
        sweep = _ddp_sweep(spec, ranks, ddp_plan(spec, ranks, backend=backend), False, backend, base_env, on_event)
        without = _ddp_sweep(spec, ranks, ab_plan, True, backend, ab_env, on_event, ab_workers) if spec.ddp.nvlink_ab else None
    return sweep, without


def _plan_ranks(plan: Plan) -> int:
    return max(step.world for step in plan.steps)


def _ddp_sweep(spec, ranks, plan, without_p2p, backend, env, on_event, workers=None) -> DdpSweep:
    shape = ddp_shape(spec)
    failures = [
        StepFailure(step=f"DDP on {world} GPUs", reason="not_run", message=f"DDP on {world} GPUs not run: {ranks} GPU(s) under test")
        for world in spec.ddp.world_sizes
        if world > ranks
    ]
    results: list[DdpResult] = []
    outcome = run_plan(plan, _plan_ranks(plan), env=env, on_event=on_event, workers=workers) if plan else None
    if outcome is not None:
        for index in sorted(outcome.results):
            results.extend(DdpResult(**r) for r in outcome.results[index])
        failures += [StepFailure(step=f.step, reason=f.reason, message=f.message) for f in outcome.failures.values()]
    ready = (outcome.ready if outcome else None) or {}
    return DdpSweep(
        backend=ready.get("backend", backend),
        nccl_version=ready.get("nccl"),
        torch_version=ready.get("torch", ""),
        model={"layers": shape.layers, "d_model": shape.d_model, "heads": shape.heads, "vocab": shape.vocab, "seq_len": shape.seq_len},
        parameters=shape.parameters(),
        dtype=spec.ddp.dtype,
        warmup_steps=spec.ddp.warmup_steps,
        steps=spec.ddp.steps,
        p2p_disabled=without_p2p,
        environment=ready.get("environment", {}),
        wall_s=outcome.wall_s if outcome else 0.0,
        results=results,
        failures=failures,
    )
