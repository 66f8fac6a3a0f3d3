"""One rank of a multi-node job: who it is, the process group of the whole job, and measuring
collectives over all of it or over groups of its nodes.

The launcher is the user's: torchrun (RANK, LOCAL_RANK, GROUP_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
MASTER_ADDR/PORT) or srun (SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, SLURM_NTASKS,
SLURM_NTASKS_PER_NODE, SLURM_JOB_NODELIST, whose first host serves the store). Every rank runs the
same code; the collectives are the single-node ones (`collective_step.measure_collective`), given
the whole job's ranks, or a subgroup's.

Measuring groups of nodes needs every rank, including those outside the groups, since creating a
process group is collective: global rank 0 decides what to measure and broadcasts it
(`Job.measure_groups`), the other ranks follow its orders in `Job.serve` until it says stop.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from gpuaccept.errors import GpuAcceptError
from gpuaccept.measure.drills import NO_DRILLS, Drills
from gpuaccept.measure.plan import CollectiveStep, DdpStep
from gpuaccept.measure.worker import Rank

DEFAULT_PORT = 29500  # torch's own default for MASTER_PORT


class RendezvousError(GpuAcceptError):
    """The job's ranks could not all meet."""


@dataclass(frozen=True)
class Launch:
    rank: int
    world: int
    local_rank: int
    local_world: int
    node: int
    master_addr: str
    master_port: int
    launcher: str  # torchrun | srun | environment


def first_host(nodelist: str) -> str:
    """The first host of a Slurm node list: 'gpu[07-09,12],cpu1' -> 'gpu07'."""
    match = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not match:
        raise RendezvousError(f"SLURM_JOB_NODELIST {nodelist!r} names no host")
    prefix, ranges = match.group(1), match.group(2)
    if not ranges:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0]


def launch_from_environment(env: dict[str, str] | None = None) -> Launch:
    env = dict(os.environ if env is None else env)

    def number(name: str, default: int | None = None) -> int:
        try:
            value = int(env[name]) if name in env or default is None else default
        except KeyError:
            raise RendezvousError(f"{name} is not set: start gpu-accept cluster under torchrun or srun") from None
        except ValueError:
            raise RendezvousError(f"{name}={env[name]!r} is not a number") from None
        if value < 0:
            raise RendezvousError(f"{name}={value} is below 0")
        return value

    launch = _launch(env, number)
    if launch.world < 1 or launch.local_world < 1 or launch.rank >= launch.world or launch.local_rank >= launch.local_world:
        raise RendezvousError(
            f"rank {launch.rank} of {launch.world}, local rank {launch.local_rank} of {launch.local_world}: "
            f"not a rank of this job (the {launch.launcher} variables disagree)"
        )
    _refuse_a_meeting_place_that_cannot_be(launch)
    return launch


