"""Turning NVML and CUDA answers into Facts.

Every NVML error becomes an `Unavailable` reading with the call and NVML's word for it; the checks
decide what that means for a profile. Only an error that leaves nothing to check (no GPU, a GPU
CUDA sees that NVML does not) stops the probe.
"""

from __future__ import annotations

import datetime
import os
import socket
from collections.abc import Callable
from typing import Any

from gpuaccept import __version__
from gpuaccept.errors import NoDriverError, ProbeError
from gpuaccept.facts.machine import CudaFacts, FabricFacts, GpuFacts, InstalledGpu, LinkFacts, NvLinkFacts, P2PFacts, PcieFacts, SystemFacts
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import NOT_READ, Unavailable, is_known, not_probed
from gpuaccept.probe.linktype import classify_pair
from gpuaccept.probe.nvml import Nvml, NvmlCallError
from gpuaccept.vocabulary.links import gpu_key, normalize_uuid
from gpuaccept.vocabulary.nvml_codes import MAX_NVLINKS, P2P_STATUS_NAMES, P2PCapability

_REASONS = {
    "NOT_SUPPORTED": "not_supported",
    "FUNCTION_NOT_FOUND": "not_supported",
    "NO_PERMISSION": "no_permission",
    "GPU_IS_LOST": "gpu_is_lost",
    "NOT_FOUND": "not_found",
    "TIMEOUT": "timeout",
}

# Environment a run depends on, kept with the facts so a replay knows what the machine was told.
ENVIRONMENT_PREFIXES = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NCCL_",
    "NVSHMEM_",
    "TORCH_NCCL_",
    "TORCH_SYMM_MEM_",
    "NVIDIA_VISIBLE_DEVICES",
    "SLURM_JOB_ID",
    "SLURM_JOB_NODELIST",
    "OMP_NUM_THREADS",
)


def unavailable(error: NvmlCallError) -> Unavailable:
    call = f"{error.query}({', '.join(str(a) for a in error.query_args)})"
    return Unavailable(unavailable=_REASONS.get(error.code, "error"), detail=f"{call}: {error.code} {error.message}".strip())


def read(nvml: Nvml, name: str, *args: int, convert: Callable[[Any], Any] = lambda v: v) -> Any:
    try:
        return convert(nvml.query(name, *args))
    except NvmlCallError as error:
        return unavailable(error)


def normalize_bus_id(bus_id: str) -> str:
    """00000000:00:06.0 and 0000:00:06.0 name the same function; compare them as one form."""
    domain, _, rest = bus_id.strip().rpartition(":")
    domain, _, bus = domain.rpartition(":") if domain.count(":") else ("0", "", domain)
    device, _, function = rest.partition(".")
    return f"{int(domain or '0', 16):08X}:{int(bus, 16):02X}:{int(device, 16):02X}.{int(function or '0', 16)}"


PciFunctions = tuple[list[str] | Unavailable, list[str] | Unavailable]  # (GPU bus ids, NVSwitch bus ids): probe/pci.py


def collect_facts(
    nvml: Nvml, cuda: CudaFacts | Unavailable, environ: dict[str, str] | None = None, pci: PciFunctions | None = None
) -> Facts:
    """`pci`: the machine's NVIDIA PCI functions; None where they are not this NVML's (answers replayed)."""
    environ = dict(os.environ if environ is None else environ)
    try:
        nvml_count = nvml.query("device_count")
        driver = nvml.query("driver_version")
    except NvmlCallError as error:
        raise NoDriverError(f"no NVIDIA driver found: {error}") from None
    if nvml_count == 0:
        raise NoDriverError("no NVIDIA GPU found: NVML reports 0 devices")

    nvml_order = _gpus_under_test(nvml, nvml_count, cuda, environ)
    gpus = [_gpu_facts(nvml, cuda_index, nvml_index) for cuda_index, nvml_index in enumerate(nvml_order)]
    links = [
        _link_facts(nvml, gpus[a], gpus[b])
        for a in range(len(gpus))
        for b in range(a + 1, len(gpus))
    ]
    p2p = [_p2p_facts(nvml, gpus[a], gpus[b], cuda) for a in range(len(gpus)) for b in range(len(gpus)) if a != b]
    system = SystemFacts(
        hostname=socket.gethostname(),
        driver_version=driver,
        cuda_driver_version=read(nvml, "cuda_driver_version", convert=_cuda_version_text),
        nvml_version=read(nvml, "nvml_version"),
        nvml_gpu_count=nvml_count,
        installed_gpus=[_installed(nvml, index) for index in range(nvml_count)],
        **({"pci_gpus": pci[0], "pci_nvswitches": pci[1]} if pci is not None else {}),
    )
    return Facts(
        recorded_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        tool_version=__version__,
        system=system,
        cuda=cuda,
        gpus=gpus,
        links=links,
        p2p=p2p,
        environment={k: v for k, v in sorted(environ.items()) if k.startswith(ENVIRONMENT_PREFIXES)},
    )


def _cuda_version_text(code: int) -> str:
    return f"{code // 1000}.{(code % 1000) // 10}"


def _installed(nvml: Nvml, index: int) -> InstalledGpu:
    """What identifies a GPU NVML sees, whether or not it is under test; '' where NVML cannot say."""

    def text(name: str, convert: Callable[[str], str] = str) -> str:
        try:
            return convert(nvml.query(name, index))
        except NvmlCallError:
            return ""

    return InstalledGpu(nvml_index=index, name=text("name"), uuid=text("uuid"), pci_bus_id=text("pci_bus_id", normalize_bus_id))


