"""How long a GEMM must be timed for its TFLOP/s to mean something, and whether gpu-accept's GEMM
differs from plain torch.matmul in anything but the window.

On one GPU, after WARM_S of products, ROUNDS rounds each run every variant once (the order rotated
and reversed every other round, so none always follows another):

- plain:      torch.matmul(a, b) on unseeded randn bf16 inputs, host clock around synchronizations
- plain_out:  the same into a preallocated output (gpu-accept's `out=`)
- seeded:     the same on gpu-accept's inputs (seeded float32 randn cast to bf16)
- ours:       gpu-accept's `measure_gemm` (CUDA events, then its verification)
- plain_long, ours_long: plain and ours timed over LONG_REPEATS products

Each line: the variant's median TFLOP/s and its spread ((max - min) / median) over the rounds.

    python bench/gemm_window.py --gpu 0 --markdown gemm-window.md
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

from bench.gemm_reference import host_seconds
from gpuaccept.measure.load_steps import measure_gemm
from gpuaccept.measure.plan import GemmStep

WARM_S = 5.0
SHORT_REPEATS = 50
LONG_REPEATS = 500


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("this benchmark needs a CUDA GPU", file=sys.stderr)
        return 2
    n, device = args.size, torch.device("cuda", args.gpu)
    torch.cuda.set_device(device)
    me = SimpleNamespace(cuda=True, device=device, rank=0, world=1)

    def timed(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None, repeats: int) -> float:
        def product() -> None:
            torch.matmul(a, b) if out is None else torch.matmul(a, b, out=out)

        return 2 * n**3 * repeats / host_seconds(product, repeats, device, warmup=5) / 1e12

    def unseeded() -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(n, n, device=device, dtype=torch.bfloat16), torch.randn(n, n, device=device, dtype=torch.bfloat16)

    def seeded() -> tuple[torch.Tensor, torch.Tensor]:
        generator = torch.Generator(device=device).manual_seed(1234 + args.gpu)  # as measure_gemm seeds
        a = torch.randn(n, n, generator=generator, device=device).to(torch.bfloat16)
        return a, torch.randn(n, n, generator=generator, device=device).to(torch.bfloat16)

    def ours(repeats: int) -> float:
        return float(measure_gemm(GemmStep(gpu=args.gpu, size=n, repeats=repeats), me)["tflops"])

    variants: dict[str, Callable[[], float]] = {
        "plain": lambda: timed(*unseeded(), None, SHORT_REPEATS),
        "plain_out": lambda: timed(*unseeded(), torch.empty(n, n, device=device, dtype=torch.bfloat16), SHORT_REPEATS),
        "seeded": lambda: timed(*seeded(), None, SHORT_REPEATS),
        "ours": lambda: ours(SHORT_REPEATS),
        "plain_long": lambda: timed(*unseeded(), None, LONG_REPEATS),
        "ours_long": lambda: ours(LONG_REPEATS),
    }
    square = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    ended = time.perf_counter() + WARM_S
    while time.perf_counter() < ended:
        torch.matmul(square, square)
    torch.cuda.synchronize(device)
    names = list(variants)
    got: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(args.rounds):
        shift = round_ % len(names)
        order = names[shift:] + names[:shift]
        for name in order[::-1] if round_ % 2 else order:
            got[name].append(variants[name]())
            torch.cuda.empty_cache()
    rows = [
        "| variant | products timed | median TFLOP/s | spread | rounds |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, values in got.items():
        median = statistics.median(values)
        repeats = LONG_REPEATS if name.endswith("_long") else SHORT_REPEATS
        rows.append(
            f"| {name} | {repeats} | {median:.1f} | {(max(values) - min(values)) / median:.1%} | "
            f"{', '.join(f'{v:.0f}' for v in values)} |"
        )
    ratio_short = statistics.median(got["ours"]) / statistics.median(got["plain"])
    ratio_long = statistics.median(got["ours_long"]) / statistics.median(got["plain_long"])
    header = f"{torch.cuda.get_device_name(device)} (gpu{args.gpu}), torch {torch.__version__}, bf16 {n}^3, {args.rounds} rounds"
    footer = f"ours / plain: {ratio_short:.3f} over {SHORT_REPEATS} products, {ratio_long:.3f} over {LONG_REPEATS}"
    text = "\n".join([header, "", *rows, "", footer]) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
