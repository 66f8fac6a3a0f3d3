"""`gpu-accept cluster`: acceptance of many nodes as one job, each rank of it running this.

The launcher is the one the cluster already runs, never one of ours: the same command on every
node under `torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d ...`, or as every task of
`srun --nodes N --ntasks-per-node G`. Each process is one rank with one GPU (one CPU under gloo):

1. It reads who it is from the launcher's variables, checks the job's shape against the profile
   (WORLD_SIZE = cluster.nodes x gpus.count, before anyone waits on anyone), and joins one process
   group of every rank of every node: a rank missing past `cluster.rendezvous_s` ends every rank
   with one line and exit 2.
2. Every rank measures the profile's `cluster.busbw` collectives together, with the single-node
   step code (`collective_step`), so busbw is nccl-tests' at world size N x G.
3. A collective that missed its floor is narrowed down to a node (`measure.localize`): global rank
   0 decides which groups of nodes to measure, every rank takes part (`Job.measure_groups`).
   Where the profile asks for DDP scaling (`cluster.ddp_min_efficiency`), its `ddp:` workload
   trains on one node and on every node: samples/s per GPU on all over on one.
4. Local rank 0 of each node reads its node: RDMA ports, GPU<->adapter PCI levels, nvidia_peermem
   (before step 1's wait as well, written at once: a job that never measures still leaves them),
   and the transport NCCL logged (NCCL_DEBUG=INFO into a file per process, asked for at start).
5. Node facts are gathered to global rank 0, which judges the cluster (each node's verdicts and the
   inter-node ones) and writes its run record, as a run of one host is written (cluster/reports.py):
   cluster-results.json, cluster-junit.xml and cluster-report.html (with the nodes x tests view, the
   slow node marked); each node's local rank 0 writes the record of its own tests, node-results.json
   in OUT/node<i>-<host>/, so every node keeps its results.

Everything is in one process per rank, with no worker of its own: torchrun or srun own the
processes, NCCL's (or gloo's) timeouts bound a hung collective. Every rank returns the same exit
code: 0 passed, 1 a check failed, 2 nothing could be judged (bad shape, a rank missing). After the
last barrier the process group is not torn down: the command line ends the process at once (see
cli._cluster), since the group's threads can abort an orderly interpreter exit.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path

from gpuaccept.checks.cluster import cluster_verdicts, node_verdicts
from gpuaccept.checks.verdict import Verdict
from gpuaccept.cluster.reports import (
    NODE_RESULTS,
    cluster_name,
    lines,
    run_info,
    started,
    write_cluster,
    write_in_progress,
    write_node,
)
from gpuaccept.errors import EXIT_USAGE, GpuAcceptError, shown
from gpuaccept.facts.cluster import ClusterFacts, LocalizationFacts, NcclTransport, NodeFacts, Trial
from gpuaccept.facts.measurements import CollectiveResult, DdpResult
from gpuaccept.facts.record import Unavailable
from gpuaccept.facts.run_record import RunInfo
from gpuaccept.measure.cluster import Job, gpu_bus_ids, join, launch_from_environment
from gpuaccept.measure.drills import Drills
from gpuaccept.measure.localize import Group, localize
from gpuaccept.measure.nccl_logs import capture_nccl_info
from gpuaccept.measure.plan import CollectiveStep, DdpStep
from gpuaccept.measure.ranks import Launch
from gpuaccept.measure.worker import RECORDED_ENVIRONMENT
from gpuaccept.probe.network import peermem_loaded, read_affinity, read_nccl_logs, read_ports
from gpuaccept.profile.model import Profile
from gpuaccept.profile.spec import ClusterSpec
from gpuaccept.report.results import run_moment
from gpuaccept.stages.fabric import ddp_shape
from gpuaccept.vocabulary.sizes import format_size, parse_size


class ClusterShapeError(GpuAcceptError):
    """The job is not the cluster the profile describes."""


class ClusterMeasureError(GpuAcceptError):
    """A collective over the whole job failed: nothing after it can be measured on that group."""


def run_cluster(
    profile: Profile, out: Path, root: Path = Path("/"), backend: str = "auto", name: str | None = None, metrics: Path | None = None,
) -> int:
    """This rank's part of the job; its exit code, the same on every rank. `name`: the cluster's, as
    its history in a results store knows it (its nodes' hosts where None); `metrics`: where global
    rank 0 writes the run's Prometheus text ("in progress" from its start)."""
    spec = profile.spec.cluster
    began = run_moment()
    if spec is None:
        raise ClusterShapeError(f"profile {profile.name} ({profile.path}) has no cluster: section")
    launch = launch_from_environment()
    gpus = profile.spec.gpus.count
    if launch.local_world != gpus or launch.world != spec.nodes * gpus:
        raise ClusterShapeError(
            f"the job has {launch.world} ranks, {launch.local_world} per node; profile {profile.name} wants "
            f"cluster.nodes {spec.nodes} x gpus.count {gpus} = {spec.nodes * gpus}"
        )
    # this node's drills, read once (GPUACCEPT_INJECT_SLOW on one node's ranks makes it the slow node)
    drills = Drills.from_environment(os.environ)
    host = socket.gethostname()
    node_out = out / f"node{launch.node}-{host}"
    capture_nccl_info(node_out)
    if launch.rank == 0 and metrics is not None:  # a job killed from here on leaves "in progress", never an earlier pass
        write_in_progress(metrics, name or socket.gethostname(), profile.name, began)
    watchdog = start_watchdog(deadline_s(profile, spec.nodes), launch.rank, launch.world)
    own_run = run_info(profile, began)  # this node's record of its own tests, written before the job joins and at its end
    if launch.local_rank == 0:
        _preflight(profile, launch, root, node_out, gpus, drills, own_run, backend)
    job = join(launch, backend, spec.rendezvous_s, spec.timeout_s, drills)
    try:
        if job.nodes != spec.nodes or any(len(ranks) != gpus for ranks in job.layout.values()):
            shape = ", ".join(f"node{node} {len(ranks)}" for node, ranks in sorted(job.layout.items()))
            raise ClusterShapeError(f"ranks per node as they joined: {shape}; profile {profile.name} wants {spec.nodes} nodes of {gpus}")
        collectives = _measure(job, spec)
        localization = _localize(job, spec, collectives)
        ddp = _ddp(job, profile, gpus)
        mine = None
        if launch.local_rank == 0:
            mine = _node_facts(launch, job.layout[launch.node], root, node_out, gpus, job.me.backend, drills)
        gathered = job.gather(mine.model_dump(mode="json") if mine else None)
        nodes = [NodeFacts.model_validate(node) for node in gathered if node is not None]
        facts = ClusterFacts(
            profile=profile.name, backend=job.me.backend, torch_version=job.torch_version, nccl_version=job.nccl_version,
            world=launch.world, gpus_per_node=gpus, nodes=sorted(nodes, key=lambda node: node.node),
            collectives=collectives, localization=localization, ddp=ddp,
        )
        if mine is not None:
            _write_node(profile, facts, mine, node_out, own_run, complete=True)
        code = 0
        if launch.rank == 0:
            code = _report(profile, facts, out, began, name or cluster_name([node.host for node in facts.nodes]), metrics)
        code = int(job.broadcast(code))
        job.gather(code)  # a barrier: every rank holds the verdict before any rank leaves
        return code
    except BaseException:
        job.close()
        raise
    finally:
        watchdog.cancel()


def deadline_s(profile: Profile, nodes: int) -> float:
    """The longest a rank may go without a verdict: the rendezvous, then every collective and every
    localization round (at most 2 N + 4 of them) each at its timeout, the gathers, and DDP twice."""
    spec = profile.spec.cluster
    assert spec is not None
    rounds = len(_steps(spec)) + 2 * nodes + 4
    ddp = profile.spec.ddp
    training = 2 * ddp.timeout_s if ddp is not None and spec.ddp_min_efficiency is not None else 0.0
    return spec.rendezvous_s + rounds * spec.timeout_s + training


def start_watchdog(seconds: float, rank: int, world: int) -> threading.Timer:
    """End this rank with one line and exit 2 should it still have no verdict after `seconds`: every
    wait has its own timeout, and this is the bound on what slips past them (a hang inside a library)."""

    def expire() -> None:
        print(
            f"gpu-accept: rank {rank} of {world}: no verdict after {seconds:g} s, longer than every timeout of the profile "
            "allows together (a peer or a collective hung past its own timeout)",
            file=sys.stderr, flush=True,
        )
        os._exit(EXIT_USAGE)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


def _steps(spec: ClusterSpec) -> list[CollectiveStep]:
    return [
        CollectiveStep(collective=collective, size_bytes=parse_size(size), dtype=spec.dtype, warmup=spec.warmup,
                       iterations=spec.iterations, timeout_s=spec.timeout_s)
        for collective, sizes in spec.busbw.items() for size in sizes
    ]


def _measure(job: Job, spec: ClusterSpec) -> list[CollectiveResult]:
    results = []
    for step in _steps(spec):
        try:
            record = job.measure(step)
        except Exception as exc:  # a collective that failed or timed out: the job's process group cannot be trusted after it
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ClusterMeasureError(f"rank {job.me.rank}: {step.label} over the whole job failed: {text}") from None
        fields = {name: value for name, value in record.items() if name != "key"}
        results.append(CollectiveResult(nominal_size=format_size(step.size_bytes), **fields))
    return results


def floor_of(spec: ClusterSpec, collective: str, size_bytes: int) -> float | None:
    """The profile's floor, however its size was written (1GiB, 1024MiB)."""
    sizes = spec.busbw.get(collective, {})  # type: ignore[call-overload]
    return next((floor for size, floor in sizes.items() if parse_size(size) == size_bytes), None)


def _first_miss(spec: ClusterSpec, results: list[CollectiveResult]) -> CollectiveResult | None:
    for result in results:
        floor = floor_of(spec, result.collective, parse_size(result.nominal_size))
        if floor is not None and result.busbw_GBps < floor:
            return result
    return None


def _localize(job: Job, spec: ClusterSpec, results: list[CollectiveResult]) -> LocalizationFacts | None:
    """Every rank computes the same miss from the same results, so all of them enter here together."""
    missed = _first_miss(spec, results)
    if missed is None:
        return None
    floor = floor_of(spec, missed.collective, parse_size(missed.nominal_size)) or 0.0
    size = parse_size(spec.localize.size) if spec.localize.size else parse_size(missed.nominal_size)
    step = CollectiveStep(collective=missed.collective, size_bytes=size, dtype=spec.dtype, warmup=spec.warmup,
                          iterations=spec.iterations, timeout_s=spec.timeout_s)
    if job.me.rank != 0:
        job.serve()
        return None

    def busbw(groups: list[Group]) -> dict[Group, float]:
        return {group: record["busbw_GBps"] for group, record in job.measure_groups(groups, step).items()}

    def alone(groups: list[Group]) -> dict[Group, float]:
        # a node by itself: busbw is 0 at one rank, algbw compares nodes of the same size fairly
        return {group: record["algbw_GBps"] for group, record in job.measure_groups(groups, step).items()}

    try:
        found = localize(job.nodes, busbw, floor, solo=alone, solo_ratio=spec.localize.solo_ratio, halves_from=spec.localize.halves_from)
    finally:
        job.stop_serving()
    return LocalizationFacts(
        collective=missed.collective, size_bytes=size, floor_GBps=floor, slow=list(found.slow), cleared=list(found.cleared),
        undecided=list(found.undecided), reason=found.reason,
        trials=[Trial(round=t.round, nodes=list(t.nodes), value_GBps=t.value, passed=t.passed, alone=t.alone) for t in found.trials],
    )


def _ddp(job: Job, profile: Profile, gpus: int) -> list[DdpResult]:
    """The profile's DDP workload on one node (global ranks 0..G-1: torchrun and srun number a
    node's ranks together) and on every node, where the cluster asks for its scaling."""
    spec, ddp = profile.spec.cluster, profile.spec.ddp
    if spec is None or spec.ddp_min_efficiency is None or ddp is None:
        return []
    results = []
    for world in (gpus, job.me.world):
        step = DdpStep(world=world, model=ddp_shape(profile.spec), dtype=ddp.dtype, batches=ddp.batches, accumulation=[1],
                       warmup_steps=ddp.warmup_steps, steps=ddp.steps, timeout_s=ddp.timeout_s)
        try:
            records = job.measure_ddp(step)
        except Exception as exc:  # as for the collectives: the job's group cannot be trusted after it
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ClusterMeasureError(f"rank {job.me.rank}: DDP on {world} ranks failed: {text}") from None
        results += [DdpResult(**{name: value for name, value in record.items() if name != "key"}) for record in records]
    return results


def _node_facts(
    launch: Launch, ranks: list[int], root: Path, node_out: Path, gpus: int, backend: str | None, drills: Drills
) -> NodeFacts:
    """This node as its local rank 0 reads it; `backend` None: before NCCL connected (the transport
    it chose is not known yet)."""
    ports = read_ports(root)
    transport: NcclTransport | Unavailable
    if backend is None:
        transport = Unavailable(unavailable="not_probed", detail="read once NCCL has connected the nodes")
    else:
        transport = read_nccl_logs(capture_nccl_info(node_out)) if backend == "nccl" else _no_nccl()
    return NodeFacts(
        node=launch.node, host=socket.gethostname(), ranks=ranks, adapters=ports,
        affinity=read_affinity(root, gpu_bus_ids(gpus), ports), peermem=peermem_loaded(root), transport=transport,
        environment=dict(sorted({
            **{k: v for k, v in os.environ.items() if k.startswith(RECORDED_ENVIRONMENT)}, **drills.environment(),
        }.items())),
    )


def _preflight(
    profile: Profile, launch: Launch, root: Path, node_out: Path, gpus: int, drills: Drills, own_run: RunInfo, backend: str,
) -> None:
    """This node's own tests (RDMA ports, GPU-NIC affinity, GPUDirect RDMA) read, printed and written
    to its node-results.json before it waits on any other node: a node whose job never measures, or
    hangs, still says what it found. The run's end writes the file again, with NCCL's transport."""
    ranks = [launch.rank - launch.local_rank + index for index in range(launch.local_world)]  # as torchrun and srun number them
    node = _node_facts(launch, ranks, root, node_out, gpus, None, drills)
    # the job as known before it joined: the backend as asked (auto until the ranks chose), no software measured yet
    job = ClusterFacts(profile=profile.name, backend=backend, torch_version="", nccl_version=None, world=launch.world,
                       gpus_per_node=gpus, nodes=[node])
    verdicts = _write_node(profile, job, node, node_out, own_run, complete=False)
    for line in lines(verdicts)[:-1]:
        print(shown(f"node{launch.node} preflight: {line}"), flush=True)  # host names and adapters are the machine's words


def _no_nccl() -> Unavailable:
    return Unavailable(unavailable="not_supported", detail="the gloo backend runs no NCCL: no transport to read")


def _write_node(profile: Profile, job: ClusterFacts, node: NodeFacts, node_out: Path, run: RunInfo, complete: bool) -> list[Verdict]:
    """This node's node-results.json: the job as it knew it, with this node alone, and its own tests."""
    verdicts = node_verdicts(profile, node, job.gpus_per_node)
    mine = job.model_copy(update={"nodes": [node], "collectives": [], "failures": [], "localization": None, "ddp": []})
    write_node(node_out / NODE_RESULTS, started(run, node.host, mine, node.host), verdicts, complete)
    return verdicts


def _report(profile: Profile, facts: ClusterFacts, out: Path, began: str, name: str, metrics: Path | None) -> int:
    """The cluster's verdicts, its reports, and its exit code: the recorded verdict's, decided once
    from its tests (RunRecord.judged), with any report not written among its reasons."""
    verdicts: list[Verdict] = cluster_verdicts(profile, facts)
    record, not_written = write_cluster(out, started(run_info(profile, began), name, facts, socket.gethostname()), verdicts, metrics)
    for line in lines(verdicts):
        print(shown(line), flush=True)
    for why in not_written:
        print(shown(f"gpu-accept: report not written: {why}"), file=sys.stderr, flush=True)
    assert record.verdict is not None
    return record.verdict.exit_code
