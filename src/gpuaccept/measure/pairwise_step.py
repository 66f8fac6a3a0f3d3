"""Bandwidth between every GPU pair, to name the one weak link or GPU a collective only averages.

Each pair exchanges a buffer both ways at once (NCCL send/receive, like nccl-tests' sendrecv on
two GPUs); busbw is the bytes one way per second. On switch systems disjoint pairs run at once,
in the N-1 rounds of a round-robin schedule; on PCIe trees, where pairs share uplinks and would
slow each other, one pair at a time.
"""

from __future__ import annotations

import functools

from gpuaccept.measure.collective_step import pattern
from gpuaccept.measure.collectives import DTYPE_BYTES
from gpuaccept.measure.plan import PairwiseStep
from gpuaccept.measure.timing import time_operation
from gpuaccept.vocabulary.steps import PairKey


def round_robin(ranks: int) -> list[list[tuple[int, int]]]:
    """Rounds of disjoint pairs covering every pair once (the circle method)."""
    players = list(range(ranks)) + ([None] if ranks % 2 else [])
    rounds = []
    for _ in range(len(players) - 1):
        half = len(players) // 2
        pairs = [(players[i], players[-1 - i]) for i in range(half)]
        rounds.append(sorted((min(a, b), max(a, b)) for a, b in pairs if a is not None and b is not None))
        players = [players[0], players[-1]] + players[1:-1]
    return rounds


def schedule(ranks: int, concurrent: bool, only: list[tuple[int, int]] | None = None) -> list[list[tuple[int, int]]]:
    """The rounds of pairs: every pair (None, or all of them listed), or `only` these (the pairs
    measured again after a miss)."""
    every = [(a, b) for a in range(ranks) for b in range(a + 1, ranks)]
    wanted = every if only is None else sorted({(min(a, b), max(a, b)) for a, b in only})
    if wanted == every:
        return round_robin(ranks) if concurrent else [[pair] for pair in every]
    if not concurrent:
        return [[pair] for pair in wanted]
    rounds: list[list[tuple[int, int]]] = []
    for pair in wanted:  # first round whose pairs share no GPU with this one
        free = next((r for r in rounds if not any(set(pair) & set(other) for other in r)), None)
        if free is None:
            rounds.append([pair])
        else:
            free.append(pair)
    return rounds


def _code(source: int, destination: int) -> int:
    return (source * 8 + destination) % 31 + 1


def measure_pairs(step: PairwiseStep, me) -> list[dict]:
    import torch
    import torch.distributed as dist

    beyond = [str(pair) for pair in step.pairs if pair.b >= me.world]
    if beyond:
        raise ValueError(f"{', '.join(beyond)}: the job has {me.world} ranks (gpu0 to gpu{me.world - 1})")
    dtype = getattr(torch, step.dtype)
    count = step.size_bytes // DTYPE_BYTES[step.dtype]
    values = pattern(count, me.device, dtype)
    send = torch.empty(count, dtype=dtype, device=me.device)
    receive = torch.empty(count, dtype=dtype, device=me.device)
    rounds = schedule(me.world, step.concurrent, [pair.gpus for pair in step.pairs])
    all_pairs = [pair for pairs in rounds for pair in pairs]
    times = torch.zeros(len(all_pairs), dtype=torch.float64, device=me.device)
    wrong = torch.zeros(len(all_pairs), dtype=torch.int64, device=me.device)

    def exchange(peer: int) -> None:
        requests = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, receive, peer)])
        for request in requests:
            request.wait()

    for pairs in rounds:
        mine = next((pair for pair in pairs if me.rank in pair), None)
        if mine is None:
            dist.barrier()  # the timing barrier the others pass through
            continue
        peer = mine[1] if mine[0] == me.rank else mine[0]
        index = all_pairs.index(mine)
        send.copy_(values * _code(me.rank, peer))
        for _ in range(step.warmup):
            exchange(peer)
        times[index] = time_operation(functools.partial(exchange, peer), step.iterations, me)
        receive.fill_(float("nan"))
        exchange(peer)
        wrong[index] = (receive != values * _code(peer, me.rank)).sum()
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    dist.all_reduce(wrong)
    results = []
    for round_index, pairs in enumerate(rounds):
        for pair in pairs:
            index = all_pairs.index(pair)
            seconds = float(times[index].item())
            results.append(
                {
                    "key": str(PairKey(*pair)),
                    "gpus": list(pair),
                    "size_bytes": count * DTYPE_BYTES[step.dtype],
                    "iterations": step.iterations,
                    "time_us": seconds * 1e6,
                    "busbw_GBps": count * DTYPE_BYTES[step.dtype] / seconds / 1e9,
                    "wrong": int(wrong[index].item()),
                    "round": round_index,
                }
            )
    return results
