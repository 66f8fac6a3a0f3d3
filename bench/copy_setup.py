"""Where the copy stage's set-up goes, and whether threads shorten it: the parts its worker
prepares before anything is timed (measure/copy_step.py `prepare_copies`), one after another as the
worker does them, beside the same parts with a thread a GPU for the CUDA contexts, the buffers and
peer access. Each way runs ROUNDS times in a fresh process, in turn (the order swapped every
round); the process's end after its set-up (the driver tearing its contexts down, the pinned host
memory released) is timed too.

    python bench/copy_setup.py [--rounds N] [--size 1GiB] [--out FILE.json]

Needs CUDA GPUs (two or more for peer access); prints a table of medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from gpuaccept.vocabulary.sizes import parse_size

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.run_time import gpus_of_machine  # noqa: E402

PARTS = ("first context", "other contexts", "buffers", "pinned host buffer", "peer access", "synchronize", "whole", "end")
WAYS = ("one after another", "a thread a GPU")


def _cudart():
    """The CUDA runtime torch loaded, through ctypes: peer access enabled by it, torch finds it enabled."""
    import ctypes

    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split()[-1]
        if "libcudart.so" in path:
            return ctypes.CDLL(path)
    raise RuntimeError("torch's CUDA runtime is not loaded")


def _each(gpus: list[int], work, threaded: bool) -> None:
    if not threaded:
        for gpu in gpus:
            work(gpu)
        return
    errors: list[BaseException] = []

    def run(gpu: int) -> None:
        try:
            work(gpu)
        except BaseException as error:  # handed to the main thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(gpu,)) for gpu in gpus]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def child(size: int, threaded: bool) -> dict[str, float]:
    """The copy worker's set-up, timed by part; `threaded`: a thread a GPU where the parts allow."""
    import torch

    parts: dict[str, float] = {}
    began = time.perf_counter()

    def timed(name: str, work) -> None:
        start = time.perf_counter()
        work()
        parts[name] = round(time.perf_counter() - start, 4)

    gpus = list(range(torch.cuda.device_count()))
    timed("first context", lambda: (torch.cuda.set_device(0), torch.zeros(1, device="cuda:0")))

    def context(gpu: int) -> None:
        torch.cuda.set_device(gpu)
        torch.zeros(1, device=torch.device("cuda", gpu))

    timed("other contexts", lambda: _each(gpus[1:], context, threaded))
    sources: dict[int, object] = {}
    targets: dict[int, object] = {}

    def buffers(gpu: int) -> None:
        torch.cuda.set_device(gpu)
        device = torch.device("cuda", gpu)
        sources[gpu] = torch.randint(0, 256, (size,), dtype=torch.uint8, device=device)
        targets[gpu] = torch.empty(size, dtype=torch.uint8, device=device)

    timed("buffers", lambda: _each(gpus, buffers, threaded))
    # one buffer, both directions, as measure/copy_step.py has it (commit 9094995 and before: two)
    timed("pinned host buffer", lambda: torch.empty(size, dtype=torch.uint8, pin_memory=True).copy_(sources[0]))
    cudart = _cudart() if threaded else None

    def peers_of(a: int) -> None:
        if cudart is not None:
            cudart.cudaSetDevice(a)
            for b in gpus:
                if b != a:
                    cudart.cudaDeviceEnablePeerAccess(b, 0)  # already enabled (704) where torch did it first
        for b in gpus:
            if b != a:
                targets[b][:1].copy_(sources[a][:1])  # torch enables peer access at a pair's first copy

    timed("peer access", lambda: _each(gpus, peers_of, threaded))
    timed("synchronize", lambda: [torch.cuda.synchronize(gpu) for gpu in gpus])
    parts["whole"] = round(time.perf_counter() - began, 4)
    return parts


def measure(size: int, threaded: bool) -> dict[str, float]:
    """One fresh process's set-up by part, and its end: from its last line to its exit."""
    command = [sys.executable, __file__, "--child", "--size", str(size)] + (["--threaded"] if threaded else [])
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    said = time.perf_counter()
    process.wait()
    if process.returncode != 0 or not line.strip():
        raise SystemExit(f"the set-up ({WAYS[threaded]}) failed: exit {process.returncode}")
    parts = json.loads(line)
    parts["end"] = round(time.perf_counter() - said, 4)
    return parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", default="1GiB")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--threaded", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    size = parse_size(args.size)
    if args.child:
        print(json.dumps(child(size, args.threaded)), flush=True)
        return 0
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for number in range(args.rounds):
        for threaded in (False, True) if number % 2 == 0 else (True, False):
            runs[threaded].append(measure(size, threaded))
    gpus, _ = gpus_of_machine()
    print(f"## The copy stage's set-up on {gpus} GPU(s), {args.size} buffers, {args.rounds} fresh processes each way (medians, s)\n")
    print(f"| part | {WAYS[0]} | {WAYS[1]} | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for part in PARTS:
        serial = statistics.median(run[part] for run in runs[False])
        threaded = statistics.median(run[part] for run in runs[True])
        ratio = f"{threaded / serial:.2f}" if serial > 0 else "-"
        print(f"| {part} | {serial:.3f} | {threaded:.3f} | {ratio} |")
    if args.out:
        args.out.write_text(json.dumps({"gpus": gpus, "size": args.size, "runs": {WAYS[k]: v for k, v in runs.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
