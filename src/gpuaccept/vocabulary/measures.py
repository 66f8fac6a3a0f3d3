"""The measured values report.html draws beside the verdicts that judged them: the link matrix, the
bus bandwidth charts, the pair and peer-copy matrices, the host copy table and the DDP table.

A check declares which of them its value is (checks/declare.py: `measure`); its verdicts carry it,
and vocabulary/checks.json holds it for results written before they did. The page joins each value
it draws to the verdict of that measure and of the value's subject, never to a check by its name.
Each is named by where the facts hold the value.
"""

from __future__ import annotations

import enum

from gpuaccept.vocabulary.copies import CopyKind


class Measure(str, enum.Enum):
    """Which measured value a verdict judged, where report.html draws it; with the verdict's subject,
    the value itself."""

    LINK_TYPE = "links.link_type"  # the link between two GPUs, its subject the pair: gpu0-gpu1
    COLLECTIVE_BUSBW = "collectives.busbw"  # a collective's bus bandwidth at a size: all_reduce 1 GiB
    PAIR_BUSBW = "pairwise.busbw"  # a GPU pair's send/receive bandwidth each way: gpu0-gpu1
    LOCAL_COPY = "copies.local"  # copy bandwidth within a GPU: gpu0
    P2P_COPY = "copies.p2p"  # copy bandwidth from one GPU to another: gpu1-gpu0
    HOST_TO_DEVICE_COPY = "copies.host_to_device"  # from pinned host memory to a GPU: gpu0
    DEVICE_TO_HOST_COPY = "copies.device_to_host"  # from a GPU to pinned host memory: gpu0
    DDP_EFFICIENCY = "ddp.efficiency"  # per-GPU throughput as a share of one GPU's, at a DDP setting: 4gpu-bs8
    DDP_EXPOSED_COMMUNICATION = "ddp.exposed_share"  # the share of a step spent in communication not hidden
    DDP_NVLINK_SPEEDUP = "ddp.speedup"  # throughput with P2P over that with NCCL_P2P_DISABLE=1

    def __str__(self) -> str:  # as results.json writes it
        return self.value


# the copies the page draws, by kind (both directions of a pair at once are not drawn)
COPY_MEASURES: dict[CopyKind, Measure] = {
    "local": Measure.LOCAL_COPY,
    "p2p": Measure.P2P_COPY,
    "host_to_device": Measure.HOST_TO_DEVICE_COPY,
    "device_to_host": Measure.DEVICE_TO_HOST_COPY,
}
