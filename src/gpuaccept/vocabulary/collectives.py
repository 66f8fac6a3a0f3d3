"""The collectives measured, by the names torch.distributed and nccl-tests give them."""

from __future__ import annotations

from typing import Literal, get_args

Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast"]
COLLECTIVES: tuple[Collective, ...] = get_args(Collective)


def bus_factor(collective: str, ranks: int) -> float:
    if collective == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return (ranks - 1) / ranks
    if collective in ("broadcast", "sendrecv"):
        return 1.0
    raise ValueError(f"unknown collective {collective!r}")
