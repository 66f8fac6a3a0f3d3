"""A level that measures this machine needs torch: missing or broken, the run could not judge,
said in one line before any test (not as every measurement failing at its start-up). The quick
level and recorded facts need none, and import none here.

Whether torch imports is asked of a child process started as the run starts, beside the probe:
importing torch takes seconds with CUDA's libraries, as long as the probe, and one waited for
before the probe made every measuring run that much longer.
"""

from __future__ import annotations

import importlib.util
import sys

from gpuaccept.errors import NoDriverError
from gpuaccept.facts.run_record import LiveMachine
from gpuaccept.plugin.options import RunOptions
from gpuaccept.process import Bounded

TORCH_IMPORT_LIMIT_S = 120  # a cold network filesystem takes tens of seconds; a hung import is no torch


class TorchCheck:
    def __init__(self, level: str):
        self.level = level
        if importlib.util.find_spec("torch") is None:
            raise NoDriverError(f"torch is not installed: the {level} level measures with it "
                                "(pip install 'gpu-accept[torch]'; --level quick needs none)")
        self.child: Bounded | None = Bounded([sys.executable, "-c", "import torch"], TORCH_IMPORT_LIMIT_S)

    @classmethod
    def of_run(cls, options: RunOptions) -> TorchCheck | None:
        """The check started now, where the run measures this machine; None where it measures nothing."""
        if not isinstance(options.source, LiveMachine) or options.level == "quick":
            return None
        return cls(options.level)

    def passed(self) -> None:
        """Once the import has ended: nothing where torch imported, one line where it did not."""
        if self.child is None:
            return
        done, self.child = self.child.finished(), None
        if done.timed_out:
            raise NoDriverError(f"torch did not import within {TORCH_IMPORT_LIMIT_S} s: the {self.level} level measures with it")
        if done.returncode != 0:
            said = [line for line in done.stderr.splitlines() if line.strip()]
            raise NoDriverError(f"torch cannot be imported ({said[-1] if said else f'exit {done.returncode}'}): "
                                f"the {self.level} level measures with it")

    def stop(self) -> None:
        """The run ends before the answer is needed."""
        if self.child is not None:
            self.child.stop()
            self.child = None
