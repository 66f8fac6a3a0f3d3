"""`python -m gpuaccept.measure.worker --plan PLAN --out DIR`: one rank of a measurement.

The suite starts one such process per GPU itself (`launch.py`); the same module runs under
`torchrun` or `srun`, which set RANK / WORLD_SIZE / LOCAL_RANK (or SLURM_PROCID / SLURM_NTASKS /
SLURM_LOCALID) and MASTER_ADDR / MASTER_PORT. NCCL is used where CUDA is, gloo elsewhere, so the
project's CPU tests run this very code.

Rank 0 reports through `DIR/progress.jsonl`, one JSON object a line: `ready` once the process
group is up; a `start` before each step, with the keys of the values it measures
(`"keys": ["pair/gpu0-gpu1", ...]`); a `result` after it, whose `results` hold one record per
value, each under its `key`; `done` at the end. The launcher watches that file to enforce each
step's time limit and to fail the values of a step that hung, by key.

With `--wait` the process imports torch first (and each `--import` module: what the steps of the
stage it was started for import at their first use) and then waits for the file `DIR/go`, which
holds the rendezvous port; the plan is read after it, and its `environment` (the GPU a per-GPU
worker sees, NCCL's settings) set before CUDA or NCCL start. The suite can so start workers ahead,
for whichever stage takes them, while other measurements run. A waiting worker whose parent is
gone exits. Where the launcher writes `DIR/driver` (the plan's environment, as JSON) before the go,
each rank sets that environment, starts the CUDA driver and NVML meanwhile (cuInit, nvmlInit) and
makes its GPU's primary context (the one torch then uses: a few hundred MB of the GPU's memory, no
work on it), then writes `DIR/driver-started-rank<r>`: what every process pays once, and the driver
does for one process at a time, is then paid beside another stage's memory test instead of after
it. The ranks then set up: the CUDA device and the process group with its NCCL communicator (a few
hundred MB a GPU) at once, then, once the launcher writes `DIR/prepare` (no
other set of the machine is ending: one that ends may hold most of a GPU's memory until it is
gone), what each step prepares before anything is timed (the DDP model, NCCL's connections, the copies' buffers).
Rank 0 writes `DIR/set-up` once every rank has, and they hold until the launcher writes
`DIR/measure`: the launcher has a set set up while nothing is measured and lets it measure once no
other set of the machine is setting up or ending. Once its plan is done, such a set holds again,
idle, until the launcher ends it.

Rank 0 says where its time went: the `ready` event's `startup_s` (torch's import, the wait for the
go, the CUDA device, the process group, the wait to prepare, the steps' preparation), the hold, and with each step's
`result` the `phases` the step timed itself (a DDP world's wrap, warm-up and timed steps).

With `--ranks N` (how the suite starts its workers on one node) the process imports torch once and
forks the N ranks from itself, each in a session of its own with `DIR/rank<r>.log` as its output,
then stays as their parent: it writes each rank's pid to `DIR/rank<r>.pid` and, when the rank
ends, its exit code to `DIR/rank<r>.exit`. Importing torch is most of a rank's start-up (a second
on a CPU, several with CUDA's libraries): paid once, not once a rank. Nothing of CUDA is set up
before the fork (torch does that on first use, in each rank), so each rank is as one started alone.
While it imports torch it beats every rank's heartbeat (a rank forked beats its own). If the
launcher dies, this process ends its ranks and exits.

The plan carries the run's drills (measure/drills.py), and each step is handed them. The `hang`
drill acts here: naming a step ("all_reduce 1 GiB", or "collective/all_reduce/1GiB"), it makes the
last rank sleep forever at the start of that step, so its peers block inside a real collective.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib
import json
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuaccept.files import write_atomically
from gpuaccept.measure.drills import Drills
from gpuaccept.measure.plan import LOAD_STEPS, ONE_GPU_STEPS, CollectiveStep, CopyStep, DdpStep, PairwiseStep, Plan, SustainedRoundStep
from gpuaccept.measure.ranks import launch_of

ERROR_MARK = "GPUACCEPT-WORKER-ERROR:"
GO_FILE = "go"
DRIVER_FILE = "driver"  # the launcher's word to start the CUDA driver and NVML before the go, with this environment
PREPARE_FILE = "prepare"  # the launcher's word that the steps may take the memory they prepare
SET_UP_FILE = "set-up"  # written by rank 0 once every rank is set up, before the hold
MEASURE_FILE = "measure"  # the launcher's word that the held ranks may measure now
LAUNCHER_PID = "GPUACCEPT_LAUNCHER_PID"
HEARTBEAT_S = 1.0  # how often each rank touches its heartbeat file, from a thread of its own
ORPHANED_EXIT = 5  # a rank that outlived its launcher
WAITING_MARK = "waiting for the go:"  # in the rank's log once a worker started ahead is ready
PREPARE_MARK = "waiting to prepare:"  # in the rank's log once its device and process group are made
WAIT_POLL_S = 0.02
RECORDED_ENVIRONMENT = ("NCCL_", "TORCH_NCCL_", "CUDA_VISIBLE_DEVICES", "NVSHMEM_", "TORCH_SYMM_MEM_")


@dataclass
class Rank:
    rank: int
    world: int
    local_rank: int
    device: Any  # torch.device
    backend: str
    group: Any = None  # a process group of some ranks (rank and world are then within it); None: every rank
    # where a step's time went, by part ("wrap", "warm-up"): rank 0's are reported with its result
    phases: dict[str, float] = field(default_factory=dict)
    on_untimed: Callable[[], None] | None = None  # rank 0's word to the launcher (`untimed`)

    def untimed(self) -> None:
        """The step says that what it does from now on measures no time or rate and starts nothing
        (the memory test's passes, once its memory is allocated): rank 0 tells the launcher, which
        may start the next stage's CUDA drivers beside it (an `untimed` event)."""
        if self.on_untimed is not None:
            self.on_untimed()

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a part of the step on the host clock (a part that ends with GPU work in flight
        synchronizes before it ends, where its time is to mean the GPU's)."""
        began = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = round(self.phases.get(name, 0.0) + time.perf_counter() - began, 4)


def rank_from_environment() -> tuple[int, int, int]:
    """(rank, world, local rank) as the launcher's variables say (ranks.py); one rank of one where
    none are set (the module started by hand)."""
    if "RANK" not in os.environ and "SLURM_PROCID" not in os.environ:
        return 0, 1, 0
    launch = launch_of(os.environ)
    return launch.rank, launch.world, launch.local_rank


class Progress:
    """Rank 0's report to the launcher: appended and flushed line by line."""

    def __init__(self, out: Path, enabled: bool):
        # open for the rank's whole life, each line flushed as written
        self.file = open(out / "progress.jsonl", "a", encoding="utf-8") if enabled else None  # noqa: SIM115

    def emit(self, **event: Any) -> None:
        if self.file:
            event["time"] = time.time()
            self.file.write(json.dumps(event) + "\n")
            self.file.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuaccept.measure.worker")
    parser.add_argument("--plan", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument(
        "--wait", action="store_true", help="import torch, then wait for DIR/go (the rendezvous port) before reading the plan"
    )
    parser.add_argument("--ranks", type=int, help="import torch once, then fork ranks 0 to N-1 from this process")
    parser.add_argument(
        "--import", dest="imports", action="append", default=[], metavar="MODULE",
        help="a module to import with torch, before the go (what the steps import at their first use)",
    )
    args = parser.parse_args(argv)
    if args.ranks:
        return fork_ranks(args)
    return serve(args)


def serve(args: argparse.Namespace, import_s: float | None = None) -> int:
    """One rank: its heartbeat, torch, the wait for the go, then the plan. `import_s`: where torch
    was imported before the fork, how long that took."""
    rank, world, local_rank = rank_from_environment()
    # the launcher names itself: a launcher that died before this line ran would otherwise leave
    # init as the parent this worker waits beside forever
    parent = int(os.environ.get(LAUNCHER_PID, os.getppid()))
    start_heartbeat(heartbeat_file(args.out, rank), parent)
    try:
        began = time.perf_counter()
        _import_torch(args.imports)  # the slow part of start-up, paid before the wait
        imported = time.perf_counter()
        if import_s is not None:
            began = imported - import_s
        driver_s = 0.0
        if args.wait:
            print(f"{WAITING_MARK} rank {rank}: torch imported in {imported - began:.1f} s", flush=True)
            went = wait_for_go(args.out, parent, rank, local_rank)
            if went is None:
                return 4
            driver_s = went
        waited = time.perf_counter()
        plan = Plan.model_validate_json(args.plan.read_text(encoding="utf-8"))
        args.out.mkdir(parents=True, exist_ok=True)
        hold = parent if args.wait else None
        run(
            plan, args.out, rank, world, local_rank, import_s=imported - began, waited_s=waited - imported - driver_s,
            driver_s=driver_s, hold_for=hold,
        )
    except Exception as exc:  # reported to the launcher in one line; the traceback goes to this rank's log
        _report_error(rank, exc)
        return 3
    return 0


def _report_error(rank: int, exc: Exception) -> None:
    """The traceback into the log, then the one line the launcher reports."""
    traceback.print_exc()
    print(f"{ERROR_MARK} rank {rank}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr)


def _import_torch(modules: list[str]) -> None:
    """torch, then `modules`. One of those that fails to import is left for the step that needs it:
    it imports the module again and fails saying why, as the step it is."""
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import torch.distributed  # noqa: F401

    for module in modules:
        with contextlib.suppress(Exception):
            importlib.import_module(module)


def fork_ranks(args: argparse.Namespace) -> int:
    """--ranks N: torch imported here once, each rank forked from this process (see the module's
    docstring); returns when every rank has ended, or ends them when the launcher is gone."""
    parent = int(os.environ.get(LAUNCHER_PID, os.getppid()))
    began = time.perf_counter()
    # the ranks' heartbeats while torch is imported for them: seconds with CUDA's libraries, far more
    # from a cold network filesystem; the thread has ended before the first fork
    stop_beating = _beat_for_ranks(args.out, args.ranks, parent)
    try:
        _import_torch(args.imports)
    except Exception as exc:  # said as rank 0 would say it (its log is this process's output): no rank started
        _report_error(0, exc)
        return 3
    finally:
        stop_beating()
    import_s = time.perf_counter() - began
    ranks: dict[int, int] = {}  # pid -> rank
    for rank in range(args.ranks):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os._exit(_forked_rank(args, rank, import_s))
        ranks[pid] = rank
        write_atomically(args.out / f"rank{rank}.pid", str(pid))
    while ranks:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid:
            write_atomically(args.out / f"rank{ranks.pop(pid)}.exit", str(os.waitstatus_to_exitcode(status)))
        elif os.getppid() != parent:  # the launcher is gone: its ranks must not hold the GPUs
            for pid in ranks:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
            return ORPHANED_EXIT
        else:
            time.sleep(WAIT_POLL_S)
    return 0


def _beat_for_ranks(out: Path, ranks: int, parent: int) -> Callable[[], None]:
    """Every rank's heartbeat from a thread, as each rank beats its own once forked; the process
    ends where the launcher is gone. Returns the function that ends the thread."""
    stop = threading.Event()
    paths = [heartbeat_file(out, rank) for rank in range(ranks)]
    thread = threading.Thread(target=_beat, args=(paths, parent, stop), name="gpuaccept-heartbeats", daemon=True)
    thread.start()

    def stopped() -> None:
        stop.set()
        thread.join()

    return stopped


def _forked_rank(args: argparse.Namespace, rank: int, import_s: float) -> int:
    """In the forked child: a session of its own (the launcher kills a rank by its group), its
    log as its output, its rank in its environment, this process as the parent it watches."""
    code = 3
    try:
        os.setsid()
        log = os.open(args.out / f"rank{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), LAUNCHER_PID: str(os.getppid())})
        code = serve(args, import_s)
    except BaseException:  # a forked child never returns into its parent's code
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return code


def heartbeat_file(out: Path, rank: int) -> Path:
    return out / f"heartbeat-rank{rank}"


def start_heartbeat(path: Path, parent: int) -> None:
    """Touch `path` every HEARTBEAT_S from a daemon thread: the launcher tells a rank that is
    stopped (SIGSTOP), frozen or gone from one that is busy, whatever step it is in. torch and NCCL
    release the GIL in their long calls, so a busy rank keeps beating. A rank whose launcher is gone
    (killed with SIGKILL: nothing could stop its workers) ends itself: left alone, a rank inside a
    hung collective or a GPU load would hold its GPU and its memory for good."""

    threading.Thread(target=_beat, args=([path], parent, threading.Event()), name="gpuaccept-heartbeat", daemon=True).start()


def _beat(paths: list[Path], parent: int, stop: threading.Event) -> None:
    """Touch `paths` every HEARTBEAT_S until `stop` is set; end the process where its parent is gone."""
    while not stop.is_set():
        if os.getppid() != parent:
            print(f"{ERROR_MARK} pid {os.getpid()}: the launcher (pid {parent}) is gone: ending", file=sys.stderr, flush=True)
            os._exit(ORPHANED_EXIT)
        for path in paths:
            with contextlib.suppress(OSError):  # the launcher removed the folder: the run is over
                path.touch()
        stop.wait(HEARTBEAT_S)


def wait_for_go(out: Path, parent: int, rank: int = 0, local_rank: int = 0) -> float | None:
    """Wait for the launcher's go, starting the CUDA driver, NVML and the context of this rank's GPU
    (`local_rank`) meanwhile where it says so (`DRIVER_FILE`): the seconds that start took (0.0 where
    it was not asked for); None when the launcher died first."""
    driver_s = 0.0
    asked = out / DRIVER_FILE
    started = False
    while not (out / GO_FILE).exists():
        if os.getppid() != parent:
            return None
        if not started and asked.exists():
            started = True
            driver_s = start_driver(json.loads(asked.read_text(encoding="utf-8")), local_rank)
            write_atomically(driver_started_file(out, rank), "")
            continue
        time.sleep(WAIT_POLL_S)
    os.environ["MASTER_PORT"] = (out / GO_FILE).read_text(encoding="utf-8").strip()
    return driver_s


def driver_started_file(out: Path, rank: int) -> Path:
    return out / f"driver-started-rank{rank}"


def start_driver(environment: dict[str, str], device: int = 0) -> float:
    """The plan's environment set (CUDA reads CUDA_VISIBLE_DEVICES as its driver starts), then the
    CUDA driver and NVML started in this process (cuInit, nvmlInit) and the primary context of
    `device` (as this process sees it) made: the context torch's first CUDA call then takes, and
    NCCL's initialization finds the driver started. It runs nothing on the GPU; the context holds a
    few hundred MB of its memory. The seconds it took. Where any of it cannot be done (no driver
    here, no memory left), nothing is said: the set-up does it again and says why."""
    os.environ.update(environment)
    began = time.perf_counter()
    with contextlib.suppress(OSError, AttributeError):
        cuda = ctypes.CDLL("libcuda.so.1")
        handle, context = ctypes.c_int(), ctypes.c_void_p()
        if cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(handle), device) == 0:
            cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle)  # kept for the process: torch's context
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libnvidia-ml.so.1").nvmlInit_v2()
    return time.perf_counter() - began


def _wait_for_file(path: Path, parent: int) -> bool:
    """Until the launcher writes `path`; False when the launcher died first."""
    while not path.exists():
        if os.getppid() != parent:
            return False
        time.sleep(WAIT_POLL_S)
    return True


def run(
    plan: Plan, out: Path, rank: int, world: int, local_rank: int, import_s: float = 0.0, waited_s: float = 0.0,
    driver_s: float = 0.0, hold_for: int | None = None,
) -> None:
    """The plan's steps in order; with `hold_for` (the launcher's pid), the ranks set up, then hold
    until the launcher lets them measure (`MEASURE_FILE`)."""
    # before CUDA or NCCL first look at it (torch's import does not): read when the driver and NCCL initialize
    os.environ.update(plan.environment)
    import torch
    import torch.distributed as dist

    began = time.perf_counter()
    use_cuda = plan.backend != "gloo" and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        torch.zeros(1, device=device)  # the context is made here, not by the first step
    else:
        device = torch.device("cpu")
    device_s = time.perf_counter() - began
    backend = "nccl" if use_cuda else "gloo"
    me = Rank(rank, world, local_rank, device, backend)
    progress = Progress(out, enabled=rank == 0)
    needs_group = any(not isinstance(step, ONE_GPU_STEPS) for step in plan.steps)
    grouped = time.perf_counter()
    if needs_group:
        options = {"device_id": device} if use_cuda else {}
        dist.init_process_group(backend, rank=rank, world_size=world, **options)
        dist.barrier()  # the communicator is made here, not by the first step
    group_s = time.perf_counter() - grouped
    allowed = time.perf_counter()
    if hold_for is not None:
        print(f"{PREPARE_MARK} rank {rank}: device and process group made in {time.perf_counter() - began:.1f} s", flush=True)
        if not _wait_for_file(out / PREPARE_FILE, hold_for):
            sys.stdout.flush()
            os._exit(ORPHANED_EXIT)  # the launcher is gone: nothing to prepare for
    allowed_s = time.perf_counter() - allowed
    prepared = time.perf_counter()
    prepare_steps(plan.steps, me)
    prepare_s = time.perf_counter() - prepared
    held = time.perf_counter()
    if hold_for is not None and needs_group:
        dist.barrier()  # every rank is set up before the launcher hears it
    nccl = ".".join(str(v) for v in torch.cuda.nccl.version()) if use_cuda else None
    progress.emit(
        event="ready",
        backend=backend,
        ranks=world,
        torch=torch.__version__,
        nccl=nccl,
        # where start-up time went: the import (before the go, for a set started ahead), the wait
        # for the go, the CUDA driver's start where it was asked for before the go, the CUDA device
        # and its context, the process group and its communicator, the wait for the launcher's word
        # to prepare, and what the steps prepare before anything is timed
        startup_s={"import": round(import_s, 3), "waited": round(waited_s, 3), "driver before the go": round(driver_s, 3),
                   "device": round(device_s, 3),
                   "group": round(group_s, 3), "waited to prepare": round(allowed_s, 3), "prepare": round(prepare_s, 3),
                   **{f"prepare: {part}": seconds for part, seconds in me.phases.items()}},
        environment={k: v for k, v in sorted(os.environ.items()) if k.startswith(RECORDED_ENVIRONMENT)},
    )
    if hold_for is not None:
        if rank == 0:
            write_atomically(out / SET_UP_FILE, str(os.getpid()))
        if not _wait_for_file(out / MEASURE_FILE, hold_for):  # the launcher is gone: nothing to measure for
            sys.stdout.flush()
            os._exit(ORPHANED_EXIT)
        progress.emit(event="released", held_s=round(time.perf_counter() - held, 3))
    hang_at = plan.drills.hang
    for index, step in enumerate(plan.steps):
        keys = [str(key) for key in step.keys]
        progress.emit(event="start", step=index, label=step.label, keys=keys, timeout_s=step.timeout_s)
        me.on_untimed = lambda index=index, keys=keys: progress.emit(event="untimed", step=index, keys=keys)
        if hang_at is not None and step.is_named(hang_at) and rank == world - 1:
            while True:  # the injected fault: this rank never joins the step's collectives
                time.sleep(3600)
        me.phases = {}
        results = run_step(step, me, plan.drills)
        returned = [record["key"] for record in results]
        if sorted(returned) != sorted(keys):
            raise RuntimeError(f"{step.label} returned values for {', '.join(returned) or 'nothing'}; it measures {', '.join(keys)}")
        progress.emit(event="result", step=index, label=step.label, results=results, phases=me.phases)
    if needs_group:
        dist.barrier()
    # every rank is past its last step: the launcher may now end the processes without waiting for
    # the process group's and CUDA's tear-down
    progress.emit(event="done")
    if hold_for is not None:
        # a set started ahead holds, idle, until the launcher ends it: it may keep the set while
        # another set measures (DDP's A/B arm), where a tear-down of its own would run beside it
        while os.getppid() == hold_for:
            time.sleep(WAIT_POLL_S)
        sys.stdout.flush()
        os._exit(ORPHANED_EXIT)  # the launcher is gone
    if needs_group:
        dist.destroy_process_group()


def prepare_steps(steps: list, me: Rank) -> None:
    """What the steps set up before anything of the plan is timed, on every rank: for DDP, the
    process groups of every world and the model; for the collectives and pairs, NCCL's connections;
    for the copies, every GPU's context and buffers."""
    ddp = [step for step in steps if isinstance(step, DdpStep)]
    if ddp:
        from gpuaccept.measure.ddp_step import prepare_ddp

        prepare_ddp(ddp, me)
    if any(isinstance(step, CollectiveStep | PairwiseStep) for step in steps):
        from gpuaccept.measure.collective_step import prepare_collectives

        prepare_collectives(steps, me)
    copies = [step for step in steps if isinstance(step, CopyStep)]
    if copies and me.cuda:  # without CUDA the step says why it cannot run
        from gpuaccept.measure.copy_step import prepare_copies

        for step in copies:
            prepare_copies(step, me)


def run_step(step, me: Rank, drills: Drills) -> list[dict]:
    """What `step` measured: one record per value, each with its key's string under "key"."""
    if isinstance(step, CollectiveStep):
        from gpuaccept.measure.collective_step import measure_collective

        return measure_collective(step, me, drills)
    if isinstance(step, PairwiseStep):
        from gpuaccept.measure.pairwise_step import measure_pairs

        return measure_pairs(step, me)
    if isinstance(step, CopyStep):
        from gpuaccept.measure.copy_step import measure_copies

        return measure_copies(step, me)
    if isinstance(step, DdpStep):
        from gpuaccept.measure.ddp_step import measure_ddp

        return measure_ddp(step, me)
    if isinstance(step, LOAD_STEPS):
        from gpuaccept.measure.load_steps import measure_load

        return measure_load(step, me, drills)
    if isinstance(step, SustainedRoundStep):
        from gpuaccept.measure.sustained import sustained_round

        return sustained_round(step, me, drills)
    raise ValueError(f"unknown step {step!r}")


if __name__ == "__main__":
    raise SystemExit(main())
