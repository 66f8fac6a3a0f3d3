"""The compute stage: the per-GPU loads a profile asks for (GEMM, HBM bandwidth, memory test).

Each GPU gets a worker process of its own that sees only that GPU (CUDA_VISIBLE_DEVICES narrowed
to it), and the GPUs asked for are loaded at the same time (`OnEachGpu`, which a burn-in's
sustained load runs on too): the throughput a GPU keeps while its neighbours work too, the power
and cooling of the whole machine stressed at once, and one GPU's hang or crash costs only its own
values. Each GPU's values are judged on their own: a GPU slower than its siblings fails its own
tests. The steps of one GPU run in order (GEMM, HBM, memory test); a step that hangs is killed and
named, and the GPU's later steps run in a fresh worker.

`run_compute_stage(spec, gpus)` can be called as often as wanted: it keeps nothing between calls.
The session's store (store.py) calls it once per session, on every GPU at once, and keeps the result.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping

from gpuaccept.facts.measurements import ComputeSweep, GemmResult, HbmResult, Measurements, MemtestResult, StepFailure
from gpuaccept.measure.drills import NO_DRILLS, Drills
from gpuaccept.measure.launch import Outcome, WorkerPool, Workers, run_plan
from gpuaccept.measure.plan import GemmStep, HbmStep, MemtestStep, Plan, Step
from gpuaccept.profile.spec import ProfileSpec
from gpuaccept.stages.fabric import MAX_DERIVED_STEP_S, PACE_SLACK
from gpuaccept.vocabulary.sizes import parse_size
from gpuaccept.vocabulary.steps import LoadKey, StepKey

# Step time limits where the profile sets none, as for the fabric stages: 50 times what the step
# needs at its floor's pace, at least MIN_LOAD_STEP_S; without a floor, at a pace slower than any
# GPU this suite is for.
MIN_LOAD_STEP_S = 20.0
UNFLOORED_TFLOPS = 10.0
UNFLOORED_GBPS = 100.0
# the memory test stops itself at its cap; this covers allocation and the chunk in flight
MEMTEST_ALLOWANCE_S = 60.0
POLL_S = 0.05


def _limit(given: float | None, seconds_at_pace: float) -> float:
    return given if given is not None else min(MAX_DERIVED_STEP_S, max(MIN_LOAD_STEP_S, PACE_SLACK * seconds_at_pace))


def compute_steps(spec: ProfileSpec, gpu: int, only: set[StepKey] | None = None) -> list[Step]:
    """The steps of one GPU, in the order they run; `only` keeps those measuring these keys."""
    compute = spec.compute
    if compute is None:
        return []
    steps: list[Step] = []
    if compute.gemm is not None:
        gemm = compute.gemm
        products = gemm.warmup + gemm.repeats + gemm.verify_repeats + 2
        at_pace = products * 2 * gemm.size**3 / ((gemm.min_tflops or UNFLOORED_TFLOPS) * 1e12)
        steps.append(
            GemmStep(
                gpu=gpu,
                size=gemm.size,
                dtype=gemm.dtype,
                warmup=gemm.warmup,
                repeats=gemm.repeats,
                verify_repeats=gemm.verify_repeats,
                timeout_s=_limit(gemm.timeout_s, at_pace),
            )
        )
    if compute.hbm is not None:
        hbm = compute.hbm
        size = parse_size(hbm.size)
        floor = min([f for f in (hbm.copy_min, hbm.triad_min) if f is not None], default=UNFLOORED_GBPS)
        at_pace = (hbm.warmup + hbm.iterations + 2) * 5 * size / (floor * 1e9)  # a copy moves 2 sizes, a triad 3
        steps.append(
            HbmStep(gpu=gpu, size_bytes=size, warmup=hbm.warmup, iterations=hbm.iterations, timeout_s=_limit(hbm.timeout_s, at_pace))
        )
    if compute.memtest is not None:
        memtest = compute.memtest
        steps.append(
            MemtestStep(
                gpu=gpu,
                fraction=memtest.fraction,
                max_bytes=parse_size(memtest.max_size) if memtest.max_size else None,
                chunk_bytes=parse_size(memtest.chunk),
                time_cap_s=memtest.time_cap_s,
                seed=memtest.seed,
                timeout_s=memtest.time_cap_s + MEMTEST_ALLOWANCE_S,
            )
        )
    if only is not None:
        steps = [step for step in steps if set(step.keys) & only]
    return steps


def compute_plan(spec: ProfileSpec, gpu: int, only: set[StepKey] | None = None, drills: Drills = NO_DRILLS) -> Plan | None:
    """One GPU's plan, for its own worker."""
    steps = compute_steps(spec, gpu, only)
    if not steps:
        return None
    return Plan(steps=steps, startup_timeout_s=spec.timeouts.startup_s, stalled_s=spec.timeouts.stalled_s, drills=drills)


