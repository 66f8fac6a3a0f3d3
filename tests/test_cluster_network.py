"""A node's network as read from a fake /sys tree and real NCCL INFO lines, and the checks of it.

The tree in tests/data/sysfs/two-rails is laid out as the kernel lays out /sys; the NCCL lines are
public logs (each file names its source). A node without /sys/class/infiniband fails what its
profile requires of its adapters: the lent GPU machines, which have no InfiniBand, would.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpuaccept.checks.cluster import (
    cluster_busbw,
    cluster_verdicts,
    gpu_nic_affinity,
    gpudirect_rdma,
    nccl_transport,
    node_verdicts,
    rdma_ports,
    rdma_rate,
)
from gpuaccept.checks.verdict import Outcome
from gpuaccept.cli import main
from gpuaccept.cluster.reports import finished, started
from gpuaccept.facts.cluster import ClusterFacts, LocalizationFacts, NcclTransport, NodeFacts, Trial
from gpuaccept.facts.measurements import CollectiveResult, DdpResult
from gpuaccept.facts.record import Unavailable
from gpuaccept.facts.run_record import LiveMachine, RunInfo, RunProfile, RunRecord
from gpuaccept.facts.verdict import Verdict
from gpuaccept.probe.network import (
    normalize_bus_id,
    parse_nccl_transport,
    pci_level,
    peermem_loaded,
    read_affinity,
    read_nccl_logs,
    read_ports,
)
from gpuaccept.profile import load_profile
from gpuaccept.profile.model import Profile
from gpuaccept.report.cluster_view import text


def cluster_record(facts: ClusterFacts, verdicts: list[Verdict], name: str = "rack-a") -> RunRecord:
    """A cluster run's record as `gpu-accept cluster` writes it, of these facts and verdicts, begun at a fixed moment."""
    run = RunInfo(started_at="2026-11-28T00:00:00.000000+00:00", id="0" * 32, tool_version="0.1.0", command=["gpu-accept", "cluster"],
                  facts_source=LiveMachine(), profile=RunProfile(name=facts.profile, path=f"{facts.profile}.yaml", sha256=""))
    return finished(started(run, name, facts, "host0"), verdicts)


DATA = Path(__file__).parent / "data"
TREE = DATA / "sysfs" / "two-rails"
LOGS = DATA / "nccl-info"
GPUS = ["00000000:04:00.0", "00000000:84:00.0"]  # NVML's form of the two GPUs' addresses in the tree

PROFILE = """\
schema: 1
gpus: {count: 2, model: "*"}
affinity:
  nic: {all: {link: PIX}}  # each GPU beside its own adapter
cluster:
  nodes: 2
  nics: {count: 2, rate_gbps: 400, link_layer: InfiniBand}  # two NDR ports per node
  gpudirect_rdma: true
  transport: [IB]
  busbw:
    all_reduce: {1GiB: 40}  # made up for the test
"""


@pytest.fixture
def profile(tmp_path: Path) -> Profile:
    path = tmp_path / "two-rails.yaml"
    path.write_text(PROFILE, encoding="utf-8")
    return load_profile(path)


def tree_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "root"
    shutil.copytree(TREE, copy, symlinks=True)
    return copy


def node(root: Path, transport: NcclTransport | Unavailable | None = None, index: int = 0) -> NodeFacts:
    ports = read_ports(root)
    return NodeFacts(
        node=index, host=f"host{index}", ranks=[2 * index, 2 * index + 1], adapters=ports,
        affinity=read_affinity(root, GPUS, ports), peermem=peermem_loaded(root),
        transport=transport if transport is not None else read_nccl_logs([LOGS / "ib-gdrdma.log"]),
    )


def test_ports_read_from_sysfs() -> None:
    ports = read_ports(TREE)
    assert not isinstance(ports, Unavailable)
    assert [(p.adapter, p.port, p.state, p.phys_state, p.rate_gbps, p.link_layer, p.pci_bus_id) for p in ports] == [
        ("mlx5_0", 1, "ACTIVE", "LinkUp", 400.0, "InfiniBand", "0000:03:00.0"),
        ("mlx5_1", 1, "ACTIVE", "LinkUp", 400.0, "InfiniBand", "0000:83:00.0"),
    ]


