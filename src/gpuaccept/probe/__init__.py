"""Probing a machine: NVML and CUDA answers turned into Facts, in a child process with a time limit."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

from gpuaccept.errors import FactsError, NoDriverError, ProbeError
from gpuaccept.process import Bounded

if TYPE_CHECKING:  # the facts' models are imported where facts are read: `python -m gpuaccept.probe` starts the drivers first
    from gpuaccept.facts import Facts

EXIT_NO_DRIVER = 2  # what `python -m gpuaccept.probe` exits with when there is no driver or GPU

PROBE_TIMEOUT_S = 180.0
QUICK_OPTION = "--quick"  # facts for the quick level: no NVLink error counter in the start reading


def start_probe(nvml_log: str | None = None, timeout_s: float = PROBE_TIMEOUT_S, quick: bool = False) -> Bounded:
    """The probe's child process, started now; `probe_machine(started=...)` reads its facts."""
    command = [sys.executable, "-m", "gpuaccept.probe"]
    if nvml_log:
        command += ["--nvml-log", str(nvml_log)]
    if quick:
        command.append(QUICK_OPTION)
    return Bounded(command, timeout_s, env=dict(os.environ))


def probe_machine(
    nvml_log: str | None = None, timeout_s: float = PROBE_TIMEOUT_S, started: Bounded | None = None, quick: bool = False
) -> Facts:
    """This machine's facts, from the probe's child: `started` where it was started ahead (by the
    command, as it began) for the same level, a new one otherwise. `quick`: for the quick level."""
    from gpuaccept.facts import parse_facts  # the facts' models: imported here, where facts are read

    if started is not None and (QUICK_OPTION in started.command) != quick:
        # started for another level than the run turned out to be (the command's arguments read
        # before they were parsed): a run that loads must have the NVLink counters at its start
        started.stop()
        started = None
    probe = started if started is not None else start_probe(nvml_log, timeout_s, quick)
    # the probe closes its output once its facts are written: its exit, after NVML's and CUDA's
    # teardown, is not waited for where they are whole
    written = probe.output_once_closed()
    if written:
        with contextlib.suppress(FactsError):  # cut short: its exit and its errors say why, below
            return parse_facts(written, "probe output")
    finished = probe.finished()
    if finished.timed_out:
        raise ProbeError(f"the probe did not finish within {timeout_s:.0f} s: NVML or CUDA initialization hung")
    last_line = (finished.stderr.strip().splitlines() or [""])[-1].removeprefix("gpu-accept: ")
    if finished.returncode == EXIT_NO_DRIVER:
        raise NoDriverError(last_line or "no NVIDIA driver found")
    if finished.returncode != 0:
        raise ProbeError(f"the probe failed (exit {finished.returncode}): {last_line or 'no message'}")
    return parse_facts(finished.stdout, "probe output")
