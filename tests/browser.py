"""Headless Chromium for the tests of pages whose script builds what they show: Debian's `chromium`,
installed with apt-get where it is missing (as root, as CI runs; a few workers at once wait on one
lock). A machine that can install nothing skips the test outside CI and fails it in CI (CI set)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

INSTALL_LOCK = Path("/tmp/gpu-accept-tests-chromium.lock")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
         "--disable-component-update", "--disable-sync", "--virtual-time-budget=10000"]


def chromium() -> str:
    found = _installed()
    if found is None:
        problem = _install()
        found = _installed()
        if found is None:
            why = f"headless Chromium is needed and Debian's chromium could not be installed: {problem or 'not found after installing'}"
            if os.environ.get("CI"):
                pytest.fail(why)
            pytest.skip(why)
    return found


def dom(page: Path, folder: Path, fragment: str = "", window: str = "") -> str:
    """The page's document as Chromium holds it once its scripts ran (--dump-dom), in a window of
    `window` pixels (`1400,800`) where given."""
    size = [f"--window-size={window}"] if window else []
    done = subprocess.run(
        [chromium(), *FLAGS, *size, f"--user-data-dir={folder / 'chromium-profile'}", "--dump-dom", page.as_uri() + fragment],
        capture_output=True, text=True, timeout=180,
    )
    assert done.stdout.strip(), done.stderr[-2000:]
    return done.stdout


def screenshot(page: Path, folder: Path, shot: Path) -> None:
    subprocess.run([chromium(), *FLAGS, f"--user-data-dir={folder / 'chromium-profile'}", "--window-size=1400,800",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=180)


def _installed() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _install() -> str:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "not root, or no apt-get"
    with open(INSTALL_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _installed() is not None:
            return ""  # another worker installed it meanwhile
        environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", "chromium", "fonts-liberation"]):
            done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=900, stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                said = (done.stderr or done.stdout).strip().splitlines()
                return f"{' '.join(command[:2])} exited {done.returncode}: {said[-1] if said else 'no output'}"
    return ""
