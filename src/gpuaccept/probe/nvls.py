"""NVLink SHARP (NVLS): whether the GPUs offer switch multicast, and whether NCCL used it.

Two witnesses, because either alone misleads. CUDA's CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED says
what the GPU and driver offer; it reads 1 on boards whose fabric manager cannot be reached, where
NCCL then fails to bind multicast memory and runs without NVLS. NCCL's INFO lines at communicator
set-up say what NCCL did:

    NCCL INFO NVLS multicast support is available on dev 0
    NCCL INFO NVLS multicast support is not available on dev 5
    NCCL INFO NVLS comm 0x55cd... headRank 1 nHeads 8 ... nvlsTotalSize 268435456
    NCCL INFO 24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels, ...
    NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.

Reading only: nothing here creates a multicast object or changes a setting.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Iterable
from pathlib import Path

from gpuaccept.facts.measurements import NcclNvls
from gpuaccept.facts.record import BoolReading, Unavailable

# cuda.h (CUDA 12.0 and later): "Device supports switch multicast and reduction operations"
CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED = 132
_CUDA_SUCCESS = 0
_CUDA_ERROR_INVALID_VALUE = 1  # what a driver older than the attribute answers for it

_AVAILABLE = re.compile(r"NVLS multicast support is (not )?available on dev (\d+)")
_COMM = re.compile(r"NVLS comm 0x[0-9a-fA-F]+ headRank")
_CHANNELS = re.compile(r"\b(\d+) nvls channels\b")
_ENABLE = re.compile(r"NCCL_NVLS_ENABLE set by environment to (\S+?)\.?$")


def parse_nccl_nvls(lines: Iterable[str]) -> NcclNvls | Unavailable:
    available: set[int] = set()
    not_available: set[int] = set()
    comms = read = 0
    channels: int | None = None
    enable: str | None = None
    for line in lines:
        if "NCCL" not in line:
            continue
        read += 1
        if match := _AVAILABLE.search(line):
            (not_available if match.group(1) else available).add(int(match.group(2)))
        elif _COMM.search(line):
            comms += 1
        elif match := _CHANNELS.search(line):
            channels = max(channels or 0, int(match.group(1)))
        elif match := _ENABLE.search(line.rstrip()):
            enable = match.group(1)
    if read == 0:
        return Unavailable(unavailable="not_found", detail="no NCCL INFO output to read (NCCL_DEBUG=INFO was not in effect)")
    return NcclNvls(
        available_on=sorted(available), not_available_on=sorted(not_available), nvls_comms=comms, nvls_channels=channels,
        enable_setting=enable, lines_read=read,
    )


def read_nccl_nvls(paths: Iterable[Path]) -> NcclNvls | Unavailable:
    lines: list[str] = []
    for path in paths:
        try:
            lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            return Unavailable(unavailable="error", detail=f"{path}: {exc.strerror}")
    return parse_nccl_nvls(lines)


def probe_multicast(count: int, library: str = "libcuda.so.1") -> list[BoolReading] | Unavailable:
    """CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED of CUDA ordinals 0..count-1, through the driver API.
    A driver that does not know the attribute, or no driver library, is "not supported" or "not
    installed", never False: only the driver's own answer is a yes or a no."""
    try:
        cuda = ctypes.CDLL(library)
    except OSError as exc:
        return Unavailable(unavailable="not_installed", detail=f"{library}: {exc}")
    try:
        status = cuda.cuInit(0)
        if status != _CUDA_SUCCESS:
            return Unavailable(unavailable="error", detail=f"cuInit returned CUDA error {status}")
        readings: list[BoolReading] = []
        for ordinal in range(count):
            device = ctypes.c_int()
            status = cuda.cuDeviceGet(ctypes.byref(device), ordinal)
            if status != _CUDA_SUCCESS:
                readings.append(Unavailable(unavailable="error", detail=f"cuDeviceGet({ordinal}) returned CUDA error {status}"))
                continue
            value = ctypes.c_int(-1)
            status = cuda.cuDeviceGetAttribute(ctypes.byref(value), CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, device)
            if status == _CUDA_ERROR_INVALID_VALUE:
                readings.append(Unavailable(unavailable="not_supported",
                                            detail="the driver does not know CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED (before CUDA 12.0)"))
            elif status != _CUDA_SUCCESS or value.value not in (0, 1):
                said = f"cuDeviceGetAttribute(MULTICAST_SUPPORTED) returned CUDA error {status}, value {value.value}"
                readings.append(Unavailable(unavailable="error", detail=said))
            else:
                readings.append(value.value == 1)
        return readings
    except AttributeError as exc:  # a library without the driver API's functions
        return Unavailable(unavailable="not_supported", detail=f"{library}: {exc}")
    except OSError as exc:  # the call itself failed in the library loader (a broken driver install)
        return Unavailable(unavailable="error", detail=f"{library}: {exc}")