def visible_gpu(env: Mapping[str, str], gpu: int) -> str:
    """CUDA_VISIBLE_DEVICES for a worker that sees only `gpu` (its CUDA ordinal as this run sees
    it): the entry of CUDA_VISIBLE_DEVICES at that place where one is set, the ordinal itself otherwise."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    entries = [entry.strip() for entry in visible.split(",")] if visible else []
    return entries[gpu] if gpu < len(entries) else str(gpu)


def on_gpu(plan: Plan, gpu: int, env: Mapping[str, str] | None = None) -> Plan:
    """`plan` for a worker that sees only `gpu` (CUDA_VISIBLE_DEVICES set in its environment)."""
    visible = visible_gpu(os.environ if env is None else env, gpu)
    return plan.model_copy(update={"environment": {**plan.environment, "CUDA_VISIBLE_DEVICES": visible}})


def compute_stage_plans(
    spec: ProfileSpec, gpus: list[int], *, env: Mapping[str, str] | None = None, only: set[StepKey] | None = None,
    drills: Drills = NO_DRILLS, require_cuda: bool = False,
) -> dict[int, Plan]:
    """Each GPU's plan as its worker runs it: seeing that GPU alone; on CUDA where `require_cuda`."""
    plans = {}
    for gpu in gpus:
        plan = compute_plan(spec, gpu, only, drills)
        if plan is not None:
            plans[gpu] = on_gpu(plan.model_copy(update={"backend": "nccl"}) if require_cuda else plan, gpu, env)
    return plans


