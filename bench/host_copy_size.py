"""Whether a host copy of 256 MiB measures what one of a GiB does: each GPU's copies to and from
pinned host memory through the copy stage's own code (measure/copy_step.py), at the profile's
`size` (1 GiB) and at `host_size` (256 MiB), ROUNDS rounds of each in turn in one process (the
order swapped every round). Per GPU and direction: GB/s at each size (median of the rounds) and
their ratio; and the step's wall time at each size.

    python bench/host_copy_size.py [--rounds N] [--out FILE.json]

Needs CUDA GPUs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from gpuaccept.measure.copy_step import measure_copies
from gpuaccept.measure.plan import CopyStep
from gpuaccept.vocabulary.steps import CopyKey

GIB = 2**30
SIZES = {"1 GiB": None, "256 MiB": 256 * 2**20}  # host_size_bytes: None copies the whole size


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    gpus = torch.cuda.device_count()
    copies = [CopyKey(what, (g,)) for g in range(gpus) for what in ("host_to_device", "device_to_host")]
    steps = {name: CopyStep(size_bytes=GIB, host_size_bytes=host, copies=copies) for name, host in SIZES.items()}
    rates: dict[str, dict[str, list[float]]] = {name: {} for name in SIZES}
    walls: dict[str, list[float]] = {name: [] for name in SIZES}
    wrong = 0
    for number in range(args.rounds):
        for name in SIZES if number % 2 == 0 else reversed(list(SIZES)):
            began = time.perf_counter()
            results = measure_copies(steps[name], None)
            walls[name].append(time.perf_counter() - began)
            for record in results:
                rates[name].setdefault(record["key"], []).append(record["GBps"])
                wrong += record["wrong"]
    print(f"## Host copies of 1 GiB and of 256 MiB on {gpus} GPU(s), {args.rounds} rounds each in turn (medians)\n")
    print("| copy | 1 GiB (GB/s) | 256 MiB (GB/s) | 256 MiB / 1 GiB |")
    print("| --- | ---: | ---: | ---: |")
    ratios = []
    for key in rates["1 GiB"]:
        whole, part = statistics.median(rates["1 GiB"][key]), statistics.median(rates["256 MiB"][key])
        ratios.append(part / whole)
        print(f"| {key} | {whole:.2f} | {part:.2f} | {part / whole:.4f} |")
    print(f"\nratios {min(ratios):.4f}-{max(ratios):.4f}; bytes found wrong after the copies: {wrong}")
    print("the step's wall time (s), each round: " + "; ".join(f"{name} {', '.join(f'{s:.2f}' for s in walls[name])}" for name in SIZES))
    if args.out:
        args.out.write_text(json.dumps({"gpus": gpus, "rounds": args.rounds, "GBps": rates, "wall_s": walls, "wrong": wrong}, indent=1))
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
