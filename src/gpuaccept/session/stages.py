"""The fabric stages a profile asks for: plans to run, and their outcomes as facts.

- the NCCL stage: every collective and size the profile has a floor for, then the pairwise
  exchange, in one set of workers (one NCCL initialization), one rank per GPU under test;
- the copy stage: copy-engine bandwidth in a single process that sees every GPU.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

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
)
from gpuaccept.measure.launch import Outcome, Workers, run_plan
from gpuaccept.measure.pairwise_step import schedule
from gpuaccept.measure.plan import CollectiveStep, CopyStep, DdpStep, PairwiseStep, Plan
from gpuaccept.profile.spec import ProfileSpec
from gpuaccept.vocabulary.copies import COPY_KINDS
from gpuaccept.vocabulary.gpt import PRESETS, GptDims
from gpuaccept.vocabulary.sizes import format_size, parse_size
from gpuaccept.vocabulary.steps import collective_key, ddp_key, ddp_label, pair_step_key, parse_ddp_case

# Step time limits, where the profile sets none: what the step needs at its floor's pace, times a
# slack that lets a slow machine finish (and be measured as slow) but stops a hung one; never
# less than a floor that covers buffer set-up.
PACE_SLACK = 50
MIN_NCCL_STEP_S = 20.0
MIN_COPY_STEP_S = 60.0
MAX_DERIVED_STEP_S = 600.0  # a floor set near zero must not make a hang wait for hours


def _limit(given: float | None, seconds_at_floor: float, minimum: float) -> float:
    return given if given is not None else min(MAX_DERIVED_STEP_S, max(minimum, PACE_SLACK * seconds_at_floor))


def _plan(steps: list, spec: ProfileSpec, backend: str = "auto") -> Plan | None:
    timeouts = spec.timeouts
    return Plan(steps=steps, backend=backend, startup_timeout_s=timeouts.startup_s, stalled_s=timeouts.stalled_s) if steps else None


def nccl_plan(spec: ProfileSpec, ranks: int, backend: str = "auto", only: set[str] | None = None) -> Plan | None:
    """Every collective and size with a floor, then the pairwise exchange; `only` keeps the steps
    with those keys (the values measured again after a miss)."""
    steps: list = []
    if spec.nccl is not None:
        nccl = spec.nccl
        for collective, sizes in nccl.busbw.items():
            floors = {parse_size(text): floor for text, floor in sizes.items()}
            for size in sorted(floors):
                if only is not None and collective_key(collective, format_size(size)) not in only:
                    continue
                # at most 2 bytes on the wire per byte of message (all_reduce's 2(n-1)/n)
                at_floor = (nccl.warmup + nccl.iterations + 2) * 2 * size / (floors[size] * 1e9)
                steps.append(
                    CollectiveStep(
                        collective=collective,
                        size_bytes=size,
                        dtype=nccl.dtype,
                        warmup=nccl.warmup,
                        iterations=nccl.iterations,
                        timeout_s=_limit(nccl.timeout_s, at_floor, MIN_NCCL_STEP_S),
                    )
                )
    if spec.pairwise is not None:
        pairwise = spec.pairwise
        pairs = None
        if only is not None:
            pairs = [pair for pair in _all_pairs(ranks) if pair_step_key(*pair) in only]
        if only is None or pairs:
            size = parse_size(pairwise.size)
            rounds = len(schedule(ranks, pairwise.concurrent, pairs))
            at_floor = rounds * (pairwise.warmup + pairwise.iterations + 1) * size / (pairwise.min_busbw * 1e9)
            steps.append(
                PairwiseStep(
                    size_bytes=size,
                    dtype=pairwise.dtype,
                    warmup=pairwise.warmup,
                    iterations=pairwise.iterations,
                    concurrent=pairwise.concurrent,
                    pairs=pairs,
                    timeout_s=_limit(pairwise.timeout_s, at_floor, MIN_NCCL_STEP_S),
                )
            )
    return _plan(steps, spec, backend)


def _all_pairs(ranks: int) -> list[tuple[int, int]]:
    return [(a, b) for a in range(ranks) for b in range(a + 1, ranks)]


def copy_plan(spec: ProfileSpec, gpus: int, only: set[str] | None = None) -> Plan | None:
    copies = spec.copies
    if copies is None:
        return None
    floors = {kind: copies.floor(kind) for kind in COPY_KINDS if copies.floor(kind) is not None}
    if only is not None:
        floors = {kind: floor for kind, floor in floors.items() if any(key.startswith(f"copy/{kind}/") for key in only)}
    if not floors:
        return None
    size = parse_size(copies.size)
    # how many copies of each kind, and the bytes each moves, on a machine of `gpus` GPUs
    counts = {
        "p2p": gpus * (gpus - 1),
        "p2p_bidirectional": gpus * (gpus - 1) // 2,
        "local": gpus,
        "host_to_device": gpus,
        "device_to_host": gpus,
    }
    moved = {"p2p_bidirectional": 2 * size}
    at_floor = sum(
        counts[kind] * (copies.warmup + copies.iterations + 1) * moved.get(kind, size) / (floor * 1e9) for kind, floor in floors.items()
    )
    step = CopyStep(
        size_bytes=size,
        warmup=copies.warmup,
        iterations=copies.iterations,
        what=list(floors),
        only=sorted(only) if only is not None else None,
        timeout_s=_limit(copies.timeout_s, at_floor, MIN_COPY_STEP_S),
    )
    return _plan([step], spec)


def run_nccl_stage(
    spec: ProfileSpec,
    ranks: int,
    *,
    backend: str = "auto",
    env=None,
    on_event: Callable[[dict], None] | None = None,
    only: set[str] | None = None,
) -> tuple[CollectiveSweep | None, PairSweep | None]:
    plan = nccl_plan(spec, ranks, backend, only)
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
    has = {type(step) for step in plan.steps}
    if spec.nccl is not None and (only is None or CollectiveStep in has):
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
    if spec.pairwise is not None and (only is None or PairwiseStep in has):
        pair_sweep = PairSweep(
            backend=backend_used, concurrent=spec.pairwise.concurrent, wall_s=outcome.wall_s, results=pairs, failures=pair_failures
        )
    return collective_sweep, pair_sweep


def run_copy_stage(
    spec: ProfileSpec, gpus: int, *, env=None, on_event: Callable[[dict], None] | None = None, only: set[str] | None = None
) -> CopySweep | None:
    plan = copy_plan(spec, gpus, only)
    if plan is None:
        return None
    outcome: Outcome = run_plan(plan, 1, env=env, on_event=on_event)
    results = [CopyResult(**{**r, "gpus": tuple(r["gpus"])}) for r in outcome.results.get(0, [])]
    failures = [StepFailure(step=f.step, reason=f.reason, message=f.message) for f in outcome.failures.values()]
    return CopySweep(wall_s=outcome.wall_s, results=results, failures=failures)


def ddp_shape(spec: ProfileSpec) -> GptDims:
    ddp = spec.ddp
    shape = PRESETS[ddp.model] if isinstance(ddp.model, str) else ddp.model
    return shape if ddp.seq_len is None else shape.model_copy(update={"seq_len": ddp.seq_len})


def ddp_plan(
    spec: ProfileSpec, ranks: int, *, without_p2p: bool = False, backend: str = "auto", only: set[str] | None = None
) -> Plan | None:
    """One step per world size. The A/B arm trains only the settings `nvlink_ab` names; `only`
    keeps the settings with those keys ("ddp/4gpu-bs8", "ddp_without_p2p/4gpu-bs8")."""
    ddp = spec.ddp
    if ddp is None:
        return None
    shape = ddp_shape(spec)
    if only is not None:
        cases = [parse_ddp_case(key.split("/", 1)[1]) for key in only if key.startswith(ddp_key("", without_p2p))]
    elif without_p2p:
        cases = [parse_ddp_case(case) for case in ddp.nvlink_ab]
    else:
        cases = [(w, b, a) for w in ddp.world_sizes for b in ddp.batches for a in ddp.accumulation]
    worlds = sorted({world for world, _, _ in cases if world <= ranks})
    steps = []
    for world in worlds:
        settings = {(b, a) for w, b, a in cases if w == world}
        steps.append(
            DdpStep(
                world=world,
                model=shape,
                dtype=ddp.dtype,
                batches=sorted({b for b, _ in settings}),
                accumulation=sorted({a for _, a in settings}),
                warmup_steps=ddp.warmup_steps,
                steps=ddp.steps,
                no_sync=not without_p2p,
                timeout_s=ddp.timeout_s,
            )
        )
    return _plan(steps, spec, backend)


def run_ddp_stage(
    spec: ProfileSpec,
    ranks: int,
    *,
    backend: str = "auto",
    env=None,
    on_event: Callable[[dict], None] | None = None,
    only: set[str] | None = None,
) -> tuple[DdpSweep | None, DdpSweep | None]:
    """The scaling sweep, and where the profile asks for it, the same settings without P2P; with
    `only`, just the settings with those keys (an arm with none of them gives None)."""
    if spec.ddp is None:
        return None, None
    base_env = dict(os.environ if env is None else env)
    plan = ddp_plan(spec, ranks, backend=backend, only=only)
    ab_plan = ddp_plan(spec, ranks, without_p2p=True, backend=backend, only=only) if spec.ddp.nvlink_ab else None
    ab_env = {**base_env, "NCCL_P2P_DISABLE": "1"}
    # the A/B arm's workers import torch while the scaling arm trains: one start-up less to wait for
    with Workers(_plan_ranks(ab_plan), ab_env) if ab_plan else contextlib.nullcontext() as ab_workers:
        sweep = _ddp_sweep(spec, ranks, plan, False, backend, base_env, on_event) if plan or only is None else None
        without = (
            _ddp_sweep(spec, ranks, ab_plan, True, backend, ab_env, on_event, ab_workers)
            if ab_plan or (only is None and spec.ddp.nvlink_ab)
            else None
        )
    return sweep, without


def _plan_ranks(plan: Plan) -> int:
    return max(step.world for step in plan.steps)


def _ddp_sweep(spec, ranks, plan, without_p2p, backend, env, on_event, workers=None) -> DdpSweep:
    shape = ddp_shape(spec)
    worlds = {step.world for step in plan.steps} if plan else set()
    failures = [
        StepFailure(step=ddp_label(world), reason="not_run", message=f"{ddp_label(world)} not run: {ranks} GPU(s) under test")
        for world in spec.ddp.world_sizes
        if world > ranks and world not in worlds
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
        model=shape.model_dump(),
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
