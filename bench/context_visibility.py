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
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ranks_at_once import TIMED_SET_UP, WAIT_FOR_GO, free_port, run_at_one_go  # noqa: E402
from bench.run_time import gpus_of_machine  # noqa: E402

RANK_CODE = "import torch, torch.distributed as dist\n" + WAIT_FOR_GO + TIMED_SET_UP + r'''
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


def one_run(gpus: int, own: bool, work: Path) -> dict:
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    processes = []
    for rank in range(gpus):
        visible = {"CUDA_VISIBLE_DEVICES": str(rank)} if own else {}
        processes.append((RANK_CODE, [str(rank), str(gpus), "0" if own else str(rank)], {**env, **visible}))
    ranks = run_at_one_go(processes, work)
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
        seeing_every = [value(run, part) for run in runs["every GPU"]]
        seeing_own = [value(run, part) for run in runs["its own GPU"]]
        unit = "GB/s" if part.startswith("busbw") else "s"
        lines.append(f"| {part} ({unit}) | {', '.join(f'{v:.3f}' for v in seeing_every)} | {', '.join(f'{v:.3f}' for v in seeing_own)} | "
                     f"{statistics.median(seeing_own) / statistics.median(seeing_every):.3f} |")
    print("\n".join(lines))
    if args.out:
        args.out.write_text(json.dumps({"gpus": gpus, "runs": runs}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