def _gpus_under_test(nvml: Nvml, nvml_count: int, cuda: CudaFacts | Unavailable, environ: dict) -> list[int]:
    """NVML indices of the GPUs under test, in CUDA ordinal order.

    NVML ignores CUDA_VISIBLE_DEVICES and may order GPUs differently from CUDA, so the two are
    matched by UUID.
    """
    if isinstance(cuda, Unavailable):
        if environ.get("CUDA_VISIBLE_DEVICES") is not None:
            raise ProbeError(
                f"CUDA_VISIBLE_DEVICES is set but CUDA could not be asked which GPUs it selects: {cuda}"
            )
        return list(range(nvml_count))
    by_uuid: dict[str, int] = {}
    for index in range(nvml_count):
        try:
            by_uuid[normalize_uuid(nvml.query("uuid", index))] = index
        except NvmlCallError as error:
            raise ProbeError(f"cannot read the UUID of NVML GPU {index}: {error}") from None
    order = []
    for cuda_index, uuid in enumerate(cuda.uuids):
        if normalize_uuid(uuid) not in by_uuid:
            raise ProbeError(f"CUDA device {cuda_index} (UUID {uuid}) is not among the GPUs NVML sees")
        order.append(by_uuid[normalize_uuid(uuid)])
    return order


def _gpu_facts(nvml: Nvml, cuda_index: int, i: int) -> GpuFacts:
    def required(name: str) -> Any:
        try:
            return nvml.query(name, i)
        except NvmlCallError as error:
            raise ProbeError(f"{gpu_key(cuda_index)}: NVML cannot read its {name.replace('_', ' ')}: {error}") from None

    ecc = read(nvml, "ecc_mode", i)
    return GpuFacts(
        index=cuda_index,
        nvml_index=i,
        name=required("name"),
        uuid=required("uuid"),
        pci_bus_id=normalize_bus_id(required("pci_bus_id")),
        serial=read(nvml, "serial", i),
        vbios=read(nvml, "vbios", i),
        memory_total_bytes=required("memory_total"),
        ecc_enabled=bool(ecc[0]) if is_known(ecc) else ecc,
        persistence_mode=read(nvml, "persistence_mode", i, convert=bool),
        numa_node=read(nvml, "numa_node", i),
        clock_event_reasons=read(nvml, "clock_event_reasons", i),
        pcie=PcieFacts(
            generation_current=read(nvml, "pcie_generation_current", i),
            generation_max=read(nvml, "pcie_generation_max", i),
            generation_gpu_max=read(nvml, "pcie_generation_gpu_max", i),
            width_current=read(nvml, "pcie_width_current", i),
            width_max=read(nvml, "pcie_width_max", i),
        ),
        nvlinks=_nvlinks(nvml, i),
        fabric=_fabric(nvml, i),
    )


def _nvlinks(nvml: Nvml, i: int) -> list[NvLinkFacts] | Unavailable:
    links = []
    for link in range(MAX_NVLINKS):
        try:
            state = nvml.query("nvlink_state", i, link)
        except NvmlCallError as error:
            if error.code == "INVALID_ARGUMENT" or (error.code == "NOT_SUPPORTED" and link > 0):
                break  # past the last link this GPU has
            return unavailable(error)
        active = bool(state)
        down = Unavailable(unavailable="not_probed", detail="link is down")
        links.append(
            NvLinkFacts(
                link=link,
                active=active,
                version=read(nvml, "nvlink_version", i, link),
                remote_type=read(nvml, "nvlink_remote_type", i, link) if active else down,
                remote_bus_id=read(nvml, "nvlink_remote_bus_id", i, link, convert=normalize_bus_id) if active else down,
                speed_GBps=_link_speed(nvml, i, link) if active else down,
            )
        )
    return links


def _link_speed(nvml: Nvml, i: int, link: int) -> float | Unavailable:
    speed = read(nvml, "nvlink_speed_mbps", i, link, convert=lambda mbps: mbps / 1000)
    # a recording made before this query was asked has no answer for it: not read, not an error
    if isinstance(speed, Unavailable) and "NOT_RECORDED" in speed.detail:
        return not_probed(NOT_READ)
    return speed


def _fabric(nvml: Nvml, i: int) -> FabricFacts | Unavailable:
    info = read(nvml, "fabric_info", i)
    return FabricFacts(**info) if is_known(info) else info


def _link_facts(nvml: Nvml, a: GpuFacts, b: GpuFacts) -> LinkFacts:
    level = read(nvml, "topology_common_ancestor", a.nvml_index, b.nvml_index)
    link_type, direct, via_switch = classify_pair(a.nvlinks, b.nvlinks, b.pci_bus_id, level)
    return LinkFacts(
        gpus=(a.index, b.index), link_type=link_type, direct_nvlinks=direct, topology_level=level, via_switch=via_switch
    )


def _p2p_facts(nvml: Nvml, src: GpuFacts, dst: GpuFacts, cuda: CudaFacts | Unavailable) -> P2PFacts:
    statuses = {
        cap.name.lower(): read(
            nvml, "p2p_status", src.nvml_index, dst.nvml_index, int(cap), convert=lambda v: P2P_STATUS_NAMES.get(v, f"STATUS_{v}")
        )
        for cap in P2PCapability
    }
    if isinstance(cuda, Unavailable):
        peer = cuda
    else:
        peer = cuda.peer_access[src.index][dst.index]
    return P2PFacts(gpus=(src.index, dst.index), nvml=statuses, cuda_can_access_peer=peer)
