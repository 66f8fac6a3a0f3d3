"""gpu-accept's per-GPU load measurements beside plain torch loops, on the same GPU in the same run.

For each GPU: a warm-up of about WARM_S of matrix products (clocks ramp up), then ROUNDS rounds,
each measuring gpu-accept's GEMM (`measure_gemm`, exactly as a worker runs it: CUDA events, then
its verification) and a plain `torch.matmul` loop timed with a host clock around synchronizations,
alternating which goes first; likewise gpu-accept's HBM copy and triad beside a plain
`dst.copy_(src)` loop and a plain `torch.add(b, c, alpha=3, out=a)` loop. The ratio is the median
of gpu-accept's rounds over the median of the plain ones. Target: GEMM within 3% (0.97-1.03).

    python bench/gemm_reference.py --gpus 4 --markdown gemm-reference.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import torch

from gpuaccept.measure.load_steps import measure_gemm, measure_hbm
from gpuaccept.measure.plan import GemmStep, HbmStep
from gpuaccept.profile.spec import GemmSpec

WARM_S = 5.0


def host_seconds(operation: Callable[[], object], repeats: int, device: torch.device, warmup: int) -> float:
    """Seconds of `repeats` back-to-back runs of `operation` after `warmup` more, by the host clock
    around synchronizations: how a plain torch loop is usually timed."""
    for _ in range(warmup):
        operation()
    torch.cuda.synchronize(device)
    began = time.perf_counter()
    for _ in range(repeats):
        operation()
    torch.cuda.synchronize(device)
    return time.perf_counter() - began


def plain_gemm_tflops(device: torch.device, n: int, repeats: int, dtype: torch.dtype) -> float:
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    return 2 * n**3 * repeats / host_seconds(lambda: torch.matmul(a, b), repeats, device, warmup=5) / 1e12


def plain_hbm_GBps(device: torch.device, size_bytes: int, iterations: int) -> tuple[float, float]:
    elements = size_bytes // 4
    a, b, c = (torch.rand(elements, device=device) for _ in range(3))
    copy = host_seconds(lambda: a.copy_(b), iterations, device, warmup=3)
    triad = host_seconds(lambda: torch.add(b, c, alpha=3.0, out=a), iterations, device, warmup=3)
    return 2 * elements * 4 * iterations / copy / 1e9, 3 * elements * 4 * iterations / triad / 1e9


def warm(device: torch.device, n: int) -> None:
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    ended = time.perf_counter() + WARM_S
    while time.perf_counter() < ended:
        for _ in range(20):
            torch.matmul(a, a)
        torch.cuda.synchronize(device)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=torch.cuda.device_count() if torch.cuda.is_available() else 0)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=GemmSpec().repeats)  # as a profile that sets none
    parser.add_argument("--hbm-size", type=int, default=1 << 30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available() or args.gpus < 1:
        print("this benchmark needs CUDA GPUs", file=sys.stderr)
        return 2
    rows = []
    worst = 1.0
    for gpu in range(args.gpus):
        device = torch.device("cuda", gpu)
        torch.cuda.set_device(device)
        me = SimpleNamespace(cuda=True, device=device, rank=0, world=1)
        warm(device, args.size)
        ours: dict[str, list[float]] = {"gemm": [], "copy": [], "triad": []}
        plain: dict[str, list[float]] = {"gemm": [], "copy": [], "triad": []}
        step = GemmStep(gpu=gpu, size=args.size, repeats=args.repeats)
        hbm = HbmStep(gpu=gpu, size_bytes=args.hbm_size)
        for round_ in range(args.rounds):
            order = [0, 1] if round_ % 2 == 0 else [1, 0]
            for which in order:
                if which == 0:
                    ours["gemm"].append(measure_gemm(step, me)["tflops"])
                    copy, triad = measure_hbm(hbm, me)
                    ours["copy"].append(copy["GBps"])
                    ours["triad"].append(triad["GBps"])
                else:
                    plain["gemm"].append(plain_gemm_tflops(device, args.size, args.repeats, torch.bfloat16))
                    copy_GBps, triad_GBps = plain_hbm_GBps(device, args.hbm_size, 20)
                    plain["copy"].append(copy_GBps)
                    plain["triad"].append(triad_GBps)
            torch.cuda.empty_cache()
        for what, unit in (("gemm", "TFLOP/s"), ("copy", "GB/s"), ("triad", "GB/s")):
            ratio = statistics.median(ours[what]) / statistics.median(plain[what])
            if what == "gemm":
                worst = ratio if abs(ratio - 1) > abs(worst - 1) else worst
            rows.append(
                f"| gpu{gpu} | {what} | {unit} | {', '.join(f'{v:.1f}' for v in ours[what])} | "
                f"{', '.join(f'{v:.1f}' for v in plain[what])} | {ratio:.3f} |"
            )
    name = torch.cuda.get_device_name(0)
    header = [
        f"{args.gpus}x {name}, torch {torch.__version__}, bf16 {args.size}^3 x {args.repeats}, HBM arrays {args.hbm_size >> 20} MiB",
        "",
        "| GPU | load | unit | gpu-accept, rounds | plain torch, rounds | ratio of medians |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    verdict = f"GEMM ratio farthest from 1: {worst:.3f} (target within 3%: 0.97-1.03)"
    text = "\n".join(header + rows + ["", verdict]) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    return 0 if abs(worst - 1) <= 0.03 else 1


if __name__ == "__main__":
    raise SystemExit(main())
