"""Wall time of the per-GPU load tests (suites/test_compute.py) run serially and under
`gpu-accept run -n <gpus>`, where each pytest-xdist worker loads a GPU of its own; the ratio is the
parallel run's wall time over the serial one's (target < 1 on more than one GPU). Both runs must
pass. Alternates the order over --pairs pairs of runs, so clocks that ramp favour neither.

    python bench/pergpu_parallel.py --gpus 4 --markdown pergpu-parallel.md [--profile NAME]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(profile: str, workers: int, reports: Path) -> tuple[float, int, str]:
    command = ["gpu-accept", "run", "--profile", profile, "--reports", str(reports), "-q", "-k", "test_compute"]
    if workers > 1:
        command += ["-n", str(workers)]
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - began
    last = [line for line in done.stdout.splitlines() if "passed" in line or "failed" in line]
    errors = done.stderr.strip().splitlines()
    return wall, done.returncode, last[-1] if last else (errors[-1] if errors else "no summary")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, required=True, help="xdist workers of the parallel run: one per GPU")
    parser.add_argument("--profile", default="auto")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    serial: list[float] = []
    parallel: list[float] = []
    lines = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="pergpu-bench-") as folder:
        for index in range(args.pairs):
            order = [1, args.gpus] if index % 2 == 0 else [args.gpus, 1]
            for workers in order:
                wall, code, summary = run(args.profile, workers, Path(folder) / f"run{index}-n{workers}")
                (serial if workers == 1 else parallel).append(wall)
                failed |= code != 0
                lines.append(f"| {index + 1} | {'serial' if workers == 1 else f'-n {workers}'} | {wall:.1f} | {code} | {summary} |")
    ratio = statistics.median(parallel) / statistics.median(serial) if args.gpus > 1 else 1.0
    text = "\n".join(
        [
            f"per-GPU load tests, profile {args.profile}, {args.gpus} GPU(s)",
            "",
            "| pair | run | wall (s) | exit | summary |",
            "| --- | --- | --- | --- | --- |",
            *lines,
            "",
            f"median wall: serial {statistics.median(serial):.1f} s, -n {args.gpus} "
            f"{statistics.median(parallel) if parallel else float('nan'):.1f} s; ratio {ratio:.2f} (target < 1 on 2+ GPUs)",
        ]
    ) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    return 1 if failed or (args.gpus > 1 and ratio >= 1) else 0


if __name__ == "__main__":
    sys.exit(main())
