"""Many nodes on one CPU machine: torchrun agents on localhost, each a "node", with gloo.

Every test here runs the real path (`gpu-accept cluster` under `gpu-accept torchrun` or plain
`python -m torch.distributed.run` with the c10d rendezvous, or with srun's variables set by hand):
rendezvous, world size N x G, the merge of every node's facts on global rank 0, a node slowed by
GPUACCEPT_INJECT_SLOW and named by the localization, a node or rank that never joins. Each test has
its own port and rendezvous id.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from gpuaccept.facts.cluster import LocalizationFacts
from gpuaccept.facts.run_record import RunRecord, load_results
from tests.helpers import ROOT

pytestmark = pytest.mark.slow

CPU_PROFILE = ROOT / "examples" / "profiles" / "cluster-cpu-gloo.yaml"
LIMIT_S = 240  # far above the 10-40 s these take on two loaded cores: only a hang reaches it


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def profile(tmp_path: Path, nodes: int, gpus: int = 1, rendezvous_s: float = 60, ddp: bool = True) -> Path:
    """The CPU cluster profile for `nodes` x `gpus` ranks; without `ddp`, no DDP training between the
    nodes (the network's checks and the localization alone)."""
    spec = yaml.safe_load(CPU_PROFILE.read_text(encoding="utf-8"))
    spec["gpus"]["count"] = gpus
    spec["cluster"]["nodes"] = nodes
    spec["cluster"]["rendezvous_s"] = rendezvous_s
    if not ddp:
        del spec["cluster"]["ddp_min_efficiency"]
    path = tmp_path / f"cluster-{nodes}x{gpus}.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUACCEPT_INJECT", "RANK", "SLURM_", "MASTER_", "WORLD_SIZE"))}
    env["PYTHONPATH"] = str(ROOT / "src")
    return dict(env, **extra)


def torchrun_command(
    nodes: int, gpus: int, spec: Path, out: Path, plain: bool = False, name: str | None = None, metrics: Path | None = None
) -> list[str]:
    """`gpu-accept torchrun` (or, `plain`, torchrun itself) running `gpu-accept cluster` on every rank
    (`--name name`, `--metrics metrics` where given)."""
    port = free_port()
    rendezvous = [
        "--nnodes", str(nodes), "--nproc-per-node", str(gpus),
        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"localhost:{port}", "--rdzv-id", f"test-{port}",
    ]
    cluster = ["--profile", str(spec), "--out", str(out), *(["--name", name] if name else []),
               *(["--metrics", str(metrics)] if metrics else [])]
    if plain:
        plain_torchrun = [sys.executable, "-m", "torch.distributed.run", *rendezvous, "--rdzv-conf", "join_timeout=60"]
        return [*plain_torchrun, "-m", "gpuaccept", "cluster", *cluster]
    return [sys.executable, "-m", "gpuaccept", "torchrun", *rendezvous, "--", *cluster]


def torchrun_nodes(
    tmp_path: Path, nodes: int, gpus: int, slow: int | None = None, plain: bool = False, ddp: bool = True, name: str | None = None,
    metrics: Path | None = None,
) -> list[tuple[int, str]]:
    """Start one torchrun agent a node, the `slow`-th with GPUACCEPT_INJECT_SLOW; their exit codes and output."""
    command = torchrun_command(nodes, gpus, profile(tmp_path, nodes, gpus, ddp=ddp), tmp_path / "out", plain, name, metrics)
    agents = []
    for index in range(nodes):
        env = environment(GPUACCEPT_INJECT_SLOW="1") if index == slow else environment()
        log = open(tmp_path / f"agent{index}.log", "w+", encoding="utf-8")  # noqa: SIM115  read back below
        agents.append((subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True), log))
    return [finish(process, log) for process, log in agents]


def finish(process: subprocess.Popen, log) -> tuple[int, str]:  # type: ignore[type-arg]
    try:
        code = process.wait(timeout=LIMIT_S)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    log.seek(0)
    return code, log.read()


def results(tmp_path: Path) -> RunRecord:
    return load_results(tmp_path / "out" / "cluster-results.json")


