"""`python -m gpuaccept.probe.snapshot --label L --targets JSON`: one health reading of the GPUs
named, printed as JSON (HealthFacts). Run as a bounded child of the suite after each measurement
stage, as the probe runs, so that a hung driver call never hangs the suite.

NVML is opened through its one door (probe/nvml.py), as the probe opens it.
"""

from __future__ import annotations

import argparse
import json
import sys

from gpuaccept.errors import GpuAcceptError
from gpuaccept.probe.health import Target, health_reading
from gpuaccept.probe.nvml import NvmlCallError, nvml_of_this_machine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuaccept.probe.snapshot")
    parser.add_argument("--label", required=True, help='when the reading is taken: "after nccl"')
    parser.add_argument("--targets", required=True, help="JSON: [[gpu, nvml_index, [active links], bus id], ...]")
    args = parser.parse_args(argv)
    targets = [Target(gpu, nvml_index, tuple(links), bus) for gpu, nvml_index, links, bus in json.loads(args.targets)]
    try:
        nvml = nvml_of_this_machine()
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
