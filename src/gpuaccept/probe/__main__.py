"""`python -m gpuaccept.probe`: probe this machine once and print its facts as JSON.

Run as a child of the suite so that a hung driver call can be killed, and so that CUDA is never
initialized in the pytest process itself.
NVML is opened through its one door (probe/nvml.py: the driver, or a recording replayed).

The drivers' starts are begun before anything else is imported (probe/warm.py), and CUDA's
answers are read in a thread while NVML's are: a quick check between jobs waits for the slower of
the two, not for their sum. `--phases` prints where the time went on stderr, one JSON line.
"""

from __future__ import annotations

import time

BEGAN = time.perf_counter()  # Python's own start is before this

from gpuaccept.probe import warm  # noqa: E402  (the standard library only: the drivers start now)

warm.begin()
IMPORTING = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402

from gpuaccept.errors import GpuAcceptError, NoDriverError  # noqa: E402
from gpuaccept.facts import dump_facts  # noqa: E402
from gpuaccept.probe import EXIT_NO_DRIVER, QUICK_OPTION  # noqa: E402
from gpuaccept.probe.collect import collect_facts  # noqa: E402
from gpuaccept.probe.cuda import probe_cuda  # noqa: E402
from gpuaccept.probe.health import START_LABEL, Target, health_reading  # noqa: E402
from gpuaccept.probe.nvml import NVML_REPLAY, nvml_of_this_machine  # noqa: E402
from gpuaccept.probe.pci import read_pci_functions  # noqa: E402

EXIT_PROBE_FAILED = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuaccept.probe")
    parser.add_argument("--nvml-log", help="also save every NVML answer here, for replay in tests")
    parser.add_argument("--phases", action="store_true", help="say where the time went, on stderr: one JSON line")
    parser.add_argument(
        QUICK_OPTION, action="store_true",
        help="facts for the quick level: its start reading leaves out NVLink's error counters (only their change over a load is judged)",
    )
    args = parser.parse_args(argv)
    phases = {"imports": time.perf_counter() - IMPORTING}
    cuda: list = []
    cuda_reader = threading.Thread(target=lambda: cuda.append(_timed(probe_cuda, phases, "CUDA")), name="gpu-accept CUDA probe")
    cuda_reader.start()
    try:
        began = time.perf_counter()
        nvml = nvml_of_this_machine(record_to=args.nvml_log)
        phases["NVML start"] = time.perf_counter() - began
        try:
            # replayed NVML answers are another machine's: this machine's PCI bus would contradict them
            pci = None if os.environ.get(NVML_REPLAY) else read_pci_functions()
            cuda_reader.join()
            began = time.perf_counter()
            facts = collect_facts(nvml, cuda[0], pci=pci)
            phases["NVML facts"] = time.perf_counter() - began
            # the health snapshot every later one is compared with, before any load
            began = time.perf_counter()
            start = health_reading(nvml, [Target.of(gpu) for gpu in facts.gpus], START_LABEL, link_counters=not args.quick)
            phases["health reading"] = time.perf_counter() - began
            facts = facts.model_copy(update={"health": start})
        finally:
            nvml.close()  # a recording is written then
    except GpuAcceptError as error:
        print(f"gpu-accept: {error}", file=sys.stderr)
        return EXIT_NO_DRIVER if isinstance(error, NoDriverError) else EXIT_PROBE_FAILED
    finally:
        cuda_reader.join()
    sys.stdout.write(dump_facts(facts))
    if args.phases:
        phases["whole, after Python's start"] = time.perf_counter() - BEGAN
        print(json.dumps({"probe_phases_s": {name: round(seconds, 3) for name, seconds in phases.items()}}), file=sys.stderr)
    _close_output()
    return 0


def _close_output() -> None:
    """The facts are whole: the output is closed now, so that the suite reads them without waiting
    for this process's end, which waits for NVML's and CUDA's teardown. Nothing is written to it
    after this."""
    sys.stdout.flush()
    with open(os.devnull, "wb") as nowhere:
        os.dup2(nowhere.fileno(), sys.stdout.fileno())


def _timed(read, phases: dict[str, float], name: str):
    began = time.perf_counter()
    try:
        return read()
    finally:
        phases[name] = time.perf_counter() - began


if __name__ == "__main__":
    raise SystemExit(main())