class OnEachGpu:
    """A plan per GPU, run at once, each by a worker of its own that sees only its GPU: the compute
    stage's loads and a burn-in's sustained load. One GPU's hang or crash costs only its own values,
    and each GPU's values are its own, judged on their own.

    Each GPU's workers are the set `pool` was given its plan for ahead, else one started ahead:
    with `ahead`, started now to import torch while whatever comes first runs, or one of `pool`'s
    waiting; the rest start with their plans. No GPU's load begins before every GPU's workers are
    set up (measure/launch.py lets a set measure only then)."""

    def __init__(
        self, gpus: list[int], *, env: dict[str, str] | None = None, on_event: Callable[[dict], None] | None = None,
        pool: WorkerPool | None = None, ahead: bool = False,
    ):
        self.gpus = sorted(gpus)
        self.env = env
        self.on_event = on_event
        self.visible = {gpu: visible_gpu(os.environ if env is None else env, gpu) for gpu in self.gpus}
        self.outcomes: dict[int, Outcome] = {}
        self.pool = pool if env is None else None
        self._workers: dict[int, Workers] = {gpu: Workers(1, env) for gpu in self.gpus} if ahead else {}
        self._threads: list[threading.Thread] = []

    def start(self, plans: dict[int, Plan]) -> None:
        runs = []
        for gpu, plan in sorted(plans.items()):
            mine = on_gpu(plan, gpu, self.env)
            workers = self.pool.take_for(mine, 1) if self.pool is not None else None
            if workers is None:
                workers = self._workers.pop(gpu, None) or (self.pool.take(1) if self.pool is not None else None)
            else:
                self._workers.pop(gpu, None)
            if workers is not None and workers.plan is None:
                workers.begin(mine)  # every GPU's workers set up at once, before any GPU's load begins
            runs.append((gpu, mine, workers))
        for gpu, mine, workers in runs:
            thread = threading.Thread(target=self._run, args=(gpu, mine, workers), name=f"gpu-accept loads gpu{gpu}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _run(self, gpu: int, plan: Plan, workers: Workers | None) -> None:
        self.outcomes[gpu] = run_plan(plan, 1, env=self.env, on_event=self.on_event, workers=workers)

    @property
    def running(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    def wait(self) -> dict[int, Outcome]:
        """Every GPU's outcome, once all are done: in short waits, so that Ctrl-C reaches the caller."""
        while self.running:
            for thread in self._threads:
                thread.join(POLL_S)
        return dict(sorted(self.outcomes.items()))

    def close(self) -> None:
        """End the workers never given a plan (a load that never began)."""
        for workers in self._workers.values():
            workers.end()
        self._workers.clear()


def run_compute_stage(
    spec: ProfileSpec,
    gpus: list[int],
    *,
    env: dict[str, str] | None = None,
    on_event: Callable[[dict], None] | None = None,
    only: set[StepKey] | None = None,
    require_cuda: bool = False,
    drills: Drills = NO_DRILLS,
    pool: WorkerPool | None = None,
) -> ComputeSweep | None:
    """Load `gpus` at once, one worker each; None where the profile asks for no per-GPU load.
    `require_cuda`: a worker that finds no CUDA device fails its steps instead of loading the CPU."""
    plans = compute_stage_plans(spec, gpus, env=env, only=only, drills=drills, require_cuda=require_cuda)
    if spec.compute is None or (only is not None and not plans):
        return None
    loads = OnEachGpu(list(plans), env=env, on_event=on_event, pool=pool)
    try:
        loads.start(plans)
        outcomes = loads.wait()
    finally:
        loads.close()
    results: list[GemmResult | HbmResult | MemtestResult] = []
    failures: list[StepFailure] = []
    backend, torch_version = "", ""
    for gpu, outcome in outcomes.items():
        ready = outcome.ready or {}
        used = "cuda" if ready.get("backend") == "nccl" else "cpu" if ready else ""
        backend, torch_version = backend or used, torch_version or ready.get("torch", "")
        if require_cuda and used == "cpu":
            keys: list[StepKey] = [key for step in plans[gpu].steps for key in step.keys]
            message = f"the worker of gpu{gpu} found no CUDA device (CUDA_VISIBLE_DEVICES={loads.visible[gpu]})"
            failures.append(StepFailure(step=f"loads on gpu{gpu}", reason="error", message=message, keys=keys))
            continue
        for key, record in outcome.values.items():
            if isinstance(key, LoadKey):
                results.append(load_result(key, record))
        failures.extend(outcome.failures)
    return ComputeSweep(
        backend=backend,
        torch_version=torch_version,
        gpus=sorted(gpus),
        wall_s=max((outcome.wall_s for outcome in outcomes.values()), default=0.0),
        results=results,
        failures=failures,
        phases={f"gpu{gpu}: {name}": seconds for gpu, outcome in outcomes.items() for name, seconds in outcome.phases.items()},
    )


def load_result(key: LoadKey, record: dict) -> GemmResult | HbmResult | MemtestResult:
    if key.what == "gemm":
        return GemmResult(**record)
    if key.what == "memtest":
        return MemtestResult(**record)
    return HbmResult(**record)


def compute_not_run(spec: ProfileSpec, gpus: list[int], reason: str) -> Measurements:
    """Every load of `gpus`, failed with the reason they were not loaded (so each test says it)."""
    failures = [
        StepFailure(
            step=f"loads on gpu{gpu}", reason="not_run", message=f"gpu{gpu} not loaded: {reason}",
            keys=[key for step in compute_steps(spec, gpu) for key in step.keys],
        )
        for gpu in gpus
    ]
    return Measurements(compute=ComputeSweep(backend="", torch_version="", gpus=sorted(gpus), wall_s=0.0, results=[], failures=failures))
