"""A node's network as the kernel and NCCL describe it: RDMA ports, where GPUs sit beside the
adapters, GPUDirect RDMA, and the transport NCCL chose.

Every reader takes the file system's root (`/` on a machine, a small fake tree in the tests) and
reads files only: nothing here needs a driver library. A machine without /sys/class/infiniband
has no RDMA adapters: that is an `Unavailable` ("not_found") its checks skip on, never an empty
list that a count of zero would then fail.

Sources: /sys/class/infiniband/<adapter>/ports/<n>/{state, phys_state, rate, link_layer} (the
kernel's ib_core, "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)"); the adapter's PCI function is
its `device` link; /sys/bus/pci/devices/<bdf> links into /sys/devices, whose path is the PCI tree;
/sys/module/nvidia_peermem exists while that module is loaded; NCCL's INFO channel lines
("Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA") name the transport of every connection.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from gpuaccept.facts.cluster import NcclTransport, NicAffinity, PortFacts
from gpuaccept.facts.record import Unavailable

INFINIBAND = "sys/class/infiniband"
PCI_DEVICES = "sys/bus/pci/devices"


def _read(path: Path) -> str | Unavailable:
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return Unavailable(unavailable="not_found", detail=f"no {path.name}")
    except OSError as exc:
        return Unavailable(unavailable="error", detail=f"{path}: {exc.strerror}")


def _named_state(text: str | Unavailable) -> str | Unavailable:
    """'4: ACTIVE' -> 'ACTIVE': the kernel writes the code and its name."""
    return text if isinstance(text, Unavailable) else text.partition(":")[2].strip() or text


def _rate(text: str | Unavailable) -> float | Unavailable:
    """'400 Gb/sec (4X NDR)' -> 400.0."""
    if isinstance(text, Unavailable):
        return text
    match = re.match(r"\s*([0-9.]+)\s*Gb/sec", text)
    return float(match.group(1)) if match else Unavailable(unavailable="error", detail=f"rate {text!r} not understood")


def read_ports(root: Path = Path("/")) -> list[PortFacts] | Unavailable:
    base = root / INFINIBAND
    if not base.is_dir():
        return Unavailable(unavailable="not_found", detail=f"no /{INFINIBAND}: this node has no RDMA adapter (InfiniBand or RoCE)")
    ports = []
    for adapter in sorted(base.iterdir()):
        bus_id: str | Unavailable
        try:
            bus_id = os.path.basename(os.readlink(adapter / "device"))
        except OSError:
            bus_id = Unavailable(unavailable="not_found", detail=f"{adapter.name} has no PCI device link")
        for port in sorted((adapter / "ports").glob("*"), key=lambda path: int(path.name) if path.name.isdigit() else 0):
            ports.append(
                PortFacts(
                    adapter=adapter.name,
                    port=int(port.name),
                    state=_named_state(_read(port / "state")),
                    phys_state=_named_state(_read(port / "phys_state")),
                    rate_gbps=_rate(_read(port / "rate")),
                    link_layer=_read(port / "link_layer"),
                    pci_bus_id=bus_id,
                )
            )
    if not ports:
        return Unavailable(unavailable="not_found", detail=f"/{INFINIBAND} lists no adapter port")
    return ports


def pci_path(root: Path, bus_id: str) -> list[str] | None:
    """The chain of PCI functions from the root complex down to `bus_id`: ['pci0000:00',
    '0000:00:01.0', '0000:01:00.0', ...]; None where the device is not in the tree."""
    link = root / PCI_DEVICES / normalize_bus_id(bus_id)
    try:
        target = os.readlink(link)
    except OSError:
        return None
    parts = [part for part in Path(target).parts if part.startswith("pci") or re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:", part)]
    return parts or None


def normalize_bus_id(bus_id: str) -> str:
    """NVML's '00000000:17:00.0' and torch's forms -> sysfs's '0000:17:00.0'."""
    domain, _, rest = bus_id.lower().rpartition(":")[0].partition(":")
    function = bus_id.lower().rpartition(":")[2]
    return f"{int(domain, 16):04x}:{rest}:{function}" if rest else bus_id.lower()


