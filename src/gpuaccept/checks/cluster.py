"""Checks of a cluster: each node's network before anything crosses it, then the collectives over
every GPU of every node, a missed floor carrying the node the localization named.

Per node (subject `node1`, the host in the message): RDMA ports ACTIVE and LinkUp, their rate,
each GPU's closest adapter, GPUDirect RDMA, the transport NCCL used, each where the profile states
it. A node without any RDMA adapter (no /sys/class/infiniband: no adapter, or its driver not
loaded) lacks what the profile requires and fails, as does one whose adapters are there but down;
adapters that could not be read, or NCCL lines that were not, are an error: never a skip.

These checks are declared like the suites' (checks/declare.py, runner "cluster") and judged by
`gpu-accept cluster`: node_verdicts and cluster_verdicts below go through the declarations.
"""

from __future__ import annotations

from typing import Any

from gpuaccept.checks.declare import DeclaredCheck, Subjects, check, declared_checks
from gpuaccept.checks.verdict import AtLeast, Better, Criterion, Described, Judge, Verdict
from gpuaccept.facts.cluster import ClusterFacts, LocalizationFacts, NodeFacts
from gpuaccept.facts.record import Unavailable
from gpuaccept.profile.model import Profile
from gpuaccept.profile.spec import ClusterSpec
from gpuaccept.vocabulary.links import PCIE_LEVELS, gpu_key
from gpuaccept.vocabulary.sizes import format_size, human_size, parse_size
from gpuaccept.vocabulary.steps import ddp_case


def node_key(node: int) -> str:
    return f"node{node}"


def _spec(profile: Profile) -> ClusterSpec | None:
    return profile.spec.cluster


def _nodes(profile: Profile) -> list[int]:
    spec = _spec(profile)
    return list(range(spec.nodes)) if spec else []


def _cases(profile: Profile) -> list[tuple[str, str]]:
    spec = _spec(profile)
    return [(collective, size) for collective, sizes in spec.busbw.items() for size in sizes] if spec else []


def _batches(profile: Profile) -> list[tuple[int, int]]:
    """(every GPU of every node, batch) for each batch DDP is judged at between the nodes."""
    spec = _spec(profile)
    if spec is None or spec.ddp_min_efficiency is None:
        return []
    batches = profile.spec.ddp.batches if profile.spec.ddp else [0]
    return [(spec.nodes * profile.gpu_count, batch) for batch in batches]


# the subjects of a cluster's checks; the suites parametrize none of them (no fixture): the job's
# nodes give the node checks their NodeFacts, the runner the rest
NODE = Subjects("", _nodes, node_key, "no nodes", "each node", "node1")
NODE_GPU = Subjects(
    "", lambda profile: [(node, gpu) for node in _nodes(profile) for gpu in range(profile.gpu_count)],
    lambda subject: f"{node_key(subject[0])}-{gpu_key(subject[1])}", "no GPUs", "each GPU of each node", "node1-gpu0",
)
CLUSTER_CASE = Subjects(
    "", _cases, lambda case: f"{case[0]}-{format_size(parse_size(case[1]))}", "no inter-node floors",
    "each collective and size the profile sets an inter-node floor for", "all_reduce-1GiB",
)
CLUSTER_BATCH = Subjects(
    "", _batches, lambda case: ddp_case(*case), "no DDP efficiency between nodes", "each DDP batch per GPU", "16gpu-bs8"
)


def _no_adapters(judge: Judge, subject: str, node: NodeFacts, reading: Unavailable, criterion: Criterion) -> Verdict:
    """The profile states RDMA adapters and the node gave none: none there fails, unreadable errs."""
    if reading.unavailable == "not_found":
        detail = f"{node.host}: no RDMA adapter ({reading.detail or reading}), expected {criterion}"
        return judge.failed(subject, detail, "none", criterion)
    return judge.unavailable(subject, f"{node.host}: RDMA adapters", reading, criterion)


