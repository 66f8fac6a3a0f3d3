"""A burn-in's sustained load: every GPU under matrix products from the load's start to its end,
with no gap between rounds, judged in rounds of `burnin.round_s`.

The compute stage starts it for a burn-in (its `sustain`, registry.py), on the stage's own runner and
steps: one worker process per GPU (the GPU alone visible to it: `OnEachGpu`, compute.py) runs
that GPU's rounds one after another (measure/sustained.py); its plan is fixed when the load starts, each
round ending at the same moment on every GPU, so round N of every GPU covers the same stretch of
time and the GPUs are judged against each other round by round. A worker that hangs or crashes
fails its round by name (the launcher's watchdog), and a fresh worker goes on with the rounds left.

The driver talks to the workers through flags in a folder of its own: `stop` (Ctrl-C, SIGTERM:
the round under way ends, the rounds left give nothing), and `fabric` (a fabric stage runs beside
the load: a memory test waits, products go on). `fabric_beside()` raises `fabric` and then waits
until no worker is inside a memory test, so that the memory a fabric stage needs is free.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gpuaccept.facts.measurements import ComputeSweep, GemmResult, HbmResult, MemtestResult, StepFailure
from gpuaccept.measure.drills import NO_DRILLS, Drills
from gpuaccept.measure.plan import GemmStep, HbmStep, MemtestStep, Plan, SustainedRoundStep
from gpuaccept.measure.sustained import FABRIC_FLAG, STOP_FLAG, memtest_due_flag, memtest_flag
from gpuaccept.profile.spec import ProfileSpec
from gpuaccept.stages.compute import MIN_LOAD_STEP_S, OnEachGpu, compute_steps, load_result
from gpuaccept.vocabulary.steps import parse_step_key
from gpuaccept.vocabulary.telemetry import parse_duration

# how long a memory test may wait for a fabric stage beside the load before it runs anyway (on the
# memory that is free then); the fabric stages have their own time limits, far below this
MEMTEST_WAIT_S = 600.0
# how long a fabric stage waits for the memory tests under way to end: their time cap and this
MEMTEST_END_ALLOWANCE_S = 60.0
POLL_S = 0.05


@dataclass
class LoadRound:
    """Round `index` of the sustained load: every GPU's values in it, and when it ran (epoch seconds)."""

    index: int
    began: float
    ended: float
    sweep: ComputeSweep


@dataclass
class _Gathered:
    records: dict[int, dict[int, list[dict]]] = field(default_factory=dict)  # round -> gpu -> records
    times: dict[int, list[float]] = field(default_factory=dict)  # round -> moments its steps began and ended
    backend: str = ""
    torch_version: str = ""


def rounds_of(duration_s: float, round_s: float) -> int:
    """Rounds of about `round_s` that fill `duration_s` (at least one)."""
    return max(1, round(duration_s / round_s))


def memtest_rounds(rounds: int, round_s: float, interval_s: float) -> set[int]:
    """The rounds that end with a memory test: the first, then the first round that begins at
    least `interval_s` after the one before."""
    chosen, due = set(), 0.0
    for index in range(1, rounds + 1):
        begins = (index - 1) * round_s
        if begins >= due:
            chosen.add(index)
            due = begins + interval_s
    return chosen


