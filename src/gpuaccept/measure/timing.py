"""Timing device work: CUDA events on the rank's stream, a host clock where work is synchronous."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any


def time_operation(operation: Callable[[], object], iterations: int, me) -> float:
    """Mean seconds of one `operation` over `iterations` back-to-back runs, after a barrier."""
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier(group=me.group)
    if me.cuda:
        torch.cuda.synchronize(me.device)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            operation()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / iterations
    began = time.perf_counter()
    for _ in range(iterations):
        operation()
    return (time.perf_counter() - began) / iterations


def slowest_rank_seconds(seconds: float, me) -> float:
    import torch
    import torch.distributed as dist

    if not dist.is_initialized() or me.world == 1:
        return seconds
    value = torch.tensor([seconds], dtype=torch.float64, device=me.device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX, group=me.group)
    return float(value.item())


def phase(me: Any, name: str) -> contextlib.AbstractContextManager[None]:
    """Time a part of a step under `name`, where the rank keeps phases (worker.py's Rank.phase)."""
    timed = getattr(me, "phase", None)
    return timed(name) if timed is not None else contextlib.nullcontext()


def untimed(me: Any) -> None:
    """Say that the step measures no time or rate from here on, where the rank passes that on
    (worker.py's Rank.untimed)."""
    said = getattr(me, "untimed", None)
    if said is not None:
        said()
