"""One collective at one size: warm up, time, then check the result as nccl-tests' #wrong does.

Timing: a barrier, then CUDA events around `iterations` back-to-back operations on the rank's
stream (a host clock under gloo, whose operations are synchronous); the time of one operation is
the slowest rank's mean, as one nccl-tests process driving every GPU sees it.

Connections: NCCL connects a communicator's peers lazily, at the first operation that needs them
(an alltoall's first call on four H200s: about a second, far more than its timed iterations; an
NVLink SHARP all_reduce's first call allocates its multicast buffers). `prepare_collectives` makes
one untimed operation of each collective at the smallest size its steps measure, and a small
alltoall where the pairs are measured (their send/receive connections are an alltoall's), while
the workers set up: the set measures with every connection made, as it would after its warm-up.

Validation: a separate, untimed operation on inputs whose exact result is known. The values are
small integers (at most 256, and every partial sum too) so that bf16 sums are exact and any
difference is a real error, not rounding. The output is poisoned with NaN first, so an element
nobody wrote counts as wrong.
"""

from __future__ import annotations

import time

from gpuaccept.measure.collectives import bandwidths, buffers
from gpuaccept.measure.drills import NO_DRILLS, Drills
from gpuaccept.measure.plan import CollectiveStep, PairwiseStep
from gpuaccept.measure.timing import slowest_rank_seconds, time_operation

EXACT_LIMIT = 256  # bf16 holds every integer up to 256


def measure_collective(step: CollectiveStep, me, drills: Drills = NO_DRILLS) -> list[dict]:
    """The drills (measure/drills.py) act here: `wrong` corrupts one element of the last rank's
    result; `dip` (in the plan of a first measurement only) makes every rank run one extra operation
    on every second timed iteration, a third slower, as a one-off dip on a shared machine is;
    `slow_s` makes each timed operation that much longer, as a node with a slow link does to every
    collective it is in."""
    import torch

    dtype = getattr(torch, step.dtype)
    shape = buffers(step.collective, step.size_bytes, me.world, step.dtype)
    inputs = torch.empty(shape.input_elements, dtype=dtype, device=me.device)
    in_place = step.collective in ("all_reduce", "broadcast")
    outputs = inputs if in_place else torch.empty(shape.output_elements, dtype=dtype, device=me.device)
    operation = _operation(step.collective, inputs, outputs, me.group)

    _fill(step.collective, inputs, me)  # time real data, never zeros
    for _ in range(step.warmup):
        operation()
    timed = _with_dip(operation) if _names(drills.dip, step) else operation
    if drills.slow_s:
        timed = _with_delay(timed, drills.slow_s)
    seconds = slowest_rank_seconds(time_operation(timed, step.iterations, me), me)

    _fill(step.collective, inputs, me)
    if not in_place or (step.collective == "broadcast" and me.rank != 0):
        outputs.fill_(float("nan"))
    operation()
    if _names(drills.wrong, step) and me.rank == me.world - 1:
        outputs[0] += 1  # the injected fault: one element of the result is off
    wrong = _count_wrong(step.collective, outputs, shape, me)

    algbw, busbw = bandwidths(step.collective, shape.size_bytes, seconds, me.world)
    (key,) = step.keys
    return [{
        "key": str(key),
        "collective": step.collective,
        "size_bytes": shape.size_bytes,
        "dtype": step.dtype,
        "ranks": me.world,
        "warmup": step.warmup,
        "iterations": step.iterations,
        "time_us": seconds * 1e6,
        "algbw_GBps": algbw,
        "busbw_GBps": busbw,
        "wrong": wrong,
    }]


def prepare_collectives(steps: list, me) -> None:
    """One untimed operation of each collective of `steps` at the smallest size they measure (and an
    alltoall for the pairs' connections), made before anything is timed: see the module's docstring."""
    import torch

    smallest: dict[str, tuple[int, str]] = {}
    for step in steps:
        if isinstance(step, CollectiveStep) and (step.collective not in smallest or step.size_bytes < smallest[step.collective][0]):
            smallest[step.collective] = (step.size_bytes, step.dtype)
    pairwise = [step for step in steps if isinstance(step, PairwiseStep)]
    if pairwise and "alltoall" not in smallest:
        smallest["alltoall"] = (min(step.size_bytes for step in pairwise), pairwise[0].dtype)
    if not smallest:
        return
    with me.phase("connections"):
        for collective, (size, dtype) in smallest.items():
            try:
                shape = buffers(collective, size, me.world, dtype)
                inputs = torch.zeros(shape.input_elements, dtype=getattr(torch, dtype), device=me.device)
                outputs = inputs if collective in ("all_reduce", "broadcast") else torch.empty(
                    shape.output_elements, dtype=inputs.dtype, device=me.device
                )
                _operation(collective, inputs, outputs, me.group)()
            except Exception:
                # left to the step that measures it: it meets the same error and fails by its name
                # and keys, where the set's start-up would fail every step of the stage
                continue
        if me.cuda:
            torch.cuda.synchronize(me.device)
            torch.cuda.empty_cache()  # a held set keeps no buffers beside the stage that measures before it


