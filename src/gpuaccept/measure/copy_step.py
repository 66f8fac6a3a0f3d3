"""Copy-engine bandwidth, in one process that sees every GPU.

- p2p: one GPU's buffer copied into another's (cudaMemcpyPeer through torch), per ordered pair;
- p2p_bidirectional: both directions of a pair at once, bytes of both directions counted;
- local: a copy within one GPU, bytes counted once;
- host_to_device / device_to_host: pinned host memory to and from each GPU: the PCIe link under
  load, which catches a link that trained down (x8, Gen3) while idle readings looked right. Their
  copies may be smaller than the others (`host_size_bytes`, the profile's copies.host_size): a
  PCIe link's 55 GB/s is reached with far less than the GiB a copy over NVLink needs, and each
  GPU's host copies run alone, one GPU after another, so their size is paid once a GPU.

Each copy is checked: the destination must equal the source afterwards.

With `concurrent` (switch systems, where disjoint pairs share no link), the copies between GPUs run
in the rounds of a round-robin schedule, disjoint pairs at once: every pair's one-way copy of a
round in one direction, then the other, then its bidirectional copies. The copies of a GPU pair grow
with the square of the GPU count (56 ordered pairs on 8 GPUs), the rounds with the count (14). Each
copy is still timed on its own: CUDA events on the stream it runs on (torch issues a copy between
GPUs on the source GPU's current stream), a bidirectional copy's from its first stream's start to
the later of its two streams' ends. One at a time, a copy is timed by the host clock between full
synchronizations, as before.

What the copies need is made before anything is timed (`prepare_copies`, while the worker sets
up): a CUDA context on every GPU, each GPU's source and target buffers, one pinned host buffer, and
peer access between every pair (torch enables it at a pair's first copy). The host buffer serves
both directions, one copy at a time: each GPU's copy to the host lands where the next GPU's copy
from the host is read, and each is checked against what the buffer held. Pinning a GiB took
0.5-0.6 s on lent 4xH200s (bench/copy_setup.py), on the run's path: a second buffer would double it,
and a host copy's own size (the first part of each GPU's buffers) shortens it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gpuaccept.measure.pairwise_step import schedule
from gpuaccept.measure.plan import CopyStep
from gpuaccept.vocabulary.copies import HOST_COPIES, CopyKind
from gpuaccept.vocabulary.steps import CopyKey


@dataclass
class _Buffers:
    sources: list  # each GPU's random bytes
    targets: list  # each GPU's landing buffer
    host: object | None  # pinned, first filled from gpu0's bytes: read by each copy to a GPU, written by each copy from one


_PREPARED: dict[tuple[int, int], _Buffers] = {}  # by size and host copies' size (0: none asked): made once in this process


def prepare_copies(step: CopyStep, me) -> None:
    """Every GPU's context and buffers, the pinned host buffers and peer access between every pair,
    made now (the worker's set-up) rather than inside the step; where the step cannot run (a copy of
    a GPU this process does not see), nothing: the step says why."""
    import torch

    if all(max(key.gpus) < torch.cuda.device_count() for key in step.copies):
        _buffers(step)


def _buffers(step: CopyStep) -> _Buffers:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("copy bandwidth needs CUDA devices")
    gpus = torch.cuda.device_count()
    beyond = [str(key) for key in step.copies if max(key.gpus) >= gpus]
    if beyond:
        raise ValueError(f"{', '.join(beyond)}: this process sees {gpus} GPU(s)")
    kinds = {key.what for key in step.copies}
    host_copies = bool(kinds & set(HOST_COPIES))
    key = (step.size_bytes, step.host_bytes if host_copies else 0)
    if key in _PREPARED:
        return _PREPARED[key]
    size = step.size_bytes
    sources = [_random_bytes(size, torch.device("cuda", g)) for g in range(gpus)]
    targets = [torch.empty(size, dtype=torch.uint8, device=torch.device("cuda", g)) for g in range(gpus)]
    host = None
    if host_copies:
        # pinned from the start, filled from a GPU's random bytes: random numbers drawn on the CPU
        # and then pinned cost seconds per GiB
        host = torch.empty(step.host_bytes, dtype=torch.uint8, pin_memory=True).copy_(sources[0][: step.host_bytes])
    for a, b in {key.gpus for key in step.copies if len(key.gpus) == 2}:
        targets[b][:1].copy_(sources[a][:1])  # a byte each way: torch enables peer access at a pair's first copy
        targets[a][:1].copy_(sources[b][:1])
    for g in range(gpus):
        torch.cuda.synchronize(g)
    _PREPARED[key] = _Buffers(sources, targets, host)
    return _PREPARED[key]


def measure_copies(step: CopyStep, me) -> list[dict]:
    import torch

    buffers = _buffers(step)  # made already where the worker prepared its steps
    gpus = torch.cuda.device_count()
    wanted = set(step.copies)
    kinds = {key.what for key in wanted}
    size = step.size_bytes
    sources, targets = buffers.sources, buffers.targets
    results = []

    def differ(destination, source) -> int:
        return int((destination != source.to(destination.device)).sum().item())

    def measured(what: CopyKind, devices: tuple[int, ...], bytes_per_s: float, wrong: int) -> dict:
        return {"key": str(CopyKey(what, devices)), "what": what, "gpus": list(devices),
                "size_bytes": step.host_bytes if what in HOST_COPIES else size,
                "iterations": step.iterations, "GBps": bytes_per_s / 1e9, "wrong": wrong}

    def record(what: CopyKind, devices: tuple[int, ...], copies: list, moved: int, check) -> None:
        key = CopyKey(what, devices)
        if key not in wanted:
            return
        for _ in range(step.warmup):
            _run(copies, devices)
        seconds = _timed(copies, devices, step.iterations)
        wrong = check()  # after the copies: the destination must hold the source
        results.append(measured(what, devices, moved / seconds, wrong))

    def record_together(what: CopyKind, round_index: int, together: list[_Together]) -> None:
        together = [copy for copy in together if CopyKey(what, copy.gpus) in wanted]
        if not together:
            return
        devices = tuple(sorted({gpu for copy in together for gpu in copy.gpus}))
        issue_all = [copy.issue for copy in together]
        for _ in range(step.warmup):
            _run(issue_all, devices)
        seconds = _timed_each(together, devices, step.iterations)
        at_once = round_index if len(together) > 1 else None  # a copy alone in its round (2 GPUs, a copy measured again) ran alone
        for copy, taken in zip(together, seconds, strict=True):
            results.append({**measured(what, copy.gpus, copy.moved / taken, copy.check()), "round": at_once})

    if "local" in kinds:
        for g in range(gpus):
            record("local", (g,), [lambda g=g: targets[g].copy_(sources[g])], size, lambda g=g: differ(targets[g], sources[g]))
    if kinds & set(HOST_COPIES):
        host, moved = buffers.host, step.host_bytes
        for g in range(gpus):
            # one buffer both ways: a GPU's copy from the host reads what the copy before it left there
            landing, source = targets[g][:moved], sources[g][:moved]
            if "host_to_device" in kinds:
                copy = [lambda landing=landing: landing.copy_(host, non_blocking=True)]
                record("host_to_device", (g,), copy, moved, lambda landing=landing: differ(landing, host))
            if "device_to_host" in kinds:
                copy = [lambda source=source: host.copy_(source, non_blocking=True)]
                record("device_to_host", (g,), copy, moved, lambda source=source: differ(source, host))

    def one_way(a: int, b: int) -> _Together:
        return _Together(
            (a, b), lambda: targets[b].copy_(sources[a], non_blocking=True), [torch.cuda.current_stream(a)], size,
            lambda: differ(targets[b], sources[a]),
        )

    streams = [torch.cuda.Stream(device=torch.device("cuda", g)) for g in range(gpus)]

    def both_ways(a: int, b: int) -> _Together:
        def issue() -> None:
            _on_stream(streams[a], lambda: targets[b].copy_(sources[a], non_blocking=True))
            _on_stream(streams[b], lambda: targets[a].copy_(sources[b], non_blocking=True))

        check = lambda: differ(targets[b], sources[a]) + differ(targets[a], sources[b])  # noqa: E731
        return _Together((a, b), issue, [streams[a], streams[b]], 2 * size, check)

    if "p2p" in kinds:
        if step.concurrent:
            for index, pairs in enumerate(schedule(gpus, True)):
                record_together("p2p", index, [one_way(a, b) for a, b in pairs])
                record_together("p2p", index, [one_way(b, a) for a, b in pairs])
        else:
            for a in range(gpus):
                for b in range(gpus):
                    if a != b:
                        alone = one_way(a, b)
                        record("p2p", (a, b), [alone.issue], size, alone.check)
    if "p2p_bidirectional" in kinds:
        if step.concurrent:
            for index, pairs in enumerate(schedule(gpus, True)):
                record_together("p2p_bidirectional", index, [both_ways(a, b) for a, b in pairs])
        else:
            for a in range(gpus):
                for b in range(a + 1, gpus):
                    alone = both_ways(a, b)
                    record("p2p_bidirectional", (a, b), [alone.issue], 2 * size, alone.check)
    return results


@dataclass
class _Together:
    """One copy of a round whose copies run at once: its GPUs, how one iteration of it is issued,
    the streams it runs on (the first one's events time it), the bytes it moves, its check."""

    gpus: tuple[int, int]
    issue: Callable[[], object]
    streams: list
    moved: int
    check: Callable[[], int]


def _random_bytes(size: int, device):
    import torch

    return torch.randint(0, 256, (size,), dtype=torch.uint8, device=device)


def _on_stream(stream, work) -> None:
    import torch

    with torch.cuda.stream(stream):
        work()


def _run(copies: list, devices: tuple[int, ...]) -> None:
    for copy in copies:
        copy()
    _synchronize(devices)


def _timed(copies: list, devices: tuple[int, ...], iterations: int) -> float:
    # a host clock between full synchronizations: a copy between two GPUs runs on one device's
    # stream and is awaited on the other's, so no single pair of events brackets it
    _synchronize(devices)
    began = time.perf_counter()
    for _ in range(iterations):
        for copy in copies:
            copy()
    _synchronize(devices)
    return (time.perf_counter() - began) / iterations


def _timed_each(together: list[_Together], devices: tuple[int, ...], iterations: int) -> list[float]:
    """Each copy's mean seconds an iteration, the copies issued together: events on its first
    stream, whose start its other stream waits for and whose end waits for its other stream."""
    import torch

    _synchronize(devices)
    starts, ends = [], []
    for copy in together:
        first, *others = copy.streams
        start = torch.cuda.Event(enable_timing=True)
        start.record(first)
        for other in others:
            other.wait_event(start)
        starts.append(start)
    for _ in range(iterations):
        for copy in together:
            copy.issue()
    for copy in together:
        first, *others = copy.streams
        for other in others:
            done = torch.cuda.Event()
            done.record(other)
            first.wait_event(done)
        end = torch.cuda.Event(enable_timing=True)
        end.record(first)
        ends.append(end)
    for end in ends:
        end.synchronize()
    return [start.elapsed_time(end) / 1e3 / iterations for start, end in zip(starts, ends, strict=True)]


def _synchronize(devices: tuple[int, ...]) -> None:
    import torch

    for device in devices:
        torch.cuda.synchronize(device)