def test_no_infiniband_is_not_found_never_an_empty_list(tmp_path: Path) -> None:
    ports = read_ports(tmp_path)
    assert isinstance(ports, Unavailable)
    assert ports.unavailable == "not_found"
    assert "no RDMA adapter" in ports.detail


def test_gpu_nic_levels_from_the_pci_tree() -> None:
    affinity = read_affinity(TREE, GPUS, read_ports(TREE))
    assert not isinstance(affinity, Unavailable)
    assert {(a.gpu, a.adapter): a.level for a in affinity} == {
        (0, "mlx5_0"): "PIX", (0, "mlx5_1"): "SYS", (1, "mlx5_0"): "SYS", (1, "mlx5_1"): "PIX",
    }


def test_pci_levels_as_topo_names_them() -> None:
    root = ["pci0000:00", "0000:00:01.0"]
    nic, gpu = [*root, "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"], [*root, "0000:01:00.0", "0000:02:01.0", "0000:04:00.0"]
    assert pci_level(nic, gpu) == "PIX"
    deep = [*root, "0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0", "0000:05:00.0"]
    assert pci_level(deep, [*root, "0000:01:00.0", "0000:02:01.0", "0000:06:00.0"]) == "PXB"
    assert pci_level(["pci0000:00", "0000:00:01.0", "0000:01:00.0"], ["pci0000:00", "0000:00:02.0", "0000:02:00.0"]) == "PHB"
    assert pci_level(["pci0000:00", "a"], ["pci0000:40", "b"], 0, 0) == "NODE"
    assert pci_level(["pci0000:00", "a"], ["pci0000:80", "b"], 0, 1) == "SYS"


def test_bus_ids_in_every_form() -> None:
    assert normalize_bus_id("00000000:17:00.0") == "0000:17:00.0"
    assert normalize_bus_id("0000:17:00.0") == "0000:17:00.0"


@pytest.mark.parametrize(
    ("log", "networks", "net", "gdr"),
    [
        ("ib-gdrdma.log", ["IB"], 6, 6),
        ("ib-no-gdrdma.log", ["IB"], 4, 0),
        ("socket.log", ["Socket"], 3, 0),
        ("ib-plugin.log", ["IBext_v8"], 3, 0),
    ],
)
def test_nccl_transport_from_real_info_lines(log: str, networks: list[str], net: int, gdr: int) -> None:
    found = read_nccl_logs([LOGS / log])
    assert isinstance(found, NcclTransport)
    assert (found.networks, found.net_channels, found.gdrdma_channels) == (networks, net, gdr)


def test_no_nccl_output_is_said_so() -> None:
    found = parse_nccl_transport([])
    assert isinstance(found, Unavailable)
    assert "NCCL_DEBUG=INFO" in found.detail


def test_a_healthy_node_passes_every_check(profile: Profile) -> None:
    facts = node(TREE)
    verdicts = [rdma_ports(profile, facts), rdma_rate(profile, facts), gpu_nic_affinity(profile, facts, 0),
                gpu_nic_affinity(profile, facts, 1), gpudirect_rdma(profile, facts), nccl_transport(profile, facts)]
    assert [v.outcome for v in verdicts] == [Outcome.PASSED] * 6, [v.message for v in verdicts]
    assert verdicts[0].subject == "node0"
    assert verdicts[2].subject == "node0-gpu0"
    assert verdicts[2].measured == "mlx5_0 at PIX"


def test_a_port_down_fails_with_its_state(profile: Profile, tmp_path: Path) -> None:
    root = tree_copy(tmp_path)
    (root / "sys/class/infiniband/mlx5_1/ports/1/state").write_text("1: DOWN\n")
    (root / "sys/class/infiniband/mlx5_1/ports/1/phys_state").write_text("3: Disabled\n")
    verdict = rdma_ports(profile, node(root))
    assert verdict.outcome is Outcome.FAILED
    assert verdict.measured == 1
    assert "1 ports < 2 ports" in verdict.message
    assert "mlx5_1/1 DOWN/Disabled/InfiniBand" in verdict.message


