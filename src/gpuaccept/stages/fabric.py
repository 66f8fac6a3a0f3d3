"""The fabric stages a profile asks for: plans to run, and their outcomes as facts (the stages
themselves, in registry.py).

- the NCCL stage: every collective and size the profile has a floor for, then the pairwise
  exchange, in one set of workers (one NCCL initialization), one rank per GPU under test;
- the copy stage: copy-engine bandwidth in a single process that sees every GPU.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from gpuaccept.facts.measurements import (
    CollectiveResult,
    CollectiveSweep,
    CopyResult,
    CopySweep,
    DdpResult,
    DdpSweep,
    Measurements,
    PairResult,
    PairSweep,
    StepFailure,
)
from gpuaccept.facts.record import Unavailable
from gpuaccept.measure.drills import NO_DRILLS, Drills
from gpuaccept.measure.launch import Outcome, WorkerPool, Workers, run_plan
from gpuaccept.measure.nccl_logs import nccl_info_settings, our_nccl_files
from gpuaccept.measure.pairwise_step import schedule
from gpuaccept.measure.plan import CollectiveStep, CopyStep, DdpStep, PairwiseStep, Plan
from gpuaccept.probe.nvls import read_nccl_nvls
from gpuaccept.profile.spec import ProfileSpec
from gpuaccept.vocabulary.copies import COPY_KINDS, HOST_COPIES, CopyKind
from gpuaccept.vocabulary.gpt import PRESETS, GptDims
from gpuaccept.vocabulary.sizes import parse_size
from gpuaccept.vocabulary.steps import CollectiveKey, CopyKey, DdpKey, PairKey, StepKey, parse_ddp_case

# Step time limits, where the profile sets none: what the step needs at its floor's pace, times a
# slack that lets a slow machine finish (and be measured as slow) but stops a hung one; never
# less than a floor that covers buffer set-up.
PACE_SLACK = 50
MIN_NCCL_STEP_S = 20.0
MIN_COPY_STEP_S = 60.0
MAX_DERIVED_STEP_S = 600.0  # a floor set near zero must not make a hang wait for hours
WITHOUT_P2P = {"NCCL_P2P_DISABLE": "1"}  # the NVLink A/B's other arm: NCCL through host memory


def _limit(given: float | None, seconds_at_floor: float, minimum: float) -> float:
    return given if given is not None else min(MAX_DERIVED_STEP_S, max(minimum, PACE_SLACK * seconds_at_floor))


def _plan(steps: list, spec: ProfileSpec, backend: str = "auto", drills: Drills = NO_DRILLS) -> Plan | None:
    timeouts = spec.timeouts
    if not steps:
        return None
    return Plan(steps=steps, backend=backend, startup_timeout_s=timeouts.startup_s, stalled_s=timeouts.stalled_s, drills=drills)


def nccl_plan(
    spec: ProfileSpec, ranks: int, backend: str = "auto", only: set[StepKey] | None = None, drills: Drills = NO_DRILLS
) -> Plan | None:
    """Every collective and size with a floor, then the pairwise exchange; `only` keeps the steps
    with those keys (the values measured again after a miss)."""
    steps: list = []
    if spec.nccl is not None:
        nccl = spec.nccl
        for collective, sizes in nccl.busbw.items():
            floors = {parse_size(text): floor for text, floor in sizes.items()}
            for size in sorted(floors):
                if only is not None and CollectiveKey(collective, size) not in only:
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
        pairs = [PairKey(a, b) for a in range(ranks) for b in range(a + 1, ranks)]
        if only is not None:
            pairs = [pair for pair in pairs if pair in only]
        if pairs:
            size = parse_size(pairwise.size)
            rounds = len(schedule(ranks, pairwise.concurrent, [pair.gpus for pair in pairs]))
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
    return _plan(steps, spec, backend, drills)


def _copies_of(kind: CopyKind, gpus: int) -> list[CopyKey]:
    """Every copy of one kind on a machine of `gpus` GPUs."""
    if kind == "p2p":
        return [CopyKey("p2p", (a, b)) for a in range(gpus) for b in range(gpus) if a != b]
    if kind == "p2p_bidirectional":
        return [CopyKey("p2p_bidirectional", (a, b)) for a in range(gpus) for b in range(a + 1, gpus)]
    return [CopyKey(kind, (gpu,)) for gpu in range(gpus)]


def copy_plan(spec: ProfileSpec, gpus: int, only: set[StepKey] | None = None, drills: Drills = NO_DRILLS) -> Plan | None:
    copies = spec.copies
    if copies is None:
        return None
    floors = {kind: floor for kind in COPY_KINDS if (floor := copies.floor(kind)) is not None}
    keys = [key for kind in floors for key in _copies_of(kind, gpus) if only is None or key in only]
    if not keys:
        return None
    size = parse_size(copies.size)
    host_size = parse_size(copies.host_size) if copies.host_size is not None else None

    def moved(what: str) -> int:  # bytes a copy of this kind moves: bidirectional ones move the size both ways
        return 2 * size if what == "p2p_bidirectional" else (host_size or size) if what in HOST_COPIES else size

    # what the copies take at their floors' pace
    at_floor = sum((copies.warmup + copies.iterations + 1) * moved(key.what) / (floors[key.what] * 1e9) for key in keys)
    step = CopyStep(
        size_bytes=size,
        host_size_bytes=host_size,
        warmup=copies.warmup,
        iterations=copies.iterations,
        concurrent=copies.concurrent,
        copies=keys,
        timeout_s=_limit(copies.timeout_s, at_floor, MIN_COPY_STEP_S),
    )
    return _plan([step], spec, drills=drills)


def nccl_stage_plan(
    spec: ProfileSpec, ranks: int, logs: Path, *, backend: str = "auto", env=None, only: set[StepKey] | None = None,
    drills: Drills = NO_DRILLS,
) -> Plan | None:
    """The NCCL stage's plan as its workers run it: `nccl_plan`, with the environment that sends
    NCCL's set-up lines to files in `logs` (made here), where the user has not sent them elsewhere."""
    plan = nccl_plan(spec, ranks, backend, only, drills)
    if plan is None:
        return None
    logs.mkdir(parents=True, exist_ok=True)
    ours, _ = _nccl_set_up_lines(env, logs)
    return plan.model_copy(update={"environment": {**plan.environment, **ours}})


