"""Whether a rank's set-up is shorter when its process has started the CUDA driver and NVML before
it is let go: SETS sets of one rank a GPU (3: a standard run's second wave, DDP's two arms and the
NCCL stage's ranks) set up at once, each rank's CUDA context and its set's NCCL communicator timed
from one go, as bench/context_creation.py times them. One way starts the driver at the go (cuInit
by torch's first CUDA call; NVML by NCCL's initialization), as the workers do; the other has each
process call cuInit and nvmlInit (through ctypes: no context, no GPU memory) before it says it is
ready. ROUNDS runs of each, in turn (the order swapped every round).

    python bench/driver_start.py [--rounds N] [--sets N] [--out FILE.json]

Needs CUDA GPUs and NCCL.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.context_creation import REPORT, one_run  # noqa: E402
from bench.ranks_at_once import TIMED_SET_UP, WAIT_FOR_GO  # noqa: E402
from bench.run_time import gpus_of_machine  # noqa: E402

DRIVER_BEFORE = r'''
import ctypes, time as _time
_began = _time.time()
ctypes.CDLL("libcuda.so.1").cuInit(0)
ctypes.CDLL("libnvidia-ml.so.1").nvmlInit_v2()
driver_s = _time.time() - _began
'''
WAYS = {"at the go": "", "before the go": DRIVER_BEFORE}


def rank_code(before: str) -> str:
    """A rank that runs `before` ahead of its ready (the driver's start, or nothing), then is timed
    from the go as bench/context_creation.py's ranks are."""
    said = 'parts["driver before the go"] = globals().get("driver_s", 0.0)\n'
    return "import torch, torch.distributed as dist\n" + before + WAIT_FOR_GO + TIMED_SET_UP + said + REPORT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sets", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    gpus, _ = gpus_of_machine()
    runs: dict[str, list[dict]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(prefix="driver-start-") as folder:
        for number in range(args.rounds):
            for way in WAYS if number % 2 == 0 else reversed(list(WAYS)):
                runs[way].append(one_run(gpus, args.sets, Path(folder), rank_code(WAYS[way])))
    print(f"## {args.sets} sets of a rank a GPU on {gpus} GPUs set up at once, the driver started at the go or before it")
    print(f"\n{args.rounds} runs each, in turn; the slowest rank's part, medians (s)\n")
    parts = list(runs["at the go"][0])
    print("| way | " + " | ".join(parts) + " |")
    print("| --- |" + " ---: |" * len(parts))
    for way, found in runs.items():
        print(f"| {way} | " + " | ".join(f"{statistics.median(run[part] for run in found):.3f}" for part in parts) + " |")
    if args.out:
        args.out.write_text(json.dumps({"gpus": gpus, "sets": args.sets, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
