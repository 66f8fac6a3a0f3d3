"""DDP throughput of the GPT workload on the first `world` ranks of the job.

Before anything is timed (`prepare_ddp`, while the ranks set up), every rank of the job creates the
subgroup of each world size (torch requires it) and makes its communicator, and each rank builds
the model once, on its device: one model serves every world size, each world wrapping it in DDP of
its own (whose construction gives every rank of the world rank 0's weights) with a fresh optimizer.
A world of all the job's ranks trains on the job's own group; the ranks outside a world wait.
Each batch setting is trained in turn. Steps are timed one by one after warm-up steps (CUDA events
between steps, so nothing waits on the host) on every rank of the subgroup; a rank's median step
counts, so one step slowed by a neighbour's burst is not believed, and the slowest rank's median is
the result. The same steps are then timed inside `no_sync()`, where DDP skips the gradient
all-reduce: the difference is the communication that compute did not hide, a small difference of
two times, which is why both are medians.
"""

from __future__ import annotations

import contextlib
import itertools
import statistics
import time

from gpuaccept.measure.gpt import build
from gpuaccept.measure.plan import DdpStep
from gpuaccept.vocabulary.gpt import GptDims

# what a worker process prepared for its DDP steps: the model by its dimensions and type, the
# process group of each world size (None for one GPU)
_MODELS: dict[tuple[str, str], object] = {}
_GROUPS: dict[int, object] = {}


def prepare_ddp(steps: list[DdpStep], me) -> None:
    """The process group of each step's world, made on every rank of the job with its communicator,
    then the model on the ranks of any of those worlds: each made once in this process. Groups
    first: making one is a collective of every rank, which would otherwise wait for each world's
    ranks to build their model, one world after another."""
    with me.phase("groups"):
        for step in steps:
            if step.world > me.world:
                raise ValueError(f"DDP on {step.world} GPUs needs {step.world} ranks; the job has {me.world}")
            _group_of(step, me)
    for step in steps:
        if me.rank < step.world:
            _model_of(step, me)


def _group_of(step: DdpStep, me):
    import torch
    import torch.distributed as dist

    if step.world not in _GROUPS:
        if step.world == 1:
            group = None
        elif step.world == me.world:
            group = dist.group.WORLD  # the job's own group: its communicator is made already
        else:
            group = dist.new_group(list(range(step.world)))
            if me.rank < step.world:  # its communicator made now: torch would make it at the world's first collective
                dist.all_reduce(torch.zeros(1, device=me.device), group=group)
        _GROUPS[step.world] = group
    return _GROUPS[step.world]


def _model_of(step: DdpStep, me):
    import torch

    key = (step.model.model_dump_json(), step.dtype)
    if key not in _MODELS:
        torch.manual_seed(1234 + me.rank)
        with me.phase("model"), torch.device(me.device):  # initialized where it trains: a CPU initialization of 350M weights takes seconds
            model = build(step.model)
        with me.phase("first step"):
            _first_step(model, step, me)
        _MODELS[key] = model
    return _MODELS[key]


def _first_step(model, step: DdpStep, me) -> None:
    """One training step of this rank alone, with an optimizer let go after it: what a process pays
    once (its kernels loaded, cuBLAS and attention set up) is paid here, by every rank at once,
    instead of by the ranks new to each world during that world's warm-up, one world after another.
    Each world still has its own warm-up steps before its timed ones."""
    import torch
    from torch.nn import functional as F

    shape = step.model
    tokens = torch.randint(0, shape.vocab, (min(step.batches), shape.seq_len + 1), device=me.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=me.cuda)
    with torch.autocast(me.device.type, dtype=torch.bfloat16, enabled=me.cuda and step.dtype == "bfloat16"):
        logits = model(tokens[:, :-1])
    F.cross_entropy(logits.float().reshape(-1, shape.vocab), tokens[:, 1:].reshape(-1)).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    del optimizer, logits
    if me.cuda:
        torch.cuda.synchronize(me.device)
        torch.cuda.empty_cache()  # what the step held beyond the model is let go: a set that holds keeps the model alone


