"""Measure once, check many: each measurement stage runs at most once per session.

The first test that needs a stage runs it; every other test, in this process or in another
pytest-xdist worker, reads its result. Locks guard the GPUs (`locks.py`): two fabric stages never
run at once, nor beside a per-GPU one; the compute stage is measured per GPU, so that under
`pytest -n N` each xdist worker loads a GPU of its own while the others load theirs. No stage runs
twice on a GPU. Replayed facts (--facts) carry their measurements with them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gpuaccept.checks.attempts import worth_measuring_again
from gpuaccept.checks.stages import STAGE_VALUES
from gpuaccept.facts import Facts
from gpuaccept.facts.model import (
    STAGE_SWEEPS,
    CollectiveSweep,
    ComputeSweep,
    ConfirmationRound,
    CudaFacts,
    Measurements,
    PairSweep,
    StepFailure,
)
from gpuaccept.files import write_atomically
from gpuaccept.measure.drills import NO_DRILLS, Drills
from gpuaccept.profile import Profile
from gpuaccept.session.compute import compute_steps, run_compute_stage
from gpuaccept.session.locks import GpuLocks
from gpuaccept.session.stages import failures_of, nccl_plan, run_copy_stage, run_ddp_stage, run_nccl_stage
from gpuaccept.session.telemetry import record_load
from gpuaccept.vocabulary.steps import CollectiveKey, LoadKey, PairKey, StepKey

STAGE_FILES = {"nccl": "nccl.json", "copies": "copies.json", "ddp": "ddp.json"}
COMPUTE_FILE = "compute-gpu{gpu}.json"  # the compute stage keeps one file per GPU
STAGES = (*STAGE_FILES, "compute")
# A stage's confirmation rounds may take as long as the stage itself took, and at least this long.
MIN_CONFIRM_BUDGET_S = 30.0


class MeasurementStore:
    def __init__(
        self, folder: Path, live: bool, say: Callable[[str], None] = lambda text: None, confirm: int = 2,
        after_stage: Sequence[Callable[[str, Facts], None]] = (), own_gpu: int | None = None, drills: Drills = NO_DRILLS,
    ):
        self.folder = Path(folder)
        self.live = live
        self.say = say
        self.confirm = confirm  # how many times a miss may be measured again
        # called with the stage's name and the facts after each stage this session runs (a health
        # snapshot), still holding the GPUs: nothing else runs in between
        self.after_stage = list(after_stage)
        # the GPU this pytest-xdist worker loads first (gwN: gpuN): N workers load N GPUs at once,
        # whichever per-GPU tests pytest-xdist hands each of them
        self.own_gpu = own_gpu
        self.locks = GpuLocks(self.folder)
        self.drills = drills  # read at the door (measure/drills.py), put in every plan

    def with_stage(self, stage: str, facts: Facts, profile: Profile) -> Facts:
        """`facts` with the stage's measurements in them, measuring first if this is the first ask."""
        if stage == "compute":
            return self.with_compute(facts, profile, list(range(facts.gpu_count)))
        if not self.live:
            return facts
        path = self.folder / STAGE_FILES[stage]
        with self.locks.fabric():
            if not path.exists():
                began = time.time()
                measured = self._confirmed(stage, facts, profile, self._measure(stage, facts, profile))
                write_atomically(path, measured.model_dump_json())
                self.stage_ran(stage, began, facts)
        return merge(facts, Measurements.model_validate_json(path.read_text(encoding="utf-8")))

    def measure_stage(self, stage: str, facts: Facts, profile: Profile) -> Measurements:
        """The stage measured now, once more, without confirmation rounds: one round of a burn-in
        (session/burnin.py), where every round is a sample. It holds the whole machine, the per-GPU
        stage too: a burn-in round loads every GPU at once."""
        with self.locks.fabric():
            began = time.time()
            try:
                if stage == "compute":
                    return self._measure(stage, facts, profile, gpus=list(range(facts.gpu_count)))
                return self._measure(stage, facts, profile)
            finally:
                self.stage_ran(stage, began, facts)

    def stage_ran(self, stage: str, began: float, facts: Facts) -> None:
        """The one place that follows every stage that ran (in whichever process ran it), still
        holding the GPUs: the telemetry learns when the GPUs were under load, then each hook runs
        (a health snapshot)."""
        record_load(self.folder, stage, began, time.time())
        for hook in self.after_stage:
            hook(stage, facts)

    def with_compute(self, facts: Facts, profile: Profile, gpus: list[int]) -> Facts:
        """`facts` with the per-GPU loads of `gpus`, each GPU measured alone on first ask (and this
        worker's own GPU first, see `own_gpu`)."""
        if not self.live or profile.spec.compute is None:
            return facts
        order = sorted(set(gpus))
        if self.own_gpu is not None and facts.gpu_count:
            own = self.own_gpu % facts.gpu_count
            order = [own, *(gpu for gpu in order if gpu != own)]
        for gpu in order:
            path = self.folder / COMPUTE_FILE.format(gpu=gpu)
            if path.exists():
                continue
            with self.locks.gpu(gpu):
                if not path.exists() and gpu >= facts.gpu_count:
                    # a GPU the profile expects but the machine lacks is not loaded: its tests fail saying so
                    write_atomically(path, _compute_not_run(profile, gpu, facts.gpu_count).model_dump_json())
                elif not path.exists():
                    began = time.time()
                    measured = self._measure("compute", facts, profile, gpus=[gpu])
                    measured = self._confirmed("compute", facts, profile, measured, gpus=[gpu])
                    write_atomically(path, measured.model_dump_json())
                    self.stage_ran("compute", began, facts)
        found = Measurements()
        for gpu in sorted(set(gpus)):
            path = self.folder / COMPUTE_FILE.format(gpu=gpu)
            found = _combine(found, Measurements.model_validate_json(path.read_text(encoding="utf-8")))
        return merge(facts, found)

    def collected(self) -> Measurements:
        """Everything measured in this session so far, from every worker."""
        found = Measurements()
        paths = [self.folder / name for name in STAGE_FILES.values()] + sorted(self.folder.glob(COMPUTE_FILE.format(gpu="*")))
        for path in paths:
            if path.exists():
                found = _combine(found, Measurements.model_validate_json(path.read_text(encoding="utf-8")))
        return found

    def _progress(self, event: dict) -> None:
        if event.get("event") == "start":
            self.say(f"gpu-accept: measuring {event['label']}")

    def _measure(
        self, stage: str, facts: Facts, profile: Profile, only: set[StepKey] | None = None, attempt: int = 0, gpus: list[int] | None = None
    ) -> Measurements:
        spec = profile.spec
        again = " again" if only is not None else ""
        env = dict(os.environ)
        drills = self.drills.for_attempt(attempt)
        if stage == "compute":
            gpus = gpus if gpus is not None else sorted({key.gpu for key in only or () if isinstance(key, LoadKey)})
            named = ", ".join(f"gpu{gpu}" for gpu in gpus)
            self.say(f"gpu-accept: compute stage{again} on {named} (profile {profile.name})")
            cuda = isinstance(facts.cuda, CudaFacts) and facts.cuda.device_count > 0
            sweep = run_compute_stage(spec, gpus, env=env, on_event=self._progress, only=only, require_cuda=cuda, drills=drills)
            return Measurements(compute=sweep)
        if stage == "nccl":
            if facts.gpu_count < 2:
                return _nccl_not_run(spec, f"needs at least 2 GPUs; {facts.gpu_count} under test")
            self.say(f"gpu-accept: NCCL stage{again} on {facts.gpu_count} GPUs (profile {profile.name})")
            collectives, pairwise = run_nccl_stage(spec, facts.gpu_count, env=env, on_event=self._progress, only=only, drills=drills)
            return Measurements(collectives=collectives, pairwise=pairwise)
        if stage == "ddp":
            self.say(f"gpu-accept: DDP stage{again} on up to {facts.gpu_count} GPU(s) (profile {profile.name})")
            sweep, without_p2p = run_ddp_stage(spec, facts.gpu_count, env=env, on_event=self._progress, only=only, drills=drills)
            return Measurements(ddp=sweep, ddp_without_p2p=without_p2p)
        self.say(f"gpu-accept: copy stage{again} on {facts.gpu_count} GPU(s) (profile {profile.name})")
        return Measurements(copies=run_copy_stage(spec, facts.gpu_count, env=env, on_event=self._progress, only=only, drills=drills))

    def _confirmed(
        self, stage: str, facts: Facts, profile: Profile, measured: Measurements, gpus: list[int] | None = None
    ) -> Measurements:
        """Confirm before failing: a value that missed its criterion, by no more than a dip would
        (profile judging.confirm_within), is measured again, only its own step, up to `confirm`
        times; the checks then judge every attempt. The rounds of one stage together get as long
        as the stage itself took (at least MIN_CONFIRM_BUDGET_S); what is left then stays
        unconfirmed, and the report says so."""
        budget = max(MIN_CONFIRM_BUDGET_S, _stage_wall(measured))
        spent = 0.0
        for attempt in range(1, self.confirm + 1):
            keys = self._misses(stage, merge(facts, measured), profile)
            if gpus is not None:  # a per-GPU stage measures again only the GPUs it measured
                keys = [key for key in keys if getattr(key, "gpu", None) in gpus]
            if not keys:
                break
            if spent >= budget:
                self.say(f"gpu-accept: {len(keys)} value(s) not measured again: the {stage} stage's {budget:.0f} s for it is spent")
                return measured.model_copy(update={"unconfirmed": keys})
            self.say(f"gpu-accept: {len(keys)} value(s) missed their criterion; measuring again: {', '.join(map(str, keys))}")
            began = time.monotonic()
            again = (
                self._measure(stage, facts, profile, only=set(keys), attempt=attempt, gpus=gpus)
                if gpus is not None
                else self._measure(stage, facts, profile, only=set(keys), attempt=attempt)
            )
            wall = time.monotonic() - began
            spent += wall
            round_ = ConfirmationRound(stage=stage, keys=keys, measurements=again, wall_s=wall)
            measured = measured.model_copy(update={"rounds": [*measured.rounds, round_]})
        return measured

    @staticmethod
    def _misses(stage: str, facts: Facts, profile: Profile) -> list[StepKey]:
        """The keys of the values of this stage that missed by no more than a dip would."""
        keys: set[StepKey] = set()
        within = profile.spec.judging.confirm_within
        for value in STAGE_VALUES[stage]:
            if not value.measured_again:
                continue
            for subject in value.subjects(profile):
                if worth_measuring_again(value.check(profile, facts, subject), within):
                    keys.update(value.check.step_keys(profile, subject))  # type: ignore[attr-defined]
        return sorted(keys)