def pci_level(a: list[str], b: list[str], numa_a: int | None = None, numa_b: int | None = None) -> str:
    """nvidia-smi topo's name for the path between two devices, from their PCI chains:
    PIX one switch between them, PXB several switches, PHB through the host bridge, NODE
    between host bridges of one NUMA node, SYS across NUMA nodes."""
    shared = 0
    for left, right in zip(a, b, strict=False):
        if left != right:
            break
        shared += 1
    if shared == 0:
        return "NODE" if numa_a is not None and numa_a == numa_b else "SYS"
    # bridges below the root complex that both paths pass through
    common_bridges = shared - 1
    if common_bridges == 0:
        return "PHB"
    # PIX: the devices hang off the same bridge (one PCIe switch); PXB: they meet higher up
    own_a, own_b = len(a) - shared, len(b) - shared
    return "PIX" if own_a <= 2 and own_b <= 2 else "PXB"


def _numa(root: Path, bus_id: str) -> int | None:
    text = _read(root / PCI_DEVICES / normalize_bus_id(bus_id) / "numa_node")
    return int(text) if isinstance(text, str) and text.lstrip("-").isdigit() and int(text) >= 0 else None


def read_affinity(root: Path, gpu_bus_ids: list[str], ports: list[PortFacts] | Unavailable) -> list[NicAffinity] | Unavailable:
    """For each GPU, the PCI level to each RDMA adapter."""
    if isinstance(ports, Unavailable):
        return ports
    adapters = {port.adapter: port.pci_bus_id for port in ports}
    found = []
    for gpu, gpu_bus in enumerate(gpu_bus_ids):
        gpu_path = pci_path(root, gpu_bus)
        for adapter, nic_bus in adapters.items():
            level: str | Unavailable
            nic_path = pci_path(root, nic_bus) if isinstance(nic_bus, str) else None
            if gpu_path is None or nic_path is None:
                missing = gpu_bus if gpu_path is None else f"{adapter}'s device"
                level = Unavailable(unavailable="not_found", detail=f"{missing} is not in /{PCI_DEVICES}")
            else:
                level = pci_level(gpu_path, nic_path, _numa(root, gpu_bus), _numa(root, str(nic_bus)))
            found.append(NicAffinity(gpu=gpu, gpu_bus_id=normalize_bus_id(gpu_bus), adapter=adapter, level=level))
    return found


def peermem_loaded(root: Path = Path("/")) -> bool:
    return (root / "sys/module/nvidia_peermem").is_dir()


# "... NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA": the transport after NET/,
# then the device index, then GDRDMA where GPUDirect RDMA is used
_CHANNEL_NET = re.compile(r"NCCL INFO Channel \d+(?:/\d+)? : .* via NET/([A-Za-z0-9_]+)/\d+(/GDRDMA)?")


def parse_nccl_transport(lines: Iterable[str]) -> NcclTransport | Unavailable:
    networks: list[str] = []
    net = gdr = read = 0
    for line in lines:
        read += 1
        match = _CHANNEL_NET.search(line)
        if match is None:
            continue
        net += 1
        gdr += match.group(2) is not None
        if match.group(1) not in networks:
            networks.append(match.group(1))
    if read == 0:
        return Unavailable(unavailable="not_found", detail="no NCCL INFO output to read (NCCL_DEBUG=INFO was not in effect)")
    return NcclTransport(networks=networks, net_channels=net, gdrdma_channels=gdr, lines_read=read)


def read_nccl_logs(paths: Iterable[Path]) -> NcclTransport | Unavailable:
    lines: list[str] = []
    for path in paths:
        lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    return parse_nccl_transport(lines)
