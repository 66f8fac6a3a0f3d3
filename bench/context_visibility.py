"""What a measurement rank's CUDA context and NCCL set-up cost when the rank sees every GPU of the
machine (as the suite's DDP and NCCL ranks do) against when it sees only its own GPU
(CUDA_VISIBLE_DEVICES set to that GPU before CUDA starts), and whether NCCL's bandwidth differs.

One process a GPU, started together (torch imported first, untimed; then a go), in turn: each times
its CUDA context (set_device and a first tensor), the process group with its communicator, the first
all_reduce of 256 MiB and the first alltoall of 256 MiB (NCCL connects then), and all_reduce and
alltoall of 1 GiB (5 warm-up, 20 timed, CUDA events; busbw as nccl-tests defines it). The slowest
rank's time of each part counts. ROUNDS rounds, the two ways in turn.

    python bench/context_visibility.py [--rounds N] [--out FILE.json]

Needs 2 or more CUDA GPUs and NCCL.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.run_time import gpus_of_machine  # noqa: E402

RANK_CODE = r'''
import json, os, sys, time
import torch, torch.distributed as dist
out, go, rank, world, device = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
open(out + ".ready", "w").close()
while not os.path.exists(go):
    time.sleep(0.005)
parts = {}
began = time.perf_counter()
torch.cuda.set_device(device)
torch.zeros(1, device=device)
torch.cuda.synchronize()
parts["context"] = time.perf_counter() - began
began = time.perf_counter()
dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", device))
dist.barrier()
torch.cuda.synchronize()
parts["group"] = time.perf_counter() - began
big = torch.ones(1 << 29, dtype=torch.bfloat16, device=device)  # 1 GiB
out_big = torch.empty_like(big)
for name, operation in (("first all_reduce 256 MiB", lambda: dist.all_reduce(big[: 1 << 27])),
                        ("first alltoall 256 MiB", lambda: dist.all_to_all_single(out_big[: 1 << 27], big[: 1 << 27]))):
    began = time.perf_counter()
    operation()
    torch.cuda.synchronize()
    parts[name] = time.perf_counter() - began
bandwidth = {}
for name, operation, factor in (("all_reduce 1 GiB", lambda: dist.all_reduce(big), 2 * (world - 1) / world),
                                ("alltoall 1 GiB", lambda: dist.all_to_all_single(out_big, big), (world - 1) / world)):
    for _ in range(5):
        operation()
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        operation()
    end.record()
    end.synchronize()
    seconds = torch.tensor([start.elapsed_time(end) / 1e3 / 20], dtype=torch.float64, device=device)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
    bandwidth[name] = (1 << 30) / seconds.item() / 1e9 * factor
dist.barrier()
json.dump({"parts": parts, "busbw": bandwidth}, open(out, "w"))
dist.destroy_process_group()
'''


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def one_run(gpus: int, own: bool, work: Path) -> dict:
    go = work / "go"
    go.unlink(missing_ok=True)
    port = free_port()
    processes = []
    for rank in range(gpus):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        if own:
            env["CUDA_VISIBLE_DEVICES"] = str(rank)
        out = work / f"rank{rank}.json"
        out.unlink(missing_ok=True)
        command = [sys.executable, "-c", RANK_CODE, str(out), str(go), str(rank), str(gpus), "0" if own else str(rank)]
        processes.append((subprocess.Popen(command, env=env), out))
    while not all(Path(str(out) + ".ready").exists() for _, out in processes):
        time.sleep(0.01)
    go.touch()
    for process, _ in processes:
        if process.wait(timeout=300) != 0:
            raise RuntimeError(f"a rank exited with {process.returncode}")
    ranks = [json.loads(out.read_text()) for _, out in processes]
    for _, out in processes:
        Path(str(out) + ".ready").unlink()
    slowest = {part: max(rank["parts"][part] for rank in ranks) for part in ranks[0]["parts"]}
    return {"parts": slowest, "busbw": ranks[0]["busbw"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    gpus, _ = gpus_of_machine()
    runs: dict[str, list[dict]] = {"every GPU": [], "its own GPU": []}
    with tempfile.TemporaryDirectory() as folder:
        for number in range(args.rounds):
            for own in (False, True) if number % 2 == 0 else (True, False):
                way = "its own GPU" if own else "every GPU"
                runs[way].append(one_run(gpus, own, Path(folder)))
                print(f"round {number + 1}, a rank sees {way}: {json.dumps(runs[way][-1])}", flush=True)
    parts = list(runs["every GPU"][0]["parts"]) + [f"busbw {name}" for name in runs["every GPU"][0]["busbw"]]

    def value(run: dict, part: str) -> float:
        return run["busbw"][part.removeprefix("busbw ")] if part.startswith("busbw ") else run["parts"][part]

    lines = [f"## {gpus} ranks, one a GPU: a rank that sees every GPU against one that sees its own ({args.rounds} runs each)", "",
             "| part | sees every GPU | sees its own | ratio of medians |", "| --- | ---: | ---: | ---: |"]
    for part in parts:
        every = [value(run, part) for run in runs["every GPU"]]
        own = [value(run, part) for run in runs["its own GPU"]]
        unit = "GB/s" if part.startswith("busbw") else "s"
        lines.append(f"| {part} ({unit}) | {', '.join(f'{v:.3f}' for v in every)} | {', '.join(f'{v:.3f}' for v in own)} | "
                     f"{statistics.median(own) / statistics.median(every):.3f} |")
    print("\n".join(lines))
    if args.out:
        args.out.write_text(json.dumps({"gpus": gpus, "runs": runs}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
