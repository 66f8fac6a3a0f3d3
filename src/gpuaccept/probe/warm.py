"""The drivers' slow starts, begun in threads as the probe's process starts: cuInit (hundreds of
milliseconds, more on a machine of many GPUs) and NVML's init run while Python imports the facts'
models, and beside each other; NVML's in the command's own process too, as it starts the probe.
The later cuInit and nvmlInit return at once, or wait for these (both drivers count their inits).
Nothing here reads an answer: a driver that cannot start is said by the probe's own call."""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading

from gpuaccept.probe.nvml import NVML_REPLAY

CUDA_DRIVER = "libcuda.so.1"


def begin(cuda_library: str = CUDA_DRIVER) -> None:
    starts = [_cuda_init]
    if not os.environ.get(NVML_REPLAY):  # a recording answers for the driver: nothing to start
        starts.append(_nvml_init)
    for start in starts:
        threading.Thread(target=start, args=(cuda_library,), name=f"gpu-accept {start.__name__}", daemon=True).start()


def begin_nvml() -> None:
    """NVML's start alone, for the command's own process, which opens NVML for the XID listener as
    its session starts (never CUDA: the measurement workers it starts must find it uninitialized).
    Begun as the command starts, it runs while the command imports and waits for the probe."""
    if not os.environ.get(NVML_REPLAY):
        threading.Thread(target=_nvml_init, args=("",), name="gpu-accept _nvml_init", daemon=True).start()


def _cuda_init(library: str) -> None:
    with contextlib.suppress(OSError, AttributeError):  # no driver, or not the driver's library: probe/cuda.py says so
        ctypes.CDLL(library).cuInit(0)


def _nvml_init(library: str) -> None:
    with contextlib.suppress(Exception):  # whatever fails is the probe's own to say, when it starts NVML itself
        import pynvml

        pynvml.nvmlInit()