def run_nccl_stage(
    spec: ProfileSpec,
    ranks: int,
    *,
    backend: str = "auto",
    env=None,
    on_event: Callable[[dict], None] | None = None,
    only: set[StepKey] | None = None,
    drills: Drills = NO_DRILLS,
    pool: WorkerPool | None = None,
    logs: Path | None = None,
) -> tuple[CollectiveSweep | None, PairSweep | None]:
    """`logs`: where NCCL's set-up lines go (a temporary folder where None), a folder of this run's own."""
    if nccl_plan(spec, ranks, backend, only, drills) is None:
        return None, None
    with contextlib.ExitStack() as stack:
        folder = logs if logs is not None else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gpu-accept-nccl-")))
        plan = nccl_stage_plan(spec, ranks, folder, backend=backend, env=env, only=only, drills=drills)
        assert plan is not None
        ours, nccl_files = _nccl_set_up_lines(env, folder)
        outcome = run_plan(plan, ranks, env=env, on_event=on_event, pool=pool)
        nvls = read_nccl_nvls(sorted(nccl_files())) if nccl_files is not None else Unavailable(
            unavailable="not_found", detail="NCCL_DEBUG_FILE is set in the environment: NCCL's lines went to the user's files"
        )
    ready = outcome.ready or {}
    values = outcome.values.items()
    collectives = [CollectiveResult(nominal_size=key.nominal_size, **record) for key, record in values if isinstance(key, CollectiveKey)]
    pairs = [PairResult(**{**record, "gpus": key.gpus}) for key, record in values if isinstance(key, PairKey)]
    collective_failures = failures_of(outcome.failures, CollectiveKey)
    pair_failures = failures_of(outcome.failures, PairKey)
    backend_used = ready.get("backend", backend)
    collective_sweep = None
    has = {type(step) for step in plan.steps}
    if spec.nccl is not None and (only is None or CollectiveStep in has):
        collective_sweep = CollectiveSweep(
            backend=backend_used,
            nccl_version=ready.get("nccl"),
            torch_version=ready.get("torch", ""),
            ranks=ranks,
            environment={k: v for k, v in ready.get("environment", {}).items() if ours.get(k) != v},  # the user's, not ours
            wall_s=outcome.wall_s,
            results=collectives,
            failures=collective_failures,
            nvls=nvls if backend_used == "nccl" else Unavailable(unavailable="not_supported", detail=f"backend {backend_used}"),
            phases=outcome.phases,
        )
    pair_sweep = None
    if spec.pairwise is not None and (only is None or PairwiseStep in has):
        pair_sweep = PairSweep(
            backend=backend_used, concurrent=spec.pairwise.concurrent, wall_s=outcome.wall_s, results=pairs, failures=pair_failures,
            phases=outcome.phases,
        )
    return collective_sweep, pair_sweep


