"""Running a child process that must not outlive its time limit, nor leave children behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
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
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd, start_new_session=True
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
        return Finished(process.returncode, stdout, stderr)
    except subprocess.TimeoutExpired:
        kill_group(process)
        stdout, stderr = process.communicate()
        return Finished(None, stdout, stderr)
    except BaseException:
        kill_group(process)
        process.communicate()
        raise


class _Process(Protocol):
    pid: int


def kill_group(process: _Process) -> None:
    """SIGKILL to the process group `process` leads (a session of its own: its pid is the group's)."""
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(process.pid, signal.SIGKILL)
