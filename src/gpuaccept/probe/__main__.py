"""`python -m gpuaccept.probe`: probe this machine once and print its facts as JSON.

Run as a child of the suite so that a hung driver call can be killed, and so that CUDA is never
initialized in the pytest process itself.
NVML is opened through its one door (probe/nvml.py: the driver, or a recording replayed).
"""

from __future__ import annotations

import argparse
import os
import sys

from gpuaccept.errors import GpuAcceptError, NoDriverError
from gpuaccept.facts import dump_facts
from gpuaccept.probe import EXIT_NO_DRIVER
from gpuaccept.probe.collect import collect_facts
from gpuaccept.probe.cuda import probe_cuda
from gpuaccept.probe.health import Target, health_reading
from gpuaccept.probe.nvml import NVML_REPLAY, nvml_of_this_machine
from gpuaccept.probe.pci import read_pci_functions

EXIT_PROBE_FAILED = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuaccept.probe")
    parser.add_argument("--nvml-log", help="also save every NVML answer here, for replay in tests")
    args = parser.parse_args(argv)
    try:
        nvml = nvml_of_this_machine(record_to=args.nvml_log)
        try:
            # replayed NVML answers are another machine's: this machine's PCI bus would contradict them
            pci = None if os.environ.get(NVML_REPLAY) else read_pci_functions()
            facts = collect_facts(nvml, probe_cuda(), pci=pci)
            # the health snapshot every later one is compared with, before any load
            start = health_reading(nvml, [Target.of(gpu) for gpu in facts.gpus], "start")
            facts = facts.model_copy(update={"health": start})
        finally:
            nvml.close()  # a recording is written then
    except GpuAcceptError as error:
        print(f"gpu-accept: {error}", file=sys.stderr)
        return EXIT_NO_DRIVER if isinstance(error, NoDriverError) else EXIT_PROBE_FAILED
    sys.stdout.write(dump_facts(facts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