def _nccl_set_up_lines(env, folder: Path):
    """What the workers' environment needs for NCCL's INFO lines to be written to files in `folder`
    (measure/nccl_logs.py), where the user has not sent them elsewhere: they say whether NCCL set up
    NVLink SHARP. Returns the settings to add (the plan's environment; left out of the facts' record
    of the user's environment) and a function listing the files written; none of either where
    NCCL_DEBUG_FILE is the user's (whose level this stage leaves as it is)."""
    base = dict(os.environ if env is None else env)
    if "NCCL_DEBUG_FILE" in base:
        return {}, None
    return nccl_info_settings(base, folder), lambda: our_nccl_files(folder)


def failures_of(failures: list[StepFailure], kind: type) -> list[StepFailure]:
    """The failures of values of one kind (CollectiveKey, PairKey): those of one sweep."""
    return [failure for failure in failures if any(isinstance(key, kind) for key in failure.keys)]


def run_copy_stage(
    spec: ProfileSpec, gpus: int, *, env=None, on_event: Callable[[dict], None] | None = None, only: set[StepKey] | None = None,
    drills: Drills = NO_DRILLS, pool: WorkerPool | None = None,
) -> CopySweep | None:
    plan = copy_plan(spec, gpus, only, drills)
    if plan is None:
        return None
    outcome: Outcome = run_plan(plan, 1, env=env, on_event=on_event, pool=pool)
    results = [CopyResult(**{**record, "gpus": key.gpus}) for key, record in outcome.values.items() if isinstance(key, CopyKey)]
    return CopySweep(wall_s=outcome.wall_s, results=results, failures=outcome.failures, phases=outcome.phases)


def ddp_shape(spec: ProfileSpec) -> GptDims:
    ddp = spec.ddp
    shape = PRESETS[ddp.model] if isinstance(ddp.model, str) else ddp.model
    return shape if ddp.seq_len is None else shape.model_copy(update={"seq_len": ddp.seq_len})


def ddp_plan(
    spec: ProfileSpec, ranks: int, *, without_p2p: bool = False, backend: str = "auto", only: set[StepKey] | None = None,
    drills: Drills = NO_DRILLS,
) -> Plan | None:
    """One step per world size up to `ranks`. The A/B arm trains only the settings `nvlink_ab`
    names; `only` keeps the settings with those keys (ddp/4gpu-bs8, ddp_without_p2p/4gpu-bs8)."""
    return _plan([step for step in _ddp_steps(spec, without_p2p, only) if step.world <= ranks], spec, backend, drills)


def _ddp_steps(spec: ProfileSpec, without_p2p: bool, only: set[StepKey] | None) -> list[DdpStep]:
    """One step per world size the arm asks for, however many GPUs there are."""
    ddp = spec.ddp
    if ddp is None:
        return []
    shape = ddp_shape(spec)
    if only is not None:
        cases = [(k.world, k.batch, k.accumulation) for k in only if isinstance(k, DdpKey) and k.without_p2p == without_p2p]
    elif without_p2p:
        cases = [parse_ddp_case(case) for case in ddp.nvlink_ab]
    else:
        cases = [(w, b, a) for w in ddp.world_sizes for b in ddp.batches for a in ddp.accumulation]
    steps = []
    for world in sorted({world for world, _, _ in cases}):
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
                without_p2p=without_p2p,
                timeout_s=ddp.timeout_s,
            )
        )
    return steps


def ddp_stage_plans(
    spec: ProfileSpec, ranks: int, *, backend: str = "auto", only: set[StepKey] | None = None, drills: Drills = NO_DRILLS,
) -> tuple[Plan | None, Plan | None]:
    """The DDP stage's plans as its workers run them: the scaling sweep's, and the NVLink A/B's
    other arm's (with NCCL_P2P_DISABLE=1), where the profile asks for it (None where an arm has no step)."""
    if spec.ddp is None:
        return None, None
    plan = ddp_plan(spec, ranks, backend=backend, only=only, drills=drills)
    ab_plan = ddp_plan(spec, ranks, without_p2p=True, backend=backend, only=only, drills=drills) if spec.ddp.nvlink_ab else None
    if ab_plan is not None:
        ab_plan = ab_plan.model_copy(update={"environment": {**ab_plan.environment, **WITHOUT_P2P}})
    return plan, ab_plan


