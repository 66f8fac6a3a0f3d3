"""`python -m gpuaccept.probe.snapshot --label L --targets JSON`: one health reading of the GPUs
named, printed as JSON (HealthFacts). Run as a bounded child of the suite, as the probe runs, so
that a hung driver call never hangs the suite.

With `--serve` (no label) it opens NVML once and takes a reading for each label it reads on its
input, one line each, answering with one JSON line each: {"reading": HealthFacts} or {"error":
why}; it ends when its input does. A session keeps one such child for its readings after each
stage: Python's start, the imports and NVML's start were paid for each of them before.

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
    parser.add_argument("--label", help='when the reading is taken: "after nccl"')
    parser.add_argument("--serve", action="store_true", help="a reading for each label read on the input, a JSON line each")
    parser.add_argument("--targets", required=True, help="JSON: [[gpu, nvml_index, [active links], bus id], ...]")
    args = parser.parse_args(argv)
    if (args.label is None) == (not args.serve):
        parser.error("give --label, or --serve")
    targets = [Target(gpu, nvml_index, tuple(links), bus) for gpu, nvml_index, links, bus in json.loads(args.targets)]
    try:
        nvml = nvml_of_this_machine()
        try:
            if args.serve:
                return _serve(nvml, targets)
            reading = health_reading(nvml, targets, args.label)
        finally:
            nvml.close()
    except (GpuAcceptError, NvmlCallError) as error:
        print(f"gpu-accept: {error}", file=sys.stderr)
        return 3
    sys.stdout.write(reading.model_dump_json())
    return 0


def _serve(nvml, targets: list[Target]) -> int:
    for line in sys.stdin:
        label = line.strip()
        if not label:
            continue
        try:
            answer = '{"reading": ' + health_reading(nvml, targets, label).model_dump_json() + "}"
        except (GpuAcceptError, NvmlCallError) as error:
            answer = json.dumps({"error": str(error)})
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
