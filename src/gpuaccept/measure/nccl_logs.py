"""NCCL's INFO lines, written to files of ours: what an environment needs for NCCL to write them into
a folder where its user has not sent them elsewhere (NCCL_DEBUG_FILE), and the files written. A stage
of one host sets it in its workers' environment (stages/fabric.py: whether NCCL set up NVLink SHARP);
each rank of a cluster job in its own (`capture_nccl_info`: the transport NCCL chose between nodes).
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import socket
import time
from collections.abc import Mapping
from pathlib import Path

OUR_NCCL_FILES = "nccl.%h.%p.log"  # a file per host and process


def nccl_info_settings(env: Mapping[str, str], folder: Path) -> dict[str, str]:
    """The settings `env` needs for NCCL's INFO lines (its default subsystems: communicator set-up, not
    each operation) to be written: to files in `folder` unless NCCL_DEBUG_FILE already sends them
    elsewhere; at level INFO unless NCCL_DEBUG already says INFO or TRACE. The user's own settings
    pass unchanged."""
    ours = {} if "NCCL_DEBUG_FILE" in env else {"NCCL_DEBUG_FILE": str(folder / OUR_NCCL_FILES)}
    if env.get("NCCL_DEBUG", "").upper() not in ("INFO", "TRACE"):
        ours["NCCL_DEBUG"] = "INFO"
    return ours


def our_nccl_files(folder: Path) -> list[Path]:
    """The files NCCL wrote in `folder` as `nccl_info_settings` asked."""
    return sorted(folder.glob(OUR_NCCL_FILES.replace("%h", "*").replace("%p", "*")))


_CAPTURE_BEGAN: list[float] = []  # when this process first asked for NCCL's lines
# an earlier file in a folder the user chose counts as this run's if written this close to its
# start: the folder may be on another machine (NFS), whose clock runs apart from this one's
CLOCK_SLACK_S = 60.0


def nccl_host() -> str:
    """The host as NCCL writes it for %h in NCCL_DEBUG_FILE: the name up to its first dot."""
    return socket.gethostname().split(".")[0]


def capture_nccl_info(folder: Path) -> list[Path]:
    """Ask NCCL for its INFO lines, one file per process: in `folder`, unless the user already sends
    them elsewhere (NCCL_DEBUG_FILE), whose files are kept where they are and read there. Returns
    the files this node's ranks wrote so far: of this host, and of this run."""
    first_call = not _CAPTURE_BEGAN
    if first_call:
        _CAPTURE_BEGAN.append(time.time())
    ours = str(folder / OUR_NCCL_FILES)
    settings = nccl_info_settings(os.environ, folder)  # the transport NCCL chose is in its INFO lines only
    if "NCCL_DEBUG_FILE" in settings:
        folder.mkdir(parents=True, exist_ok=True)
    os.environ.update(settings)
    pattern = nccl_files_pattern(os.environ["NCCL_DEBUG_FILE"], nccl_host())
    if os.environ["NCCL_DEBUG_FILE"] == ours:
        if first_call:  # an earlier run's files in the same reports folder: never this run's
            for stale in glob.glob(pattern):
                with contextlib.suppress(OSError):
                    os.unlink(stale)
        return sorted(Path(name) for name in glob.glob(pattern))
    found = []
    for name in sorted(glob.glob(pattern)):
        with contextlib.suppress(OSError):  # a file another job removed meanwhile
            if os.stat(name).st_mtime >= _CAPTURE_BEGAN[0] - CLOCK_SLACK_S:
                found.append(Path(name))
    return found


def nccl_files_pattern(debug_file: str, host: str) -> str:
    """The glob of the files NCCL_DEBUG_FILE names on `host`: NCCL's %h is the host, any other %
    code (%p the process) matches anything, and every other character is itself. A folder named
    `run[1]` is that folder, not `run1`, whose files (another run's) would be read and deleted."""
    parts = re.split(r"(%[a-zA-Z])", debug_file)
    return "".join(
        glob.escape(host) if part == "%h" else "*" if re.fullmatch(r"%[a-zA-Z]", part) else glob.escape(part) for part in parts
    )
