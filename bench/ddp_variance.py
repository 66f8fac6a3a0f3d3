"""Where DDP's efficiency swings between runs on one machine: within a process, or between processes.

On lent H200 machines the same code measured a 2-GPU efficiency of 0.908, 0.911, 0.902 and then
0.724 within two minutes (bench/runs/2026-11-28-session8/call4-h200-2), the steps without
communication and the 1-GPU steps the same every time (56.5-57.5 ms), the NCCL stage's busbw the
same: only the communication DDP leaves exposed changed. This trains the DDP workload the way the
DDP stage does (gpuaccept.measure.gpt, bf16 autocast, fused AdamW, CUDA events between steps, a
rank's median, the slowest rank's) in fresh sets of processes, each timing several blocks of steps
in a row: blocks that differ within a process point at something that comes and goes (the host,
a neighbour on the switches); processes that differ from each other, each steady, point at
something a process settles into when it starts (where its threads run, how DDP's buckets fell).
With --pin, each rank is bound to its own share of this process's CPUs.

    python bench/ddp_variance.py --runs 4 --blocks 8 [--pin] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import sys
import time

from gpuaccept.measure.gpt import build
from gpuaccept.vocabulary.gpt import PRESETS


def _rank(rank: int, world: int, args: argparse.Namespace, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn import functional as F
    from torch.nn.parallel import DistributedDataParallel

    if args.pin:
        cpus = sorted(os.sched_getaffinity(0))
        share = len(cpus) // world
        os.sched_setaffinity(0, cpus[rank * share : (rank + 1) * share])
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
    shape = PRESETS[args.model]
    torch.manual_seed(1234)
    with torch.device(device):
        model = build(shape)
    tokens = torch.randint(0, shape.vocab, (args.batch, shape.seq_len + 1), device=device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]

    def blocks_of(trained, optimizer, count: int, sync: bool) -> list[float]:
        """`count` blocks of `args.steps` steps: each block's median step, in seconds."""
        medians = []
        for _ in range(count):
            torch.cuda.synchronize()
            marks = [_mark(torch)]
            for _ in range(args.steps):
                context = trained.no_sync() if not sync and hasattr(trained, "no_sync") else contextlib.nullcontext()
                with context:
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        logits = trained(inputs)
                    F.cross_entropy(logits.float().reshape(-1, shape.vocab), targets.reshape(-1)).backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                marks.append(_mark(torch))
            torch.cuda.synchronize()
            medians.append(statistics.median(a.elapsed_time(b) / 1e3 for a, b in itertools.pairwise(marks)))
        return medians

    one_gpu: list[float] = []
    if rank == 0:  # the baseline: this rank alone, as the stage's world of one
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        blocks_of(model, optimizer, 1, True)  # warm-up
        one_gpu = blocks_of(model, optimizer, 3, True)
    dist.barrier()
    trained = DistributedDataParallel(model, device_ids=[rank])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    blocks_of(trained, optimizer, 1, True)  # warm-up
    synced, unsynced = [], []
    for _ in range(args.blocks):  # each block with communication, then one without, in turn
        synced += blocks_of(trained, optimizer, 1, True)
        unsynced += blocks_of(trained, optimizer, 1, False)
    gathered: list = [None] * world
    dist.all_gather_object(gathered, {"synced": synced, "unsynced": unsynced, "cpus": len(os.sched_getaffinity(0))})
    if rank == 0:
        slowest_synced = [max(r["synced"][i] for r in gathered) for i in range(args.blocks)]
        slowest_unsynced = [max(r["unsynced"][i] for r in gathered) for i in range(args.blocks)]
        base = statistics.median(one_gpu)
        with open(out, "w", encoding="utf-8") as file:
            json.dump(
                {
                    "one_gpu_s": one_gpu,
                    "synced_s": slowest_synced,
                    "unsynced_s": slowest_unsynced,
                    "efficiency": [base / s for s in slowest_synced],
                    "exposed": [(s - u) / s for s, u in zip(slowest_synced, slowest_unsynced, strict=True)],
                    "cpus_per_rank": [r["cpus"] for r in gathered],
                },
                file,
            )
    dist.destroy_process_group()


def _mark(torch):
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


def main() -> int:
    import torch
    import torch.multiprocessing as mp

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=4, help="fresh sets of processes, one after another")
    parser.add_argument("--blocks", type=int, default=8, help="blocks of steps each set times, in a row")
    parser.add_argument("--steps", type=int, default=10, help="steps a block (the stage's 10)")
    parser.add_argument("--world", type=int, help="ranks (default: every GPU)")
    parser.add_argument("--model", default="gpt2-medium")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--pin", action="store_true", help="each rank on its own share of the CPUs")
    parser.add_argument("--json", help="write every run's blocks here")
    args = parser.parse_args()
    world = args.world or torch.cuda.device_count()
    if world < 2:
        print(f"ddp_variance: needs 2 GPUs or more; {world} visible", file=sys.stderr)
        return 2
    runs = []
    for run in range(args.runs):
        out = f"/tmp/ddp-variance-{os.getpid()}-{run}.json"
        began = time.perf_counter()
        mp.spawn(_rank, args=(world, args, 29500 + (os.getpid() + run) % 1000, out), nprocs=world)
        with open(out, encoding="utf-8") as file:
            result = json.load(file)
        os.unlink(out)
        result["wall_s"] = time.perf_counter() - began
        runs.append(result)
        efficiency = ", ".join(f"{e:.3f}" for e in result["efficiency"])
        exposed = ", ".join(f"{e:.3f}" for e in result["exposed"])
        one = statistics.median(result["one_gpu_s"]) * 1e3
        unsynced = statistics.median(result["unsynced_s"]) * 1e3
        pinned = f", pinned to {result['cpus_per_rank']} CPUs" if args.pin else ""
        print(
            f"run {run + 1}{pinned}: 1 GPU {one:.1f} ms, without sync {unsynced:.1f} ms; "
            f"{world}-GPU efficiency by block {efficiency}; exposed {exposed}",
            flush=True,
        )
    spread_within = statistics.median(max(r["efficiency"]) - min(r["efficiency"]) for r in runs)
    medians = [statistics.median(r["efficiency"]) for r in runs]
    print(
        f"efficiency: within a run (median of each run's range) {spread_within:.3f}; "
        f"between runs (each run's median) {min(medians):.3f}-{max(medians):.3f}"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump({"world": world, "pin": args.pin, "model": args.model, "batch": args.batch, "runs": runs}, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
