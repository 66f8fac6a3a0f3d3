"""What a set of measurement ranks pays to set up when other sets set up beside it: CUDA contexts
and NCCL communicators made by 1, 2 or 3 sets of one rank a GPU at once, as a standard run's second
wave makes three (DDP's two arms and the NCCL stage's ranks) once the per-GPU loads have ended.

Every process imports torch first (untimed, all at once), then waits for one go. Each then times its
CUDA context (set_device, a first tensor, synchronize) and its set's process group with its
communicator (init_process_group and a barrier; each set its own group and port). Per run: the
slowest rank's context and group, and the wall time from the go until every rank of every set is
done. Where the driver makes contexts one at a time, the wall time grows with the number of sets
(and so with the GPUs: a set has a rank a GPU); where it makes them side by side, it does not.
ROUNDS runs of each count of sets, the counts in turn.

    python bench/context_creation.py [--rounds N] [--sets 1 2 3] [--out FILE.json]

Needs CUDA GPUs and NCCL (one set of one rank on a single GPU runs no NCCL communicator).
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

# a rank's answer once it is set up: its parts, and the wall time from the go until it was done
REPORT = r'''
parts["done after the go"] = time.time() - went
json.dump(parts, open(out, "w"))
if world > 1:
    dist.destroy_process_group()
'''
RANK_CODE = "import torch, torch.distributed as dist\n" + WAIT_FOR_GO + TIMED_SET_UP + REPORT


def one_run(gpus: int, sets: int, work: Path, code: str = RANK_CODE) -> dict:
    """`sets` sets of `gpus` ranks (one a GPU, each running `code`) set up at once: the slowest
    context and group, and the wall time from the go until the last rank was done."""
    processes = []
    for _ in range(sets):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
        processes += [(code, [str(rank), str(gpus), str(rank)], env) for rank in range(gpus)]
    ranks = run_at_one_go(processes, work)
    return {part: max(rank[part] for rank in ranks) for part in ranks[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sets", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    gpus, _ = gpus_of_machine()
    runs: dict[int, list[dict]] = {count: [] for count in args.sets}
    with tempfile.TemporaryDirectory() as folder:
        for number in range(args.rounds):
            for count in args.sets if number % 2 == 0 else list(reversed(args.sets)):
                runs[count].append(one_run(gpus, count, Path(folder)))
                print(f"round {number + 1}, {count} set(s) of {gpus} ranks at once: {json.dumps(runs[count][-1])}", flush=True)
    parts = list(runs[args.sets[0]][0])
    lines = [f"## Sets of {gpus} ranks (one a GPU) setting up at once, {args.rounds} runs each (s, slowest rank)", "",
             "| sets at once | processes | " + " | ".join(parts) + " |", "| ---: | ---: | " + " | ".join("---:" for _ in parts) + " |"]
    for count in args.sets:
        cells = [", ".join(f"{run[part]:.2f}" for run in runs[count]) for part in parts]
        lines.append(f"| {count} | {count * gpus} | " + " | ".join(cells) + " |")
    first = args.sets[0]
    for count in args.sets[1:]:
        ratio = statistics.median(run["done after the go"] for run in runs[count]) / statistics.median(
            run["done after the go"] for run in runs[first])
        lines.append(f"\n{count} sets against {first}: wall time x{ratio:.2f} (x{count / first:.0f} if made one after another)")
    print("\n".join(lines))
    if args.out:
        args.out.write_text(json.dumps({"gpus": gpus, "runs": {str(k): v for k, v in runs.items()}}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
