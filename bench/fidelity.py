"""Fidelity: the suite's busbw beside nccl-tests', same sizes, same dtype, same iterations, one run.

Needs an nccl-tests build (its binaries, e.g. all_reduce_perf) in --nccl-tests; nothing of it is
kept in this repository. Runs the suite's NCCL stage, then nccl-tests' five binaries, then the
suite's stage again, and prints a table of the ratios (target >= 0.98) and the wall times (target:
the suite's stage <= 1.2 x nccl-tests alone).

    python bench/fidelity.py --nccl-tests BUILD/ --gpus 4 --markdown fidelity.md
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from gpuaccept.profile.spec import ProfileSpec
from gpuaccept.stages.fabric import run_nccl_stage
from gpuaccept.vocabulary.collectives import COLLECTIVES
from gpuaccept.vocabulary.sizes import format_size

# torch's all_reduce and broadcast work in place; the others write a separate output buffer
IN_PLACE = {"all_reduce", "broadcast"}
ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+\w+\s+\w+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")


def nccl_library_dir() -> str:
    import nvidia.nccl

    return str(Path(next(iter(nvidia.nccl.__path__))) / "lib")


def run_nccl_tests(
    build: Path, collective: str, gpus: int, sizes: list[int], warmup: int, iterations: int
) -> tuple[dict[int, float], float, str]:
    binary = build / f"{collective}_perf"
    command = [
        str(binary), "-b", str(min(sizes)), "-e", str(max(sizes)), "-f", "4", "-g", str(gpus), "-d", "bfloat16",
        "-w", str(warmup), "-n", str(iterations), "-c", "1",
    ]
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = nccl_library_dir() + ":" + env.get("LD_LIBRARY_PATH", "")
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"{binary} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    found = {}
    for line in done.stdout.splitlines():
        match = ROW.match(line)
        if match:
            size = int(match.group(1))
            out_of_place, in_place = float(match.group(5)), float(match.group(9))
            found[size] = in_place if collective in IN_PLACE else out_of_place
    return found, wall, done.stdout


def run_suite(gpus: int, sizes: list[int], warmup: int, iterations: int):
    spec = ProfileSpec.model_validate(
        {
            "schema": 1,
            "gpus": {"count": gpus, "model": "any"},
            "nccl": {"dtype": "bfloat16", "warmup": warmup, "iterations": iterations,
                     "busbw": {c: {format_size(s): 1 for s in sizes} for c in COLLECTIVES}},
        }
    )
    began = time.perf_counter()
    sweep, _ = run_nccl_stage(spec, gpus)
    wall = time.perf_counter() - began
    if sweep.failures:
        raise RuntimeError("; ".join(f.message for f in sweep.failures))
    return {(r.collective, r.size_bytes): r.busbw_GBps for r in sweep.results}, wall, sweep


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nccl-tests", required=True, type=Path, help="folder holding all_reduce_perf and the others")
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--sizes", default="256MiB,1GiB,4GiB")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("--logs", type=Path, help="write nccl-tests' own output here")
    args = parser.parse_args()
    from gpuaccept.vocabulary.sizes import parse_size

    sizes = [parse_size(s) for s in args.sizes.split(",")]
    first, wall_first, sweep = run_suite(args.gpus, sizes, args.warmup, args.iterations)
    reference, wall_reference, logs = {}, 0.0, []
    for collective in COLLECTIVES:
        found, wall, output = run_nccl_tests(args.nccl_tests, collective, args.gpus, sizes, args.warmup, args.iterations)
        wall_reference += wall
        logs.append(output)
        for size, busbw in found.items():
            reference[(collective, size)] = busbw
    second, wall_second, _ = run_suite(args.gpus, sizes, args.warmup, args.iterations)
    if args.logs:
        args.logs.write_text("\n".join(logs))

    lines = [
        "| collective | size | nccl-tests busbw (GB/s) | gpu-accept busbw (GB/s), two runs | ratio (mean / nccl-tests) |",
        "| --- | --- | --- | --- | --- |",
    ]
    worst = 9.9
    for collective in COLLECTIVES:
        for size in sizes:
            ours = [first.get((collective, size)), second.get((collective, size))]
            theirs = reference.get((collective, size))
            if None in ours or theirs is None:
                lines.append(f"| {collective} | {format_size(size)} | {theirs} | {ours} | missing |")
                worst = 0.0
                continue
            ratio = (sum(ours) / 2) / theirs
            worst = min(worst, ratio)
            lines.append(f"| {collective} | {format_size(size)} | {theirs:.2f} | {ours[0]:.2f}, {ours[1]:.2f} | {ratio:.3f} |")
    wall_ours = (wall_first + wall_second) / 2
    summary = [
        "",
        f"lowest ratio: {worst:.3f} (target >= 0.98)",
        f"wall time over these sizes: gpu-accept NCCL stage {wall_ours:.1f} s (mean of two, start-up included), "
        f"nccl-tests' five binaries {wall_reference:.1f} s: {wall_ours / wall_reference:.2f}x (target <= 1.2x)",
        f"NCCL {sweep.nccl_version}, torch {sweep.torch_version}, {args.gpus} GPUs, bfloat16, "
        f"warm-up {args.warmup}, {args.iterations} iterations",
    ]
    text = "\n".join(lines + summary)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    return 0 if worst >= 0.98 and wall_ours <= 1.2 * wall_reference else 1


if __name__ == "__main__":
    sys.exit(main())
