"""A CUDA driver library for machines without a GPU: tests/data/cuda/fake_libcuda.c built as
`libcuda.so.1`, so the probe's real ctypes calls (argument types, pointers written, the UUID
struct) run against a library with the driver's C signatures, answering from the environment."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.helpers import DATA

SOURCE = DATA / "cuda" / "fake_libcuda.c"


def _compiler() -> str:
    """The C compiler; installed from Debian's packages where the machine lacks one (CI is root on Debian)."""
    found = shutil.which("cc") or shutil.which("gcc")
    if found is None:
        subprocess.run(["apt-get", "install", "-y", "-q", "gcc"], check=True, capture_output=True, timeout=600)
        found = shutil.which("cc") or shutil.which("gcc")
    assert found is not None, "no C compiler after apt-get install gcc"
    return found


def fake_cuda_driver(folder: Path, *, with_peer_call: bool = True) -> Path:
    """A folder holding the built `libcuda.so.1` (put it on LD_LIBRARY_PATH, or load it by path)."""
    folder.mkdir(parents=True, exist_ok=True)
    library = folder / "libcuda.so.1"
    flags = [] if with_peer_call else ["-DWITHOUT_PEER_CALL"]
    subprocess.run([_compiler(), "-shared", "-fPIC", "-O1", *flags, "-o", str(library), str(SOURCE)], check=True, timeout=120)
    return folder


def driver_environment(uuids: list[str], *, no_peer: list[tuple[int, int]] = (), init_status: int = 0, multicast: int = 0) -> dict:
    """The fake driver's answers, as environment variables."""
    return {
        "FAKE_CUDA_UUIDS": ",".join(uuids),
        "FAKE_CUDA_NO_PEER": ",".join(f"{a}-{b}" for a, b in no_peer),
        "FAKE_CUDA_INIT": str(init_status),
        "FAKE_CUDA_MULTICAST": str(multicast),
    }