def _compute_not_run(profile: Profile, gpu: int, under_test: int) -> Measurements:
    steps = compute_steps(profile.spec, gpu)
    message = f"gpu{gpu} not loaded: {under_test} GPU(s) under test"
    failure = StepFailure(step=f"loads on gpu{gpu}", reason="not_run", message=message, keys=[key for step in steps for key in step.keys])
    return Measurements(compute=ComputeSweep(backend="", torch_version="", gpus=[gpu], wall_s=0.0, results=[], failures=[failure]))


def _stage_wall(measured: Measurements) -> float:
    sweeps = [getattr(measured, name) for name in Measurements.model_fields if name not in ("rounds", "unconfirmed")]
    return sum(sweep.wall_s for sweep in sweeps if sweep is not None)


def _nccl_not_run(spec, reason: str) -> Measurements:
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


def _combine(first: Measurements, second: Measurements) -> Measurements:
    """`second`'s sweeps over `first`'s; each stage's confirmation rounds travel with its sweeps.
    The compute stage's sweeps are per GPU: `second`'s GPUs replace `first`'s, the others stay."""
    fresh = {stage for stage, names in STAGE_SWEEPS.items() if any(getattr(second, name) is not None for name in names)}
    merged = {
        name: getattr(second, name) or getattr(first, name) for name in Measurements.model_fields if name not in ("rounds", "unconfirmed")
    }
    if first.compute is not None and second.compute is not None:
        merged["compute"] = first.compute.joined(second.compute)

    def replaced(key: StepKey) -> bool:
        if key.stage != "compute":
            return key.stage in fresh
        return second.compute is not None and isinstance(key, LoadKey) and key.gpu in second.compute.gpus

    merged["rounds"] = [r for r in first.rounds if not any(replaced(key) for key in r.keys)] + list(second.rounds)
    merged["unconfirmed"] = sorted(set(second.unconfirmed) | {k for k in first.unconfirmed if not replaced(k)})
    return Measurements(**merged)


def merge(facts: Facts, measured: Measurements) -> Facts:
    return facts.model_copy(update={"measurements": _combine(facts.measurements, measured)})

