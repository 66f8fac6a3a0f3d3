"""A burn-in: the load stages run round after round until the duration is spent, every round kept.

The stage store measures each stage once per session (measure once, check many); a burn-in
measures again and again, so it runs the stages through the store's `measure_stage` (the same
lock, the same workers, the same hook after a stage ran) and keeps each round's measurements
apart. Then the suites judge: each burn-in value over every round (checks/burnin.py), the
telemetry over the whole time. Ctrl-C or SIGTERM ends the rounds; what ran is kept and judged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from gpuaccept.facts import Facts
from gpuaccept.facts.model import BurnIn, BurnInRound, Measurements
from gpuaccept.files import write_atomically
from gpuaccept.profile import Profile
from gpuaccept.session.store import MeasurementStore
from gpuaccept.vocabulary.telemetry import parse_duration, show_duration

# The per-GPU loads, run every round, and the fabric stages, run in the first round and then at the
# profile's burnin.fabric_interval.
LOAD_STAGES: tuple[str, ...] = ("compute", "copies")
FABRIC_STAGES: tuple[str, ...] = ("nccl",)
BURNIN_FILE = "burnin.json"


def stages_asked(profile: Profile) -> list[str]:
    """The burn-in stages this profile has something to measure in."""
    spec = profile.spec
    asks = {
        "compute": spec.compute is not None,
        "copies": spec.copies is not None,
        "nccl": spec.nccl is not None or spec.pairwise is not None,
    }
    return [stage for stage in (*LOAD_STAGES, *FABRIC_STAGES) if asks.get(stage, True)]


class BurninDriver:
    def __init__(
        self, store: MeasurementStore, facts: Facts, profile: Profile, duration_s: float,
        say: Callable[[str], None] = lambda text: None, clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.store, self.facts, self.profile = store, facts, profile
        self.duration_s = duration_s
        self.fabric_interval_s = parse_duration(profile.spec.burnin.fabric_interval)
        self.say = say
        self.clock = clock
        self.sleep = sleep

    def run(self) -> BurnIn:
        """Rounds until the duration is spent (a round that has begun finishes), or until Ctrl-C or
        SIGTERM: then the round under way keeps the stages it finished. Written to the session folder."""
        stages = stages_asked(self.profile)
        rounds: list[BurnInRound] = []
        start = self.clock()
        last_fabric: float | None = None
        ended: Literal["deadline", "interrupted"] = "deadline"
        try:
            while stages and (not rounds or self.clock() - start < self.duration_s):
                began = self.clock() - start
                fabric_due = last_fabric is None or began - last_fabric >= self.fabric_interval_s
                planned = [s for s in stages if s in LOAD_STAGES or (s in FABRIC_STAGES and fabric_due)]
                if not planned:
                    # only fabric stages, not due yet: wait for them (or the end) without a busy loop
                    assert last_fabric is not None
                    self.sleep(max(0.0, min(last_fabric + self.fabric_interval_s, self.duration_s) - began))
                    continue
                if fabric_due:
                    last_fabric = began
                done: list[str] = []
                measured = Measurements()
                index = len(rounds) + 1
                try:
                    for stage in planned:
                        self.say(f"gpu-accept: burn-in round {index}: {stage} stage; {self._left(began)}")
                        found = self.store.measure_stage(stage, self.facts, self.profile)
                        sweeps = {name: sweep for name, sweep in found if sweep is not None and name not in ("rounds", "unconfirmed")}
                        measured = measured.model_copy(update=sweeps)
                        done.append(stage)
                finally:
                    if done:
                        wall = self.clock() - start - began
                        rounds.append(
                            BurnInRound(index=index, started_s=round(began, 3), wall_s=round(wall, 3), stages=done, measurements=measured)
                        )
        except KeyboardInterrupt:
            ended = "interrupted"
        elapsed = self.clock() - start
        burnin = BurnIn(duration_s=self.duration_s, elapsed_s=round(elapsed, 3), ended=ended, rounds=rounds)
        write_atomically(Path(self.store.folder) / BURNIN_FILE, burnin.model_dump_json())
        how = "ended by a signal" if ended == "interrupted" else "done"
        self.say(f"gpu-accept: burn-in {how}: {len(rounds)} round(s) in {show_duration(elapsed)} of {show_duration(self.duration_s)}")
        return burnin

    def _left(self, elapsed: float) -> str:
        left = max(0.0, self.duration_s - elapsed)
        return f"{show_duration(elapsed)} of {show_duration(self.duration_s)} done, {show_duration(left)} left"


def read_burnin(folder: Path) -> BurnIn | None:
    path = Path(folder) / BURNIN_FILE
    return BurnIn.model_validate_json(path.read_text(encoding="utf-8")) if path.exists() else None