def test_two_nodes_of_two_ranks_measure_as_one_job_under_plain_torchrun(tmp_path: Path) -> None:
    agents = torchrun_nodes(tmp_path, nodes=2, gpus=2, plain=True)
    assert [code for code, _ in agents] == [0, 0], agents
    record = results(tmp_path)  # results.json's record, read by the reader of every run's
    facts = record.cluster
    assert facts is not None
    assert facts.world == 4
    assert facts.backend == "gloo"
    assert sorted(node.node for node in facts.nodes) == [0, 1]
    assert sorted(rank for node in facts.nodes for rank in node.ranks) == [0, 1, 2, 3]
    (result,) = facts.collectives
    assert result.ranks == 4
    assert result.busbw_GBps == pytest.approx(result.algbw_GBps * 2 * 3 / 4)  # nccl-tests' all_reduce factor at n=4
    assert result.wrong == 0
    assert facts.localization is None
    # DDP on one node (2 ranks) and on both (4 ranks), judged as samples/s per GPU on all over on one
    assert sorted(result.world for result in facts.ddp) == [2, 4]
    (ddp,) = [test for test in record.tests if test.id.startswith("test_cluster_ddp_efficiency[")]
    assert ddp.id == "test_cluster_ddp_efficiency[4gpu-bs2]"
    assert ddp.outcome == "passed", ddp.verdict
    assert record.summary.failed == 0
    # the run's verdict, decided once from its tests as a run of one host's is; named by its nodes' one host
    assert record.complete and record.verdict is not None and record.verdict.exit_code == 0
    assert record.environment.host == socket.gethostname() == record.verdict.host
    # every node keeps its own results, a record of its own tests
    for node in facts.nodes:
        (folder,) = (tmp_path / "out").glob(f"node{node.node}-*")
        own = load_results(folder / "node-results.json")
        assert own.complete and own.cluster is not None and [n.node for n in own.cluster.nodes] == [node.node]
        assert {test.verdict.subject for test in own.tests if test.verdict} >= {f"node{node.node}"}
        assert own.environment.host == node.host
    view = (tmp_path / "out" / "cluster-report.html").read_text(encoding="utf-8")
    assert "<td>node0</td>" in view and "<td>node1</td>" in view
    assert "id='tests'" in view or "test_cluster_busbw[all_reduce-64KiB]" in view  # every test, as a run's report lists them
    junit = (tmp_path / "out" / "cluster-junit.xml").read_text(encoding="utf-8")
    assert 'name="test_cluster_busbw[all_reduce-64KiB]"' in junit
    assert "the profile states no RDMA adapters" in junit  # skipped with the reason, the CPU profile states none


def test_a_named_clusters_runs_go_into_a_store_and_its_history_shows_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two real runs of a cluster its user named, added to a results store as a host's runs are; the
    history of the cluster shows each run's values by its name."""
    from gpuaccept.cli import main

    runs = []
    metrics = tmp_path / "gpu-accept-cluster.prom"
    for each in ("first", "second"):
        (tmp_path / each).mkdir()
        agents = torchrun_nodes(tmp_path / each, nodes=2, gpus=1, ddp=False, name="rack-a", metrics=metrics)
        assert [code for code, _ in agents] == [0, 0], agents
        runs.append(tmp_path / each / "out" / "cluster-results.json")
    # the metrics of the last run, as a run of one host writes them (docs/metrics.md)
    samples = metrics.read_text(encoding="utf-8").splitlines()
    assert 'gpu_accept_run_exit_code{command="cluster",host="rack-a",profile="cluster-2x1"} 0' in samples
    assert any(line.startswith('gpu_accept_cluster_busbw_bytes_per_second{collective="all_reduce",command="cluster"') for line in samples)
    records = [load_results(path) for path in runs]
    assert [record.environment.host for record in records] == ["rack-a", "rack-a"]
    values = []
    for record in records:
        (busbw,) = [test.verdict for test in record.tests if test.id == "test_cluster_busbw[all_reduce-64KiB]"]
        assert busbw is not None and busbw.in_fleet and busbw.numeric is not None
        values.append(busbw.numeric)
    db = tmp_path / "fleet.duckdb"
    assert main(["store", "add", *map(str, runs), "--db", str(db)]) == 0
    assert "2 run(s) added" in capsys.readouterr().out
    copy = tmp_path / "copy.json"
    copy.write_bytes(runs[0].read_bytes())
    assert main(["store", "add", str(copy), "--db", str(db)]) == 0
    assert "0 run(s) added" in capsys.readouterr().out  # a run added twice is one run
    assert main(["store", "info", "--db", str(db)]) == 0
    assert "2 run(s) of 0 host(s) and 1 cluster(s)" in capsys.readouterr().out
    assert main(["report", "history", "--db", str(db), "--show", "rack-a"]) == 0
    shown = capsys.readouterr().out.splitlines()
    at = shown.index("test_cluster_busbw[all_reduce-64KiB]")
    assert [line.split()[1] for line in shown[at + 1 : at + 3]] == [f"{value:g}" for value in values]  # oldest first
    assert all("torch=" in line for line in shown[at + 1 : at + 3])
    assert main(["report", "history", "--db", str(db), "--host", "rack-a"]) == 0  # too few runs for a median: nothing found
    assert capsys.readouterr().out.splitlines()[-1].startswith("1 host(s), 2 run(s): 0 drop(s)")
    nodes = "\n".join(node.host for node in records[0].cluster.nodes)  # type: ignore[union-attr]
    assert duckdb_rows(db, "SELECT host, nodes FROM runs") == [("rack-a", nodes), ("rack-a", nodes)]


def duckdb_rows(db: Path, sql: str) -> list[tuple]:  # type: ignore[type-arg]
    import duckdb

    with duckdb.connect(str(db), read_only=True) as connection:
        return connection.execute(sql).fetchall()


