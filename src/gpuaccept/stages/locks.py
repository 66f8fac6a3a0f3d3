"""Who may use the GPUs now, across the pytest-xdist workers of one session.

Two kinds of stage share the machine. A fabric stage (NCCL, copies, DDP) uses every GPU and the
links between them: it takes the machine lock exclusively, so it runs alone. A per-GPU stage (the
compute loads) takes the machine lock shared and the lock of each GPU it loads exclusively, so the
loads of different GPUs run at once (the GPUs one process took together, or those several xdist
workers took apart), never two on one GPU, and never beside a fabric stage. Locks are `flock`s on files in the session's folder: the kernel
releases them when a worker dies, and they conflict between open files of one process as well,
which is how the tests check them without timing anything.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

MACHINE_LOCK = "gpus.lock"


class Busy(Exception):
    """A lock asked for without waiting is held by another stage."""


class GpuLocks:
    def __init__(self, folder: Path):
        self.folder = Path(folder)

    @contextlib.contextmanager
    def fabric(self, wait: bool = True) -> Iterator[None]:
        """The whole machine, alone."""
        with self._lock(MACHINE_LOCK, fcntl.LOCK_EX, wait):
            yield

    @contextlib.contextmanager
    def gpu(self, index: int, wait: bool = True) -> Iterator[None]:
        """One GPU alone, beside other per-GPU stages of other GPUs."""
        with self._lock(MACHINE_LOCK, fcntl.LOCK_SH, wait), self._lock(f"gpu{index}.lock", fcntl.LOCK_EX, wait):
            yield

    @contextlib.contextmanager
    def free_gpus(self, indices: list[int]) -> Iterator[list[int]]:
        """The machine shared (waiting for a fabric stage to end), and of `indices` each GPU no
        other stage holds now, alone: yields those taken, in the order given."""
        with self._lock(MACHINE_LOCK, fcntl.LOCK_SH, True), contextlib.ExitStack() as held:
            taken = []
            for index in indices:
                try:
                    held.enter_context(self._lock(f"gpu{index}.lock", fcntl.LOCK_EX, False))
                except Busy:
                    continue  # another stage loads it: its values come from there
                taken.append(index)
            yield taken

    @contextlib.contextmanager
    def _lock(self, name: str, mode: int, wait: bool) -> Iterator[None]:
        # opened anew each time: flock belongs to the open file, so two holders never share one
        with open(self.folder / name, "a") as handle:
            try:
                fcntl.flock(handle, mode if wait else mode | fcntl.LOCK_NB)
            except BlockingIOError:
                raise Busy(name) from None
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
