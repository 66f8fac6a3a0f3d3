"""Running a child process that must not outlive its time limit, nor leave children behind; and
holding the signals that would end this one while it writes what it must not leave half done."""

from __future__ import annotations

import contextlib
import os
import selectors
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
        self._read: tuple[bytes, bytes] | None = None  # what it wrote until it closed its standard output
        self._output_closed = False  # whether it did, before its time limit

    def output_once_closed(self) -> str | None:
        """All it writes to its standard output, as soon as it closes it, without waiting for its
        exit: a child that closes its output once done (the probe) may take a while more to end (its
        drivers' teardown). None where its time limit came first (the group is then killed)."""
        if self._read is None:
            self._read, self._output_closed = self._read_until_closed()
            if not self._output_closed:
                self.stop()
        return self._read[0].decode(errors="replace") if self._output_closed else None

    def _read_until_closed(self) -> tuple[tuple[bytes, bytes], bool]:
        """What it wrote to its output and its errors until it closed its output (True), or until
        its time limit (False). Its errors are read meanwhile: a full pipe of them would stop it."""
        assert self.process.stdout is not None and self.process.stderr is not None
        out, errors = self.process.stdout.fileno(), self.process.stderr.fileno()
        read = {out: bytearray(), errors: bytearray()}
        with selectors.DefaultSelector() as selector:
            for fd in read:
                selector.register(fd, selectors.EVENT_READ)
            while out in selector.get_map():
                left = self.deadline - time.monotonic()
                ready = selector.select(left) if left > 0 else []
                if not ready:
                    break
                for key, _ in ready:
                    chunk = os.read(key.fd, 1 << 20)
                    read[key.fd] += chunk
                    if not chunk:
                        selector.unregister(key.fd)
            closed = out not in selector.get_map()
        return (bytes(read[out]), bytes(read[errors])), closed

    def finished(self) -> Finished:
        if self._finished is not None:
            return self._finished
        try:
            stdout, stderr = self.process.communicate(timeout=max(0.0, self.deadline - time.monotonic()))
            self._finished = self._with_read(self.process.returncode, stdout, stderr)
        except subprocess.TimeoutExpired:
            kill_group(self.process)
            stdout, stderr = self.process.communicate()
            self._finished = self._with_read(None, stdout, stderr)
        except BaseException:
            self.stop()
            raise
        return self._finished

    @property
    def output_read(self) -> bool:
        """Whether `output_once_closed` read its output to the end."""
        return self._output_closed and self._finished is None

    def stop(self, grace_s: float = 0.0) -> None:
        """Kill it now, if it still runs (its result is no longer wanted); `grace_s`: wait that long
        first for it to end on its own (a child whose output was read, ending)."""
        if self._finished is None:
            ended = False
            if grace_s > 0:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=grace_s)
                    ended = True
            if not ended:
                kill_group(self.process)
            stdout, stderr = self.process.communicate()
            self._finished = self._with_read(self.process.returncode if ended else None, stdout, stderr)

    def _with_read(self, returncode: int | None, stdout: str, stderr: str) -> Finished:
        """Its output: what `output_once_closed` read first, then the rest (the pipes' ends)."""
        before = self._read or (b"", b"")
        return Finished(returncode, before[0].decode(errors="replace") + stdout, before[1].decode(errors="replace") + stderr)


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
