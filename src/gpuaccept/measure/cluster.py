"""One rank of a multi-node job: who it is, the process group of the whole job, and measuring
collectives over all of it or over groups of its nodes.

The launcher is the user's: torchrun or srun, whose variables say who a rank is (ranks.py). Every rank runs the
same code; the collectives are the single-node ones (`collective_step.measure_collective`), given
the whole job's ranks, or a subgroup's.

Measuring groups of nodes needs every rank, including those outside the groups, since creating a
process group is collective: global rank 0 decides what to measure and broadcasts it
(`Job.measure_groups`), the other ranks follow its orders in `Job.serve` until it says stop.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from gpuaccept.measure.drills import NO_DRILLS, Drills
from gpuaccept.measure.nccl_logs import nccl_host
from gpuaccept.measure.plan import CollectiveStep, DdpStep
from gpuaccept.measure.ranks import Launch, RendezvousError, launch_of
from gpuaccept.measure.worker import Rank


def launch_from_environment(env: Mapping[str, str] | None = None) -> Launch:
    """This rank of the job, as its launcher's variables describe it (ranks.py), with the place its
    ranks meet checked before any of them waits there."""
    launch = launch_of(os.environ if env is None else env)
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
