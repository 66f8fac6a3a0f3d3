"""A level that measures this machine needs torch: missing or broken, the run could not judge,
said in one line before any test (not as every measurement failing at its start-up). The quick
level and recorded facts need none, and import none here.

Whether torch imports is asked of a child process started as the run starts, beside the probe:
importing torch takes seconds with CUDA's libraries, as long as the probe, and one waited for
before the probe made every measuring run that much longer. The child says so as soon as the
import is done, and the answer is taken then: a process that imported CUDA's libraries takes
a while more to exit, which no run needs to wait for.
"""

from __future__ import annotations

import importlib.util
import selectors
import subprocess
import sys
import threading
import time

from gpuaccept.errors import NoDriverError
from gpuaccept.facts.run_record import LiveMachine
from gpuaccept.plugin.options import RunOptions
from gpuaccept.process import kill_group

TORCH_IMPORT_LIMIT_S = 120  # a cold network filesystem takes tens of seconds; a hung import is no torch
IMPORTED = "torch imported"  # the child's line once the import is done
IMPORT_TORCH = f"import torch; print({IMPORTED!r}, flush=True)"


class TorchCheck:
    def __init__(self, level: str):
        self.level = level
        if importlib.util.find_spec("torch") is None:
            raise NoDriverError(f"torch is not installed: the {level} level measures with it "
                                "(pip install 'gpu-accept[torch]'; --level quick needs none)")
        self.deadline = time.monotonic() + TORCH_IMPORT_LIMIT_S
        self.child: subprocess.Popen[str] | None = subprocess.Popen(
            [sys.executable, "-c", IMPORT_TORCH], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            text=True, start_new_session=True,
        )

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
        child, self.child = self.child, None
        try:
            said = _first_line(child, self.deadline)
        except BaseException:
            _end(child)
            raise
        if said == IMPORTED:
            _end(child)  # done: its exit is not waited for
            return
        if said is None:
            _end(child)
            raise NoDriverError(f"torch did not import within {TORCH_IMPORT_LIMIT_S} s: the {self.level} level measures with it")
        # the output ended without the line: the import failed, and the child has exited or is exiting
        _, stderr = child.communicate()
        lines = [line for line in stderr.splitlines() if line.strip()]
        raise NoDriverError(f"torch cannot be imported ({lines[-1] if lines else f'exit {child.returncode}'}): "
                            f"the {self.level} level measures with it")

    def stop(self) -> None:
        """The run ends before the answer is needed."""
        if self.child is not None:
            _end(self.child)
            self.child = None


def _first_line(child: subprocess.Popen[str], deadline: float) -> str | None:
    """The child's first line of output ("" where its output ended without one), or None at the deadline."""
    assert child.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        left = deadline - time.monotonic()
        if left <= 0 or not selector.select(timeout=left):
            return None
    line: str = child.stdout.readline()
    return line.strip()


def _end(child: subprocess.Popen[str]) -> None:
    """Killed, and reaped by a thread: the kernel takes its time to take down what it mapped."""
    kill_group(child)
    threading.Thread(target=child.communicate, name="gpu-accept torch check's end", daemon=True).start()
