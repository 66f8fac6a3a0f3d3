"""A burn-in: the GPUs held under a sustained load for the whole duration, judged in rounds.

What runs, in order:
1. The fabric stages (NCCL collectives and pairs, copies) once on a machine at rest: the values
   held to the profile's floors, as a standard run measures them.
2. The sustained load, which the compute stage starts (its `sustain`: stages/sustained.py) on its
   loads: every GPU under matrix products, each product checked, from then to the end of the
   duration, with no gap; each `burnin.round_s` of it is a round with every GPU's GEMM throughput
   and wrong elements, HBM copy and triad, and the memory test at `burnin.memtest_interval`.
3. Beside the load, every `burnin.fabric_interval`: the fabric stages again, so the links and the
   power stage are loaded together as in training. Those rounds are checked for wrong data and
   hangs; their bandwidth, shared with the products, is shown and not held to an unloaded floor.

A profile without `compute.gemm` has no load to sustain: its fabric stages run at their interval
for the duration. Every round is kept; the suites judge each value over its rounds
(checks/burnin.py) and the heat (checks/heat.py) over the telemetry. Ctrl-C or SIGTERM ends the
burn-in: the load's round under way ends, and what ran is kept and judged.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from gpuaccept.facts import Facts
from gpuaccept.facts.machine import CudaFacts
from gpuaccept.facts.measurements import Measurements
from gpuaccept.facts.telemetry import BurnIn, BurnInRound, TelemetrySample
from gpuaccept.files import write_atomically
from gpuaccept.profile import Profile
from gpuaccept.stages.registry import STAGES
from gpuaccept.stages.stage import Sustain
from gpuaccept.stages.store import MeasurementStore
from gpuaccept.stages.sustained import LoadRound, SustainedLoad
from gpuaccept.vocabulary.display import show
from gpuaccept.vocabulary.telemetry import parse_duration, show_duration

SUSTAINED = "sustained"  # the load's window in the telemetry's loads and its health snapshot
BURNIN_FILE = "burnin.json"
POLL_S = 0.5

Readings = Callable[[], dict[int, TelemetrySample]]  # each GPU's latest telemetry sample


def burnin_stages(profile: Profile | None = None) -> list[str]:
    """The stages a burn-in runs, the sustained load's first, then the fabric stages run before it
    and beside it (each stage's `in_burnin`); with `profile`, those it has something to measure in."""
    runs = [stage for stage in STAGES.values() if stage.in_burnin is not None and (profile is None or stage.burnin_asks(profile.spec))]
    return [stage.name for stage in runs if stage.in_burnin == "load"] + [stage.name for stage in runs if stage.in_burnin == "fabric"]


class BurninDriver:
    def __init__(
        self, store: MeasurementStore, facts: Facts, profile: Profile, duration_s: float,
        say: Callable[[str], None] = lambda text: None, readings: Readings = dict,
        clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep, start_load: Sustain | None = None,
    ):
        self.store, self.facts, self.profile = store, facts, profile
        self.duration_s = duration_s
        self.fabric_interval_s = parse_duration(profile.spec.burnin.fabric_interval)
        self.say = say
        self.readings = readings
        self.clock, self.sleep = clock, sleep
        self.start_load = start_load  # None: the load stage's own (`Stage.sustain`); the project's tests give a stand-in
        self.rounds: list[BurnInRound] = []
        # the GPUs that finished each round of the load, until every one has: each GPU's worker
        # says so on a thread of its own
        self._finished: dict[int, set[int]] = {}
        self._finished_lock = threading.Lock()
        self.start = 0.0
        self.last_fabric: float | None = None  # when the fabric stages last began, seconds into the burn-in

    def run(self) -> BurnIn:
        """The burn-in, until the duration is spent or until Ctrl-C or SIGTERM; written to the
        session folder. A fabric stage that has begun finishes, so a burn-in can run past its
        duration by one."""
        stages = burnin_stages(self.profile)
        fabric = [stage for stage in stages if STAGES[stage].in_burnin == "fabric"]
        self.start = self.clock()
        started_at = datetime.datetime.fromtimestamp(self.start, datetime.timezone.utc).isoformat(timespec="milliseconds")
        load: SustainedLoad | None = None
        ended: Literal["deadline", "interrupted"] = "deadline"
        load_window: tuple[float, float] | None = None
        try:
            sustain = next((STAGES[stage].sustain for stage in stages if STAGES[stage].sustain is not None), None)
            if sustain is not None:
                cuda = isinstance(self.facts.cuda, CudaFacts) and self.facts.cuda.device_count > 0
                load = (self.start_load or sustain)(
                    self.profile.spec, list(range(self.facts.gpu_count)), self.duration_s, require_cuda=cuda, on_round=self._round_done,
                    drills=self.store.drills,  # the run's, as the fabric stages take them
                )
            if fabric:
                self._fabric_round(fabric, beside_load=False)
            if load is not None:
                load.duration_s = max(1.0, self.duration_s - self._elapsed())
                self.say(
                    f"gpu-accept: burn-in: sustained load on {self.facts.gpu_count} GPU(s) for {show_duration(load.duration_s)}, "
                    f"in rounds of {show_duration(self.profile.spec.burnin.round_s)} (profile {self.profile.name})"
                )
                load.start()
                load_window = (load.began, load.began + load.duration_s)
            self._beside(load, fabric)
        except KeyboardInterrupt:
            ended = "interrupted"
            if load is not None:
                load.stop()
        finally:
            if load is not None:
                ended = self._finish(load, ended) if load_window else ended
                load.close()
        elapsed = self._elapsed()
        burnin = BurnIn(
            duration_s=self.duration_s, elapsed_s=round(elapsed, 3), ended=ended, rounds=self._numbered(), started_at=started_at,
            load_started_s=round(load_window[0] - self.start, 3) if load_window else None,
            load_ended_s=round(min(self.clock(), load_window[1]) - self.start, 3) if load_window else None,
        )
        write_atomically(Path(self.store.folder) / BURNIN_FILE, burnin.model_dump_json())
        how = "ended by a signal" if ended == "interrupted" else "done"
        spent = f"{show_duration(elapsed)} of {show_duration(self.duration_s)}"
        self.say(f"gpu-accept: burn-in {how}: {len(burnin.rounds)} round(s) in {spent}")
        return burnin

    def _beside(self, load: SustainedLoad | None, fabric: list[str]) -> None:
        """Until the end: the fabric stages every fabric_interval (beside the load, where there is one)."""
        while self._elapsed() < self.duration_s and (load is None or load.running):
            due = self.last_fabric is None or self._elapsed() - self.last_fabric >= self.fabric_interval_s
            if fabric and due and self.duration_s - self._elapsed() > 1.0:
                if load is None:
                    self._fabric_round(fabric, beside_load=False)
                else:
                    with load.fabric_beside():
                        self._fabric_round(fabric, beside_load=True)
                continue
            next_due = self.duration_s
            if fabric and self.last_fabric is not None and self.last_fabric + self.fabric_interval_s > self._elapsed():
                next_due = min(next_due, self.last_fabric + self.fabric_interval_s)
            wait = max(0.0, next_due - self._elapsed())
            # while the load runs, in short steps: a load that ended early (every GPU's worker gone) ends the wait
            self.sleep(min(POLL_S, wait) if load is not None else wait)

    def _finish(self, load: SustainedLoad, ended: Literal["deadline", "interrupted"]) -> Literal["deadline", "interrupted"]:
        """The load's rounds, once every GPU is done with them (a Ctrl-C meanwhile stops them)."""
        try:
            load.wait()
        except KeyboardInterrupt:
            ended = "interrupted"
            load.stop()
            load.wait()
        self.store.stage_ran(SUSTAINED, load.began, self.facts)
        self.rounds += [self._load_round(found) for found in load.rounds()]
        return ended

    def _load_round(self, found: LoadRound) -> BurnInRound:
        return BurnInRound(
            index=0, started_s=round(found.began - self.start, 3), wall_s=round(found.ended - found.began, 3), stages=["compute"],
            measurements=Measurements(compute=found.sweep),
        )

    def _fabric_round(self, stages: list[str], beside_load: bool) -> None:
        """The fabric stages once; the round keeps the stages it finished, Ctrl-C or not."""
        began = self.last_fabric = self._elapsed()
        measured = Measurements()
        done: list[str] = []
        where = " beside the sustained load" if beside_load else ""
        try:
            for stage in stages:
                self.say(f"gpu-accept: burn-in: {stage} stage{where}; {self._left()}")
                found = self.store.measure_stage(stage, self.facts, self.profile)
                sweeps = {name: sweep for name, sweep in found if sweep is not None and name not in ("rounds", "unconfirmed")}
                measured = measured.model_copy(update=sweeps)
                done.append(stage)
        finally:
            if done:
                self.rounds.append(
                    BurnInRound(
                        index=0, started_s=round(began, 3), wall_s=round(self._elapsed() - began, 3), stages=done,
                        measurements=measured, beside_load=beside_load,
                    )
                )

    def _round_done(self, gpu: int, index: int) -> None:
        """A GPU finished round `index` of the load: once every GPU has, the terminal shows where
        the burn-in stands and each GPU's power and temperature now. (GPUs finish a round at
        different moments: one that is done says nothing of the others, whose round, its memory
        test included, may not have begun.)"""
        with self._finished_lock:
            finished = self._finished.setdefault(index, set())
            finished.add(gpu)
            if len(finished) < self.facts.gpu_count:
                return
            del self._finished[index]
        readings = self.readings()
        shown = []
        for number, sample in sorted(readings.items()):
            power = f"{show(sample.power_w, 'W')}" if isinstance(sample.power_w, float) else "power not read"
            heat = f"{sample.temperature_c} °C" if isinstance(sample.temperature_c, int) else "temperature not read"
            shown.append(f"gpu{number} {power} {heat}")
        now = f": {'; '.join(shown)}" if shown else ""
        self.say(f"gpu-accept: burn-in: load round {index} done; {self._left()}{now}")

    def _numbered(self) -> list[BurnInRound]:
        ordered = sorted(self.rounds, key=lambda r: r.started_s)
        return [r.model_copy(update={"index": number}) for number, r in enumerate(ordered, start=1)]

    def _elapsed(self) -> float:
        return self.clock() - self.start

    def _left(self) -> str:
        elapsed = self._elapsed()
        left = max(0.0, self.duration_s - elapsed)
        return f"{show_duration(elapsed)} of {show_duration(self.duration_s)} done, {show_duration(left)} left"


def read_burnin(folder: Path) -> BurnIn | None:
    path = Path(folder) / BURNIN_FILE
    return BurnIn.model_validate_json(path.read_text(encoding="utf-8")) if path.exists() else None
