"""Checks of a cluster: each node's network before anything crosses it, then the collectives over
every GPU of every node, a missed floor carrying the node the localization named.

Per node (subject `node1`, the host in the message): RDMA ports ACTIVE and LinkUp, their rate,
each GPU's closest adapter, GPUDirect RDMA, the transport NCCL used, each where the profile states
it. A node without any RDMA adapter (no /sys/class/infiniband: no adapter, or its driver not
loaded) lacks what the profile requires and fails, as does one whose adapters are there but down;
adapters that could not be read, or NCCL lines that were not, are an error: never a skip.
"""

from __future__ import annotations

from gpuaccept.checks.verdict import AtLeast, Criterion, Described, Judge, Verdict
from gpuaccept.facts.cluster import ClusterFacts, LocalizationFacts, NodeFacts
from gpuaccept.facts.model import Unavailable
from gpuaccept.profile.model import Profile
from gpuaccept.profile.spec import ClusterSpec
from gpuaccept.vocabulary.links import PCIE_LEVELS, gpu_key
from gpuaccept.vocabulary.sizes import format_size, human_size, parse_size
from gpuaccept.vocabulary.steps import ddp_case


def node_key(node: int) -> str:
    return f"node{node}"


def _spec(profile: Profile) -> ClusterSpec | None:
    return profile.spec.cluster


def _no_adapters(judge: Judge, subject: str, node: NodeFacts, reading: Unavailable, criterion: Criterion) -> Verdict:
    """The profile states RDMA adapters and the node gave none: none there fails, unreadable errs."""
    if reading.unavailable == "not_found":
        detail = f"{node.host}: no RDMA adapter ({reading.detail or reading}), expected {criterion}"
        return judge.failed(subject, detail, "none", criterion)
    return judge.unavailable(subject, f"{node.host}: RDMA adapters", reading, criterion)


def rdma_ports(profile: Profile, node: NodeFacts) -> Verdict:
    judge = Judge("rdma_ports", profile.name)
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


def rdma_rate(profile: Profile, node: NodeFacts) -> Verdict:
    judge = Judge("rdma_rate", profile.name)
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


def gpu_nic_affinity(profile: Profile, node: NodeFacts, gpu: int) -> Verdict:
    judge = Judge("gpu_nic_affinity", profile.name)
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


def gpudirect_rdma(profile: Profile, node: NodeFacts) -> Verdict:
    judge = Judge("gpudirect_rdma", profile.name)
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


def nccl_transport(profile: Profile, node: NodeFacts) -> Verdict:
    judge = Judge("nccl_transport", profile.name)
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


def cluster_busbw(profile: Profile, facts: ClusterFacts, collective: str, size: str) -> Verdict:
    spec = _spec(profile)
    floors = spec.busbw if spec else {}
    judge = Judge("cluster_busbw", profile.name, profile.spec.judging.marginal_band)
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


def cluster_ddp(profile: Profile, facts: ClusterFacts, batch: int) -> Verdict:
    """Samples/s per GPU training on every node over on one node: what the network costs DDP."""
    spec = _spec(profile)
    judge = Judge("cluster_ddp_efficiency", profile.name, profile.spec.judging.marginal_band)
    subject = ddp_case(facts.world, batch)
    if spec is None or spec.ddp_min_efficiency is None:
        return judge.not_applicable(subject, "the profile sets no cluster.ddp_min_efficiency")
    criterion = AtLeast(spec.ddp_min_efficiency)
    many = next((r for r in facts.ddp if r.world == facts.world and r.batch == batch), None)
    one = next((r for r in facts.ddp if r.world == facts.gpus_per_node and r.batch == batch), None)
    scope = f"DDP batch {batch} per GPU, {len(facts.nodes)} nodes over 1"
    if many is None or one is None:
        return judge.error(subject, "DDP on one node and on every node was not measured (the profile needs a ddp: section)",
                           criterion, scope=scope)
    efficiency = many.samples_per_s_per_gpu / one.samples_per_s_per_gpu
    note = f"{many.samples_per_s_per_gpu:.4g} samples/s per GPU on {facts.world} GPUs, {one.samples_per_s_per_gpu:.4g} on {one.world}"
    return judge(subject, "efficiency", efficiency, criterion, note=note, scope=scope)


def localization_note(facts: ClusterFacts, found: LocalizationFacts) -> str:
    def named(index: int) -> str:
        return f"{node_key(index)} ({facts.node(index).host})"

    if found.slow:
        return f"slow node: {', '.join(named(i) for i in found.slow)}: {found.reason}"
    if not found.undecided:
        return "no slow node: every group of nodes met the floor when measured apart"
    return f"no single node named ({found.reason}); undecided: {', '.join(named(i) for i in found.undecided)}"


def node_verdicts(profile: Profile, node: NodeFacts, gpus_per_node: int) -> list[Verdict]:
    verdicts = [rdma_ports(profile, node), rdma_rate(profile, node)]
    verdicts += [gpu_nic_affinity(profile, node, gpu) for gpu in range(gpus_per_node)]
    verdicts += [gpudirect_rdma(profile, node), nccl_transport(profile, node)]
    return verdicts


def cluster_verdicts(profile: Profile, facts: ClusterFacts) -> list[Verdict]:
    spec = _spec(profile)
    verdicts = [v for node in facts.nodes for v in node_verdicts(profile, node, facts.gpus_per_node)]
    if spec is not None:
        verdicts += [cluster_busbw(profile, facts, collective, size) for collective, sizes in spec.busbw.items() for size in sizes]
        if spec.ddp_min_efficiency is not None:
            batches = profile.spec.ddp.batches if profile.spec.ddp else [0]
            verdicts += [cluster_ddp(profile, facts, batch) for batch in batches]
    return verdicts