@check(subjects=NODE, runner="cluster")
def rdma_ports(judge: Judge, profile: Profile, node: NodeFacts) -> Verdict:
    """The node has at least `cluster.nics.count` RDMA ports ACTIVE and LinkUp (of the link layer the
    profile names)."""
    spec = _spec(profile)
    if spec is None or spec.nics is None:
        return judge.not_applicable(node_key(node.node), "the profile states no RDMA adapters")
    wanted_layer = spec.nics.link_layer
    layer = f" {wanted_layer}" if wanted_layer else ""
    criterion = AtLeast(spec.nics.count, "ports")
    if isinstance(node.adapters, Unavailable):
        return _no_adapters(judge, node_key(node.node), node, node.adapters, criterion)
    up = [
        p for p in node.adapters
        if p.state == "ACTIVE" and p.phys_state == "LinkUp" and (wanted_layer is None or p.link_layer == wanted_layer)
    ]
    down = [f"{p.adapter}/{p.port} {p.state}/{p.phys_state}/{p.link_layer}" for p in node.adapters if p not in up]
    note = f"{node.host}" + (f"; not counted: {', '.join(down)}" if down else "")
    return judge(node_key(node.node), f"ports ACTIVE, LinkUp{layer}:", len(up), criterion, note=note)


@check(subjects=NODE, runner="cluster")
def rdma_rate(judge: Judge, profile: Profile, node: NodeFacts) -> Verdict:
    """The slowest ACTIVE RDMA port of the node runs at `cluster.nics.rate_gbps` or faster."""
    spec = _spec(profile)
    if spec is None or spec.nics is None:
        return judge.not_applicable(node_key(node.node), "the profile states no RDMA adapters")
    criterion = AtLeast(spec.nics.rate_gbps, "Gb/s")
    if isinstance(node.adapters, Unavailable):
        return _no_adapters(judge, node_key(node.node), node, node.adapters, criterion)
    active = [p for p in node.adapters if p.state == "ACTIVE"]
    if not active:
        return judge.failed(node_key(node.node), f"{node.host}: no ACTIVE port to read a rate from", "no port", criterion)
    for port in active:
        if isinstance(port.rate_gbps, Unavailable):
            return judge.unavailable(node_key(node.node), f"{port.adapter}/{port.port} rate:", port.rate_gbps, criterion)
    rates = {f"{p.adapter}/{p.port}": float(p.rate_gbps) for p in active if not isinstance(p.rate_gbps, Unavailable)}
    slowest = min(rates, key=lambda name: rates[name])
    return judge(node_key(node.node), "slowest ACTIVE port", rates[slowest], criterion, note=f"{node.host} {slowest}")


@check(subjects=NODE_GPU, runner="cluster")
def gpu_nic_affinity(judge: Judge, profile: Profile, node: NodeFacts, gpu: int) -> Verdict:
    """The GPU's closest RDMA adapter is at the PCIe distance `affinity.nic` names, or closer (and is
    the adapter it names)."""
    subject = f"{node_key(node.node)}-{gpu_key(gpu)}"
    wanted = profile.expected_nic(gpu)
    if wanted is None:
        return judge.not_applicable(subject, "the profile states no NIC for this GPU (affinity.nic)")
    rule = f"an RDMA adapter at {wanted.link} or closer" + (f", {wanted.nic}" if wanted.nic else "")
    criterion = Described(rule)
    if isinstance(node.affinity, Unavailable):
        return _no_adapters(judge, subject, node, node.affinity, criterion)
    known = [(a.adapter, a.level) for a in node.affinity if a.gpu == gpu and isinstance(a.level, str)]
    if not known:
        return judge.error(subject, f"{node.host}: the PCI path of {gpu_key(gpu)} to the adapters could not be read", criterion)
    best = min(PCIE_LEVELS.index(level) for _, level in known)
    closest = sorted(adapter for adapter, level in known if PCIE_LEVELS.index(level) == best)
    measured = f"{'/'.join(closest)} at {PCIE_LEVELS[best]}"
    near_enough = [adapter for adapter, level in known if PCIE_LEVELS.index(level) <= PCIE_LEVELS.index(wanted.link)]
    if not near_enough or (wanted.nic and wanted.nic not in near_enough):
        return judge.failed(subject, f"{node.host}: closest RDMA adapter {measured}, expected {rule}", measured, criterion)
    return judge.passed(subject, f"{node.host}: closest RDMA adapter {measured}", measured, criterion)


