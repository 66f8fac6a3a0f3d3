"""Rebuilding the link type nvidia-smi shows for a GPU pair from NVML's answers.

nvidia-smi shows NV# where NVLinks join the pair and the PCIe path otherwise. Two cases:
- direct NVLinks (bridges, DGX-1 style meshes): # is the number of links whose far end is the
  other GPU;
- NVSwitch: every link ends at a switch, and any two GPUs of the partition talk through it.
  nvidia-smi then shows NV# with # the links the pair can use together, the smaller of the two
  GPUs' active switch links, which is also how NCCL counts them.
The PCIe common ancestor (nvmlDeviceGetTopologyCommonAncestor) says host bridge for such pairs;
the NVLink view overrides it.
"""

from __future__ import annotations

from gpuaccept.facts.machine import NvLinkFacts
from gpuaccept.facts.record import Unavailable, is_known
from gpuaccept.vocabulary.links import TOPOLOGY_LEVEL_LABELS, nvlink_type
from gpuaccept.vocabulary.nvml_codes import NVLINK_REMOTE_GPU, NVLINK_REMOTE_SWITCH


def switch_links(links: list[NvLinkFacts] | Unavailable) -> int:
    if isinstance(links, Unavailable):
        return 0
    return sum(1 for link in links if link.active and link.remote_type == NVLINK_REMOTE_SWITCH)


def classify_pair(
    links_a: list[NvLinkFacts] | Unavailable,
    links_b: list[NvLinkFacts] | Unavailable,
    bus_id_b: str,
    topology_level: int | Unavailable,
) -> tuple[str | Unavailable, int, bool]:
    """(link type, direct NVLinks from a to b, whether the pair is joined through NVSwitch)."""
    direct = 0
    unreadable = 0
    if not isinstance(links_a, Unavailable):
        for link in links_a:
            if not link.active:
                continue
            if link.remote_type == NVLINK_REMOTE_GPU or not is_known(link.remote_type):
                if is_known(link.remote_bus_id) and link.remote_bus_id == bus_id_b:
                    direct += 1
                elif not is_known(link.remote_bus_id) and not is_known(link.remote_type):
                    unreadable += 1
    if direct:
        return nvlink_type(direct), direct, False
    shared = min(switch_links(links_a), switch_links(links_b))
    if shared:
        return nvlink_type(shared), 0, True
    if unreadable:
        return (
            Unavailable(unavailable="error", detail=f"{unreadable} active NVLink(s) whose far end NVML could not name"),
            0,
            False,
        )
    if isinstance(topology_level, Unavailable):
        return topology_level, 0, False
    label = TOPOLOGY_LEVEL_LABELS.get(topology_level)
    if label is None:
        return Unavailable(unavailable="error", detail=f"unknown topology level {topology_level}"), 0, False
    return label, 0, False
