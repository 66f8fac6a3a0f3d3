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
import os
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
        self.child: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-c", IMPORT_TORCH], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            start_new_session=True,
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
            imported, stderr = _import_ended(child, self.deadline)
        finally:
            _end(child)  # done either way: its exit is not waited for
        if imported is None:
            raise NoDriverError(f"torch did not import within {TORCH_IMPORT_LIMIT_S} s: the {self.level} level measures with it")
        if not imported:
            lines = [line for line in stderr.splitlines() if line.strip()]
            raise NoDriverError(f"torch cannot be imported ({lines[-1] if lines else f'exit {child.wait()}'}): "
                                f"the {self.level} level measures with it")

    def stop(self) -> None:
        """The run ends before the answer is needed."""
        if self.child is not None:
            _end(self.child)
            self.child = None


def _import_ended(child: subprocess.Popen[bytes], deadline: float) -> tuple[bool | None, str]:
    """Whether the child said the import was done (False: its output ended without saying so;
    None: the deadline came first), and what it wrote on stderr meanwhile. Both pipes are read as
    they fill: a child whose warnings filled one would otherwise wait on it forever."""
    assert child.stdout is not None and child.stderr is not None
    out, err = child.stdout.fileno(), child.stderr.fileno()
    said = {out: b"", err: b""}
    with selectors.DefaultSelector() as selector:
        for fd in said:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            ready = selector.select(timeout=left) if left > 0 else []
            if not ready:
                return None, said[err].decode(errors="replace")
            for key, _ in ready:
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fd)
                said[key.fd] += chunk
            if IMPORTED.encode() in said[out].splitlines():
                return True, said[err].decode(errors="replace")
    return False, said[err].decode(errors="replace")


def _end(child: subprocess.Popen[bytes]) -> None:
    """Killed, and reaped by a thread: the kernel takes its time to take down what it mapped."""
    kill_group(child)
    threading.Thread(target=child.communicate, name="gpu-accept torch check's end", daemon=True).start()