def test_a_slow_port_fails_on_its_rate(profile: Profile, tmp_path: Path) -> None:
    root = tree_copy(tmp_path)
    (root / "sys/class/infiniband/mlx5_0/ports/1/rate").write_text("200 Gb/sec (4X HDR)\n")
    verdict = rdma_rate(profile, node(root))
    assert verdict.outcome is Outcome.FAILED
    assert verdict.measured == 200.0
    assert "mlx5_0/1" in verdict.message
    assert "< 400 Gb/s" in verdict.message


def test_a_gpu_far_from_every_adapter_fails(profile: Profile, tmp_path: Path) -> None:
    root = tree_copy(tmp_path)
    shutil.rmtree(root / "sys/class/infiniband/mlx5_1")
    verdict = gpu_nic_affinity(profile, node(root), 1)
    assert verdict.outcome is Outcome.FAILED
    assert "closest RDMA adapter mlx5_0 at SYS, expected an RDMA adapter at PIX or closer" in verdict.message


def test_gpudirect_rdma_through_dma_buf_without_peermem(profile: Profile, tmp_path: Path) -> None:
    root = tree_copy(tmp_path)
    shutil.rmtree(root / "sys/module/nvidia_peermem")
    assert gpudirect_rdma(profile, node(root)).outcome is Outcome.PASSED  # GDRDMA in NCCL's lines
    missing = gpudirect_rdma(profile, node(root, read_nccl_logs([LOGS / "ib-no-gdrdma.log"])))
    assert missing.outcome is Outcome.FAILED
    assert "nvidia_peermem not loaded and 4 network channels, none GDRDMA" in missing.message


def test_nccl_on_sockets_fails_where_ib_is_required(profile: Profile) -> None:
    verdict = nccl_transport(profile, node(TREE, read_nccl_logs([LOGS / "socket.log"])))
    assert verdict.outcome is Outcome.FAILED
    assert "NCCL used NET/Socket, expected NCCL channels between nodes via NET/IB" in verdict.message


def test_a_node_without_infiniband_fails_what_the_profile_requires_of_it(profile: Profile, tmp_path: Path) -> None:
    # no /sys/class/infiniband: no adapter, or its driver did not load; the profile states two NDR ports
    bare = node(tmp_path, Unavailable(unavailable="not_found", detail="no NCCL INFO output to read"))
    verdicts = {(v.check, v.subject): v for v in node_verdicts(profile, bare, 2)}
    assert {key: v.outcome for key, v in verdicts.items()} == {
        ("rdma_ports", "node0"): Outcome.FAILED,
        ("rdma_rate", "node0"): Outcome.FAILED,
        ("gpu_nic_affinity", "node0-gpu0"): Outcome.FAILED,
        ("gpu_nic_affinity", "node0-gpu1"): Outcome.FAILED,
        ("gpudirect_rdma", "node0"): Outcome.FAILED,
        ("nccl_transport", "node0"): Outcome.ERROR,  # NCCL's lines were not read: could not judge
    }
    ports = verdicts["rdma_ports", "node0"]
    assert ports.message.startswith("node0: host0: no RDMA adapter (no /sys/class/infiniband") and "expected >= 2 ports" in ports.message
    assert ports.criterion.model_dump(mode="json") == {"op": ">=", "limit": 2, "unit": "ports"}
    transport = verdicts["nccl_transport", "node0"]
    assert "which transport NCCL used is unknown: not found (no NCCL INFO output to read)" in transport.message


def test_adapters_that_could_not_be_read_are_an_error(profile: Profile, tmp_path: Path) -> None:
    unreadable = Unavailable(unavailable="no_permission", detail="/sys/class/infiniband: Permission denied")
    facts = node(TREE).model_copy(update={"adapters": unreadable})
    verdict = rdma_ports(profile, facts)
    assert verdict.outcome is Outcome.ERROR and "Permission denied" in verdict.message


