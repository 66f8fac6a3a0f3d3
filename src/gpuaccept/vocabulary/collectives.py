"""The collectives measured, by the names torch.distributed and nccl-tests give them."""

from __future__ import annotations

from typing import Literal, get_args

Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast"]
COLLECTIVES: tuple[Collective, ...] = get_args(Collective)
