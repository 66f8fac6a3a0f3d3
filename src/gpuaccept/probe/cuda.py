"""What CUDA says about the GPUs: which ones this process sees (CUDA_VISIBLE_DEVICES applied), their
UUIDs, and peer access between them, asked from the CUDA driver API (libcuda) through ctypes.

No torch: importing it took 3.4 s of a quick check that loads nothing on a 4xH200, and its runtime
asks the same driver calls (cudaDeviceCanAccessPeer is cuDeviceCanAccessPeer). Which torch the
measurement workers will import, and the CUDA runtime it was built with, are read from its
installed files without importing it. Nothing here creates a CUDA context.
"""

from __future__ import annotations

import ast
import ctypes
import importlib.util
import os
from pathlib import Path

from gpuaccept.facts.machine import CudaFacts
from gpuaccept.facts.record import StrReading, Unavailable

CUDA_DRIVER = "libcuda.so.1"  # the CUDA driver's library, which torch's CUDA runtime loads too
CUDA_SUCCESS = 0


class _Refused(Exception):
    """A driver call that did not succeed: the whole CUDA reading is then why."""

    def __init__(self, reading: Unavailable):
        self.reading = reading


class _Driver:
    """The driver API's few calls the probe makes, each checked; a failure becomes `_Refused`."""

    def __init__(self, library: ctypes.CDLL, name: str):
        self.library = library
        self.name = name

    def call(self, function: str, *args: object) -> None:
        try:
            entry = getattr(self.library, function)
        except AttributeError:  # a driver older than the call, or a library that is not the driver
            raise _Refused(Unavailable(unavailable="not_supported", detail=f"{self.name} has no {function}")) from None
        status = entry(*args)
        if status != CUDA_SUCCESS:
            raise _Refused(Unavailable(unavailable="error", detail=f"{function} returned {self.error_name(status)}"))

    def has(self, function: str) -> bool:
        return hasattr(self.library, function)

    def error_name(self, status: int) -> str:
        """CUDA_ERROR_NO_DEVICE (100): the driver's own name for a status, where it can give one."""
        text = ctypes.c_char_p()
        if self.has("cuGetErrorName") and self.library.cuGetErrorName(status, ctypes.byref(text)) == CUDA_SUCCESS and text.value:
            return f"{text.value.decode(errors='replace')} ({status})"
        return f"CUDA error {status}"


def driver_loads(library: str = CUDA_DRIVER) -> bool:
    """Whether the CUDA driver's library loads here: a machine whose GPUs CUDA can use (nothing is
    initialized)."""
    try:
        ctypes.CDLL(library)
    except OSError:
        return False
    return True


def _uuid_text(raw: bytes) -> str:
    """A CUuuid's 16 bytes as torch and nvidia-smi write them, without the GPU- prefix."""
    hexed = raw.hex()
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}"


def probe_cuda(library: str = CUDA_DRIVER) -> CudaFacts | Unavailable:
    """The GPUs CUDA sees and peer access between them; why not, where the driver cannot say."""
    try:
        loaded = ctypes.CDLL(library)
    except OSError as exc:
        return Unavailable(unavailable="not_installed", detail=f"no CUDA driver: {str(exc).splitlines()[0]}")
    driver = _Driver(loaded, library)
    try:
        driver.call("cuInit", ctypes.c_uint(0))
        count = ctypes.c_int(0)
        driver.call("cuDeviceGetCount", ctypes.byref(count))
        if count.value == 0:
            return Unavailable(unavailable="error", detail="the CUDA driver sees no CUDA device")
        devices = []
        for ordinal in range(count.value):
            device = ctypes.c_int()
            driver.call("cuDeviceGet", ctypes.byref(device), ctypes.c_int(ordinal))
            devices.append(device)
        # _v2 gives a MIG instance's own UUID where the device is one, as CUDA_VISIBLE_DEVICES names it
        get_uuid = "cuDeviceGetUuid_v2" if driver.has("cuDeviceGetUuid_v2") else "cuDeviceGetUuid"
        uuids = []
        for device in devices:
            raw = (ctypes.c_char * 16)()
            driver.call(get_uuid, raw, device)
            uuids.append(_uuid_text(bytes(raw)))
        peer: list[list[bool | None]] = []
        for i, device in enumerate(devices):
            row: list[bool | None] = []
            for j, other in enumerate(devices):
                can = ctypes.c_int(0)
                if i != j:
                    driver.call("cuDeviceCanAccessPeer", ctypes.byref(can), device, other)
                row.append(None if i == j else bool(can.value))
            peer.append(row)
    except _Refused as refused:
        return refused.reading
    except OSError as exc:  # the call itself failed in the library loader (a broken driver install)
        return Unavailable(unavailable="error", detail=f"{library}: {exc}")
    from gpuaccept.probe.nvls import probe_multicast

    torch_version, runtime = torch_build()
    return CudaFacts(
        torch_version=torch_version,
        cuda_runtime=runtime,
        device_count=count.value,
        visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        uuids=uuids,
        peer_access=peer,
        multicast=probe_multicast(count.value, library),  # never raises: a reading, or why there is none
    )


def torch_build() -> tuple[str, StrReading]:
    """The torch the measurement workers will import ("" where none is installed) and the CUDA
    runtime it was built with, read from its version.py without importing it (seconds, with CUDA's
    libraries): the file torch's own `__version__` and `version.cuda` come from."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:
        return "", Unavailable(unavailable="not_installed", detail="torch is not installed (pip install 'gpu-accept[torch]')")
    path = Path(spec.origin).parent / "version.py"
    try:
        found = _constants(path.read_text(encoding="utf-8"), ("__version__", "cuda"))
    except (OSError, SyntaxError, ValueError) as exc:
        return "", Unavailable(unavailable="error", detail=f"{path}: {exc}")
    version = found.get("__version__")
    if not isinstance(version, str):
        return "", Unavailable(unavailable="error", detail=f"{path}: no __version__")
    if "cuda" not in found:
        return version, Unavailable(unavailable="error", detail=f"{path}: no cuda = ... line")
    cuda = found["cuda"]
    return version, cuda if isinstance(cuda, str) else Unavailable(unavailable="not_installed", detail="torch built without CUDA")


def _constants(source: str, names: tuple[str, ...]) -> dict[str, object]:
    """The literal values the module's top level assigns to `names` (`x = '1'`, `x: T = '1'`)."""
    found: dict[str, object] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in names:
            found[target.id] = ast.literal_eval(value)
    return found