def _refuse_a_meeting_place_that_cannot_be(launch: Launch) -> None:
    """Where the ranks meet, checked before any rank waits there: a port beyond TCP's, an empty
    host or one that does not resolve would only end the rendezvous after its whole time limit (and
    torch's C++ stack traces before the line that says why)."""
    if not 1 <= launch.master_port <= 65535:
        raise RendezvousError(f"MASTER_PORT={launch.master_port} is not a TCP port (1 to 65535): no rank can meet there")
    if not launch.master_addr.strip():
        raise RendezvousError("MASTER_ADDR is empty: name the host the ranks meet at (torchrun and srun set it)")
    try:
        socket.getaddrinfo(launch.master_addr, launch.master_port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as error:  # socket.gaierror; a name IDNA cannot encode
        why = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise RendezvousError(f"MASTER_ADDR={launch.master_addr!r} does not resolve ({why}): no rank can meet there") from None


def _launch(env: dict[str, str], number: Callable[..., int]) -> Launch:
    if "RANK" in env and "GROUP_RANK" in env:
        return Launch(number("RANK"), number("WORLD_SIZE"), number("LOCAL_RANK"), number("LOCAL_WORLD_SIZE"), number("GROUP_RANK"),
                      env.get("MASTER_ADDR", "127.0.0.1"), number("MASTER_PORT", DEFAULT_PORT), "torchrun")
    if "SLURM_PROCID" in env:
        given = env.get("SLURM_NTASKS_PER_NODE", "").split("(")[0]
        tasks_per_node = int(given) if given.isdigit() else number("SLURM_NTASKS") // max(1, number("SLURM_NNODES"))
        master = env.get("MASTER_ADDR") or first_host(env.get("SLURM_JOB_NODELIST", ""))
        return Launch(number("SLURM_PROCID"), number("SLURM_NTASKS"), number("SLURM_LOCALID"), tasks_per_node,
                      number("SLURM_NODEID"), master, number("MASTER_PORT", DEFAULT_PORT), "srun")
    if "RANK" in env:  # set by hand, as the tests do: nodes are consecutive blocks of LOCAL_WORLD_SIZE ranks
        rank, local_world = number("RANK"), max(1, number("LOCAL_WORLD_SIZE"))
        return Launch(rank, number("WORLD_SIZE"), number("LOCAL_RANK", rank % local_world), number("LOCAL_WORLD_SIZE"),
                      number("GROUP_RANK", rank // local_world), env.get("MASTER_ADDR", "127.0.0.1"),
                      number("MASTER_PORT", DEFAULT_PORT), "environment")
    raise RendezvousError("no RANK or SLURM_PROCID in the environment: start gpu-accept cluster under torchrun or srun")


_CAPTURE_BEGAN: list[float] = []  # when this process first asked for NCCL's lines
# an earlier file in a folder the user chose counts as this run's if written this close to its
# start: the folder may be on another machine (NFS), whose clock runs apart from this one's
CLOCK_SLACK_S = 60.0
OUR_NCCL_FILES = "nccl.%h.%p.log"


def nccl_host() -> str:
    """The host as NCCL writes it for %h in NCCL_DEBUG_FILE: the name up to its first dot."""
    return socket.gethostname().split(".")[0]


def capture_nccl_info(folder: Path) -> list[Path]:
    """Ask NCCL for its INFO lines, one file per process: in `folder`, unless the user already sends
    them elsewhere (NCCL_DEBUG_FILE), whose files are kept where they are and read there. Returns
    the files this node's ranks wrote so far: of this host, and of this run."""
    first_call = not _CAPTURE_BEGAN
    if first_call:
        _CAPTURE_BEGAN.append(time.time())
    ours = str(folder / OUR_NCCL_FILES)
    if "NCCL_DEBUG_FILE" not in os.environ:
        folder.mkdir(parents=True, exist_ok=True)
        os.environ["NCCL_DEBUG_FILE"] = ours
    if os.environ.get("NCCL_DEBUG", "").upper() not in ("INFO", "TRACE"):
        os.environ["NCCL_DEBUG"] = "INFO"  # the transport NCCL chose is in its INFO lines only
    pattern = nccl_files_pattern(os.environ["NCCL_DEBUG_FILE"], nccl_host())
    if os.environ["NCCL_DEBUG_FILE"] == ours:
        if first_call:  # an earlier run's files in the same reports folder: never this run's
            for stale in glob.glob(pattern):
                with contextlib.suppress(OSError):
                    os.unlink(stale)
        return sorted(Path(name) for name in glob.glob(pattern))
    found = []
    for name in sorted(glob.glob(pattern)):
        with contextlib.suppress(OSError):  # a file another job removed meanwhile
            if os.stat(name).st_mtime >= _CAPTURE_BEGAN[0] - CLOCK_SLACK_S:
                found.append(Path(name))
    return found


def nccl_files_pattern(debug_file: str, host: str) -> str:
    """The glob of the files NCCL_DEBUG_FILE names on `host`: NCCL's %h is the host, any other %
    code (%p the process) matches anything, and every other character is itself. A folder named
    `run[1]` is that folder, not `run1`, whose files (another run's) would be read and deleted."""
    parts = re.split(r"(%[a-zA-Z])", debug_file)
    return "".join(
        glob.escape(host) if part == "%h" else "*" if re.fullmatch(r"%[a-zA-Z]", part) else glob.escape(part) for part in parts
    )


def gpu_bus_ids(count: int) -> list[str]:
    """The PCI addresses of this node's first `count` GPUs, as CUDA numbers them; [] where CUDA is
    absent or this torch does not report them (its GPU-NIC checks then say the path was not read)."""
    import torch

    if not torch.cuda.is_available():
        return []
    ids = []
    for index in range(min(count, torch.cuda.device_count())):
        props = torch.cuda.get_device_properties(index)
        # attributes of recent torch's device properties, absent from its type stubs
        parts = [getattr(props, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
        if None in parts:
            return []
        domain, bus, device = parts
        ids.append(f"{domain:04x}:{bus:02x}:{device:02x}.0")
    return ids


@dataclass
class Job:
    launch: Launch
    me: Rank
    layout: dict[int, list[int]]  # node -> its global ranks
    hosts: dict[int, str]  # node -> host name
    torch_version: str
    nccl_version: str | None
    timeout: timedelta
    drills: Drills = NO_DRILLS  # this node's (measure/drills.py): `slow_s` makes it the slow node

    @property
    def nodes(self) -> int:
        return len(self.layout)

    def ranks_of(self, nodes: tuple[int, ...]) -> list[int]:
        return sorted(rank for node in nodes for rank in self.layout[node])

    def measure(self, step: CollectiveStep) -> dict:
        from gpuaccept.measure.collective_step import measure_collective

        (record,) = measure_collective(step, self.me, self.drills)
        return record

    def measure_ddp(self, step: DdpStep) -> list[dict[str, Any]]:
        """Every rank: DDP on the job's first `step.world` ranks (the job's default group is the
        whole job, as the single-node worker's is)."""
        from gpuaccept.measure.ddp_step import measure_ddp

        return measure_ddp(step, self.me)

    def broadcast(self, value: Any) -> Any:
        """Rank 0's `value` (JSON-able) on every rank, through the job's control group."""
        import torch
        import torch.distributed as dist

        data = json.dumps(value).encode() if self.me.rank == 0 else b""
        length = torch.tensor([len(data)], dtype=torch.int64, device=self.me.device)
        dist.broadcast(length, src=0)
        buffer = _bytes_tensor(data, int(length.item()), self.me.device)
        dist.broadcast(buffer, src=0)
        return json.loads(bytes(buffer.cpu().tolist()).decode())

    def gather(self, value: Any) -> list[Any]:
        """Every rank's `value` (JSON-able), in rank order, on every rank."""
        import torch
        import torch.distributed as dist

        data = json.dumps(value).encode()
        length = torch.tensor([len(data)], dtype=torch.int64, device=self.me.device)
        lengths = [torch.zeros_like(length) for _ in range(self.me.world)]
        dist.all_gather(lengths, length)
        longest = max(int(item.item()) for item in lengths)
        buffers = [torch.zeros(longest, dtype=torch.uint8, device=self.me.device) for _ in range(self.me.world)]
        dist.all_gather(buffers, _bytes_tensor(data, longest, self.me.device))
        sizes = [int(size.item()) for size in lengths]
        return [json.loads(bytes(buffer.cpu().tolist()[:size]).decode()) for buffer, size in zip(buffers, sizes, strict=True)]

    def measure_groups(self, groups: list[tuple[int, ...]], step: CollectiveStep) -> dict[tuple[int, ...], dict]:
        """Rank 0: measure `step` over each group of nodes at once (every rank takes part)."""
        self.broadcast((groups, step.model_dump_json()))
        return self._measure_groups(groups, step)

    def serve(self) -> None:
        """Every rank but 0: measure what rank 0 orders, until it says stop."""
        while True:
            order = self.broadcast(None)
            if order is None:
                return
            groups, step_json = order
            self._measure_groups([tuple(group) for group in groups], CollectiveStep.model_validate_json(step_json))

    def stop_serving(self) -> None:
        self.broadcast(None)

    def _measure_groups(self, groups: list[tuple[int, ...]], step: CollectiveStep) -> dict[tuple[int, ...], dict]:
        import torch.distributed as dist

        mine: tuple[Any, tuple[int, ...]] | None = None
        made = []
        for group in groups:  # every rank creates every group, in the same order
            ranks = self.ranks_of(group)
            handle = dist.new_group(ranks, timeout=self.timeout)
            made.append(handle)
            if self.me.rank in ranks:
                mine = (handle, group)
        record = None
        if mine is not None:
            handle, group = mine
            ranks = self.ranks_of(group)
            member = Rank(ranks.index(self.me.rank), len(ranks), self.me.local_rank, self.me.device, self.me.backend, handle)
            from gpuaccept.measure.collective_step import measure_collective

            (record,) = measure_collective(step, member, self.drills)
            record = record if member.rank == 0 else None
        everything = self.gather((mine[1], record) if record is not None and mine is not None else None)
        for handle in made:
            dist.destroy_process_group(handle)
        return {tuple(group): found for item in everything if item is not None for group, found in [item]}

    def close(self) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def _bytes_tensor(data: bytes, length: int, device: Any) -> Any:
    """`data` padded to `length` as a uint8 tensor: objects travel as JSON bytes, which needs no
    pickle and no numpy (torch's *_object collectives need both)."""
    import torch

    buffer = torch.zeros(length, dtype=torch.uint8, device=device)
    if data:
        buffer[: len(data)] = torch.tensor(list(data), dtype=torch.uint8, device=device)
    return buffer


def join_failure(launch: Launch, rendezvous_s: float, exc: Exception) -> RendezvousError:
    """Why this rank could not join, in one line: the ranks never all met (the store timed out), or
    they met and NCCL could not connect them (its first WARN line for this process says why)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    where = f"rank {launch.rank} of {launch.world}"
    if type(exc).__name__ == "DistBackendError" or "NCCL error" in first:
        said = nccl_warning(os.getpid())
        return RendezvousError(f"{where}: NCCL could not connect the job's ranks: {said or first}")
    at = f"{launch.master_addr}:{launch.master_port}"
    return RendezvousError(f"{where}: not every rank joined at {at} within {rendezvous_s:.0f} s ({first})")


def nccl_warning(pid: int) -> str | None:
    """The first `NCCL WARN` line of process `pid`, from the file capture_nccl_info sent NCCL's lines to."""
    pattern = os.environ.get("NCCL_DEBUG_FILE")
    if not pattern:
        return None
    path = Path(pattern.replace("%h", nccl_host()).replace("%p", str(pid)))
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return next((line.split("NCCL WARN", 1)[1].strip() for line in lines if "NCCL WARN" in line), None)


def join(launch: Launch, backend: str, rendezvous_s: float, timeout_s: float, drills: Drills = NO_DRILLS) -> Job:
    """Join the job's process group: every rank of every node, or a `RendezvousError` in one line
    once `rendezvous_s` passed without them all."""
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR=launch.master_addr, MASTER_PORT=str(launch.master_port),
                      RANK=str(launch.rank), WORLD_SIZE=str(launch.world))
    use_cuda = backend != "gloo" and torch.cuda.is_available()
    device = torch.device("cuda", launch.local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    name = "nccl" if use_cuda else "gloo"
    try:
        # the rendezvous and the control messages between ranks are bound by rendezvous_s; the
        # collectives measured, on a group of their own, by timeout_s
        dist.init_process_group(name, timeout=timedelta(seconds=rendezvous_s), **({"device_id": device} if use_cuda else {}))
        everyone = dist.new_group(list(range(launch.world)), timeout=timedelta(seconds=timeout_s))
        me = Rank(launch.rank, launch.world, launch.local_rank, device, name, everyone)
        nccl = ".".join(map(str, torch.cuda.nccl.version())) if use_cuda else None
        job = Job(launch, me, {}, {}, torch.__version__, nccl, timedelta(seconds=timeout_s), drills)
        placed = job.gather((launch.node, launch.rank, socket.gethostname()))
    except Exception as exc:  # torch's store errors are RuntimeErrors of many names
        raise join_failure(launch, rendezvous_s, exc) from None
    for node, rank, host in placed:
        job.layout.setdefault(node, []).append(rank)
        job.hosts[node] = host
    return job
