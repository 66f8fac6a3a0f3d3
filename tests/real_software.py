"""The other programs gpu-accept writes into, started by the tests on this machine from their Debian
packages: a one-node Slurm (munge, slurmctld, slurmd), node_exporter, promtool.

A package that is missing is installed with apt-get where that can be done (root, as CI runs); a
test is skipped only outside CI, and says why. Every daemon runs in the foreground under the test,
with its configuration, state, sockets and logs in the test's own folder and ports picked free on
127.0.0.1: nothing of the host's configuration is read or written. Waits poll with generous limits
(a loaded two-core machine starts slurmctld in seconds, not milliseconds) and every process is
ended when the test ends, passed or not.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# a command -> the Debian package that brings it
PACKAGES = {
    "munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd", "scontrol": "slurm-client", "sinfo": "slurm-client",
    "srun": "slurm-client", "prometheus-node-exporter": "prometheus-node-exporter", "promtool": "prometheus",
}
SBIN = ("/usr/sbin", "/sbin", "/usr/bin", "/bin")


def command_path(name: str) -> str | None:
    return shutil.which(name) or next((str(Path(d) / name) for d in SBIN if (Path(d) / name).is_file()), None)


def require(*commands: str) -> dict[str, str]:
    """The paths of `commands`, their packages installed first where they are missing. Outside CI a
    machine that cannot install them skips the test; in CI (CI set) it fails."""
    missing = sorted({PACKAGES[name] for name in commands if command_path(name) is None})
    if missing:
        problem = _install(missing)
        if problem:
            if os.environ.get("CI"):
                pytest.fail(f"cannot install {' '.join(missing)}: {problem}")
            pytest.skip(f"needs {' '.join(missing)} (Debian): {problem}")
    found = {name: command_path(name) for name in commands}
    absent = [name for name, path in found.items() if path is None]
    if absent:
        pytest.fail(f"{', '.join(absent)} not found after installing {' '.join(missing)}")
    return {name: str(path) for name, path in found.items()}


_INSTALL_LOCK = Path("/tmp/gpu-accept-tests-apt.lock")


def _install(packages: list[str]) -> str:
    """apt-get install, once per package set across the test workers (a lock file serialises them)."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "not root, or no apt-get"
    import fcntl

    with open(_INSTALL_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all(command_path(name) is not None for name, package in PACKAGES.items() if package in packages):
            return ""  # another worker installed them meanwhile
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", *packages]):
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                said = (done.stderr or done.stdout).strip().splitlines()
                return f"{' '.join(command[:2])} exited {done.returncode}: {said[-1] if said else 'no output'}"
    return ""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(what: str, ready: Callable[[], object], timeout_s: float, *, logs: tuple[Path, ...] = (), every_s: float = 0.25) -> object:
    """Poll `ready()` until it gives something true; fail naming `what` and the tail of `logs`."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = ready()
        if found:
            return found
        if time.monotonic() > deadline:
            tails = "".join(f"\n--- {log} ---\n{_tail(log)}" for log in logs)
            pytest.fail(f"{what}: not within {timeout_s:.0f} s{tails}")
        time.sleep(every_s)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as error:
        return f"(unreadable: {error})"


@dataclass
class Daemons:
    """Processes started for one test, each ended (its process group) when the test ends."""

    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, command: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                       start_new_session=True)
        self.started.append(process)
        return process

    def stop(self) -> None:
        for process in reversed(self.started):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for process in reversed(self.started):
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


@contextlib.contextmanager
def daemons() -> Iterator[Daemons]:
    running = Daemons()
    try:
        yield running
    finally:
        running.stop()


class OneNodeSlurm:
    """munge, slurmctld and slurmd of Debian's packages on this machine: one node (this host's short
    name, at 127.0.0.1) in one partition, ports picked free, everything in `folder`. Commands run
    against it through `run` (SLURM_CONF set: the host's /etc/slurm is never read)."""

    def __init__(self, folder: Path, running: Daemons, settings: str):
        self.commands = require("munged", "slurmctld", "slurmd", "scontrol", "sinfo", "srun")
        self.folder = folder
        self.running = running
        self.node = socket.gethostname().split(".")[0]
        self.conf = folder / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        munge = folder / "munge"
        munge.mkdir(mode=0o755)  # munged wants its socket's folder, and every one above it, open to all
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self.socket = munge / "munge.socket"
        for sub in ("state", "spool"):
            (folder / sub).mkdir()
        self.conf.write_text(
            f"ClusterName=gpuaccepttest\nSlurmctldHost={self.node}(127.0.0.1)\nSlurmctldPort={free_port()}\nSlurmdPort={free_port()}\n"
            f"AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={self.socket}\nSlurmUser=root\nSlurmdUser=root\n"
            f"StateSaveLocation={folder}/state\nSlurmdSpoolDir={folder}/spool\nSlurmctldPidFile={folder}/slurmctld.pid\n"
            f"SlurmdPidFile={folder}/slurmd.pid\nSlurmctldLogFile={folder}/slurmctld.log\nSlurmdLogFile={folder}/slurmd.log\n"
            "SlurmdDebug=info\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSwitchType=switch/none\nMpiDefault=none\n"
            "ReturnToService=2\nSelectType=select/cons_tres\nSchedulerType=sched/builtin\nPrologEpilogTimeout=120\n"
            "MessageTimeout=100\n"  # a prolog on a loaded machine may take longer than srun's 10 s by default
            f"{settings}"
            f"NodeName={self.node} NodeHostname={self.node} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN\n"
            f"PartitionName=test Nodes={self.node} Default=YES MaxTime=10 State=UP\n"
        )
        self.slurmctld_log = folder / "slurmctld.log"
        self.slurmd_log = folder / "slurmd.log"

    def start(self) -> None:
        munge_log = self.folder / "munge" / "munged.out"
        self.running.start([self.commands["munged"], "--foreground", f"--key-file={self.folder}/munge/munge.key",
                            f"--socket={self.socket}", f"--pid-file={self.folder}/munge/munged.pid",
                            f"--log-file={self.folder}/munge/munged.log", f"--seed-file={self.folder}/munge/seed"], munge_log)
        wait_for("munged's socket", self.socket.exists, 60, logs=(munge_log,))
        self.running.start([self.commands["slurmctld"], "-D", "-c", "-f", str(self.conf)], self.folder / "slurmctld.out", self.env)
        wait_for("slurmctld answering", lambda: self.run("scontrol", "ping").returncode == 0, 120,
                 logs=(self.folder / "slurmctld.out", self.slurmctld_log))
        self.running.start([self.commands["slurmd"], "-D", "-f", str(self.conf)], self.folder / "slurmd.out", self.env)

    def run(self, command: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.commands.get(command, command), *args], capture_output=True, text=True, env=self.env,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def state(self) -> tuple[str, str]:
        """The node's state as sinfo says it (`idle`, `drained`, `draining`...) and its reason."""
        done = self.run("sinfo", "-h", "-N", "-o", "%T|%E")
        state, _, reason = done.stdout.strip().partition("|")
        return state.rstrip("*"), reason  # '*': slurmctld has not heard from slurmd for a moment (a loaded machine)

    def wait_state(self, what: str, accept: Callable[[str, str], bool], timeout_s: float = 180) -> tuple[str, str]:
        seen: list[tuple[str, str]] = []

        def reached() -> tuple[str, str] | None:
            seen.append(self.state())
            return seen[-1] if accept(*seen[-1]) else None

        try:
            found = wait_for(what, reached, timeout_s, logs=(self.slurmd_log, self.slurmctld_log), every_s=0.5)
        except pytest.fail.Exception as failure:
            raise AssertionError(f"{failure}\nlast sinfo state and reason: {seen[-1] if seen else None}") from None
        assert isinstance(found, tuple)
        return found