def test_the_cluster_floor_names_the_slow_node(profile: Profile) -> None:
    nodes = [node(TREE, index=i) for i in range(3)]
    result = CollectiveResult(collective="all_reduce", size_bytes=1 << 30, nominal_size="1GiB", dtype="bfloat16", ranks=6,
                              warmup=5, iterations=20, time_us=100000.0, algbw_GBps=12.0, busbw_GBps=20.0, wrong=0)
    found = LocalizationFacts(collective="all_reduce", size_bytes=1 << 30, floor_GBps=40.0, slow=[2], cleared=[0, 1], undecided=[],
                              reason="each suspect measured with a node proven good",
                              trials=[Trial(round=1, nodes=[0, 1], value_GBps=45.0, passed=True)])
    facts = ClusterFacts(profile=profile.name, backend="nccl", torch_version="2.13.0", nccl_version="2.28.3", world=6,
                         gpus_per_node=2, nodes=nodes, collectives=[result], localization=found)
    verdict = cluster_busbw(profile, facts, "all_reduce", "1GiB")
    assert verdict.outcome is Outcome.FAILED
    assert verdict.subject == "all_reduce-1GiB"
    assert "busbw 20 GB/s < 40 GB/s (slow node: node2 (host2)" in verdict.message
    assert "over 6 ranks on 3 nodes" in verdict.message
    assert ClusterFacts.model_validate_json(facts.model_dump_json()) == facts


def three_nodes_one_slow(profile: Profile, nodes: list[NodeFacts], slow: int) -> ClusterFacts:
    """A cluster of three nodes whose all_reduce missed its floor of 40 GB/s, `slow` named."""
    result = CollectiveResult(collective="all_reduce", size_bytes=1 << 30, nominal_size="1GiB", dtype="bfloat16", ranks=6,
                              warmup=5, iterations=20, time_us=100000.0, algbw_GBps=12.0, busbw_GBps=20.0, wrong=0)
    cleared = [index for index in range(3) if index != slow]
    found = LocalizationFacts(collective="all_reduce", size_bytes=1 << 30, floor_GBps=40.0, slow=[slow], cleared=cleared, undecided=[],
                              reason="each suspect measured with a node proven good", trials=[])
    return ClusterFacts(profile=profile.name, backend="nccl", torch_version="2.13.0", nccl_version="2.28.3", world=6,
                        gpus_per_node=2, nodes=nodes, collectives=[result], localization=found)


def test_the_cluster_view_marks_the_slow_node(profile: Profile, tmp_path: Path) -> None:
    root = tree_copy(tmp_path)
    (root / "sys/class/infiniband/mlx5_1/ports/1/state").write_text("1: DOWN\n")
    facts = three_nodes_one_slow(profile, [node(TREE, index=0), node(TREE, index=1), node(root, index=2)], slow=2)
    record = cluster_record(facts, cluster_verdicts(profile, facts))
    rows = text(record).splitlines()
    assert rows[0].split() == ["node", "host", "rdma_ports", "rdma_rate", "gpu_nic_affinity", "gpudirect_rdma", "nccl_transport",
                               "localization"]
    assert rows[1].split() == ["node0", "host0", "pass", "pass", "pass", "pass", "pass"]
    assert rows[3].split() == ["node2", "host2", "FAIL", "pass", "pass", "pass", "pass", "SLOW"]
    assert rows[4].startswith("FAIL  all_reduce-1GiB: busbw 20 GB/s < 40 GB/s (slow node: node2 (host2)")
    results = tmp_path / "cluster-results.json"
    results.write_text(record.model_dump_json(), encoding="utf-8")
    assert main(["report", "cluster", str(results), "-o", str(tmp_path / "view.html")]) == 1
    page = (tmp_path / "view.html").read_text(encoding="utf-8")  # the run's report.html, its cluster section the view
    row = page[page.index("<td>node2</td>"):]
    assert row[: row.index("</tr>")].endswith(">SLOW</td>")
    assert "<td>node1</td>" in page and page.count(">SLOW</td>") == 1


