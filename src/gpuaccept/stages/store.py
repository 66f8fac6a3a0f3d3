"""Measure once, check many: each measurement stage (registry.py) runs at most once per session.

The first test that needs a stage runs it; every other test, in this process or in another
pytest-xdist worker, reads its result. Locks guard the GPUs (`locks.py`): two fabric stages never
run at once, nor beside a per-GPU one; a per-GPU stage (the compute loads) loads every GPU of the
machine at once on its first ask (under `pytest -n N`, the GPUs no other xdist worker holds), each
GPU's values still its own. No stage runs twice on a GPU. Replayed facts (--facts) carry their
measurements with them.

Where the session says which stages it will ask for, in which order (`expect`), the stages' workers
are set up ahead, in waves: every stage up to and including the first that tests the memory free as
it begins (the compute stage's memory test) is set up at once when the session starts, while nothing
measures, and holds; the stages after it are set up together once it has ended. Each set sets up
(CUDA, NCCL, the DDP model) while no set measures, and measures once nothing else sets up or ends;
a held set does nothing on its GPUs. The next wave's workers are started as the first stage of the
wave before it begins (torch's import overlaps the measurements in flight, those of every stage of
that wave), and start the CUDA driver and NVML and make their GPU's context (nothing runs on it:
what each process pays once, one process at a time) once every GPU's memory test has allocated its
memory.
docs/what-is-checked.md says what never overlaps.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gpuaccept.checks.attempts import worth_measuring_again
from gpuaccept.checks.stages import stage_values
from gpuaccept.facts import Facts
from gpuaccept.facts.machine import CudaFacts
from gpuaccept.facts.measurements import ConfirmationRound, Measurements
from gpuaccept.files import write_atomically
from gpuaccept.measure.drills import NO_DRILLS, Drills
from gpuaccept.measure.launch import WorkerPool, settle
from gpuaccept.measure.plan import Plan
from gpuaccept.profile import Profile
from gpuaccept.stages.locks import GpuLocks
from gpuaccept.stages.registry import STAGES
from gpuaccept.stages.stage import Stage, StageRun
from gpuaccept.stages.telemetry import record_load
from gpuaccept.vocabulary.steps import StepKey

# A stage's confirmation rounds may take as long as the stage itself took, and at least this long.
MIN_CONFIRM_BUDGET_S = 30.0


class MeasurementStore:
    def __init__(
        self, folder: Path, live: bool, say: Callable[[str], None] = lambda text: None, confirm: int = 2,
        after_stage: Sequence[Callable[[str, Facts], None]] = (), drills: Drills = NO_DRILLS, pool: WorkerPool | None = None,
    ):
        self.folder = Path(folder)
        self.live = live
        self.say = say
        self.confirm = confirm  # how many times a miss may be measured again
        # called with the stage's name and the facts after each stage this session runs (a health
        # snapshot), still holding the GPUs: nothing else runs in between
        self.after_stage = list(after_stage)
        self.locks = GpuLocks(self.folder)
        self.drills = drills  # read at the door (measure/drills.py), put in every plan
        # worker sets started ahead for the stage the session asks for next (`expect`): they import
        # torch while the stage before runs; they touch no GPU until a stage takes them
        self.pool = pool if pool is not None else WorkerPool()
        self._upcoming: list[str] = []
        self._ahead = False  # whether this session sets its stages up ahead (`expect`)
        self._scratch: dict[str, Path] = {}  # the folder reserved for a stage's first run, where it was set up ahead
        self._runs = 0
        self._held: set[str] = set()  # the stages whose workers were given their plans ahead, until each has measured
        self._importing: set[str] = set()  # the stages whose workers were started ahead to import torch

    def expect(self, stages: Sequence[str], facts: Facts, profile: Profile, set_up_now: bool = True) -> None:
        """The stages this session will ask for, in the order it will first ask: the first wave's
        workers are set up now (nothing measures yet); the next wave's start as the stage before it
        begins and are set up as soon as it has ended (`_wave`). Only where that order is known (a
        pytest-xdist worker cannot know which worker a stage falls to) and where the measurements
        run on GPUs (`starts_ahead`). `set_up_now=False` where something else measures first (a
        burn-in's rounds): the first stage's workers only import torch until it begins. Asked
        again before any stage began (a standard run expects every stage as it is configured, and
        again once its tests are collected): nothing changes where the order is the same; where
        it is not, what was set up ahead is ended and the new order's first wave set up."""
        if not (self.live and starts_ahead(facts)):
            return
        upcoming = [name for name in stages if self._runs_here(STAGES[name], facts, profile)]
        if self._ahead:  # expected already, before the tests were collected (a standard run's every stage)
            if upcoming == self._upcoming:
                return
            self._drop_held()  # set up for another order: ended before anything measures
        self._upcoming = upcoming
        self._ahead = True
        if not self._upcoming:
            return
        if set_up_now:
            self._set_up_ahead(self._wave(), facts, profile)
        else:
            first = STAGES[self._upcoming[0]]
            self._start(first.plans(profile.spec, self._first_run(first, facts)))

    def _drop_held(self) -> None:
        """The sets given a plan ahead are ended: the session asks for its stages otherwise."""
        for name in sorted(self._held):
            self.pool.keep_only(name, [])
        self._held.clear()

    def _runs_here(self, stage: Stage, facts: Facts, profile: Profile) -> bool:
        """Whether the stage would start workers here: asked for, able to run, not measured yet."""
        every = _every_gpu(facts)
        measured = self._unmeasured(stage, every) == [] if stage.per_gpu else (self.folder / stage.file()).exists()
        return stage.asked(profile.spec) and stage.cannot_run(facts, every) is None and not measured

    def _wave(self, after_held: bool = False) -> list[str]:
        """The upcoming stages set up together, those not set up yet up to and including the first
        that tests the memory free as it begins: nothing set up after it may hold memory beside it
        (none, while such a stage is set up and has not measured). `after_held`: the wave after
        the stages set up now (whose workers may start importing), past a held stage that tests
        the memory free."""
        wave: list[str] = []
        for name in self._upcoming:
            if name in self._held and after_held:
                continue
            if name not in self._held:
                wave.append(name)
            if STAGES[name].tests_free_memory:
                break
        return wave

    def _begins(self, stage: Stage, facts: Facts, profile: Profile) -> None:
        """`stage` begins: the workers of the wave after those set up start now, to import torch
        (seconds; where Python finds no bytecode cached for torch and DDP's modules, 8-9 s on an
        H200 machine) while this stage and those set up before it measure."""
        if stage.name not in self._upcoming:
            return
        self._upcoming = self._upcoming[self._upcoming.index(stage.name) + 1 :]
        for name in self._wave(after_held=True):
            if name not in self._importing:
                following = STAGES[name]
                self._start(following.plans(profile.spec, self._first_run(following, facts)))
                self._importing.add(name)

    def _start(self, plans: list[tuple[Plan, int]]) -> None:
        """A set of workers started for each of a stage's plans, to import torch and what the plans'
        steps import at their first use, while what runs now runs."""
        imports = tuple(dict.fromkeys(module for plan, _ in plans for module in plan.imports_ahead))
        self.pool.prepare([ranks for _, ranks in plans], imports)

    def _ended(self, stage: Stage, facts: Facts, profile: Profile) -> None:
        """`stage` has measured: where the stage the session asks for next is not set up yet, its
        wave's workers are given their plans, to set up while the tests judge this one (and measure
        once this one's workers are gone). Where stages are not set up ahead, this one's workers
        are gone before it lets the GPUs go: another process (a pytest-xdist worker) may measure next."""
        self._held.discard(stage.name)
        if not self._ahead:
            settle()
        elif self._upcoming and self._upcoming[0] != stage.name:
            self._set_up_ahead(self._wave(), facts, profile)

    def _set_up_ahead(self, names: list[str], facts: Facts, profile: Profile) -> None:
        for name in names:
            stage = STAGES[name]
            self.pool.set_up(name, stage.plans(profile.spec, self._first_run(stage, facts)))
            self._held.add(name)

    def _first_run(self, stage: Stage, facts: Facts) -> StageRun:
        """The stage's first run on every GPU, as `_measure` will make it: in the folder kept for it."""
        if stage.name not in self._scratch:
            self._scratch[stage.name] = self._new_scratch(stage)
        scratch = self._scratch[stage.name]
        return StageRun(facts=facts, gpus=_every_gpu(facts), drills=self.drills.for_attempt(0), pool=self.pool, scratch=scratch)

    def _new_scratch(self, stage: Stage) -> Path:
        self._runs += 1
        return self.folder / f"{stage.name}-run{self._runs}"

    def close(self, wait: bool = True) -> None:
        """End the workers started ahead that no stage took (a stage that was not asked for after
        all), and wait until every set of workers is gone (with `wait`: otherwise `settle` does,
        later); the hooks that keep a process end it."""
        self.pool.close()
        if wait:
            settle()
        for hook in self.after_stage:
            close = getattr(hook, "close", None)  # SnapshotAfterStage keeps its child for the session
            if close is not None:
                close()

    @staticmethod
    def settle() -> None:
        """Until every set of workers this process ended is gone: nothing of its measurements holds a GPU."""
        settle()

    def with_stage(self, name: str, facts: Facts, profile: Profile, gpus: list[int] | None = None) -> Facts:
        """`facts` with the stage's measurements in them, measuring first if this is the first ask.
        A per-GPU stage gives the loads of `gpus` (every GPU where None): on the first ask, every
        GPU of the machine is loaded at once."""
        stage = STAGES[name]
        if not self.live:
            return facts
        if stage.per_gpu:
            return self._with_per_gpu(stage, facts, profile, _every_gpu(facts) if gpus is None else gpus)
        path = self.folder / stage.file()
        with self.locks.fabric():
            if not path.exists():
                self._begins(stage, facts, profile)
                began = time.time()
                every = _every_gpu(facts)
                measured = self._confirmed(stage, facts, profile, self._measure(stage, facts, profile, every), every)
                self._ended(stage, facts, profile)
                write_atomically(path, measured.model_dump_json())
                self.stage_ran(stage.name, began, facts)
        return merge(facts, _read(path))

    def _with_per_gpu(self, stage: Stage, facts: Facts, profile: Profile, gpus: list[int]) -> Facts:
        """The loads of `gpus`. The first ask loads every GPU of the machine at once (and each GPU
        the profile expects beyond them, which fails saying it is missing): one more GPU costs
        seconds, not a stage, and the machine's power and cooling carry every GPU's load together.
        Each GPU's values stay its own. Under pytest-xdist the first worker to ask takes every GPU
        no other worker holds; a GPU another worker loads is read once that worker lets it go."""
        if not stage.asked(profile.spec):
            return facts
        wanted = sorted(set(gpus))
        every = sorted(set(_every_gpu(facts)) | set(wanted))
        if self._unmeasured(stage, every):
            with self.locks.free_gpus(self._unmeasured(stage, every)) as taken:
                self._load(stage, facts, profile, self._unmeasured(stage, taken))
        for gpu in self._unmeasured(stage, wanted):
            with self.locks.gpu(gpu):  # another process loads it: its file is there once it lets go
                self._load(stage, facts, profile, self._unmeasured(stage, [gpu]))  # unless it ended without one
        found = Measurements()
        for path in self._files(stage, wanted):
            found = _combine(found, _read(path))
        return merge(facts, found)

    def _load(self, stage: Stage, facts: Facts, profile: Profile, gpus: list[int]) -> None:
        """`gpus` (each held by this process) loaded at once, with their confirmation rounds, into one
        file; a GPU the profile expects but the machine lacks is not loaded: its own file holds each
        of its tests' failure, saying why."""
        loaded = []
        for gpu in gpus:
            reason = stage.cannot_run(facts, [gpu])
            if reason is None:
                loaded.append(gpu)
            else:
                write_atomically(self.folder / stage.file(gpu), stage.not_run(profile.spec, [gpu], reason).model_dump_json())
        if not loaded:
            return
        self._begins(stage, facts, profile)
        began = time.time()
        measured = self._confirmed(stage, facts, profile, self._measure(stage, facts, profile, loaded), loaded)
        self._ended(stage, facts, profile)
        write_atomically(self.folder / stage.file(*loaded), measured.model_dump_json())
        self.stage_ran(stage.name, began, facts)

    def _files(self, stage: Stage, gpus: list[int]) -> list[Path]:
        """The files that hold the per-GPU stage's values of `gpus`, each once."""
        return [path for path in sorted(self.folder.glob(stage.file("*"))) if set(stage.gpus_of_file(path.name)) & set(gpus)]

    def _unmeasured(self, stage: Stage, gpus: list[int]) -> list[int]:
        done = {gpu for path in self.folder.glob(stage.file("*")) for gpu in stage.gpus_of_file(path.name)}
        return [gpu for gpu in gpus if gpu not in done]

    def measure_stage(self, name: str, facts: Facts, profile: Profile) -> Measurements:
        """The stage measured now, once more, without confirmation rounds: one round of a burn-in
        (gpuaccept/burnin), where every round is a sample. It holds the whole machine, a per-GPU
        stage too: a burn-in round loads every GPU at once."""
        stage = STAGES[name]
        with self.locks.fabric():
            began = time.time()
            try:
                return self._measure(stage, facts, profile, list(range(facts.gpu_count)))
            finally:
                settle()  # its workers gone before the round goes on
                self.stage_ran(stage.name, began, facts)

    def stage_ran(self, stage: str, began: float, facts: Facts) -> None:
        """The one place that follows every stage that ran (in whichever process ran it), still
        holding the GPUs: the telemetry learns when the GPUs were under load, then each hook runs
        (a health snapshot)."""
        record_load(self.folder, stage, began, time.time())
        for hook in self.after_stage:
            hook(stage, facts)

    def collected(self) -> Measurements:
        """Everything measured in this session so far, from every worker."""
        found = Measurements()
        for stage in STAGES.values():
            paths = sorted(self.folder.glob(stage.file("*"))) if stage.per_gpu else [self.folder / stage.file()]
            for path in paths:
                if path.exists():
                    found = _combine(found, _read(path))
        return found

    def _progress(self, event: dict) -> None:
        if event.get("event") == "start":
            self.say(f"gpu-accept: measuring {event['label']}")

    def _measure(
        self, stage: Stage, facts: Facts, profile: Profile, gpus: list[int], only: set[StepKey] | None = None, attempt: int = 0
    ) -> Measurements:
        """The stage run on `gpus` (confirmation round `attempt`, of the keys `only`, where given)."""
        if stage.cannot_run(facts, gpus) is None:
            again = " again" if only is not None else ""
            self.say(f"gpu-accept: {stage.title}{again} {stage.where(facts, gpus)} (profile {profile.name})")
        scratch = self._scratch.pop(stage.name, None) if attempt == 0 and only is None else None
        run = StageRun(
            facts=facts, gpus=gpus, only=only, drills=self.drills.for_attempt(attempt), on_event=self._progress, pool=self.pool,
            scratch=scratch or self._new_scratch(stage),
        )
        plans = stage.plans(profile.spec, run) if stage.cannot_run(facts, gpus) is None else []
        # a set given other plans ahead (the stage asked otherwise) must not hold its GPUs while this run measures
        self.pool.keep_only(stage.name, plans)
        if stage.tests_free_memory and self._ahead and only is None and attempt == 0 and plans:
            run = dataclasses.replace(run, on_event=self._drivers_once_untimed(len(plans), facts, profile))
        return stage.measure(profile.spec, run)

    def _drivers_once_untimed(self, sets: int, facts: Facts, profile: Profile) -> Callable[[dict], None]:
        """The progress of a stage that tests the memory free, with `sets` sets of workers: once each
        of them is in a part of a step that measures no time or rate (its memory test's passes, its
        memory allocated), the next wave's workers start the CUDA driver and NVML and make their
        GPU's context, in the memory the test leaves free, beside it (each process pays that start
        once, and the driver makes one process's at a time: seconds for a second wave of twelve on
        four H200s). A set that never gets that far leaves them to start at their go."""
        begun: set[tuple[str, ...]] = set()
        lock = threading.Lock()

        def on_event(event: dict) -> None:
            self._progress(event)
            if event.get("event") != "untimed":
                return
            with lock:
                before = len(begun)
                begun.add(tuple(event.get("keys") or ()))
                last = before < sets <= len(begun)
            if last:
                for name in self._wave(after_held=True):
                    following = STAGES[name]
                    self.pool.start_drivers(name, following.plans(profile.spec, self._first_run(following, facts)))

        return on_event

    def _confirmed(self, stage: Stage, facts: Facts, profile: Profile, measured: Measurements, gpus: list[int]) -> Measurements:
        """Confirm before failing: a value that missed its criterion, by no more than a dip would
        (profile judging.confirm_within), is measured again, only its own step (a per-GPU load
        beside the same load on the GPUs loaded with it), up to `confirm` times; the checks then
        judge every attempt. The rounds of one stage together get as long
        as the stage itself took (at least MIN_CONFIRM_BUDGET_S); what is left then stays
        unconfirmed, and the report says so."""
        budget = max(MIN_CONFIRM_BUDGET_S, _stage_wall(measured))
        spent = 0.0
        for attempt in range(1, self.confirm + 1):
            keys = self._misses(stage.name, merge(facts, measured), profile)
            steps = set(keys)
            if stage.per_gpu:
                # a per-GPU stage measures a value that missed again beside its siblings, as it was
                # first measured: the same load on every GPU loaded then, and only the missed values kept
                keys = [key for key in keys if getattr(key, "gpu", None) in gpus]
                steps = {dataclasses.replace(key, gpu=gpu) for key in keys for gpu in gpus}
            if not keys:
                break
            if spent >= budget:
                self.say(f"gpu-accept: {len(keys)} value(s) not measured again: the {stage.name} stage's {budget:.0f} s for it is spent")
                return measured.model_copy(update={"unconfirmed": keys})
            self.say(f"gpu-accept: {len(keys)} value(s) missed their criterion; measuring again: {', '.join(map(str, keys))}")
            began = time.monotonic()
            again = _only(self._measure(stage, facts, profile, gpus, only=steps, attempt=attempt), stage, set(keys))
            wall = time.monotonic() - began
            spent += wall
            round_ = ConfirmationRound(stage=stage.name, keys=keys, measurements=again, wall_s=wall)
            measured = measured.model_copy(update={"rounds": [*measured.rounds, round_]})
        return measured

    @staticmethod
    def _misses(stage: str, facts: Facts, profile: Profile) -> list[StepKey]:
        """The keys of the values of this stage that missed by no more than a dip would."""
        keys: set[StepKey] = set()
        within = profile.spec.judging.confirm_within
        for value in stage_values()[stage]:
            if not value.measured_again:
                continue
            for subject in value.subjects(profile):
                if worth_measuring_again(value.check(profile, facts, subject), within):
                    keys.update(value.check.step_keys(profile, subject))  # type: ignore[attr-defined]
        return sorted(keys)


# Workers are started ahead only where the measurements run on GPUs: on the CPU (gloo) the measured
# work is the CPU's, which an import of torch beside it would slow; and only where the machine has
# cores to spare for it beside the ranks measuring (two a GPU, and two more).
def starts_ahead(facts: Facts) -> bool:
    cuda = isinstance(facts.cuda, CudaFacts) and facts.cuda.device_count > 0
    return cuda and len(os.sched_getaffinity(0)) >= 2 * facts.gpu_count + 2


def _only(measured: Measurements, stage: Stage, keys: set[StepKey]) -> Measurements:
    """A per-GPU stage's measurements with only the values of `keys` (and their failures) kept; a
    fabric stage's as they are (a confirmation round measured only its keys' steps)."""
    if not stage.per_gpu:
        return measured
    update = {}
    for name in stage.sweeps:
        sweep = getattr(measured, name)
        if sweep is not None:
            update[name] = sweep.model_copy(
                update={
                    "results": [result for result in sweep.results if result.key in keys],
                    "failures": [failure for failure in sweep.failures if set(failure.keys) & keys],
                }
            )
    return measured.model_copy(update=update)


def _every_gpu(facts: Facts) -> list[int]:
    return list(range(facts.gpu_count))


def _stage_wall(measured: Measurements) -> float:
    sweeps = [getattr(measured, name) for name in Measurements.sweep_names()]
    return sum(sweep.wall_s for sweep in sweeps if sweep is not None)


def _read(path: Path) -> Measurements:
    return Measurements.model_validate_json(path.read_text(encoding="utf-8"))


def _combine(first: Measurements, second: Measurements) -> Measurements:
    """`second`'s sweeps over `first`'s; each stage's confirmation rounds travel with its sweeps.
    A per-GPU stage's sweeps are per GPU: `second`'s GPUs replace `first`'s, the others stay."""
    fresh = {stage.name for stage in STAGES.values() if any(getattr(second, name) is not None for name in stage.sweeps)}
    merged = {name: getattr(second, name) or getattr(first, name) for name in Measurements.sweep_names()}
    measured_again: set[tuple[str, int]] = set()  # (stage, GPU) of a per-GPU stage in `second`
    for stage in STAGES.values():
        if not stage.per_gpu:
            continue
        for name in stage.sweeps:
            earlier, later = getattr(first, name), getattr(second, name)
            if later is not None:
                measured_again.update((stage.name, gpu) for gpu in later.gpus)
            if earlier is not None and later is not None:
                merged[name] = earlier.joined(later)

    def replaced(key: StepKey) -> bool:
        if not STAGES[key.stage].per_gpu:
            return key.stage in fresh
        return (key.stage, getattr(key, "gpu", -1)) in measured_again

    merged["rounds"] = [r for r in first.rounds if not any(replaced(key) for key in r.keys)] + list(second.rounds)
    merged["unconfirmed"] = sorted(set(second.unconfirmed) | {k for k in first.unconfirmed if not replaced(k)})
    return Measurements(**merged)


def merge(facts: Facts, measured: Measurements) -> Facts:
    return facts.model_copy(update={"measurements": _combine(facts.measurements, measured)})

