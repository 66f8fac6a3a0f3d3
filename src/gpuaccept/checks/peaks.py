"""The physical peak a bandwidth is measured against: NVLink links x per-link speed, or PCIe
generation x width. Published per-direction rates, not thresholds: what the wire could carry."""

from __future__ import annotations

from dataclasses import dataclass

from gpuaccept.facts.machine import GpuFacts
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.vocabulary.nvml_codes import NVLINK_VERSION_NAMES

# GB/s per link and direction, where the links' own speed is not known. NVLink 4.0: nvidia-smi
# nvlink -s shows 26.562 GB/s per link on H100/H200; 3.0: 25 GB/s (A100; GA102 bridges run
# narrower links at 14.0625, which only the reported speed tells apart); 5.0: 1.8 TB/s over 18
# links, both directions.
NVLINK_GBPS_PER_LINK = {"1.0": 20.0, "2.0": 25.0, "2.2": 25.0, "3.0": 25.0, "3.1": 25.0, "4.0": 26.5625, "5.0": 50.0}
# GB/s per lane and direction after line encoding (8b/10b up to gen 2, 128b/130b from gen 3)
PCIE_GBPS_PER_LANE = {1: 0.25, 2: 0.5, 3: 8 * 128 / 130 / 8, 4: 16 * 128 / 130 / 8, 5: 32 * 128 / 130 / 8}


@dataclass(frozen=True)
class Peak:
    GBps: float
    what: str  # "NVLink 18 x 26.56 GB/s"

    def share(self, measured: float) -> float:
        return 100.0 * measured / self.GBps


def nvlink_peak(gpu: GpuFacts, links: int | None = None) -> Peak | None:
    """The links' speed as the GPU reports it where every active link has one (a 3090's bridge
    runs 14.062 GB/s links of NVLink 3.0); the generation's table speed otherwise."""
    if isinstance(gpu.nvlinks, Unavailable):
        return None
    active = [link for link in gpu.nvlinks if link.active]
    speeds = [link.speed_GBps for link in active if not isinstance(link.speed_GBps, Unavailable)]
    if active and len(speeds) == len(active):
        count = len(active) if links is None else links
        reported = sum(speeds) / len(speeds)
        same = len(set(speeds)) == 1
        shown = f"{reported:g} GB/s" if same else f"{reported:.4g} GB/s on average"
        return Peak(count * reported, f"NVLink, {count} x {shown} as reported")
    versions = {link.version for link in active if not isinstance(link.version, Unavailable)}
    if not active or len(versions) != 1:
        return None
    name = NVLINK_VERSION_NAMES.get(versions.pop())
    per_link = NVLINK_GBPS_PER_LINK.get(name or "")
    if per_link is None:
        return None
    count = len(active) if links is None else links
    return Peak(count * per_link, f"NVLink {name}, {count} x {per_link:g} GB/s")


def pcie_peak(gpu: GpuFacts) -> Peak | None:
    generation, width = gpu.pcie.generation_max, gpu.pcie.width_max
    if isinstance(generation, Unavailable) or isinstance(width, Unavailable) or generation not in PCIE_GBPS_PER_LANE:
        return None
    return Peak(PCIE_GBPS_PER_LANE[generation] * width, f"PCIe gen{generation} x{width}")


def _slowest(peaks: list[Peak | None]) -> Peak | None:
    known = [p for p in peaks if p is not None]
    if not peaks or len(known) < len(peaks):
        return None
    return min(known, key=lambda p: p.GBps)


def collective_peak(facts: Facts) -> Peak | None:
    """The slowest GPU's link to the rest: NVLink where every GPU has it, PCIe otherwise."""
    nvlinks = [nvlink_peak(gpu) for gpu in facts.gpus]
    if facts.gpus and all(nvlinks):
        return _slowest(nvlinks)
    return _slowest([pcie_peak(gpu) for gpu in facts.gpus])


def pair_peak(facts: Facts, a: int, b: int) -> Peak | None:
    first, second = facts.gpu(a), facts.gpu(b)
    link = facts.link(a, b)
    if first is None or second is None or link is None:
        return None
    if isinstance(link.link_type, str) and link.link_type.startswith("NV"):
        return nvlink_peak(first, int(link.link_type[2:]))
    return _slowest([pcie_peak(first), pcie_peak(second)])