@check(subjects=NODE, runner="cluster")
def gpudirect_rdma(judge: Judge, profile: Profile, node: NodeFacts) -> Verdict:
    """GPUDirect RDMA works on the node: nvidia_peermem loaded, or NCCL's network channels went
    through GDRDMA (dma-buf)."""
    spec = _spec(profile)
    if spec is None or not spec.gpudirect_rdma:
        return judge.not_applicable(node_key(node.node), "the profile does not require GPUDirect RDMA")
    criterion = Described("nvidia_peermem loaded, or GDRDMA in NCCL's network channels (dma-buf)")
    if isinstance(node.adapters, Unavailable):
        return _no_adapters(judge, node_key(node.node), node, node.adapters, criterion)
    transport = node.transport
    gdr_channels = 0 if isinstance(transport, Unavailable) else transport.gdrdma_channels
    evidence = []
    if node.peermem is True:
        evidence.append("nvidia_peermem loaded")
    if gdr_channels:
        evidence.append(f"{gdr_channels} NCCL channels via GDRDMA")
    if evidence:
        return judge.passed(node_key(node.node), f"{node.host}: {', '.join(evidence)}", True, criterion)
    seen = "no NCCL INFO output read" if isinstance(transport, Unavailable) else f"{transport.net_channels} network channels, none GDRDMA"
    return judge.failed(node_key(node.node), f"{node.host}: nvidia_peermem not loaded and {seen}, expected {criterion}", False, criterion)


@check(subjects=NODE, runner="cluster")
def nccl_transport(judge: Judge, profile: Profile, node: NodeFacts) -> Verdict:
    """NCCL's channels between the nodes went through a network transport the profile accepts
    (`cluster.transport`: IB, Socket)."""
    spec = _spec(profile)
    if spec is None or spec.transport is None:
        return judge.not_applicable(node_key(node.node), "the profile names no NCCL network transport")
    criterion = Described(f"NCCL channels between nodes via NET/{' or NET/'.join(spec.transport)}")
    transport = node.transport
    if isinstance(transport, Unavailable):  # NCCL's INFO lines of the run were not there to read
        return judge.error(node_key(node.node), f"{node.host}: which transport NCCL used is unknown: {transport}", criterion)
    if not transport.networks:
        detail = f"{node.host}: no NCCL channel went through a network, expected {criterion}"
        return judge.failed(node_key(node.node), detail, "none", criterion)
    measured = "/".join(transport.networks)
    other = [name for name in transport.networks if name not in spec.transport]
    if other:
        return judge.failed(node_key(node.node), f"{node.host}: NCCL used NET/{measured}, expected {criterion}", measured, criterion)
    detail = f"{node.host}: NCCL used NET/{measured} on {transport.net_channels} channels"
    return judge.passed(node_key(node.node), detail, measured, criterion)


@check(subjects=CLUSTER_CASE, marginal=True, runner="cluster", headline=True, fleet=True, better=Better.HIGHER)
def cluster_busbw(judge: Judge, profile: Profile, facts: ClusterFacts, collective: str, size: str) -> Verdict:
    """Bus bandwidth of a collective over every GPU of every node is at least the profile's
    `cluster.busbw` floor; a miss names the slow node where measuring groups of nodes apart found one."""
    spec = _spec(profile)
    floors = spec.busbw if spec else {}
    size_bytes = parse_size(size)
    subject = f"{collective}-{format_size(size_bytes)}"
    scope = f"{collective} {human_size(size_bytes)} over {facts.world} ranks on {len(facts.nodes)} nodes"
    sizes: dict[str, float] = dict(floors.get(collective, {}))  # type: ignore[call-overload]
    floor = next((value for text, value in sizes.items() if parse_size(text) == size_bytes), None)
    if floor is None:
        return judge.not_applicable(subject, "the profile sets no inter-node floor for this collective and size")
    criterion = AtLeast(floor, "GB/s")
    result = next((r for r in facts.collectives if r.collective == collective and parse_size(r.nominal_size) == size_bytes), None)
    if result is None:
        return judge.error(subject, "not measured", criterion, scope=scope)
    if isinstance(result.wrong, int) and result.wrong:
        return judge.failed(subject, f"{result.wrong} wrong elements in the result", result.wrong, criterion, scope=scope, final=True)
    note = ""
    if not criterion.holds(result.busbw_GBps) and isinstance(facts.localization, LocalizationFacts):
        note = localization_note(facts, facts.localization)
    elif not criterion.holds(result.busbw_GBps) and isinstance(facts.localization, Unavailable):
        note = f"localization: {facts.localization.detail}"
    return judge(subject, "busbw", result.busbw_GBps, criterion, note=note, scope=scope,
                 context={"algbw_GBps": result.algbw_GBps, "time_us": result.time_us, "ranks": result.ranks})


