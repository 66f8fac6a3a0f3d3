"""DDP throughput of the GPT workload on the first `world` ranks of the job.

Every rank of the job creates the subgroup (torch requires it); the ranks outside it wait. Steps
are timed after warm-up steps, between synchronizations, on every rank of the subgroup; the
slowest rank's mean step time counts. The same steps are then timed inside `no_sync()`, where DDP
skips the gradient all-reduce: the difference is the communication that compute did not hide.
"""

from __future__ import annotations

import contextlib
import time

from gpuaccept.measure.gpt import GptShape, build
from gpuaccept.measure.plan import DdpStep


def measure_ddp(step: DdpStep, me) -> list[dict]:
    import torch
    import torch.distributed as dist

    if step.world > me.world:
        raise ValueError(f"DDP on {step.world} GPUs needs {step.world} ranks; the job has {me.world}")
    group = dist.new_group(list(range(step.world))) if step.world > 1 else None
    shape = GptShape(step.layers, step.d_model, step.heads, step.vocab, step.seq_len)
    results = []
    for batch in step.batches:
        for accumulation in step.accumulation:
            timings = torch.zeros(2, dtype=torch.float64, device=me.device)
            if me.rank < step.world:
                synced, unsynced = _train(shape, step, batch, accumulation, group, me)
                timings[0], timings[1] = synced, unsynced or 0.0
            dist.all_reduce(timings, op=dist.ReduceOp.MAX)
            step_s, no_sync_s = float(timings[0].item()), float(timings[1].item())
            samples = batch * accumulation
            results.append(
                {
                    "world": step.world,
                    "batch": batch,
                    "accumulation": accumulation,
                    "step_s": step_s,
                    "no_sync_step_s": no_sync_s if group is not None and step.no_sync else None,
                    "samples_per_s_per_gpu": samples / step_s,
                    "tokens_per_s_per_gpu": samples * step.seq_len / step_s,
                    "parameters": shape.parameters(),
                }
            )
    return results


def _train(shape: GptShape, step: DdpStep, batch: int, accumulation: int, group, me) -> tuple[float, float | None]:
    import torch
    import torch.distributed as dist
    from torch.nn import functional as F
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(1234 + me.rank)
    model = build(shape).to(me.device)
    trained = model
    if group is not None:
        trained = DistributedDataParallel(model, device_ids=[me.local_rank] if me.cuda else None, process_group=group)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=me.cuda)
    tokens = torch.randint(0, shape.vocab, (batch, shape.seq_len + 1), device=me.device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    mixed = me.cuda and step.dtype == "bfloat16"

    def one_step(synchronize_gradients: bool = True) -> None:
        for micro in range(accumulation):
            last = micro == accumulation - 1
            skip_sync = group is not None and (not last or not synchronize_gradients)
            with trained.no_sync() if skip_sync else contextlib.nullcontext():
                with torch.autocast(me.device.type, dtype=torch.bfloat16, enabled=mixed):
                    logits = trained(inputs)
                loss = F.cross_entropy(logits.float().reshape(-1, shape.vocab), targets.reshape(-1))
                loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def timed(synchronize_gradients: bool) -> float:
        if group is not None:
            dist.barrier(group=group)
        _synchronize(me)
        began = time.perf_counter()
        for _ in range(step.steps):
            one_step(synchronize_gradients)
        _synchronize(me)
        return (time.perf_counter() - began) / step.steps

    for _ in range(step.warmup_steps):
        one_step()
    synced = timed(True)
    unsynced = timed(False) if group is not None and step.no_sync else None
    del trained, model, optimizer
    if me.cuda:
        torch.cuda.empty_cache()
    return synced, unsynced


def _synchronize(me) -> None:
    import torch

    if me.cuda:
        torch.cuda.synchronize(me.device)
