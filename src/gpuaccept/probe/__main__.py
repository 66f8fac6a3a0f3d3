"""`python -m gpuaccept.probe`: probe this machine once and print its facts as JSON.

Run as a child of the suite so that a hung driver call can be killed, and so that CUDA is never
initialized in the pytest process itself.

Test hook: GPUACCEPT_NVML_REPLAY=<recording> answers NVML queries from a recording made with
`gpu-accept record --nvml-log` instead of the driver, so the whole live path runs on CPU machines.
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
from gpuaccept.probe.nvml import LiveNvml, RecordingNvml, ReplayNvml

NVML_REPLAY = "GPUACCEPT_NVML_REPLAY"


EXIT_PROBE_FAILED = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuaccept.probe")
    parser.add_argument("--nvml-log", help="also save every NVML answer here, for replay in tests")
    args = parser.parse_args(argv)
    try:
        replay = os.environ.get(NVML_REPLAY)
        nvml = ReplayNvml.from_file(replay) if replay else LiveNvml()
        recorder = RecordingNvml(nvml) if args.nvml_log else None
        try:
            facts = collect_facts(recorder or nvml, probe_cuda())
            # the health snapshot every later one is compared with, before any load
            start = health_reading(recorder or nvml, [Target.of(gpu) for gpu in facts.gpus], "start")
            facts = facts.model_copy(update={"health": start})
        finally:
            nvml.close()
            if recorder:
                recorder.save(args.nvml_log)
    except GpuAcceptError as error:
        print(f"gpu-accept: {error}", file=sys.stderr)
        return EXIT_NO_DRIVER if isinstance(error, NoDriverError) else EXIT_PROBE_FAILED
    sys.stdout.write(dump_facts(facts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