def _names(drill: str | None, step: CollectiveStep) -> bool:
    return drill is not None and step.is_named(drill)


def _with_dip(operation):
    calls = iter(range(1 << 62))

    def dipped() -> None:
        operation()
        if next(calls) % 2 == 0:
            operation()

    return dipped


def _with_delay(operation, seconds: float):
    def delayed() -> None:
        operation()
        time.sleep(seconds)

    return delayed


def _operation(collective: str, inputs, outputs, group=None):
    import torch.distributed as dist

    # torch 2.13 renames the tensor forms to *_single; older releases have only the old names
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    # broadcast names its source by global rank: the group's first rank
    source = 0 if group is None else dist.get_global_rank(group, 0)
    operations = {
        "all_reduce": lambda: dist.all_reduce(inputs, group=group),
        "broadcast": lambda: dist.broadcast(inputs, src=source, group=group),
        "all_gather": lambda: gather(outputs, inputs, group=group),
        "reduce_scatter": lambda: scatter(outputs, inputs, group=group),
        "alltoall": lambda: dist.all_to_all_single(outputs, inputs, group=group),
    }
    return operations[collective]


def pattern(length: int, device, dtype):
    """1, 2, ... 7, 1, 2, ...: position-dependent, so misplaced data is caught.

    Built by repeating seven values, never through an index tensor: at 4 GiB of bf16 that would be
    16 GiB of int64."""
    import torch

    period = (torch.arange(7, device=device) + 1).to(dtype)
    return period.repeat(-(-length // 7))[:length]


def _reduce_scale(rank: int, ranks: int) -> int:
    """A per-rank factor for reductions that keeps every partial sum exact (<= 256)."""
    if 7 * ranks * (ranks + 1) // 2 <= EXACT_LIMIT:
        return rank + 1
    return 1


def _alltoall_code(source: int, destination: int, ranks: int) -> int:
    return (source * ranks + destination) % 31 + 1  # times at most 7: at most 217


def _fill(collective: str, inputs, me) -> None:
    n = inputs.numel()
    if collective in ("all_reduce", "reduce_scatter"):
        inputs.copy_(pattern(n, me.device, inputs.dtype) * _reduce_scale(me.rank, me.world))
        if 7 * me.world > EXACT_LIMIT:
            inputs.fill_(1)
    elif collective == "broadcast":
        inputs.copy_(pattern(n, me.device, inputs.dtype) * (1 if me.rank == 0 else 3))
    elif collective == "all_gather":
        inputs.copy_(pattern(n, me.device, inputs.dtype) * (me.rank % 8 + 1))
    elif collective == "alltoall":
        chunk = n // me.world
        base = pattern(chunk, me.device, inputs.dtype)
        for destination in range(me.world):
            inputs[destination * chunk : (destination + 1) * chunk] = base * _alltoall_code(me.rank, destination, me.world)


def _expected(collective: str, outputs, shape, me):
    import torch

    n = outputs.numel()
    device, dtype = me.device, outputs.dtype
    if collective == "all_reduce":
        if 7 * me.world > EXACT_LIMIT:
            return torch.full((n,), float(me.world), device=device, dtype=dtype)
        total = sum(_reduce_scale(r, me.world) for r in range(me.world))
        return pattern(n, device, dtype) * total
    if collective == "broadcast":
        return pattern(n, device, dtype)
    if collective == "reduce_scatter":
        chunk = shape.output_elements
        if 7 * me.world > EXACT_LIMIT:
            return torch.full((n,), float(me.world), device=device, dtype=dtype)
        total = sum(_reduce_scale(r, me.world) for r in range(me.world))
        start = me.rank * chunk
        return pattern(start + chunk, device, dtype)[start:] * total
    chunk = n // me.world
    base = pattern(chunk, device, dtype)
    if collective == "all_gather":
        return torch.cat([base * (source % 8 + 1) for source in range(me.world)])
    if collective == "alltoall":
        return torch.cat([base * _alltoall_code(source, me.rank, me.world) for source in range(me.world)])
    raise ValueError(collective)


def _count_wrong(collective: str, outputs, shape, me) -> int:
    import torch
    import torch.distributed as dist

    wrong = (outputs != _expected(collective, outputs, shape, me)).sum().to(torch.int64).reshape(1)
    dist.all_reduce(wrong, group=me.group)
    return int(wrong.item())
