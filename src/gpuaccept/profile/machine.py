"""What a machine is, as its facts show it: which GPU model, how many GPUs it must have, and how
they are joined. The catalogue's expectations are keyed by these.

How many GPUs a machine must have is never simply how many are visible: a GPU that fell off the
bus must not turn an 8-GPU server into a healthy 7-GPU one. The count is the largest that any
evidence gives, each piece named: NVML's count (CUDA_VISIBLE_DEVICES hides GPUs from CUDA only),
GPUs on the PCI bus that NVML does not see, NVSwitches on the bus (a whole board), the partition
sizes of an NVSwitch board (3 GPUs of an HGX board are a partition of 4 missing one), and NVLink
bridges whose far end is a GPU that is not there. A count the user states wins over all of them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gpuaccept.facts.machine import GpuFacts
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.profile.catalogue import Catalogue, FabricKind, Gpu
from gpuaccept.vocabulary.nvml_codes import NVLINK_REMOTE_GPU, NVLINK_REMOTE_SWITCH


class UnknownMachine(ValueError):
    """The facts do not say what the machine is well enough to derive its profile."""


@dataclass(frozen=True)
class Installed:
    """The GPUs a machine must have, and why that many."""

    model: str  # NVML's product name
    visible: int  # GPUs under test
    count: int  # GPUs the machine must have
    evidence: tuple[str, ...]  # each piece of evidence for the count, in words
    missing: tuple[str, ...] = ()  # what names each GPU missing: a bus id, or what shows it is missing

    @property
    def complete(self) -> bool:
        return self.count == self.visible

    def describe(self) -> str:
        text = f"{self.count}x {self.model}"
        if self.missing:
            text += f", {self.count - self.visible} missing ({'; '.join(self.missing)})"
        return text


def installed_gpus(facts: Facts, catalogue: Catalogue, stated_count: int | None = None, stated_model: str | None = None) -> Installed:
    """The count of GPUs the machine must have, from every piece of evidence its facts hold."""
    model, nvml_count = facts.installed()
    if stated_model is not None:
        model = stated_model
    visible = facts.gpu_count
    if stated_count is not None:
        return Installed(model, visible, stated_count, (f"{stated_count} as stated",), _missing_stated(visible, stated_count))
    count = max(visible, nvml_count)
    evidence = [f"{nvml_count} seen by NVML"] if nvml_count != visible else [f"{visible} under test"]
    missing: list[str] = []
    if nvml_count > visible:
        missing += [f"NVML GPU {gpu.nvml_index} ({gpu.pci_bus_id}) not visible to CUDA" for gpu in facts.hidden_gpus]
    unseen = facts.system.unseen_pci_gpus
    if unseen:
        count = max(count, nvml_count + len(unseen))
        evidence.append(f"{len(unseen)} more on the PCI bus than NVML sees")
        missing += [f"bus {bus} on the PCI bus, not seen by the driver" for bus in unseen]
    known = catalogue.gpu_named(model)
    gpu = known[1] if known else None
    if gpu is not None and gpu.board is not None:
        count, evidence, missing = _board_evidence(facts, gpu, count, evidence, missing)
    if gpu is not None and gpu.bridge is not None:
        peers = _absent_bridge_peers(facts)
        if peers:
            count = max(count, nvml_count + len(peers))
            evidence.append(f"NVLink bridges to {len(peers)} GPU(s) not there")
            missing += [f"bus {bus}, the far end of an NVLink bridge" for bus in peers]
    if count > visible and len(missing) < count - visible:
        missing.append(f"{count - visible - len(missing)} more the evidence counts")
    return Installed(model, visible, count, tuple(evidence), tuple(missing))


def _missing_stated(visible: int, stated: int) -> tuple[str, ...]:
    return (f"{stated - visible} of the {stated} stated",) if stated > visible else ()


def _board_evidence(
    facts: Facts, gpu: Gpu, count: int, evidence: list[str], missing: list[str]
) -> tuple[int, list[str], list[str]]:
    """An NVSwitch board: its switches on the PCI bus say the whole board is here; GPUs joined
    through its switches come in its partition sizes only."""
    board = gpu.board
    assert board is not None
    switches = facts.system.pci_nvswitches
    if not isinstance(switches, Unavailable) and len(switches) >= board.nvswitches and count < board.gpus:
        evidence.append(f"{len(switches)} NVSwitches on the PCI bus: a whole board of {board.gpus}")
        missing.append(f"{board.gpus - count} of the board's {board.gpus} GPUs not seen")
        return board.gpus, evidence, missing
    switched = [g for g in facts.gpus if _switch_links(g) > 0]
    if switched:
        sizes = sorted(size for size in board.partitions if size >= 2)  # a GPU alone has its NVLinks off
        if count not in sizes:
            fitting = [size for size in sizes if size >= count]
            if fitting:
                sizes_text = ", ".join(map(str, board.partitions))
                evidence.append(
                    f"{len(switched)} GPU(s) joined through NVSwitch: a partition of {fitting[0]} "
                    f"(the board's partitions hold {sizes_text} GPUs)"
                )
                missing.append(f"{fitting[0] - count} of the NVSwitch partition's {fitting[0]} GPUs not seen")
                return fitting[0], evidence, missing
    return count, evidence, missing


def _switch_links(gpu: GpuFacts) -> int:
    links = gpu.nvlinks
    if isinstance(links, Unavailable):
        return 0
    return sum(1 for link in links if link.active and link.remote_type == NVLINK_REMOTE_SWITCH)


def _absent_bridge_peers(facts: Facts) -> list[str]:
    """Bus ids at the far end of active GPU-to-GPU NVLinks that are no GPU NVML sees."""
    present = {gpu.pci_bus_id for gpu in facts.system.installed_gpus} | {gpu.pci_bus_id for gpu in facts.gpus}
    far: set[str] = set()
    for gpu in facts.gpus:
        if isinstance(gpu.nvlinks, Unavailable):
            continue
        for link in gpu.nvlinks:
            far_end = link.remote_bus_id
            # a VM hides a switch's or peer's bus id as FFFFFFFF:FF:FF.0: no evidence of a GPU
            to_a_gpu = link.active and link.remote_type == NVLINK_REMOTE_GPU
            if to_a_gpu and isinstance(far_end, str) and not far_end.startswith("FFFFFFFF") and far_end not in present:
                far.add(far_end)
    return sorted(far)


# ---- how the GPUs are joined --------------------------------------------------------------------


@dataclass(frozen=True)
class Fabric:
    """How the machine's GPUs are joined, in the catalogue's words."""

    kind: FabricKind  # the slowest way any two of its GPUs talk: what its collectives run over
    rate_GBps: float  # one GPU's bandwidth each way over that kind: its links, or its PCIe link
    rate_text: str  # the rate as its parts: 18 x 26.5625 GB/s NVLink 4.0
    pair_links: dict[tuple[int, int], str] = field(default_factory=dict)  # the link type of each pair seen, as topo -m names it
    bridged: dict[int, int] = field(default_factory=dict)  # GPU -> its bridge partner, where bridged
    pair_kind: FabricKind = "none"  # the slowest kind any one pair talks over (the pairwise floor)
    pair_rate_GBps: float = 0.0
    pair_rate_text: str = ""

    @property
    def across_sockets(self) -> bool:
        """Some pair talks across the socket interconnect (SYS), over PCIe."""
        return self.kind in ("host", "pcie") and "SYS" in self.pair_links.values()


def fabric_of(facts: Facts, catalogue: Catalogue, gpu: Gpu, count: int) -> Fabric:
    """The machine's fabric: NVSwitch where its GPUs reach each other through switches, NVLink
    bridges where pairs are bridged, the host path over PCIe otherwise."""
    if count < 2:
        return Fabric("none", 0.0, "")
    pairs: dict[tuple[int, int], str] = {}
    for link in facts.links:
        if isinstance(link.link_type, str):
            pairs[(min(link.gpus), max(link.gpus))] = link.link_type
    nvlink_pairs = {pair for pair, kind in pairs.items() if kind.startswith("NV")}
    pcie = catalogue.pcie_rate(gpu)
    switched = any(link.via_switch for link in facts.links) or any(_switch_links(g) for g in facts.gpus)
    if gpu.board is not None and gpu.nvlink is not None and (switched or (pairs and len(nvlink_pairs) == len(pairs))):
        rate = gpu.nvlink.links * gpu.nvlink.link_GBps
        text = f"{gpu.nvlink.links} x {gpu.nvlink.link_GBps:g} GB/s NVLink {gpu.nvlink.version} through NVSwitch"
        return Fabric("nvswitch", rate, text, pairs, {}, "nvswitch", rate, text)
    bridged: dict[int, int] = {}
    if gpu.bridge is not None and gpu.nvlink is not None:
        for a, b in sorted(nvlink_pairs):
            if a not in bridged and b not in bridged:
                bridged[a], bridged[b] = b, a
    if bridged:
        assert gpu.nvlink is not None and gpu.bridge is not None
        bridge_rate = gpu.bridge.links * gpu.nvlink.link_GBps
        bridge_text = f"{gpu.bridge.links} x {gpu.nvlink.link_GBps:g} GB/s NVLink {gpu.nvlink.version} over a bridge"
        if len(nvlink_pairs) == len(pairs) and len(bridged) >= count:
            return Fabric("nvlink", bridge_rate, bridge_text, pairs, bridged, "nvlink", bridge_rate, bridge_text)
        rate, text = pcie
        return Fabric("host", rate, text, pairs, bridged, "host", rate, text)
    rate, text = pcie
    return Fabric("host", rate, text, pairs, {}, "host", rate, text)


def most_common_link(pairs: dict[tuple[int, int], str]) -> str | None:
    return Counter(pairs.values()).most_common(1)[0][0] if pairs else None