@check(subjects=CLUSTER_BATCH, name="cluster_ddp_efficiency", marginal=True, runner="cluster", headline=True, fleet=True,
       share=True, better=Better.HIGHER)
def cluster_ddp(judge: Judge, profile: Profile, facts: ClusterFacts, case: tuple[int, int]) -> Verdict:
    """DDP samples/s per GPU training on every node over on one node (what the network costs DDP) is
    at least the profile's `cluster.ddp_min_efficiency`."""
    spec = _spec(profile)
    world, batch = case
    subject = ddp_case(world, batch)
    if spec is None or spec.ddp_min_efficiency is None:
        return judge.not_applicable(subject, "the profile sets no cluster.ddp_min_efficiency")
    criterion = AtLeast(spec.ddp_min_efficiency)
    many = next((r for r in facts.ddp if r.world == world and r.batch == batch), None)
    one = next((r for r in facts.ddp if r.world == facts.gpus_per_node and r.batch == batch), None)
    scope = f"DDP batch {batch} per GPU, {len(facts.nodes)} nodes over 1"
    if many is None or one is None:
        return judge.error(subject, "DDP on one node and on every node was not measured (the profile needs a ddp: section)",
                           criterion, scope=scope)
    efficiency = many.samples_per_s_per_gpu / one.samples_per_s_per_gpu
    note = f"{many.samples_per_s_per_gpu:.4g} samples/s per GPU on {world} GPUs, {one.samples_per_s_per_gpu:.4g} on {one.world}"
    return judge(subject, "efficiency", efficiency, criterion, note=note, scope=scope)


def localization_note(facts: ClusterFacts, found: LocalizationFacts) -> str:
    def named(index: int) -> str:
        return f"{node_key(index)} ({facts.node(index).host})"

    if found.slow:
        return f"slow node: {', '.join(named(i) for i in found.slow)}: {found.reason}"
    if not found.undecided:
        return "no slow node: every group of nodes met the floor when measured apart"
    return f"no single node named ({found.reason}); undecided: {', '.join(named(i) for i in found.undecided)}"


def _checks_of(subjects: Subjects) -> list[DeclaredCheck[Any]]:
    return [found for found in declared_checks("cluster") if found.declaration.subjects is subjects]


def node_verdicts(profile: Profile, node: NodeFacts, gpus_per_node: int) -> list[Verdict]:
    """Every check of one node, each GPU's after the node's own: what a rank judges of its node."""
    verdicts = []
    for found in declared_checks("cluster"):
        subjects = found.declaration.subjects
        if subjects is NODE:
            verdicts.append(found(profile, node))
        elif subjects is NODE_GPU:
            verdicts += [found(profile, node, gpu) for gpu in range(gpus_per_node)]
    return verdicts


def cluster_verdicts(profile: Profile, facts: ClusterFacts) -> list[Verdict]:
    """Every node's checks, then the collectives and DDP over every node."""
    verdicts = [v for node in facts.nodes for v in node_verdicts(profile, node, facts.gpus_per_node)]
    for case in CLUSTER_CASE.of(profile):
        verdicts += [found(profile, facts, *case) for found in _checks_of(CLUSTER_CASE)]
    for case in CLUSTER_BATCH.of(profile):
        verdicts += [found(profile, facts, case) for found in _checks_of(CLUSTER_BATCH)]
    return verdicts
