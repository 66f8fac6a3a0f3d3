"""What a measurement stage is: one object saying what the profile asks of it, how it runs, what it
yields where it cannot run, whether it loads one GPU or the whole machine, and its part in a burn-in.

The measurement store (store.py) and the burn-in (gpuaccept/burnin) read nothing else about a stage:
a new stage is a new `Stage` in registry.py, its sweeps in `Measurements`, checks that declare it as
their stage (checks/declare.py) and a suite asking for it by marker (docs/adding-a-stage.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gpuaccept.facts import Facts
from gpuaccept.facts.measurements import Measurements
from gpuaccept.measure.drills import NO_DRILLS, Drills
from gpuaccept.measure.launch import WorkerPool
from gpuaccept.measure.plan import Plan
from gpuaccept.profile.spec import ProfileSpec
from gpuaccept.stages.sustained import SustainedLoad
from gpuaccept.vocabulary.steps import StageName, StepKey

Events = Callable[[dict[str, Any]], None]
Sustain = Callable[..., SustainedLoad]  # a burn-in's sustained load started on the GPUs under test (sustained.py)


@dataclass(frozen=True)
class StageRun:
    """One run of a stage: on which GPUs, for a confirmation round the keys measured again, the
    fault drills of this run (a first measurement's keep the one-off dip, a confirmation round's do
    not), the session's workers started ahead, which its first workers are taken from, and a
    folder of this run's own for what its workers write (NCCL's set-up lines)."""

    facts: Facts
    gpus: list[int]  # a per-GPU stage's GPUs; a fabric stage's are every GPU under test
    only: set[StepKey] | None = None
    drills: Drills = NO_DRILLS
    on_event: Events | None = None
    pool: WorkerPool | None = None
    scratch: Path | None = None  # None: a temporary folder, where the stage needs one


@dataclass(frozen=True)
class Stage:
    name: StageName
    title: str  # in progress lines: "NCCL stage"
    per_gpu: bool  # each GPU measured alone, one file a GPU; otherwise the whole machine at once, one file
    asked: Callable[[ProfileSpec], bool]  # whether the profile asks for anything this stage measures
    # what its workers are given to run, each plan with its number of ranks, exactly as `run` runs
    # them (environment included): one plan for the NCCL stage, one per arm for DDP, one per GPU
    # for the per-GPU loads. A session starts sets of those sizes ahead while the stage before it
    # runs, and sets them up with these plans once that stage has ended (measure/launch.py's WorkerPool)
    plans: Callable[[ProfileSpec, StageRun], list[tuple[Plan, int]]]
    run: Callable[[ProfileSpec, StageRun], Measurements]  # the plans run, and what they measured as sweeps
    # on which GPUs it runs, for progress lines: "on 4 GPUs", "on gpu0, gpu1"
    where: Callable[[Facts, list[int]], str]
    # why it cannot run on these GPUs of this machine (None: it can), and the failures it yields
    # then, one per step, so that each test says why
    cannot_run: Callable[[Facts, list[int]], str | None] = lambda facts, gpus: None
    not_run: Callable[[ProfileSpec, list[int], str], Measurements] = lambda spec, gpus, reason: Measurements()
    # it measures a share of the memory free as it begins (the memory test): no set of workers of a
    # later stage may hold GPU memory beside it, so a session sets those up only once it has ended
    tests_free_memory: bool = False
    # its part in a burn-in: the sustained load, which it starts on the GPUs under test
    # (`sustain(spec, gpus, duration_s, require_cuda=, on_round=, drills=)`, sustained.py's `SustainedLoad`),
    # or a fabric stage run before that load and beside it; neither: not run in a burn-in
    sustain: Sustain | None = None
    beside_load: bool = False
    asked_in_burnin: Callable[[ProfileSpec], bool] | None = None  # where not `asked`

    @property
    def sweeps(self) -> tuple[str, ...]:
        """The fields of `Measurements` it fills."""
        return Measurements.sweeps_of(self.name)

    def file(self, *gpus: int | str) -> str:
        """Where the store keeps what it measured: nccl.json; for a per-GPU stage, one file for the
        GPUs loaded together, compute-gpu0-gpu1-gpu2-gpu3.json, or compute-gpu3.json (compute-gpu*.json,
        every GPU's, with "*")."""
        return f"{self.name}-{'-'.join(f'gpu{gpu}' for gpu in gpus)}.json" if self.per_gpu else f"{self.name}.json"

    def gpus_of_file(self, name: str) -> list[int]:
        """The GPUs a per-GPU stage's file holds, from its name (`file`); [] for another file."""
        words = name.removeprefix(f"{self.name}-").removesuffix(".json").split("-") if name.startswith(f"{self.name}-gpu") else []
        gpus = [word.removeprefix("gpu") for word in words]
        return [int(gpu) for gpu in gpus] if words and all(gpu.isdigit() for gpu in gpus) else []

    @property
    def in_burnin(self) -> Literal["load", "fabric"] | None:
        return "load" if self.sustain is not None else "fabric" if self.beside_load else None

    def burnin_asks(self, spec: ProfileSpec) -> bool:
        return self.in_burnin is not None and (self.asked_in_burnin or self.asked)(spec)

    def measure(self, spec: ProfileSpec, run: StageRun) -> Measurements:
        """What it measured on `run.gpus`, or where it cannot run there, every step failed saying why."""
        reason = self.cannot_run(run.facts, run.gpus)
        return self.not_run(spec, run.gpus, reason) if reason is not None else self.run(spec, run)
