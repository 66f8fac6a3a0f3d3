"""What a machine is: its GPUs, their PCIe and NVLink, the links and P2P between them, CUDA and the
system as NVML and the PCI bus list it (inventory and topology)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from gpuaccept.facts.record import (
    NOT_READ,
    NOT_READ_DUMPED,
    BoolReading,
    Count,
    FloatReading,
    IntReading,
    OmitsLaterDefaults,
    Record,
    StrReading,
    Unavailable,
    not_negative,
    not_probed,
)


class PcieFacts(Record):
    generation_current: IntReading
    generation_max: IntReading  # what the GPU and its slot together allow
    generation_gpu_max: IntReading  # what the GPU alone supports
    width_current: IntReading
    width_max: IntReading

    _not_negative = field_validator(
        "generation_current", "generation_max", "generation_gpu_max", "width_current", "width_max"
    )(not_negative)


class NvLinkFacts(OmitsLaterDefaults):
    link: int
    active: bool
    version: IntReading  # NVML's code: 4 = NVLink 3.0, 6 = NVLink 4.0, 7 = NVLink 5.0
    remote_type: IntReading  # 0 GPU, 1 IBM NPU, 2 NVSwitch, 255 unknown
    remote_bus_id: StrReading  # normalized; FFFFFFFF:FF:FF.0 inside VMs for switch links
    # the link's speed as the GPU reports it (`nvidia-smi nvlink -s`): GB/s per direction
    speed_GBps: FloatReading = Field(default_factory=lambda: not_probed(NOT_READ))

    later_fields: ClassVar[dict[str, Any]] = {"speed_GBps": NOT_READ_DUMPED}


class FabricFacts(Record):
    state: int  # 0 not supported, 1 not started, 2 in progress, 3 completed
    status: int  # an NVML return code: 0 success
    clique_id: int
    cluster_uuid: str


class NicLink(Record):
    """A network adapter as `nvidia-smi topo -m` shows it from one GPU: its name and the PCIe path."""

    nic: str  # the adapter's name: mlx5_0 where the legend names it, NIC0 otherwise
    link: str  # PIX, PXB, PHB, NODE, SYS


class GpuFacts(OmitsLaterDefaults):
    index: int  # the CUDA ordinal, as the process under test sees it: the `gpuN` of test ids
    nvml_index: int
    name: StrReading  # not_probed where the facts come from text that does not name the model
    uuid: str
    pci_bus_id: str
    serial: StrReading
    vbios: StrReading
    memory_total_bytes: IntReading
    ecc_enabled: BoolReading
    persistence_mode: BoolReading
    numa_node: IntReading
    clock_event_reasons: IntReading
    pcie: PcieFacts
    nvlinks: list[NvLinkFacts] | Unavailable
    fabric: FabricFacts | Unavailable
    # affinity as `nvidia-smi topo -m` prints it: CPU and NUMA lists ("0-47,96-143"), every NIC
    cpu_affinity: StrReading = Field(default_factory=lambda: not_probed(NOT_READ))
    numa_affinity: StrReading = Field(default_factory=lambda: not_probed(NOT_READ))
    nics: list[NicLink] | Unavailable = Field(default_factory=lambda: not_probed(NOT_READ))

    later_fields: ClassVar[dict[str, Any]] = {name: NOT_READ_DUMPED for name in ("cpu_affinity", "numa_affinity", "nics")}

    _not_negative = field_validator("index", "nvml_index", "memory_total_bytes")(not_negative)


class LinkFacts(OmitsLaterDefaults):
    """How two GPUs are connected, as `nvidia-smi topo -m` shows it, with the evidence."""

    gpus: tuple[Count, Count]
    link_type: StrReading  # NV18, PIX, SYS ...
    direct_nvlinks: int  # links from the first GPU whose far end is the second
    topology_level: IntReading  # nvmlDeviceGetTopologyCommonAncestor
    via_switch: bool  # both GPUs reach each other through NVSwitch links
    evidence: str = ""  # where the link type was read, when not from NVML ("nvidia-smi topo -m text")

    later_fields: ClassVar[dict[str, Any]] = {"evidence": ""}


class P2PFacts(Record):
    """Peer-to-peer capability of an ordered pair: NVML status per capability, and CUDA's answer."""

    gpus: tuple[Count, Count]
    nvml: dict[str, StrReading]  # read/write/nvlink/atomics/pci (topo -p2p's "prop") -> OK, NOT_SUPPORTED, ...
    cuda_can_access_peer: BoolReading


class CudaFacts(OmitsLaterDefaults):
    torch_version: str
    cuda_runtime: StrReading
    device_count: Count
    visible_devices: str | None  # CUDA_VISIBLE_DEVICES as set, None when unset
    uuids: list[str]  # in CUDA ordinal order
    peer_access: list[list[bool | None]]  # [i][j], None on the diagonal
    # CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED per CUDA ordinal (NVLink SHARP's switch multicast); None: not probed
    multicast: list[BoolReading] | Unavailable | None = None

    later_fields: ClassVar[dict[str, Any]] = {"multicast": None}


class InstalledGpu(Record):
    """A GPU as NVML sees it, under test or not: CUDA_VISIBLE_DEVICES hides GPUs from CUDA only."""

    nvml_index: int
    name: str
    uuid: str
    pci_bus_id: str


class SystemFacts(OmitsLaterDefaults):
    hostname: str
    driver_version: StrReading
    cuda_driver_version: StrReading  # the CUDA version the driver supports, e.g. "13.0"
    nvml_version: StrReading
    nvml_gpu_count: int  # every GPU NVML sees, under test or not
    installed_gpus: list[InstalledGpu] = Field(default_factory=list)  # each of them, in NVML order
    # NVIDIA functions on the PCI bus as the kernel lists them (/sys/bus/pci/devices), NVML or not:
    # a GPU that fell off the driver is still there, or an NVSwitch says which board this is
    pci_gpus: list[str] | Unavailable = Field(default_factory=lambda: not_probed(NOT_READ))  # bus ids, display/3D class
    pci_nvswitches: list[str] | Unavailable = Field(default_factory=lambda: not_probed(NOT_READ))  # bus ids, bridge class

    later_fields: ClassVar[dict[str, Any]] = {"pci_gpus": NOT_READ_DUMPED, "pci_nvswitches": NOT_READ_DUMPED}

    @property
    def unseen_pci_gpus(self) -> list[str]:
        """GPUs on the PCI bus that NVML does not see (fallen off the bus, failed to initialize), by bus id."""
        if isinstance(self.pci_gpus, Unavailable):
            return []
        seen = {gpu.pci_bus_id for gpu in self.installed_gpus}
        return [bus for bus in self.pci_gpus if bus not in seen]

    @property
    def installed_model(self) -> str | None:
        """The GPU model of the machine as installed: the most common NVML product name."""
        names = [gpu.name for gpu in self.installed_gpus]
        return max(names, key=names.count) if names else None

    _not_negative = field_validator("nvml_gpu_count")(not_negative)
