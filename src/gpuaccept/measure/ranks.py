"""Who a rank is, from its launcher's variables: torchrun's (RANK, LOCAL_RANK, GROUP_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, MASTER_ADDR/PORT), srun's (SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, SLURM_NTASKS,
SLURM_NTASKS_PER_NODE, SLURM_JOB_NODELIST, whose first host serves the store), or set by hand as
gpu-accept's own launcher sets them for its workers (launch.py: RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE). One reader for a measurement worker of one host (worker.py) and for each rank of
a cluster job (cluster.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gpuaccept.errors import GpuAcceptError

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


def launch_of(env: Mapping[str, str]) -> Launch:
    """The rank its launcher's variables describe; RendezvousError, in one line, where they are
    missing, not numbers, or disagree."""
    env = dict(env)

    def number(name: str, default: int | None = None) -> int:
        try:
            value = int(env[name]) if name in env or default is None else default
        except KeyError:
            raise RendezvousError(f"{name} is not set: start it under torchrun or srun") from None
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
    return launch


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
    raise RendezvousError("no RANK or SLURM_PROCID in the environment: start it under torchrun or srun")
