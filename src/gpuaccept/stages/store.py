"""Measure once, check many: each measurement stage (registry.py) runs at most once per session.

The first test that needs a stage runs it; every other test, in this process or in another
pytest-xdist worker, reads its result. Locks guard the GPUs (`locks.py`): two fabric stages never
run at once, nor beside a per-GPU one; a per-GPU stage (the compute loads) is measured per GPU, so that under
`pytest -n N` each xdist worker loads a GPU of its own while the others load theirs. No stage runs
twice on a GPU. Replayed facts (--facts) carry their measurements with them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gpuaccept.checks.attempts import worth_measuring_again
from gpuaccept.checks.stages import STAGE_VALUES
from gpuaccept.facts import Facts
from gpuaccept.facts.model import ConfirmationRound, Measurements
from gpuaccept.files import write_atomically
from gpuaccept.measure.drills import NO_DRILLS, Drills
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

    def with_stage(self, name: str, facts: Facts, profile: Profile, gpus: list[int] | None = None) -> Facts:
        """`facts` with the stage's measurements in them, measuring first if this is the first ask.
        A per-GPU stage gives the loads of `gpus` (every GPU where None), each GPU measured alone on
        first ask (and this worker's own GPU first, see `own_gpu`)."""
        stage = STAGES[name]
        if not self.live:
            return facts
        if stage.per_gpu:
            return self._with_per_gpu(stage, facts, profile, list(range(facts.gpu_count)) if gpus is None else gpus)
        path = self.folder / stage.file()
        with self.locks.fabric():
            if not path.exists():
                began = time.time()
                every = list(range(facts.gpu_count))
                measured = self._confirmed(stage, facts, profile, self._measure(stage, facts, profile, every), every)
                write_atomically(path, measured.model_dump_json())
                self.stage_ran(stage.name, began, facts)
        return merge(facts, _read(path))

    def _with_per_gpu(self, stage: Stage, facts: Facts, profile: Profile, gpus: list[int]) -> Facts:
        if not stage.asked(profile.spec):
            return facts
        order = sorted(set(gpus))
        if self.own_gpu is not None and facts.gpu_count:
            own = self.own_gpu % facts.gpu_count
            order = [own, *(gpu for gpu in order if gpu != own)]
        for gpu in order:
            path = self.folder / stage.file(gpu)
            if path.exists():
                continue
            with self.locks.gpu(gpu):
                if path.exists():
                    continue
                reason = stage.cannot_run(facts, [gpu])
                if reason is not None:  # a GPU the profile expects but the machine lacks: its tests fail saying why
                    write_atomically(path, stage.not_run(profile.spec, [gpu], reason).model_dump_json())
                    continue
                began = time.time()
                measured = self._confirmed(stage, facts, profile, self._measure(stage, facts, profile, [gpu]), [gpu])
                write_atomically(path, measured.model_dump_json())
                self.stage_ran(stage.name, began, facts)
        found = Measurements()
        for gpu in sorted(set(gpus)):
            found = _combine(found, _read(self.folder / stage.file(gpu)))
        return merge(facts, found)

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
            paths = sorted(self.folder.glob(stage.file(gpu="*"))) if stage.per_gpu else [self.folder / stage.file()]
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
        run = StageRun(facts=facts, gpus=gpus, only=only, drills=self.drills.for_attempt(attempt), on_event=self._progress)
        return stage.measure(profile.spec, run)

    def _confirmed(self, stage: Stage, facts: Facts, profile: Profile, measured: Measurements, gpus: list[int]) -> Measurements:
        """Confirm before failing: a value that missed its criterion, by no more than a dip would
        (profile judging.confirm_within), is measured again, only its own step, up to `confirm`
        times; the checks then judge every attempt. The rounds of one stage together get as long
        as the stage itself took (at least MIN_CONFIRM_BUDGET_S); what is left then stays
        unconfirmed, and the report says so."""
        budget = max(MIN_CONFIRM_BUDGET_S, _stage_wall(measured))
        spent = 0.0
        for attempt in range(1, self.confirm + 1):
            keys = self._misses(stage.name, merge(facts, measured), profile)
            if stage.per_gpu:  # a per-GPU stage measures again only the GPUs it measured
                keys = [key for key in keys if getattr(key, "gpu", None) in gpus]
            if not keys:
                break
            if spent >= budget:
                self.say(f"gpu-accept: {len(keys)} value(s) not measured again: the {stage.name} stage's {budget:.0f} s for it is spent")
                return measured.model_copy(update={"unconfirmed": keys})
            self.say(f"gpu-accept: {len(keys)} value(s) missed their criterion; measuring again: {', '.join(map(str, keys))}")
            began = time.monotonic()
            again = self._measure(stage, facts, profile, gpus, only=set(keys), attempt=attempt)
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
        for value in STAGE_VALUES[stage]:
            if not value.measured_again:
                continue
            for subject in value.subjects(profile):
                if worth_measuring_again(value.check(profile, facts, subject), within):
                    keys.update(value.check.step_keys(profile, subject))  # type: ignore[attr-defined]
        return sorted(keys)


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