def measure_ddp(step: DdpStep, me) -> list[dict]:
    import torch
    import torch.distributed as dist

    prepare_ddp([step], me)  # made already where the worker prepared its steps
    group = _group_of(step, me)
    shape = step.model
    trainer = None
    if me.rank < step.world:
        with me.phase(f"{step.label}: wrap"):
            trainer = _Trainer(_model_of(step, me), shape, step, group, me)
    results = []
    for batch in step.batches:
        for accumulation in step.accumulation:
            timings = torch.zeros(2, dtype=torch.float64, device=me.device)
            if trainer is not None:
                synced, unsynced = trainer.time(batch, accumulation)
                timings[0], timings[1] = synced, unsynced or 0.0
            with me.phase(f"{step.label}: waiting for the slowest rank"):
                dist.all_reduce(timings, op=dist.ReduceOp.MAX)
                step_s, no_sync_s = float(timings[0].item()), float(timings[1].item())
            samples = batch * accumulation
            results.append(
                {
                    "key": str(step.key(batch, accumulation)),
                    "world": step.world,
                    "batch": batch,
                    "accumulation": accumulation,
                    "step_s": step_s,
                    "no_sync_step_s": no_sync_s if group is not None and step.no_sync else None,
                    "samples_per_s_per_gpu": samples / step_s,
                    "tokens_per_s_per_gpu": samples * shape.seq_len / step_s,
                    "parameters": shape.parameters(),
                }
            )
    if trainer is not None:
        trainer.close()
    return results


class _Trainer:
    """The process's model wrapped for one world size, with an optimizer of its own (a fresh one:
    the optimizer state of another world's ranks would make the ranks' weights drift apart)."""

    def __init__(self, model, shape: GptDims, step: DdpStep, group, me):
        import torch
        from torch.nn.parallel import DistributedDataParallel

        self.shape, self.step, self.group, self.me = shape, step, group, me
        self.model = model
        self.trained = model
        if group is not None:
            self.trained = DistributedDataParallel(model, device_ids=[me.local_rank] if me.cuda else None, process_group=group)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=me.cuda)
        self.mixed = me.cuda and step.dtype == "bfloat16"

    def time(self, batch: int, accumulation: int) -> tuple[float, float | None]:
        import torch
        import torch.distributed as dist
        from torch.nn import functional as F

        shape, step, group, me = self.shape, self.step, self.group, self.me
        tokens = torch.randint(0, shape.vocab, (batch, shape.seq_len + 1), device=me.device)
        inputs, targets = tokens[:, :-1], tokens[:, 1:]

        def one_step(synchronize_gradients: bool = True) -> None:
            for micro in range(accumulation):
                last = micro == accumulation - 1
                skip_sync = group is not None and (not last or not synchronize_gradients)
                with self.trained.no_sync() if skip_sync else contextlib.nullcontext():
                    with torch.autocast(me.device.type, dtype=torch.bfloat16, enabled=self.mixed):
                        logits = self.trained(inputs)
                    loss = F.cross_entropy(logits.float().reshape(-1, shape.vocab), targets.reshape(-1))
                    loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)

        def timed(synchronize_gradients: bool) -> float:
            if group is not None:
                dist.barrier(group=group)
            _synchronize(me)
            marks = [_mark(me)]
            for _ in range(step.steps):
                one_step(synchronize_gradients)
                marks.append(_mark(me))
            _synchronize(me)
            return statistics.median(_seconds_between(a, b, me) for a, b in itertools.pairwise(marks))

        label = f"{step.label}: bs{batch}" + (f"-acc{accumulation}" if accumulation > 1 else "")
        with me.phase(f"{label}: warm-up"):
            for _ in range(step.warmup_steps):
                one_step()
            _synchronize(me)
        with me.phase(f"{label}: timed"):
            synced = timed(True)
        unsynced = None
        if group is not None and step.no_sync:
            with me.phase(f"{label}: timed without sync"):
                unsynced = timed(False)
        return synced, unsynced

    def close(self) -> None:
        """The DDP wrapper and the optimizer let go (its hooks leave the model with it); the model stays for the next world."""
        import gc

        del self.trained, self.optimizer
        gc.collect()


def _mark(me):
    """A point in the rank's work: a CUDA event on its stream, or the host clock on CPU."""
    import torch

    if not me.cuda:
        return time.perf_counter()
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


def _seconds_between(start, end, me) -> float:
    return start.elapsed_time(end) / 1e3 if me.cuda else end - start


def _synchronize(me) -> None:
    import torch

    if me.cuda:
        torch.cuda.synchronize(me.device)
