"""Wall time of the whole DDP stage at a profile's settings: the scaling sweep over every world
size and batch, then the NVLink A/B arm with NCCL_P2P_DISABLE=1, start-up of both included.
Target on 4xH200 with the shipped profile: at most 30 s.

    python bench/ddp_stage.py --profile h200-4-nvswitch
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from gpuaccept.profile import ProfileCatalog
from gpuaccept.stages.fabric import run_ddp_stage


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", required=True, help="profile name or path")
    parser.add_argument("--gpus", type=int, help="ranks to use (default: the profile's GPU count)")
    parser.add_argument("--target-s", type=float, default=30.0)
    args = parser.parse_args()
    catalog = ProfileCatalog.with_shipped([Path(args.profile).parent] if "/" in args.profile else [])
    profile = catalog.load(args.profile)
    ranks = args.gpus or profile.gpu_count
    events: list[dict] = []
    began = time.perf_counter()
    sweep, without = run_ddp_stage(profile.spec, ranks, on_event=events.append)
    wall = time.perf_counter() - began
    print_timeline(events)
    for arm in (sweep, without):
        if arm is None:
            continue
        label = "without P2P" if arm.p2p_disabled else "scaling"
        print(f"{label}: {arm.wall_s:.1f} s, {len(arm.results)} settings, failures: {[f.message for f in arm.failures] or 'none'}")
        for r in arm.results:
            print(f"  {r.case:14} {r.samples_per_s_per_gpu:8.1f} samples/s per GPU, step {r.step_s * 1e3:.1f} ms")
    parameters = f"{sweep.parameters / 1e6:.0f}M parameters"
    print(f"DDP stage: {wall:.1f} s wall for profile {profile.name} on {ranks} GPUs ({parameters}); target {args.target_s:.0f} s")
    return 0 if wall <= args.target_s else 1


def print_timeline(events: list[dict]) -> None:
    """Where the stage's time went, from rank 0's progress events: start-up, then each step."""
    started: dict | None = None
    for event in events:
        kind = event.get("event")
        if kind == "ready":
            arm = "without P2P" if event["environment"].get("NCCL_P2P_DISABLE") == "1" else "scaling"
            parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in event.get("startup_s", {}).items())
            print(f"{arm} workers ready: {parts}")
        elif kind == "start":
            started = event
        elif kind == "result" and started is not None:
            print(f"  {event['label']}: {event['time'] - started['time']:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
