"""What a run that measures this machine starts before anything else: torch's check and the first
wave's workers (the copy stage's process and one a GPU for the loads), each importing torch: seconds.

Neither needs anything pytest decides, so `gpu-accept run` (and `burn-in`) starts both as soon as
its own options are read and checked, before pytest checks its arguments, loads its plugins and
configures the run (a second or more on an H200 machine), and hands them to the plugin
(`GivenOptions`); a plain `pytest suites/` run starts them as it is configured. Where the command
guessed wrong (pytest's arguments turn out to ask for pytest-xdist or only for the collection),
the plugin ends the workers unused; a run refused before it began ends both.
"""

from __future__ import annotations

import os

from gpuaccept.errors import NoDriverError
from gpuaccept.facts.run_record import LiveMachine
from gpuaccept.measure.launch import WorkerPool
from gpuaccept.plugin.options import RunOptions
from gpuaccept.plugin.torch_check import TorchCheck
from gpuaccept.probe.cuda import driver_loads

XDIST_FLAGS = ("-n", "--numprocesses", "--dist")
COLLECT_FLAGS = ("--collect-only", "--co")


class HeadStart:
    """Torch's check and the first wave's workers, started before the run is configured, and what
    was guessed of pytest's arguments when they were (`distributed`, `collect_only`)."""

    def __init__(self, torch_check: TorchCheck | None, pool: WorkerPool, distributed: bool, collect_only: bool):
        self.torch_check = torch_check
        self.pool = pool
        self.distributed = distributed
        self.collect_only = collect_only

    @classmethod
    def of_command(cls, options: RunOptions, pytest_args: list[str]) -> HeadStart:
        """Started now, for a run of these options, guessing from `pytest_args` (unparsed) whether
        pytest-xdist or a collection alone will run. torch not installed starts no check: the run
        says so as it is configured, where a run that cannot judge is recorded."""
        distributed = any(arg in XDIST_FLAGS or arg.startswith(("--numprocesses=", "--dist=")) or
                          (arg.startswith("-n") and not arg.startswith("--")) for arg in pytest_args)
        collect_only = any(arg in COLLECT_FLAGS for arg in pytest_args)
        try:
            torch_check = TorchCheck.of_run(options)
        except NoDriverError:
            torch_check = None
        return cls(torch_check, first_wave(options, distributed, collect_only), distributed, collect_only)

    def fits(self, distributed: bool, collect_only: bool) -> bool:
        """Whether the workers were started for what pytest turned out to run."""
        return (self.distributed, self.collect_only) == (distributed, collect_only)

    def stop(self) -> None:
        """What was started and not taken: ended (each part may be ended again)."""
        self.pool.close()
        if self.torch_check is not None:
            self.torch_check.stop()


def first_wave(options: RunOptions, distributed: bool, collect_only: bool) -> WorkerPool:
    """A measuring run's first workers (one rank each: the copy stage's and each GPU's loads, the
    first wave a session sets up), started before the machine is probed: they import torch while
    the probe runs and the tests are collected, when nothing is measured. As every worker started
    ahead, only where the measurements run on GPUs (the CUDA driver is there; on the CPU the import
    would take its share of what the CPU measures next); not at the quick level (it starts no
    worker), not for recorded facts, not under pytest-xdist (which process measures first is not
    known). One for each GPU the driver lists only where the cores allow as many imports at once
    beside the probe (two a worker), otherwise one."""
    pool = WorkerPool()
    measures = options.level != "quick" and isinstance(options.source, LiveMachine) and not collect_only
    if measures and not distributed and driver_loads():
        workers = 1 + gpus_listed()
        pool.prepare([1] * (workers if len(os.sched_getaffinity(0)) >= 2 * workers else 1))
    return pool


def gpus_listed() -> int:
    """How many GPUs the NVIDIA driver lists (/proc/driver/nvidia/gpus, one folder a GPU), no more
    than CUDA_VISIBLE_DEVICES names: a guess before the probe, read without starting anything."""
    try:
        listed = len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return listed if visible is None else min(listed, len([name for name in visible.split(",") if name.strip()]))