def test_report_fleet_shows_a_cluster_run_beside_its_hosts(profile: Profile, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = three_nodes_one_slow(profile, [node(TREE, index=i) for i in range(3)], slow=1)
    cluster = tmp_path / "cluster-results.json"
    record = cluster_record(facts, cluster_verdicts(profile, facts))
    cluster.write_text(json.dumps(record.model_dump(mode="json"), indent=2), encoding="utf-8")
    host = Path(__file__).parents[1] / "examples" / "results" / "h200x4.json"  # a host that passed its profile
    junit_path = tmp_path / "fleet.xml"

    assert main(["report", "fleet", str(host), str(cluster), "-o", str(junit_path)]) == 1  # the cluster failed its floor
    out = capsys.readouterr().out.splitlines()
    assert "1 host(s), 0 did not pass their profile" in "\n".join(out)
    verdict = next(line for line in out if line.startswith("FAIL cluster rack-a of 3 nodes, profile two-rails"))
    assert "test_cluster_busbw[all_reduce-1GiB]: all_reduce-1GiB: busbw 20 GB/s < 40 GB/s (slow node: node1 (host1)" in verdict
    rows = {line.split()[0]: line.split() for line in out if line.startswith("  node")}
    assert rows["node1"][-1] == "SLOW" and rows["node0"][-1] != "SLOW"

    suites = ET.parse(junit_path).getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == [ET.parse(junit_path).getroot()[0].get("name"), "cluster rack-a (cluster-results.json)"]
    (busbw,) = [case for case in suites[1] if case.get("name") == "test_cluster_busbw[all_reduce-1GiB]"]
    assert busbw.find("failure") is not None
    assert {p.get("name"): p.get("value") for p in busbw.iter("property")}["measured"] == "20.0"

    # the cluster alone, passing: exit 0
    passing = cluster_record(facts, [v for v in cluster_verdicts(profile, facts) if v.outcome == "passed"])
    cluster.write_text(passing.to_json(), encoding="utf-8")
    assert main(["report", "fleet", str(cluster)]) == 0
    assert capsys.readouterr().out.startswith("PASS cluster rack-a of 3 nodes, profile two-rails")


def test_the_cluster_view_refuses_other_files_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "results.json"
    other.write_text("{}", encoding="utf-8")
    assert main(["report", "cluster", str(other)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (f"gpu-accept: {other}: not a readable cluster-results.json "
                    "(format: not a gpu-accept results file (format 'gpu-accept-results' expected))")


def test_ddp_scaling_from_one_node_to_all(tmp_path: Path) -> None:
    path = tmp_path / "ddp.yaml"
    path.write_text(PROFILE + "  ddp_min_efficiency: 0.8\nddp: {model: tiny, world_sizes: [1, 2], batches: [8]}\n", encoding="utf-8")
    profile = load_profile(path)

    def trained(world: int, samples: float) -> DdpResult:
        return DdpResult(world=world, batch=8, accumulation=1, step_s=8 / samples, no_sync_step_s=None, samples_per_s_per_gpu=samples,
                         tokens_per_s_per_gpu=samples * 32, parameters=1000)

    facts = ClusterFacts(profile=profile.name, backend="nccl", torch_version="2.13.0", nccl_version="2.28.3", world=4,
                         gpus_per_node=2, nodes=[node(TREE, index=0), node(TREE, index=1)], ddp=[trained(2, 100.0), trained(4, 60.0)])
    (verdict,) = [v for v in cluster_verdicts(profile, facts) if v.check == "cluster_ddp_efficiency"]
    assert verdict.outcome is Outcome.FAILED
    assert verdict.subject == "4gpu-bs8"
    assert verdict.measured == pytest.approx(0.6)
    assert "60 samples/s per GPU on 4 GPUs, 100 on 2" in verdict.message
    missing = [v for v in cluster_verdicts(profile, facts.model_copy(update={"ddp": []})) if v.check == "cluster_ddp_efficiency"]
    assert missing[0].outcome is Outcome.ERROR


def test_a_clusters_verdicts_are_its_declared_checks_each_subject_in_order(tmp_path: Path) -> None:
    from gpuaccept.checks.declare import declared_checks

    path = tmp_path / "ddp.yaml"
    path.write_text(PROFILE + "  ddp_min_efficiency: 0.8\nddp: {model: tiny, world_sizes: [1, 2], batches: [8, 16]}\n", encoding="utf-8")
    profile = load_profile(path)
    facts = ClusterFacts(profile=profile.name, backend="nccl", torch_version="2.13.0", nccl_version="2.28.3", world=4,
                         gpus_per_node=2, nodes=[node(TREE, index=0), node(TREE, index=1)])
    verdicts = [(v.check, v.subject) for v in cluster_verdicts(profile, facts)]
    node_checks = ["rdma_ports", "rdma_rate", "gpu_nic_affinity", "gpu_nic_affinity", "gpudirect_rdma", "nccl_transport"]
    node_subjects = ["{0}", "{0}", "{0}-gpu0", "{0}-gpu1", "{0}", "{0}"]
    assert verdicts == [
        *[(check, subject.format("node0")) for check, subject in zip(node_checks, node_subjects, strict=True)],
        *[(check, subject.format("node1")) for check, subject in zip(node_checks, node_subjects, strict=True)],
        ("cluster_busbw", "all_reduce-1GiB"), ("cluster_ddp_efficiency", "4gpu-bs8"), ("cluster_ddp_efficiency", "4gpu-bs16"),
    ]
    declared = [found.declaration.name for found in declared_checks("cluster")]
    assert declared == list(dict.fromkeys(check for check, _ in verdicts))  # every declared check, none other


def test_a_real_two_node_run_on_a_lent_2xh200_names_its_slowed_node_in_the_fleet_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # bench/runs/2026-11-23b: two torchrun nodes of one H200 each over NCCL's socket transport,
    # GPUACCEPT_INJECT_SLOW=0.5 on the node started as "node A" (NCCL_HOSTID node-a)
    archive = Path(__file__).parents[1] / "bench" / "runs" / "2026-11-23b" / "nodes-h200-2-injected.tar.gz"
    with tarfile.open(archive) as tar:
        member = tar.extractfile("injected/cluster-results.json")
        assert member is not None
        results = tmp_path / "cluster-results.json"
        results.write_bytes(member.read())
    record = json.loads(results.read_text(encoding="utf-8"))
    (slowed,) = [n["node"] for n in record["facts"]["nodes"] if "GPUACCEPT_INJECT_SLOW" in n["environment"]]
    assert main(["report", "fleet", str(results)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("FAIL cluster vm of 2 nodes, profile nodes-floors")  # both nodes on hosts named vm
    assert f"slow node: node{slowed} (vm)" in out[0]
    rows = {line.split()[0]: line.split() for line in out if line.startswith("  node")}
    assert rows[f"node{slowed}"][-1] == "SLOW"
    assert rows[f"node{1 - slowed}"][-1] != "SLOW"
    assert "transport" in out[1] and rows[f"node{slowed}"][-2] == "pass"  # NCCL used NET/Socket, as the profile said


@pytest.mark.parametrize(
    ("damage", "said", "commands"),
    [
        (lambda r: r["verdicts"][0].update(subject=True), "(verdicts[0].subject: Input should be a valid string (got True))",
         ("cluster", "fleet")),
        (lambda r: r["facts"]["nodes"][0].update(host=None), "(facts.nodes[0].host: Input should be a valid string (got None))",
         ("cluster", "fleet")),
        (lambda r: r["facts"]["nodes"].__setitem__(0, {}), "(facts.nodes[0].node: required key is missing)", ("cluster", "fleet")),
    ],
    ids=["subject-not-text", "host-null", "node-empty"],
)
def test_a_damaged_cluster_results_file_is_one_line_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage, said, commands
) -> None:
    archive = Path(__file__).parents[1] / "bench" / "runs" / "2026-11-23b" / "nodes-h200-2-injected.tar.gz"
    with tarfile.open(archive) as tar:
        member = tar.extractfile("injected/cluster-results.json")
        assert member is not None
        record = json.loads(member.read())
    damage(record)
    results = tmp_path / "cluster-results.json"
    results.write_text(json.dumps(record), encoding="utf-8")
    for command in commands:
        assert main(["report", command, str(results)]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith(f"gpu-accept: {results}: not a readable cluster-results.json (") and said in line


def test_the_cluster_view_exits_by_the_runs_recorded_verdict_as_the_fleet_does(profile: Profile, tmp_path: Path) -> None:
    facts = three_nodes_one_slow(profile, [node(TREE, index=i) for i in range(3)], slow=1)
    record = cluster_record(facts, cluster_verdicts(profile, facts)).model_dump(mode="json")
    record["summary"] = {key: 0 for key in record["summary"]}  # a summary that says nothing failed
    results = tmp_path / "cluster-results.json"
    results.write_text(json.dumps(record), encoding="utf-8")
    assert main(["report", "cluster", str(results)]) == 1 == main(["report", "fleet", str(results)])
    # a verdict that could not judge: exit 2, from both
    judged = [v.model_copy(update={"outcome": Outcome.ERROR}) if v.outcome == "failed" else v for v in cluster_verdicts(profile, facts)]
    results.write_text(cluster_record(facts, judged).to_json(), encoding="utf-8")
    assert main(["report", "cluster", str(results)]) == 2 == main(["report", "fleet", str(results)])


def test_an_earlier_cluster_results_file_reads_as_the_run_record_it_now_is(tmp_path: Path) -> None:
    """A cluster-results.json written before cluster runs were results.json records (the archived
    2xH200 run): its verdicts are its tests, its verdict decided from them; the store refuses it
    in one line, since it recorded no time to place it in a history."""
    from gpuaccept.facts.run_record import load_results

    archive = Path(__file__).parents[1] / "bench" / "runs" / "2026-11-23b" / "nodes-h200-2-injected.tar.gz"
    with tarfile.open(archive) as tar:
        member = tar.extractfile("injected/cluster-results.json")
        assert member is not None
        raw = member.read()
    results = tmp_path / "cluster-results.json"
    results.write_bytes(raw)
    older = json.loads(raw)
    record = load_results(results)
    assert record.cluster is not None and record.cluster.model_dump(mode="json") == older["facts"]
    assert [(t.verdict.check, t.verdict.subject, t.verdict.outcome, t.verdict.message) for t in record.tests if t.verdict] == [
        (v["check"], v["subject"], v["outcome"], v["message"]) for v in older["verdicts"]
    ]
    assert record.verdict is not None and record.verdict.exit_code == 1
    assert record.verdict.failed == [f"test_{v['check']}[{v['subject']}]" for v in older["verdicts"] if v["outcome"] == "failed"]
    assert main(["store", "add", str(results), "--db", str(tmp_path / "store.duckdb")]) == 2


@pytest.mark.parametrize(
    ("hosts", "name"),
    [
        (["gpu07", "gpu08", "gpu09", "gpu12"], "gpu[07-09,12]"),
        (["gpu12", "gpu07", "gpu08"], "gpu[07-08,12]"),
        (["vm", "vm"], "vm"),  # nodes of one machine
        (["a1", "node", "b1", "a2"], "a[1-2],node,b1"),
        (["rack2-n9", "rack2-n10"], "rack2-n9,rack2-n10"),  # 9 and 10 are written at widths of their own
    ],
)
def test_a_cluster_is_named_by_its_nodes_as_slurm_writes_a_node_list(hosts: list[str], name: str) -> None:
    from gpuaccept.cluster.reports import cluster_name

    assert cluster_name(hosts) == name


def test_an_empty_cluster_name_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    profile = Path(__file__).parents[1] / "examples" / "profiles" / "cluster-cpu-gloo.yaml"
    assert main(["cluster", "--profile", str(profile), "--name", " "]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "gpu-accept: --name: give the cluster a name that is not empty (or leave --name out: its nodes name it)"
    ]


def test_a_metrics_file_that_is_one_of_the_clusters_reports_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = Path(__file__).parents[1] / "examples" / "profiles" / "cluster-cpu-gloo.yaml"
    out = tmp_path / "out"
    clash = out / "cluster-results.json"
    assert main(["cluster", "--profile", str(profile), "--out", str(out), "--metrics", str(clash)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"gpu-accept: --metrics {clash}: is also --out {clash}: one would be written over the other; name another file"
    ]
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    beneath_a_file = tmp_path / "a-file" / "x.prom"
    assert main(["cluster", "--profile", str(profile), "--out", str(out), "--metrics", str(beneath_a_file)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"gpu-accept: --metrics {beneath_a_file}")


def test_gpu_accept_torchrun_checks_the_clusters_name_and_metrics_before_any_node_waits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = Path(__file__).parents[1] / "examples" / "profiles" / "cluster-cpu-gloo.yaml"
    torchrun = ["torchrun", "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:1"]
    cluster = ["--profile", str(profile), "--out", str(tmp_path / "out")]
    assert main([*torchrun, "--", *cluster, "--name", ""]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("gpu-accept: --name: give the cluster a name that is not empty")
    assert main([*torchrun, "--", *cluster, "--metrics", str(tmp_path / "out")]) == 2
    folder = tmp_path / "out"  # made by the check of --out
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"gpu-accept: --metrics {folder}: is a folder: name a file to write"
