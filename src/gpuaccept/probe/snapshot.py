"""`python -m gpuaccept.probe.snapshot --label L --targets JSON`: one health reading of the GPUs
named, printed as JSON (HealthFacts). Run as a bounded child of the suite after each measurement
stage, as the probe runs, so that a hung driver call never hangs the suite.

GPUACCEPT_NVML_REPLAY answers from a recording, as for the probe.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from gpuaccept.errors import GpuAcceptError
from gpuaccept.probe.health import Target, health_reading
from gpuaccept.probe.nvml import LiveNvml, NvmlCallError, ReplayNvml

NVML_REPLAY = "GPUACCEPT_NVML_REPLAY"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuaccept.probe.snapshot")
    parser.add_argument("--label", required=True, help='when the reading is taken: "after nccl"')
    parser.add_argument("--targets", required=True, help="JSON: [[gpu, nvml_index, [active links], bus id], ...]")
    args = parser.parse_args(argv)
    targets = [Target(gpu, nvml_index, tuple(links), bus) for gpu, nvml_index, links, bus in json.loads(args.targets)]
    try:
        replay = os.environ.get(NVML_REPLAY)
        nvml = ReplayNvml.from_file(replay) if replay else LiveNvml()
        try:
            reading = health_reading(nvml, targets, args.label)
        finally:
            nvml.close()
    except (GpuAcceptError, NvmlCallError) as error:
        print(f"gpu-accept: {error}", file=sys.stderr)
        return 3
    sys.stdout.write(reading.model_dump_json())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
