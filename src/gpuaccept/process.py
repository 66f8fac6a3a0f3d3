"""Running a child process that must not outlive its time limit, nor leave children behind; and
holding the signals that would end this one while it writes what it must not leave half done."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
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