def slow_node_named(tmp_path: Path, nodes: int, slow: int) -> LocalizationFacts:
    agents = torchrun_nodes(tmp_path, nodes=nodes, gpus=1, slow=slow, ddp=False)  # the localization is what is tested
    unexpected = [output[-3000:] for code, output in agents if code != 1]
    assert not unexpected, unexpected  # a failed check fails every node's job, as a failed check
    assert all("Traceback" not in output for _, output in agents)
    record = results(tmp_path)
    assert record.cluster is not None
    found = record.cluster.localization
    assert isinstance(found, LocalizationFacts)
    (named,) = found.slow
    slowed = [node.node for node in record.cluster.nodes if "GPUACCEPT_INJECT_SLOW" in node.environment]
    assert found.slow == slowed  # the node whose ranks were slowed, whatever index the rendezvous gave it
    (test,) = [test for test in record.tests if test.id.startswith("test_cluster_busbw[")]
    assert test.outcome == "failed" and test.verdict is not None
    assert f"slow node: node{named} (" in test.message
    assert record.verdict is not None and record.verdict.exit_code == 1 and record.verdict.failed == [test.id]
    return found


def test_the_slow_one_of_two_nodes_is_named_alone(tmp_path: Path) -> None:
    found = slow_node_named(tmp_path, nodes=2, slow=1)
    assert "measured alone" in found.reason


def test_the_slow_one_of_three_nodes_is_named_against_a_good_node(tmp_path: Path) -> None:
    found = slow_node_named(tmp_path, nodes=3, slow=2)
    assert found.reason == "each suspect measured with a node proven good"
    assert not any(trial.alone for trial in found.trials)


def srun_task(tmp_path: Path, spec: Path, tasks: int, nodes: int, timeout: float = LIMIT_S) -> subprocess.CompletedProcess[str]:
    """Task 0 of an srun job whose other tasks never start, as srun's variables describe it."""
    env = environment(
        SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_NODEID="0", SLURM_NTASKS=str(tasks), SLURM_NNODES=str(nodes),
        SLURM_JOB_NODELIST="localhost", MASTER_PORT=str(free_port()),
    )
    command = [sys.executable, "-m", "gpuaccept", "cluster", "--profile", str(spec), "--out", str(tmp_path / "out")]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def test_a_rank_that_never_joins_ends_the_run_in_one_line(tmp_path: Path) -> None:
    began = time.monotonic()
    done = srun_task(tmp_path, profile(tmp_path, nodes=2, rendezvous_s=3), tasks=2, nodes=2)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.startswith("gpu-accept:")]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("gpu-accept: rank 0 of 2: not every rank joined at localhost:")
    assert "within 3 s" in lines[0]
    assert "Traceback" not in done.stderr
    assert time.monotonic() - began < LIMIT_S
    # its node's own tests were read and written before it waited: they survive the job
    (written,) = (tmp_path / "out").glob("node0-*/node-results.json")
    own = load_results(written)
    assert not own.complete and own.cluster is not None  # the run never reached its end: its node's record says so
    assert own.verdict is not None and own.verdict.exit_code == 2
    by_check = {verdict.check: verdict for verdict in own.verdicts()}
    assert set(by_check) == {"rdma_ports", "rdma_rate", "gpu_nic_affinity", "gpudirect_rdma", "nccl_transport"}
    assert own.cluster.nodes[0].ranks == [0]  # one task on each of 2 nodes
    assert "node0 preflight: SKIPPED test_rdma_ports[node0]: node0: " in done.stdout


def test_a_job_of_the_wrong_shape_is_refused_before_anyone_waits(tmp_path: Path) -> None:
    done = srun_task(tmp_path, profile(tmp_path, nodes=2), tasks=3, nodes=3)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "gpu-accept: the job has 3 ranks, 1 per node; profile cluster-2x1 wants cluster.nodes 2 x gpus.count 1 = 2"
    )


def test_under_torchrun_a_missing_node_ends_the_rendezvous_in_one_line_with_exit_2(tmp_path: Path) -> None:
    """torchrun's agent owns the c10d rendezvous: no rank of ours starts; `gpu-accept torchrun` turns
    its timeout (plain torchrun: a traceback, exit 1) into one line, and waits cluster.rendezvous_s."""
    spec, out = profile(tmp_path, nodes=2, rendezvous_s=4), tmp_path / "out"
    began = time.monotonic()
    done = subprocess.run(
        torchrun_command(2, 1, spec, out), env=environment(), capture_output=True, text=True, timeout=LIMIT_S, check=False
    )
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.startswith("gpu-accept:")]
    assert len(lines) == 1, done.stderr
    assert "not all of --nnodes 2 joined within 4 s" in lines[0]
    assert lines[0].startswith("gpu-accept: rendezvous c10d at localhost:")
    assert "Traceback" not in done.stderr
    assert time.monotonic() - began < 60
    assert not (out / "cluster-results.json").exists()


def test_gpu_accept_torchrun_refuses_a_bad_profile_before_any_node_waits(tmp_path: Path) -> None:
    no_cluster = tmp_path / "no-cluster.yaml"
    no_cluster.write_text("schema: 1\ngpus: {count: 1, model: '*'}\n", encoding="utf-8")
    done = subprocess.run(
        torchrun_command(2, 1, no_cluster, tmp_path / "out"), env=environment(), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"gpu-accept: {no_cluster}: cluster: profile no-cluster has no cluster: section"]
