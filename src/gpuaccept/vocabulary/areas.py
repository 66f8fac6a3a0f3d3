"""The areas of a machine that checks judge, in the order causes come first, and the kinds of root
cause that a check's failure can be of other checks.

Every check declares its area (checks/declare.py); each verdict carries it, so that coverage ("not
checked: compute — the facts hold no per-GPU loads") and causes first are read from data by every
writer, never from a list of check names. The order is the machine's, from the bottom up: a GPU
that is missing (inventory) or busy with someone else's work (health) comes before the links,
collectives, copies and DDP settings it fails.
"""

from __future__ import annotations

from typing import Literal

# area -> what it covers, for people; in the order causes come first
AREAS: dict[str, str] = {
    "inventory": "GPU model, count, memory, ECC mode, driver and CUDA",
    "health": "NVML health readings, XIDs and other processes",
    "topology": "PCIe, NVLink, the NVSwitch fabric, the link matrix and affinity",
    "p2p": "P2P capability",
    "nccl": "NCCL collectives and pairwise bandwidth",
    "copies": "copy bandwidth",
    "ddp": "DDP scaling",
    "compute": "the per-GPU loads: GEMM, HBM bandwidth and the memory test",
    "telemetry": "clocks, temperatures and power while the loads ran",
    "burn-in": "a burn-in's rounds and its sustained load, hot",
    "baseline": "the regression gate against a baseline",
    "cluster": "the nodes of a cluster and the network between them",
}
UNKNOWN_AREA = ""  # a test without a verdict that says its area: listed after every area

# the areas whose values the measurement stages load the GPUs for: what someone else's load slows
MEASURED_AREAS = frozenset({"nccl", "copies", "ddp", "compute"})

# the suite module of each area, for results written before verdicts carried their area
AREA_OF_SUITE = {
    "test_inventory": "inventory", "test_health": "health", "test_topology": "topology", "test_p2p": "p2p", "test_nccl": "nccl",
    "test_bandwidth": "copies", "test_ddp": "ddp", "test_compute": "compute", "test_telemetry": "telemetry",
    "test_burnin": "burn-in", "test_baseline": "baseline",
}

# A failed check that is the root cause of others: the GPUs its verdict names are missing (every
# check of those GPUs follows from it), or carry someone else's load (the measurements that use
# them follow from it: a GEMM on one GPU slows every collective and DDP setting it is part of).
RootCause = Literal["absent_gpus", "foreign_load"]
ROOT_CAUSES: dict[str, str] = {
    "absent_gpus": "every check of the GPUs it names",
    "foreign_load": "the measurements that use the GPUs it names",
}


def area_order(area: str) -> int:
    """Where `area` comes in causes-first order; an unknown one last."""
    order = list(AREAS)
    return order.index(area) if area in AREAS else len(order)


def follows(root: str, root_gpus: list[int], area: str, gpus: list[int]) -> bool:
    """Whether a check of `area` on `gpus` follows from a failure of a root cause of kind `root` on
    `root_gpus`."""
    if not set(root_gpus) & set(gpus):
        return False
    if root == "absent_gpus":
        return True
    return root == "foreign_load" and area in MEASURED_AREAS