class SustainedLoad:
    """Every GPU of `gpus` under the sustained load for `duration_s` from `start()`."""

    def __init__(
        self,
        spec: ProfileSpec,
        gpus: list[int],
        duration_s: float,
        *,
        env: dict[str, str] | None = None,
        require_cuda: bool = False,
        on_round: Callable[[int, int], None] = lambda gpu, index: None,
        drills: Drills = NO_DRILLS,
    ):
        assert spec.compute is not None and spec.compute.gemm is not None, "the sustained load is the profile's compute.gemm"
        self.spec, self.gpus, self.duration_s = spec, sorted(gpus), duration_s
        self.require_cuda = require_cuda
        self.drills = drills
        self.on_round = on_round
        self.control = Path(tempfile.mkdtemp(prefix="gpuaccept-sustained-"))
        # the workers import torch now, while whatever runs before the load runs; they touch no GPU until their plan comes
        self.loads = OnEachGpu(self.gpus, env=env, on_event=self._event, ahead=True)
        self._lock = threading.Lock()
        self._gathered = _Gathered()
        self._labels: dict[str, tuple[int, int]] = {}  # a step's label -> (gpu, round)
        self.began = 0.0

    def plan(self, gpu: int, began: float) -> Plan:
        spec, burnin = self.spec, self.spec.burnin
        assert spec.compute is not None and spec.compute.gemm is not None
        gemm = spec.compute.gemm
        loads = compute_steps(spec, gpu)
        hbm = next((step for step in loads if isinstance(step, HbmStep)), None)
        memtest = next((step for step in loads if isinstance(step, MemtestStep)), None)
        gemm_step = next(step for step in loads if isinstance(step, GemmStep))
        count = rounds_of(self.duration_s, burnin.round_s)
        length = self.duration_s / count
        with_memtest = memtest_rounds(count, length, parse_duration(burnin.memtest_interval)) if memtest else set()
        steps = []
        for index in range(1, count + 1):
            tested = memtest if index in with_memtest else None
            # the round's own length, then what its HBM step and memory test may take, and a memory
            # test's wait for a fabric stage; the first round also sets up the operands
            limit = length + gemm_step.timeout_s + (hbm.timeout_s if hbm else 0.0)
            limit += (tested.timeout_s + MEMTEST_WAIT_S) if tested else 0.0
            steps.append(
                SustainedRoundStep(
                    gpu=gpu, round=index, ends_at=began + index * length, size=gemm.size, dtype=gemm.dtype, hbm=hbm,
                    memtest=tested, control_dir=str(self.control), memtest_wait_s=MEMTEST_WAIT_S,
                    timeout_s=max(MIN_LOAD_STEP_S, limit),
                )
            )
        backend = "nccl" if self.require_cuda else "auto"
        return Plan(
            steps=steps, backend=backend, startup_timeout_s=spec.timeouts.startup_s, stalled_s=spec.timeouts.stalled_s, drills=self.drills
        )

    def start(self) -> None:
        self.began = time.time()
        plans = {gpu: self.plan(gpu, self.began) for gpu in self.gpus}
        for gpu, plan in plans.items():
            self._labels.update({step.label: (gpu, step.round) for step in plan.steps})  # type: ignore[union-attr]
        self.loads.start(plans)

    def _event(self, event: dict) -> None:
        kind = event.get("event")
        with self._lock:
            if kind == "ready":
                used = "cuda" if event.get("backend") == "nccl" else "cpu"
                self._gathered.backend = self._gathered.backend or used
                self._gathered.torch_version = self._gathered.torch_version or event.get("torch", "")
                return
            if kind not in ("start", "result") or event.get("label") not in self._labels:
                return
            gpu, index = self._labels[event["label"]]
            if kind == "result":
                measured = [record for record in event["results"] if not record.get("skipped")]
                if not measured:
                    return  # a round planned after the burn-in was ended
                self._gathered.records.setdefault(index, {})[gpu] = measured
            self._gathered.times.setdefault(index, []).append(float(event["time"]))
        if kind == "result":
            self.on_round(gpu, index)

    @property
    def running(self) -> bool:
        return self.loads.running

    def stop(self) -> None:
        """End the round under way on every GPU, and every round after it."""
        (self.control / STOP_FLAG).touch()

    def wait(self) -> None:
        """Until every GPU's rounds are done: in short waits, so Ctrl-C reaches the caller."""
        self.loads.wait()

    @contextlib.contextmanager
    def fabric_beside(self) -> Iterator[None]:
        """A fabric stage beside the load: a memory test that is due or under way runs first, and
        none begins while the stage runs (products go on meanwhile)."""
        cap = self.spec.compute.memtest.time_cap_s if self.spec.compute and self.spec.compute.memtest else 0.0
        limit = cap + MEMTEST_END_ALLOWANCE_S
        self._wait_for(lambda gpu: [memtest_due_flag(self.control, gpu), memtest_flag(self.control, gpu)], limit)
        flag = self.control / FABRIC_FLAG
        flag.touch()  # raised before looking at the workers' flags: one of the two sees the other
        try:
            self._wait_for(lambda gpu: [memtest_flag(self.control, gpu)], limit)
            yield
        finally:
            flag.unlink(missing_ok=True)

    def _wait_for(self, flags: Callable[[int], list[Path]], limit_s: float) -> None:
        """Until no GPU has one of `flags` up, at most `limit_s` (a worker that died leaves its flag)."""
        deadline = time.monotonic() + limit_s
        while any(path.exists() for gpu in self.gpus for path in flags(gpu)) and time.monotonic() < deadline:
            time.sleep(POLL_S)

    def rounds(self) -> list[LoadRound]:
        """Every round that measured something or failed, in order."""
        gathered = self._gathered
        failures: dict[int, list[StepFailure]] = {}  # round -> steps that gave nothing (a hang, a crash)
        for gpu, outcome in sorted(self.loads.outcomes.items()):
            for failure in outcome.failures:
                _, index = self._labels.get(failure.step, (gpu, 1))
                failures.setdefault(index, []).append(failure)
        found = []
        for index in sorted(set(gathered.records) | set(failures)):
            results: list[GemmResult | HbmResult | MemtestResult] = [
                load_result(parse_step_key(record["key"]), {k: v for k, v in record.items() if k != "key"})  # type: ignore[arg-type]
                for records in gathered.records.get(index, {}).values()
                for record in records
            ]
            times = gathered.times.get(index) or [self.began, self.began]
            began, ended = min(times), max(times)
            sweep = ComputeSweep(
                backend=gathered.backend, torch_version=gathered.torch_version, gpus=self.gpus,
                wall_s=round(max(0.0, ended - began), 3), results=results, failures=failures.get(index, []),
            )
            found.append(LoadRound(index, began, ended, sweep))
        return found

    def close(self) -> None:
        self.loads.close()  # workers started ahead for a load that never began
        shutil.rmtree(self.control, ignore_errors=True)

