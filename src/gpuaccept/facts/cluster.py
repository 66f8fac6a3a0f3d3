"""Facts of a cluster run: what each node said of its network, and what every GPU of every node
measured together.

Each node's local rank 0 reads its own node (`NodeFacts`); global rank 0 gathers them and adds the
collectives measured over the whole job and, where one missed its floor, the localization that
followed (`ClusterFacts`). A value a node could not give is `Unavailable`, with its reason: a
machine without InfiniBand has no adapters to judge, which is not the same as adapters that are
down.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuaccept.facts.measurements import CollectiveResult, DdpResult, StepFailure
from gpuaccept.facts.record import BoolReading, FloatReading, Record, StrReading, Unavailable

CLUSTER_FACTS_VERSION: Literal[1] = 1


class PortFacts(Record):
    """One port of an RDMA adapter, as /sys/class/infiniband shows it."""

    adapter: str  # mlx5_0
    port: int
    state: StrReading  # ACTIVE (from "4: ACTIVE")
    phys_state: StrReading  # LinkUp (from "5: LinkUp")
    rate_gbps: FloatReading  # 400.0 (from "400 Gb/sec (4X NDR)")
    link_layer: StrReading  # InfiniBand | Ethernet (RoCE)
    pci_bus_id: StrReading  # 0000:17:00.0


class NicAffinity(Record):
    """How far a GPU sits from an adapter in the PCI tree, in nvidia-smi topo's words."""

    gpu: int
    gpu_bus_id: str
    adapter: str
    level: StrReading  # PIX, PXB, PHB, NODE, SYS


class NcclTransport(Record):
    """What NCCL's INFO lines say it used between the nodes."""

    networks: list[str]  # the NET transports of the channel lines: "IB", "Socket", "IBext_v8"
    net_channels: int  # channel connections made through a network transport
    gdrdma_channels: int  # of those, with GPUDirect RDMA ("/GDRDMA")
    lines_read: int


class NodeFacts(Record):
    node: int  # the node's index in the job (GROUP_RANK, SLURM_NODEID)
    host: str
    ranks: list[int]  # the global ranks on this node
    adapters: list[PortFacts] | Unavailable
    affinity: list[NicAffinity] | Unavailable
    peermem: BoolReading  # nvidia_peermem loaded: GPUDirect RDMA through the peer-memory API
    transport: NcclTransport | Unavailable
    # NCCL_*, CUDA_VISIBLE_DEVICES and the test hooks as this node's ranks saw them: a node set apart
    # (NCCL_MAX_NCHANNELS=1 on it alone) shows here
    environment: dict[str, str] = Field(default_factory=dict)


class Trial(Record):
    round: int
    nodes: list[int]
    value_GBps: float
    passed: bool
    alone: bool = False


class LocalizationFacts(Record):
    collective: str
    size_bytes: int
    floor_GBps: float
    slow: list[int]
    cleared: list[int]
    undecided: list[int]
    reason: str
    trials: list[Trial]


class ClusterFacts(Record):
    version: Literal[1] = CLUSTER_FACTS_VERSION
    profile: str
    backend: str
    torch_version: str
    nccl_version: str | None
    world: int  # every rank of the job: nodes x GPUs per node
    gpus_per_node: int
    nodes: list[NodeFacts]
    collectives: list[CollectiveResult] = Field(default_factory=list)
    failures: list[StepFailure] = Field(default_factory=list)
    localization: LocalizationFacts | Unavailable | None = None  # None: nothing missed its floor
    ddp: list[DdpResult] = Field(default_factory=list)  # on one node (world = gpus_per_node) and on all

    def node(self, index: int) -> NodeFacts:
        return next(node for node in self.nodes if node.node == index)

    def result(self, collective: str, nominal_size: str) -> CollectiveResult | None:
        return next((r for r in self.collectives if r.collective == collective and r.nominal_size == nominal_size), None)
