"""Floors for a profile's `compute:` section from healthy runs: the lowest value any GPU gave in any
run, times a margin, each printed with the runs and range it came from (paste into the profile).
Also prints every GPU's values per run and the largest spread below the best GPU seen in one run,
which `gemm.within_best` must stay above.

    python scripts/calibrate_compute.py runs/loads*/results.json [--margin 0.9]
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

from gpuaccept.facts.measurements import GemmResult, HbmResult
from gpuaccept.facts.run_record import load_results


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("results", nargs="+")
    parser.add_argument("--margin", type=float, default=0.9, help="floor = lowest value x margin (default 0.9)")
    args = parser.parse_args()
    values: dict[str, list[float]] = defaultdict(list)
    spreads: list[float] = []
    hosts, models = set(), set()
    runs = 0
    for path in args.results:
        record = load_results(path)
        sweep = record.facts.measurements.compute
        if sweep is None:
            print(f"{path}: no per-GPU loads in these results")
            continue
        runs += 1
        hosts.add(record.facts.system.hostname)
        models.update(str(gpu.name) for gpu in record.facts.gpus)
        gemm = [r for r in sweep.results if isinstance(r, GemmResult)]
        for result in sweep.results:
            if isinstance(result, GemmResult):
                values["gemm"].append(result.tflops)
            elif isinstance(result, HbmResult):
                values[result.load].append(result.GBps)
        if gemm:
            best = max(r.tflops for r in gemm)
            spreads.append(max(1 - r.tflops / best for r in gemm))
        cells = ", ".join(
            f"gpu{r.gpu} {r.load} {r.tflops if isinstance(r, GemmResult) else getattr(r, 'GBps', 0.0):.1f}"
            for r in sorted(sweep.results, key=lambda r: (r.gpu, r.load))
            if isinstance(r, (GemmResult, HbmResult))
        )
        print(f"{path}: {cells}")
    if not runs:
        return 1
    where = f"{runs} gpu-accept runs on {', '.join(sorted(hosts))} ({', '.join(sorted(models))})"

    def floor(name: str, unit: str) -> str:
        found = values.get(name, [])
        if not found:
            return "null  # not measured"
        low, high, middle = min(found), max(found), statistics.median(found)
        return f"{low * args.margin:.0f}  # {where}: {low:.1f}-{high:.1f} {unit} per GPU (median {middle:.1f}), lowest x {args.margin}"

    print()
    print("compute:")
    print("  gemm:")
    print(f"    min_tflops: {floor('gemm', 'TFLOP/s')}")
    if spreads:
        print(f"    # largest share below the best GPU of its run: {max(spreads):.1%} (within_best must stay above it)")
    print("  hbm:")
    print(f"    copy_min: {floor('hbm_copy', 'GB/s')}")
    print(f"    triad_min: {floor('hbm_triad', 'GB/s')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
