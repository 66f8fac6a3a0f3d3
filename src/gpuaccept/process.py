"""Running a child process that must not outlive its time limit, nor leave children behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Finished:
    returncode: int | None  # None when it was killed at its time limit
    stdout: str
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def run_bounded(command: list[str], timeout_s: float, env: dict[str, str] | None = None, cwd: str | None = None) -> Finished:
    """Run `command` in its own process group; at `timeout_s` kill the whole group.

    A hung NCCL collective or NVML call keeps its process (and any it started) alive forever:
    killing the group is the only way to be sure nothing is left holding the GPUs.
    """
    return Bounded(command, timeout_s, env=env, cwd=cwd).finished()


class Bounded:
    """`command` started now in its own process group, its end waited for later (`finished`), so
    that it runs beside whatever the caller does meanwhile; at `timeout_s` from its start the whole
    group is killed."""

    def __init__(self, command: list[str], timeout_s: float, env: dict[str, str] | None = None, cwd: str | None = None):
        self.command = list(command)
        self.deadline = time.monotonic() + timeout_s
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd, start_new_session=True
        )
        self._finished: Finished | None = None

    def finished(self) -> Finished:
        if self._finished is not None:
            return self._finished
        try:
            stdout, stderr = self.process.communicate(timeout=max(0.0, self.deadline - time.monotonic()))
            self._finished = Finished(self.process.returncode, stdout, stderr)
        except subprocess.TimeoutExpired:
            kill_group(self.process)
            stdout, stderr = self.process.communicate()
            self._finished = Finished(None, stdout, stderr)
        except BaseException:
            self.stop()
            raise
        return self._finished

    def stop(self) -> None:
        """Kill it now, if it still runs (its result is no longer wanted)."""
        if self._finished is None:
            kill_group(self.process)
            stdout, stderr = self.process.communicate()
            self._finished = Finished(None, stdout, stderr)


class _Process(Protocol):
    pid: int


def kill_group(process: _Process) -> None:
    """SIGKILL to the process group `process` leads (a session of its own: its pid is the group's)."""
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(process.pid, signal.SIGKILL)
