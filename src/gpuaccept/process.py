"""Running a child process that must not outlive its time limit, nor leave children behind; and
holding the signals that would end this one while it writes what it must not leave half done."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
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


@dataclass
class HeldSignals:
    """Ctrl-C and SIGTERM held back while a run writes its reports: each one that arrives is
    counted, nothing is raised mid-write; `release` puts the handlers back."""

    arrived: list[int] = field(default_factory=list)
    previous: dict[int, object] = field(default_factory=dict)

    def release(self) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)  # type: ignore[arg-type]
        self.previous.clear()


def hold_signals() -> HeldSignals:
    """From now until `release`, SIGINT and SIGTERM are only counted. A KeyboardInterrupt raised in
    the middle of writing results.json, its journal or JUnit would leave them half done and end the
    command in a traceback; a second SIGTERM too. Only the main thread can set handlers: elsewhere
    nothing is held."""
    held = HeldSignals()
    if threading.current_thread() is not threading.main_thread():
        return held
    for number in (signal.SIGINT, signal.SIGTERM):
        held.previous[number] = signal.getsignal(number)
        signal.signal(number, lambda signum, frame: held.arrived.append(signum))
    return held
