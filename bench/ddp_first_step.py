"""Where a DDP worker's first training step spends its time: the cost every DDP worker pays once
while it sets up (`start-up: prepare: first step`, 7.4-8.8 s on a 4xH200 with a dozen workers
setting up beside each other).

Rounds of K processes started at once (K from --processes, spread over the GPUs), each timing, with
a synchronization after each part: torch's import, the CUDA context, the model built on the GPU,
the first bf16 matmul (cuBLAS set up), the first attention (scaled_dot_product_attention), then the
first training step by part (forward, backward, the fused AdamW step) and a second step the same
way. Every round has a CUDA kernel cache of its own (CUDA_CACHE_PATH), shared by its processes as
~/.nv/ComputeCache is by a run's workers; what the cache holds afterwards says whether the driver
compiled any kernel from PTX. A last round runs one process on the first round's (warm) cache.

    python bench/ddp_first_step.py [--processes 1,2,4,8] [--model gpt2-medium] [--batch 8] [--out FILE.json]

Prints a table; with --out, writes every process's numbers as JSON. Needs CUDA (a GPU machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PARTS = [
    "import",
    "context",
    "model",
    "first matmul",
    "first attention",
    "forward",
    "backward",
    "optimizer",
    "second forward",
    "second backward",
    "second optimizer",
]


def child(gpu: int, model_name: str, batch: int) -> None:
    began = time.perf_counter()
    seconds: dict[str, float] = {}

    def mark(part: str) -> None:
        nonlocal began
        if "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized():
            sys.modules["torch"].cuda.synchronize()
        now = time.perf_counter()
        seconds[part] = now - began
        began = now

    import torch
    from torch.nn import functional as F

    mark("import")
    device = torch.device("cuda", gpu)
    torch.cuda.set_device(device)
    torch.zeros(1, device=device)
    mark("context")
    from gpuaccept.measure.gpt import build
    from gpuaccept.vocabulary.gpt import PRESETS

    shape = PRESETS[model_name]  # type: ignore[index]
    torch.manual_seed(1234)
    with torch.device(device):
        model = build(shape)
    mark("model")
    a = torch.randn(1024, 1024, device=device, dtype=torch.bfloat16)
    a @ a
    mark("first matmul")
    q = torch.randn(1, shape.heads, 128, shape.d_model // shape.heads, device=device, dtype=torch.bfloat16)
    F.scaled_dot_product_attention(q, q, q, is_causal=True)
    mark("first attention")
    tokens = torch.randint(0, shape.vocab, (batch, shape.seq_len + 1), device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    for prefix in ("", "second "):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
        mark(f"{prefix}forward")
        F.cross_entropy(logits.float().reshape(-1, shape.vocab), tokens[:, 1:].reshape(-1)).backward()
        mark(f"{prefix}backward")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        mark(f"{prefix}optimizer")
    print(json.dumps({"gpu": gpu, "seconds": seconds, "module_loading": os.environ.get("CUDA_MODULE_LOADING")}), flush=True)


def cache_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def one_round(processes: int, gpus: int, cache: Path, args, extra_env: dict[str, str]) -> dict:
    env = {**os.environ, "CUDA_CACHE_PATH": str(cache), **extra_env}
    began = time.perf_counter()
    children = [
        subprocess.Popen(
            [sys.executable, __file__, "--child", str(i % gpus), "--model", args.model, "--batch", str(args.batch)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(processes)
    ]
    results, errors = [], []
    for process in children:
        out, err = process.communicate(timeout=300)
        if process.returncode == 0 and out.strip():
            results.append(json.loads(out.strip().splitlines()[-1]))
        else:
            errors.append((err.strip().splitlines() or ["no output"])[-1])
    return {
        "processes": processes,
        "wall_s": time.perf_counter() - began,
        "cache_bytes": cache_bytes(cache),
        "env": extra_env,
        "results": results,
        "errors": errors,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--processes", default="1,2,4,8")
    parser.add_argument("--model", default="gpt2-medium")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--eager", action="store_true", help="also one process with CUDA_MODULE_LOADING=EAGER")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.model, args.batch)
        return 0
    import torch

    gpus = torch.cuda.device_count()
    if not gpus:
        print("ddp_first_step: no CUDA device", file=sys.stderr)
        return 2
    rounds = []
    with tempfile.TemporaryDirectory() as scratch:
        caches = []
        for count in (int(c) for c in args.processes.split(",")):
            cache = Path(scratch, f"cache-{count}")
            caches.append(cache)
            rounds.append({"name": f"{count} at once, cold cache", **one_round(count, gpus, cache, args, {})})
        rounds.append({"name": "1, the first round's warm cache", **one_round(1, gpus, caches[0], args, {})})
        if args.eager:
            rounds.append(
                {
                    "name": "1, CUDA_MODULE_LOADING=EAGER",
                    **one_round(1, gpus, Path(scratch, "eager"), args, {"CUDA_MODULE_LOADING": "EAGER"}),
                }
            )
    print(f"## First training step of {args.model}, batch {args.batch}, {gpus} GPU(s): medians over each round's processes (s)\n")
    print("| round | wall | cache (KB) | " + " | ".join(PARTS) + " | errors |")
    print("| --- | ---: | ---: | " + " | ".join("---:" for _ in PARTS) + " | --- |")
    for r in rounds:
        cells = [f"{statistics.median(x['seconds'][p] for x in r['results']):.2f}" if r["results"] else "-" for p in PARTS]
        print(
            f"| {r['name']} | {r['wall_s']:.1f} | {r['cache_bytes'] // 1024} | " + " | ".join(cells) + f" | {'; '.join(r['errors'][:2])} |"
        )
    if args.out:
        args.out.write_text(json.dumps({"model": args.model, "batch": args.batch, "gpus": gpus, "rounds": rounds}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