def run_ddp_stage(
    spec: ProfileSpec,
    ranks: int,
    *,
    backend: str = "auto",
    env=None,
    on_event: Callable[[dict], None] | None = None,
    only: set[StepKey] | None = None,
    drills: Drills = NO_DRILLS,
    pool: WorkerPool | None = None,
) -> tuple[DdpSweep | None, DdpSweep | None]:
    """The scaling sweep, and where the profile asks for it, the same settings without P2P; with
    `only`, just the settings with those keys (an arm with none of them gives None). Both arms set
    up at once (the A/B arm's processes hold while the scaling arm measures): one set-up less to
    wait for. The scaling arm's processes hold, idle, while the A/B arm measures, and both arms
    end together: the A/B arm does not wait for their tear-down (the driver ends their CUDA
    contexts one by one: over a second on four H200s), which goes on while the stage's tests judge."""
    if spec.ddp is None:
        return None, None
    plan, ab_plan = ddp_stage_plans(spec, ranks, backend=backend, only=only, drills=drills)
    with contextlib.ExitStack() as started:
        arms: list[Workers | None] = []
        for arm in (plan, ab_plan):
            workers = None
            if arm is not None:
                workers = _set_up_ahead(pool, env, arm) or Workers(plan_ranks(arm), env, arm.imports_ahead)
                started.callback(workers.end)  # where no run took it (a run ends it itself)
                if workers.plan is None:
                    workers.begin(arm)  # both arms set up now; each measures once nothing else sets up
            arms.append(workers)
        keep = arms[1] is not None  # the A/B arm measures after it
        sweep = _ddp_sweep(spec, ranks, plan, False, backend, env, on_event, arms[0], only, keep) if plan or only is None else None
        without = (
            _ddp_sweep(spec, ranks, ab_plan, True, backend, env, on_event, arms[1], only)
            if ab_plan or (only is None and spec.ddp.nvlink_ab)
            else None
        )
    return sweep, without


def _set_up_ahead(pool: WorkerPool | None, env, plan: Plan) -> Workers | None:
    """A set of the session's for `plan` (given it ahead, or waiting with torch imported), where
    the plan runs in this process's own environment."""
    if pool is None or env is not None:
        return None
    ranks = plan_ranks(plan)
    return pool.take_for(plan, ranks) or pool.take(ranks, plan.imports_ahead)


def plan_ranks(plan: Plan) -> int:
    """The ranks a DDP plan runs on: its largest world."""
    return max(step.world for step in plan.steps)


def _ddp_sweep(spec, ranks, plan, without_p2p, backend, env, on_event, workers=None, only=None, keep=False) -> DdpSweep:
    shape = ddp_shape(spec)
    failures = [
        StepFailure(step=step.label, reason="not_run", message=f"{step.label} not run: {ranks} GPU(s) under test", keys=step.keys)
        for step in _ddp_steps(spec, without_p2p, only)
        if step.world > ranks
    ]
    results: list[DdpResult] = []
    outcome = run_plan(plan, plan_ranks(plan), env=env, on_event=on_event, workers=workers, keep=keep) if plan else None
    if outcome is not None:
        results = [DdpResult(**record) for key, record in outcome.values.items() if isinstance(key, DdpKey)]
        failures += outcome.failures
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
        phases=outcome.phases if outcome else {},
    )


def nccl_not_run(spec: ProfileSpec, gpus: list[int], reason: str) -> Measurements:
    """Every step of the NCCL stage, failed with the reason it could not run (so each test says it).
    A profile with neither an nccl nor a pairwise section (one GPU) has no steps: nothing is said."""
    plan = nccl_plan(spec, spec.gpus.count)
    failures = [
        StepFailure(step=step.label, reason="not_run", message=f"{step.label} not run: {reason}", keys=step.keys)
        for step in (plan.steps if plan else [])
    ]
    collectives = pairwise = None
    if spec.nccl:
        collectives = CollectiveSweep(
            backend="", nccl_version=None, torch_version="", ranks=0, environment={}, wall_s=0.0, results=[],
            failures=failures_of(failures, CollectiveKey),
        )
    if spec.pairwise:
        pairwise = PairSweep(
            backend="", concurrent=spec.pairwise.concurrent, wall_s=0.0, results=[],
            failures=failures_of(failures, PairKey),
        )
    return Measurements(collectives=collectives, pairwise=pairwise)
