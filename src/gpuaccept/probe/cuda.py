"""What CUDA (through torch) says about the GPUs: which ones this process sees, and peer access."""

from __future__ import annotations

import ctypes
import os

from gpuaccept.facts.model import CudaFacts, Unavailable

CUDA_DRIVER = "libcuda.so.1"  # what torch's CUDA runtime loads to reach the GPUs


def probe_cuda() -> CudaFacts | Unavailable:
    # without the CUDA driver's library no CUDA device can be seen: said without importing torch
    # (seconds of a probe that runs before every quick check)
    try:
        ctypes.CDLL(CUDA_DRIVER)
    except OSError as exc:
        return Unavailable(unavailable="not_installed", detail=f"no CUDA driver: {str(exc).splitlines()[0]}")
    try:
        import torch
    except ImportError:
        return Unavailable(unavailable="not_installed", detail="torch is not installed (pip install 'gpu-accept[torch]')")
    try:
        if not torch.cuda.is_available():
            return Unavailable(unavailable="error", detail=f"torch {torch.__version__} sees no CUDA device")
        count = torch.cuda.device_count()
        uuids = [str(torch.cuda.get_device_properties(i).uuid) for i in range(count)]
        peer = [[None if i == j else bool(torch.cuda.can_device_access_peer(i, j)) for j in range(count)] for i in range(count)]
    except RuntimeError as exc:  # CUDA initialization errors surface as RuntimeError
        return Unavailable(unavailable="error", detail=f"CUDA: {str(exc).splitlines()[0]}")
    from gpuaccept.probe.nvls import probe_multicast

    multicast = probe_multicast(count)  # never raises: a reading, or why there is none
    return CudaFacts(
        torch_version=torch.__version__,
        cuda_runtime=torch.version.cuda or Unavailable(unavailable="not_installed", detail="torch built without CUDA"),
        device_count=count,
        visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        uuids=uuids,
        peer_access=peer,
        multicast=multicast,
    )
