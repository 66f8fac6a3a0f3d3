"""Starting measurement workers on this node, and never waiting on them forever.

One worker process per rank, each in its own process group. A watchdog reads rank 0's progress:
a step that runs past its time limit, or a rank that dies, ends the whole attempt (every group is
killed, so nothing is left holding a GPU), and the step fails: a `StepFailure` that names it for
people and covers the keys of its values (those its `start` event announced). The steps after it
run in a fresh set of workers, up to `max_restarts` times: one hung size does not cost the others
their numbers, a machine that hangs at every step does not cost hours. Results come back under
their keys too (`Outcome.values`): nothing here, or above, finds a step by its label.

Workers start, import torch and then wait for their plan (`Workers`): a stage can start the next
set ahead, so that its import overlaps the measurement running now, and a session keeps sets
started ahead for its next stage (`WorkerPool`). They touch no GPU while they wait, so they cannot
disturb it; where the launcher asks (`Workers.start_driver`, with the plan's environment), they
start the CUDA driver and NVML meanwhile and make their GPU's context, which runs nothing on it. One
process imports torch and forks the ranks (worker.py's `--ranks`); each rank is still watched, and
killed, as a process of its own (`Rank`).

Given its plan (`Workers.begin`), a set sets up (CUDA, the process group and its communicator, what
its steps prepare) and holds; `Workers.run` lets it measure once the machine is quiet for it: no
other set of this process being started, setting up or ending (`MACHINE`). So a set can be set up
while nothing measures (the tests between two stages, the other arm of DDP's A/B setting up beside
it), and no measurement runs beside a set that sets up CUDA or NCCL, or whose processes are being
torn down. A set's end (`Workers.end`) kills its ranks and leaves their reaping to a thread: the
next set sets up meanwhile, and measures only once the ending set is gone. Sets measuring do not
stop another from measuring: the per-GPU loads run at once, and a burn-in's fabric stages run
beside its load (whose set-up, the one exception, runs beside that load: the store never sets a
stage up while another measures).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpuaccept.facts.measurements import FailureReason, StepFailure
from gpuaccept.files import write_atomically
from gpuaccept.measure.plan import Plan, Step
from gpuaccept.measure.worker import (
    DRIVER_FILE,
    ERROR_MARK,
    GO_FILE,
    LAUNCHER_PID,
    MEASURE_FILE,
    PREPARE_FILE,
    SET_UP_FILE,
    driver_started_file,
    heartbeat_file,
)
from gpuaccept.process import kill_group
from gpuaccept.vocabulary.steps import StepKey, parse_step_key

POLL_S = 0.1
QUIET_POLL_S = 0.02  # how often a set waiting to measure looks whether the machine is quiet for it
FORKER_REAP_S = 10.0  # how long the process that forked the ranks may take to reap them once killed


@dataclass
class Outcome:
    ready: dict | None = None  # the workers' report of backend, versions and environment
    values: dict[StepKey, dict] = field(default_factory=dict)  # each value measured, by key: its record
    failures: list[StepFailure] = field(default_factory=list)  # each step that gave no values, with their keys
    wall_s: float = 0.0
    # where the time went, in seconds, by phase: rank 0's start-up ("start-up: group"), the
    # wait for the machine to be quiet, each step ("step: all_reduce 1 GiB") and the parts a step
    # timed itself ("DDP on 2 GPUs: bs8: timed"); a later attempt's prefixed "attempt 2: "
    phases: dict[str, float] = field(default_factory=dict)


EventCallback = Callable[[dict], None]


def run_plan(
    plan: Plan,
    ranks: int,
    *,
    env: dict[str, str] | None = None,
    on_event: EventCallback | None = None,
    max_restarts: int = 2,
    workers: Workers | None = None,
    pool: WorkerPool | None = None,
    keep: bool = False,
) -> Outcome:
    """Run `plan` on `ranks` workers: `workers` when given (started ahead, with `ranks` ranks and
    `env`), else a set of `pool`'s where it holds one and `env` is this process's own, fresh ones
    otherwise and for every restart. With `keep`, the set given that runs the whole plan is left
    to the caller to end: it holds, idle, once done (a fresh set of a restart ends as always)."""
    outcome = Outcome()
    began = time.monotonic()
    remaining = list(range(len(plan.steps)))
    restarts = 0
    if workers is None and pool is not None and env is None:
        workers = pool.take_for(plan, ranks) or pool.take(ranks, plan.imports_ahead)
    number = 0
    while remaining:
        number += 1
        attempt_plan = plan.model_copy(update={"steps": [plan.steps[i] for i in remaining]})
        attempt_workers = workers if workers is not None and workers.serves(attempt_plan) else Workers(ranks, env, plan.imports_ahead)
        if workers is not None and attempt_workers is not workers:
            workers.end()  # set up for another plan: it must not hold its GPUs while this one measures
        kept = keep and attempt_workers is workers
        workers = None  # a set started ahead serves the first attempt only
        attempt = attempt_workers.run(attempt_plan, on_event, keep=kept)
        prefix = f"attempt {number}: " if number > 1 else ""
        outcome.phases.update({prefix + name: seconds for name, seconds in attempt.phases.items()})
        outcome.ready = outcome.ready or attempt.ready
        outcome.values.update(attempt.values)
        outcome.failures.extend(attempt.refused)
        stop = attempt.stop
        if stop is None:
            break
        if stop.step is None:
            # the workers failed outside any step (start-up, between steps): every step still
            # without its values carries that failure; a retry would meet it again
            for position, index in enumerate(remaining):
                if position not in attempt.finished:
                    outcome.failures.append(_failed(plan.steps[index], stop.reason, stop.message))
            break
        outcome.failures.append(_failed(plan.steps[remaining[stop.step]], stop.reason, stop.message, stop.keys))
        remaining = remaining[stop.step + 1 :]
        restarts += 1
        if remaining and restarts > max_restarts:
            for index in remaining:
                message = f"not run: {restarts} earlier steps of this stage failed ({stop.message})"
                outcome.failures.append(_failed(plan.steps[index], "not_run", message))
            break
    if workers is not None:
        workers.end()  # started ahead for a plan that turned out empty
    outcome.wall_s = time.monotonic() - began
    return outcome


def _failed(step: Step, reason: FailureReason, message: str, keys: list[StepKey] | None = None) -> StepFailure:
    """The failure of `step`'s values: those the worker announced when it began the step, or the
    plan's where it never began."""
    return StepFailure(step=step.label, reason=reason, message=message, keys=[*(keys or step.keys)])


