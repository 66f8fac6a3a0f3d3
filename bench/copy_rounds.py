"""The copy stage with its copies between GPUs one at a time and in rounds (`copies.concurrent`),
side by side on one machine: ROUNDS runs of each, in turn (the order swapped every round), every
copy kind of the shipped profiles at their settings (1 GiB, 2 warm-up and 10 timed copies). Per
copy, the median GB/s of each way and their ratio; the copies' step time of each and their ratio.
The copies of one GPU (local, host to and from device) are measured the same way in both: their
ratio shows the machine's noise beside the copies the setting changes.

    python bench/copy_rounds.py [--rounds N] [--out FILE.json]

Needs CUDA GPUs (at least two for copies between GPUs); prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from gpuaccept.profile.spec import ProfileSpec
from gpuaccept.stages.fabric import run_copy_stage
from gpuaccept.vocabulary.copies import COPY_KINDS, floor_key

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.run_time import gpus_of_machine  # noqa: E402

STEP_PHASE = "step: copy bandwidth 1 GiB"


def spec(gpus: int, concurrent: bool) -> ProfileSpec:
    """Every copy kind at floors of 1 GB/s: the values are what is wanted, not verdicts."""
    floors = {floor_key(kind): 1.0 for kind in COPY_KINDS if gpus >= 2 or kind not in ("p2p", "p2p_bidirectional")}
    return ProfileSpec.model_validate({
        "schema": 1,
        "gpus": {"count": gpus, "model": "any"},
        "copies": {"size": "1GiB", "warmup": 2, "iterations": 10, "concurrent": concurrent, **floors},
    })


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    gpus, _ = gpus_of_machine()
    values: dict[bool, dict[str, list[float]]] = {False: {}, True: {}}
    steps: dict[bool, list[float]] = {False: [], True: []}
    rounds_of: dict[str, int | None] = {}
    for number in range(args.rounds):
        for concurrent in (False, True) if number % 2 == 0 else (True, False):
            sweep = run_copy_stage(spec(gpus, concurrent), gpus)
            if sweep is None or sweep.failures:
                for failure in sweep.failures if sweep else []:
                    print(f"copies (concurrent={concurrent}): {failure.message}", file=sys.stderr)
                return 1
            steps[concurrent].append(sweep.phases.get(STEP_PHASE, sweep.wall_s))
            for result in sweep.results:
                key = str(result.key)
                values[concurrent].setdefault(key, []).append(result.GBps)
                if concurrent:
                    rounds_of[key] = result.round
            print(f"round {number + 1}, concurrent={concurrent}: copy step {steps[concurrent][-1]:.3f} s", flush=True)
    lines = [
        f"## The copy stage on {gpus} GPUs: one copy at a time against disjoint pairs at once ({args.rounds} runs each)",
        "",
        "| copy | round | one at a time (GB/s, median) | in rounds (GB/s, median) | ratio |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    table = []
    for key in values[False]:
        alone, together = statistics.median(values[False][key]), statistics.median(values[True][key])
        table.append({"copy": key, "round": rounds_of.get(key), "alone_GBps": values[False][key], "together_GBps": values[True][key]})
        shown_round = "-" if rounds_of.get(key) is None else str(rounds_of[key])
        lines.append(f"| {key} | {shown_round} | {alone:.2f} | {together:.2f} | {together / alone:.3f} |")
    alone_s, together_s = statistics.median(steps[False]), statistics.median(steps[True])
    lines += [
        "",
        f"copy step: one at a time {', '.join(f'{s:.3f}' for s in steps[False])} s, "
        f"in rounds {', '.join(f'{s:.3f}' for s in steps[True])} s: ratio of medians {together_s / alone_s:.3f}",
    ]
    print("\n".join(lines))
    if args.out:
        args.out.write_text(json.dumps({"gpus": gpus, "copies": table, "step_s": {"alone": steps[False], "together": steps[True]}},
                                       indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