@dataclass
class _Stop:
    """Why an attempt ended before its plan did: in which step (its index in the attempt's plan,
    None outside any step), and the keys that step announced."""

    step: int | None
    reason: FailureReason  # timeout | crashed
    message: str
    keys: list[StepKey] = field(default_factory=list)


@dataclass
class _Attempt:
    ready: dict | None = None
    values: dict[StepKey, dict] = field(default_factory=dict)
    refused: list[StepFailure] = field(default_factory=list)  # values that came back as NaN or infinity
    finished: set[int] = field(default_factory=set)  # steps whose results came back
    stop: _Stop | None = None
    phases: dict[str, float] = field(default_factory=dict)  # as Outcome.phases


class Rank:
    """One rank forked by the process that imported torch for them all (its `forker`), watched as a
    process of its own: its pid and exit code are what the forker wrote for it. Until the fork the
    rank is the forker: it dies with it, and is killed with it."""

    def __init__(self, forker: subprocess.Popen, workdir: Path, rank: int):
        self.forker = forker
        self.workdir = workdir
        self.rank = rank
        self._pid: int | None = None

    @property
    def pid(self) -> int:
        if self._pid is None:
            try:
                self._pid = int((self.workdir / f"rank{self.rank}.pid").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return self.forker.pid  # not forked yet (or its pid not yet written)
        return self._pid

    def poll(self) -> int | None:
        """Its exit code once it ended (None while it runs); a forker that died first ends it too."""
        try:
            return int((self.workdir / f"rank{self.rank}.exit").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
        code = self.forker.poll()
        if code is None:
            return None
        return code if code != 0 else -signal.SIGKILL  # the forker exits 0 only after every rank's exit was written

    def kill(self) -> None:
        kill_group(self)  # a rank not forked yet is its forker, and dies with it


class Workers:
    """One worker process per rank, started now, each in its own process group, waiting for a plan
    (with torch and `imports` imported: what the steps of the plan it is for import at their first use).

    `begin` gives them their plan: they set up and hold. `run` lets them measure once the machine
    is quiet for them and returns when the plan is done; the set then ends (`end`: the processes
    are killed, and reaped by a thread). A set that never runs must be closed.
    """

    def __init__(self, ranks: int, env: dict[str, str] | None = None, imports: tuple[str, ...] = ()):
        self.ranks = ranks
        self.imports = imports
        self.workdir = Path(tempfile.mkdtemp(prefix="gpuaccept-measure-"))
        self.processes: list[Rank] = []
        self.forker: subprocess.Popen | None = None
        self.plan: Plan | None = None  # the plan it was given (`begin`)
        # the environment its ranks started the CUDA driver with before a plan (`start_driver`), and when
        self._driver: dict[str, str] | None = None
        self._driver_asked: tuple[float, float] | None = None  # (time.time(), the plan's start-up limit)
        self._starter: threading.Thread | None = None  # gives the go once no set of the machine is ending
        self._went: float | None = None  # when it was given the go (time.time())
        self._released = False
        self._finished = False  # its plan done, the set kept (`run(keep=True)`): idle until `end`
        self._reaper: threading.Thread | None = None
        base = dict(os.environ if env is None else env)
        base.update(MASTER_ADDR="127.0.0.1", WORLD_SIZE=str(ranks), LOCAL_WORLD_SIZE=str(ranks), **{LAUNCHER_PID: str(os.getpid())})
        plan, out = str(self.workdir / "plan.json"), str(self.workdir)
        command = [sys.executable, "-m", "gpuaccept.measure.worker", "--plan", plan, "--out", out, "--wait", "--ranks", str(ranks)]
        command += [argument for module in imports for argument in ("--import", module)]
        try:
            for rank in range(ranks):
                heartbeat_file(self.workdir, rank).touch()  # a rank's life counts from its start
            # what goes wrong before the fork (torch cannot be imported) is rank 0's to say
            with open(self.workdir / "rank0.log", "w", encoding="utf-8") as log:
                self.forker = subprocess.Popen(
                    command, env=base, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
                )
            self.processes = [Rank(self.forker, self.workdir, rank) for rank in range(ranks)]
        except BaseException:
            self.close()
            raise
        MACHINE.add(self)

    def serves(self, plan: Plan) -> bool:
        """Whether `run(plan)` may take this set: not given a plan yet (nor its driver started with
        another environment), or given this one."""
        return (self.plan is None and self._driver in (None, plan.environment)) or self.plan == plan

    def start_driver(self, plan: Plan) -> None:
        """Have the ranks, still waiting for a plan, set `plan`'s environment, start the CUDA driver
        and NVML and make their GPU's context (nothing runs on it): the set is then for that plan's
        environment. Until each rank has, the set counts as starting: nothing begins to measure beside it."""
        if self.plan is not None or self._driver is not None:
            return
        self._driver = dict(plan.environment)
        self._driver_asked = (time.time(), plan.startup_timeout_s)
        write_atomically(self.workdir / DRIVER_FILE, json.dumps(self._driver))

    def _starting_driver(self) -> bool:
        """Whether its ranks are starting the driver they were asked to (`start_driver`): not every
        rank has said it did, none has died, and the time its plan allows for a start-up has not passed."""
        if self._driver_asked is None or self.forker is None or any(rank.poll() is not None for rank in self.processes):
            return False  # a rank that died is its set-up's to report: nothing waits on it meanwhile
        asked, limit = self._driver_asked
        started = all(driver_started_file(self.workdir, rank).exists() for rank in range(self.ranks))
        return not started and time.time() - asked <= limit

    def begin(self, plan: Plan) -> None:
        """Hand the set its plan: it sets up at once (CUDA, the process group), and prepares what its
        steps take memory for (a DDP model, the copies' buffers) as soon as no set of the machine is
        ending; then it holds until `run` lets it measure. Call it only while nothing measures."""
        if self.plan is not None:
            raise ValueError("a set of workers is given one plan")
        if not self.serves(plan):
            raise ValueError("this set of workers started its driver for another environment")
        self.plan = plan
        (self.workdir / "plan.json").write_text(plan.model_dump_json(), encoding="utf-8")
        self._starter = threading.Thread(target=self._go_when_quiet, name="gpu-accept workers' go", daemon=True)
        self._starter.start()

    def _go_when_quiet(self) -> None:
        # the port is picked only now: one picked when the workers started could have been taken
        # by the time they meet
        write_atomically(self.workdir / GO_FILE, str(_free_port()))
        # a CUDA context and an NCCL communicator take a few hundred MB a GPU, which a set that ends
        # leaves free (the loads hold nine tenths of a GPU's memory until their processes are gone:
        # seconds on an H200); what the steps prepare waits until nothing ends
        MACHINE.wait_until(lambda: not MACHINE.ending(besides=self), lambda: self.forker is None)
        if self.forker is None:
            return  # closed meanwhile
        write_atomically(self.workdir / PREPARE_FILE, "")
        self._went = time.time()

    @property
    def state(self) -> str:
        """What the set does to the machine now: "idle" (importing torch, or waiting for a plan,
        touching no GPU), "starting" (starting the CUDA driver before a plan, or given its plan: its
        CUDA contexts and process group made, waiting for the word to prepare its steps), "setting up", "held"
        (set up, or past the time its set-up may take, or dead, or kept once its plan was done),
        "measuring", "ending", "gone"."""
        if self._reaper is not None:
            return "ending" if self._reaper.is_alive() else "gone"
        if self.forker is None:
            return "gone"
        if self.plan is None:
            return "starting" if self._starting_driver() else "idle"
        if self._went is None:
            return "starting"
        if self._finished:
            return "held"
        if self._released:
            return "measuring"
        done = (self.workdir / SET_UP_FILE).exists() or self.forker.poll() is not None
        if done or time.time() - self._went > self.plan.startup_timeout_s:
            return "held"  # past its limit: its own run says it did not start; it is not waited for
        return "setting up"

    def run(self, plan: Plan, on_event: EventCallback | None, keep: bool = False) -> _Attempt:
        """The plan measured once the machine is quiet; the set then ends, unless `keep` and the
        plan was done: its ranks then hold, idle, until `end`."""
        attempt = _Attempt()
        try:
            if self.plan is None:
                self.begin(plan)
            elif self.plan != plan:
                raise ValueError("this set of workers was set up for another plan")
            asked = time.monotonic()
            assert self._starter is not None
            while self._starter.is_alive():
                self._starter.join(QUIET_POLL_S)  # short waits: Ctrl-C reaches the caller
            # measured only where nothing else starts, sets up or ends: the set's own set-up goes on meanwhile
            MACHINE.wait_until(lambda: MACHINE.quiet_for(self), lambda: False)
            attempt.phases["waited for the machine"] = round(time.monotonic() - asked, 3)
            write_atomically(self.workdir / MEASURE_FILE, "")
            self._released = True
            _watch(plan, self.processes, self.workdir, attempt, on_event, self._went or time.time())
        except BaseException:
            self.end()
            raise
        if not keep or attempt.stop is not None:
            self.end()
        else:
            self._finished = True
        return attempt

    def end(self) -> None:
        """Kill the ranks now; their reaping (the driver tears their CUDA contexts down) goes on in
        a thread, which the machine waits for before it lets another set set up or measure."""
        if self.forker is None or self._reaper is not None:
            return
        for process in self.processes:
            process.kill()
        self._reaper = threading.Thread(target=self.close, name="gpu-accept workers' end", daemon=True)
        self._reaper.start()

    def close(self) -> None:
        """Kill the ranks and wait until they and their forker are reaped; the folder removed."""
        for process in self.processes:
            process.kill()
        if self.forker is not None:
            try:
                self.forker.wait(timeout=FORKER_REAP_S)  # it reaps its killed ranks, then exits
            except subprocess.TimeoutExpired:  # a rank stuck in the kernel: init reaps it later
                kill_group(self.forker)
                self.forker.wait()
        self.processes = []
        self.forker = None
        shutil.rmtree(self.workdir, ignore_errors=True)
        if threading.current_thread() is not self._reaper:
            MACHINE.remove(self)  # a reaper's set is removed by the machine once its thread has ended

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Machine:
    """Every set of workers this process started, by what each does to the machine (`Workers.state`)."""

    def __init__(self) -> None:
        self._sets: list[Workers] = []
        self._lock = threading.Lock()

    def add(self, workers: Workers) -> None:
        with self._lock:
            self._sets.append(workers)

    def remove(self, workers: Workers) -> None:
        with self._lock:
            if workers in self._sets:
                self._sets.remove(workers)

    def _others(self, besides: Workers | None) -> list[Workers]:
        with self._lock:
            found = [workers for workers in self._sets if workers is not besides]
        for workers in found:
            if workers.state == "gone":
                self.remove(workers)
        return [workers for workers in found if workers.state != "gone"]

    def ending(self, besides: Workers | None = None) -> bool:
        return any(workers.state == "ending" for workers in self._others(besides))

    def quiet_for(self, workers: Workers) -> bool:
        """Whether `workers` may measure now: no other set starting, setting up or ending."""
        return not any(other.state in ("starting", "setting up", "ending") for other in self._others(workers))

    def wait_until(self, ready: Callable[[], bool], given_up: Callable[[], bool]) -> None:
        while not ready() and not given_up():
            time.sleep(QUIET_POLL_S)

    def settle(self) -> None:
        """Until every set that ends is gone: nothing of this process's measurements is left holding a GPU."""
        self.wait_until(lambda: not self.ending(), lambda: False)


# the sets of workers of this process: one machine's, however many stages and arms start them
MACHINE = _Machine()


def settle() -> None:
    """Until every set of workers this process ended is reaped."""
    MACHINE.settle()


class WorkerPool:
    """Sets of workers started ahead, by their number of ranks: each imports torch and waits for a
    plan, touching no GPU, while whatever runs now runs (a stage measuring, the probe, the tests
    that judge), so that the stage that takes one starts without paying torch's import (seconds with
    CUDA's libraries). A plan brings its own environment (Plan.environment): one set serves any
    stage of its size. Where coming stages' plans are known and nothing measures, sets are given
    them ahead (`set_up`), by stage: they set up and hold, and the stage that runs one of those
    plans takes its set (`take_for`). Those never taken are ended by `close`."""

    def __init__(self) -> None:
        self._ready: dict[tuple[int, tuple[str, ...]], list[Workers]] = {}  # by size and what each imported
        self._set_up: list[tuple[str, Plan, int, Workers]] = []
        self._driven: list[tuple[str, Plan, int, Workers]] = []  # sets whose ranks start the driver for a plan (`start_drivers`)
        # the store asks for the drivers from a stage's progress thread, while the session's thread waits on that stage
        self._lock = threading.RLock()

    def prepare(self, ranks: list[int], imports: tuple[str, ...] = ()) -> None:
        """Start a set for each of `ranks` (their sizes), each importing `imports` with torch (what
        the steps of the stage they are for import at their first use), beside those already
        waiting unclaimed."""
        with self._lock:
            waiting = {shape: len(sets) for shape, sets in self._ready.items()}
            for size in ranks:
                if waiting.get((size, imports), 0) > 0:
                    waiting[(size, imports)] -= 1  # one already waits for this size
                    continue
                self._ready.setdefault((size, imports), []).append(Workers(size, imports=imports))

    def take(self, ranks: int, imports: tuple[str, ...] = ()) -> Workers | None:
        """A set of `ranks` ranks started ahead, if one waits: one that imported `imports` where
        there is, else any of that size (a step imports what it needs at its first use)."""
        with self._lock:
            for shape in [(ranks, imports), *sorted(shape for shape in self._ready if shape[0] == ranks)]:
                sets = self._ready.get(shape)
                if sets:
                    return sets.pop(0)
            return None

    def start_drivers(self, stage: str, plans: list[tuple[Plan, int]]) -> None:
        """Have a set for each of `stage`'s plans, one waiting where there is, start the CUDA driver
        and NVML with the plan's environment, still waiting for its plan (`Workers.start_driver`):
        only beside a stage that makes no CUDA context and measures no time or rate (another stage's
        memory test). `set_up` and `take_for` then take those sets for those plans."""
        with self._lock:
            for plan, ranks in plans:
                if any(size == ranks and given == plan for _, given, size, _ in self._driven + self._set_up):
                    continue
                workers = self.take(ranks, plan.imports_ahead) or Workers(ranks, imports=plan.imports_ahead)
                workers.start_driver(plan)
                self._driven.append((stage, plan, ranks, workers))

    def set_up(self, stage: str, plans: list[tuple[Plan, int]]) -> None:
        """Give each of `stage`'s plans (with its number of ranks) a set, the one that started its
        driver for it or one waiting where there is, to set up with and hold. Call it only while
        nothing measures: the sets set up at once."""
        with self._lock:
            for plan, ranks in plans:
                workers = self._take(self._driven, plan, ranks) or self.take(ranks, plan.imports_ahead)
                workers = workers or Workers(ranks, imports=plan.imports_ahead)
                workers.begin(plan)
                self._set_up.append((stage, plan, ranks, workers))

    def take_for(self, plan: Plan, ranks: int) -> Workers | None:
        """The set given `plan` ahead, or that started its driver for it, if there is one."""
        with self._lock:
            return self._take(self._set_up, plan, ranks) or self._take(self._driven, plan, ranks)

    @staticmethod
    def _take(sets: list[tuple[str, Plan, int, Workers]], plan: Plan, ranks: int) -> Workers | None:
        for index, (_, given, size, workers) in enumerate(sets):
            if size == ranks and given == plan:
                del sets[index]
                return workers
        return None

    def keep_only(self, stage: str, plans: list[tuple[Plan, int]]) -> None:
        """End the sets given a plan of `stage` ahead that is none of `plans`: the stage asked
        otherwise after all, they must not hold GPU memory (a DDP model, a context) while it
        measures. The sets of the stages after it hold on."""
        with self._lock:
            self._set_up = self._kept(self._set_up, stage, plans)
            self._driven = self._kept(self._driven, stage, plans)

    @staticmethod
    def _kept(sets: list[tuple[str, Plan, int, Workers]], stage: str, plans: list[tuple[Plan, int]]) -> list:
        kept = []
        for name, given, size, workers in sets:
            if name != stage or (given, size) in plans:
                kept.append((name, given, size, workers))
            else:
                workers.end()
        return kept

    @property
    def waiting(self) -> list[int]:
        """The sizes of the sets waiting, one entry a set."""
        return sorted(size for (size, _), sets in self._ready.items() for _ in sets)

    def close(self) -> None:
        with self._lock:
            for sets in self._ready.values():
                for workers in sets:
                    workers.close()
            self._ready.clear()
            for _, _, _, workers in self._set_up + self._driven:
                workers.close()
            self._set_up.clear()
            self._driven.clear()


@dataclass
class _Running:
    """The step rank 0 said it began: its index, the keys it announced, when, and its limit."""

    step: int
    keys: list[StepKey]
    began: float
    limit_s: float


def _watch(
    plan: Plan, processes, workdir: Path, attempt: _Attempt, on_event: EventCallback | None, went: float | None = None
) -> None:
    """Follow rank 0's progress until the plan is done or stops (`attempt.stop`). `went`: when the
    set was given its go (time.time()), from which its start-up is timed."""
    progress = _ProgressReader(workdir / "progress.jsonl")
    began = time.monotonic()
    current: _Running | None = None
    # a set that set up while it was held has had its start-up time already
    last_event = began - (max(0.0, time.time() - went) if went is not None else 0.0)
    step_began: dict[int, float] = {}  # rank 0's clock at each step's start
    finished = False
    while True:
        # polled before reading: a worker that wrote its last line and exited is seen with that line
        codes = [process.poll() for process in processes]
        for event in progress.read():
            last_event = time.monotonic()
            kind = event.get("event")
            if kind == "ready":
                attempt.ready = event
                attempt.phases.update({f"start-up: {name}": seconds for name, seconds in event.get("startup_s", {}).items()})
                if went is not None and "time" in event:
                    attempt.phases["start-up"] = round(max(0.0, event["time"] - went), 3)
            elif kind == "released":
                attempt.phases["held"] = event.get("held_s", 0.0)
            elif kind == "start":
                current = _Running(event["step"], [parse_step_key(key) for key in event["keys"]], last_event, event["timeout_s"])
                step_began[event["step"]] = event.get("time", 0.0)
            elif kind == "result":
                for record in event["results"]:
                    _take(plan.steps[event["step"]], record, attempt)
                attempt.finished.add(event["step"])
                label = plan.steps[event["step"]].label
                if event["step"] in step_began and "time" in event:
                    attempt.phases[f"step: {label}"] = round(event["time"] - step_began[event["step"]], 3)
                attempt.phases.update(event.get("phases") or {})
                current = None
            elif kind == "done":
                finished = True
            if on_event:
                on_event(event)
        if finished:
            return  # every result was delivered: the tear-down is cut short by the kill that follows
        now = time.monotonic()
        # the label names the step in messages only; what failed is told by the step's keys
        label = plan.steps[current.step].label if current else ("start-up" if attempt.ready is None else "between steps")
        step, keys = (current.step, current.keys) if current else (None, [])
        if any(code not in (None, 0) for code in codes) or all(code == 0 for code in codes):
            attempt.stop = _Stop(step, "crashed", f"{label}: {_crash_message(workdir, codes)}", keys)
            return
        stalled = _stalled_rank(processes, workdir, plan.stalled_s)
        if stalled:
            attempt.stop = _Stop(step, "timeout", f"{label}: {stalled}", keys)
            return
        if current is not None and now - current.began > current.limit_s:
            attempt.stop = _Stop(current.step, "timeout", f"{label} did not finish within {current.limit_s:.0f} s", current.keys)
            return
        if current is None:
            waiting_for_start = attempt.ready is None
            limit = plan.startup_timeout_s if waiting_for_start else max(step.timeout_s for step in plan.steps)
            if now - last_event > limit:
                what = "start-up (process group and NCCL initialization)" if waiting_for_start else "the workers between steps"
                attempt.stop = _Stop(None, "timeout", f"{what} did not finish within {limit:.0f} s")
                return
        time.sleep(POLL_S)


def _take(step: Step, record: dict, attempt: _Attempt) -> None:
    """Keep one measured record under its key; one holding NaN or infinity (a timer that read 0, a
    broken kernel) is kept as the key's failure instead, which its check reports as could not judge:
    no number to judge, and JSON could not keep it."""
    key = parse_step_key(record["key"])
    values = {name: value for name, value in record.items() if name != "key"}
    broken = [f"{name} = {value}" for name, value in values.items() if isinstance(value, float) and not math.isfinite(value)]
    if broken:
        message = f"{step.label}: the worker measured {', '.join(broken)} for {key}, not a finite number"
        attempt.refused.append(StepFailure(step=step.label, reason="not_a_number", message=message, keys=[key]))
    else:
        attempt.values[key] = values


class _ProgressReader:
    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.partial = ""

    def read(self) -> list[dict]:
        try:
            with open(self.path, encoding="utf-8") as handle:
                handle.seek(self.offset)
                text = handle.read()
                self.offset = handle.tell()
        except FileNotFoundError:
            return []
        text = self.partial + text
        lines = text.split("\n")
        self.partial = lines.pop()  # an unfinished last line waits for the rest
        return [json.loads(line) for line in lines if line.strip()]


def _stalled_rank(processes, workdir: Path, limit_s: float) -> str:
    """Why a rank counts as stalled ('' while every rank's heartbeat is fresh)."""
    now = time.time()
    for rank, process in enumerate(processes):
        try:
            silent = now - heartbeat_file(workdir, rank).stat().st_mtime
        except FileNotFoundError:
            continue
        if silent > limit_s:
            return f"rank {rank} stopped responding: no sign of life for {silent:.0f} s ({_process_state(process.pid)})"
    return ""


def _process_state(pid: int) -> str:
    """What the kernel says of a process: 'stopped by a signal' for SIGSTOP, and so on."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "process state unknown"
    return {"T": "process stopped by a signal", "t": "process stopped by a debugger", "D": "process in uninterruptible I/O",
            "Z": "process exited", "R": "process running", "S": "process sleeping"}.get(state, f"process state {state}")


def _crash_message(workdir: Path, codes: list[int | None]) -> str:
    for rank, code in enumerate(codes):
        if code in (None, 0):
            continue
        text = (workdir / f"rank{rank}.log").read_text(encoding="utf-8", errors="replace")
        marked = [line for line in text.splitlines() if line.startswith(ERROR_MARK)]
        if marked:
            return marked[-1].removeprefix(ERROR_MARK).strip()
        lines = [line for line in text.splitlines() if line.strip()]
        return f"rank {rank} exited with code {code}" + (f": {lines[-1].strip()}" if lines else "")
    return "a worker exited before finishing its steps"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
