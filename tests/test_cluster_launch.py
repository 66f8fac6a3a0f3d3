"""How a multi-node job starts and why it could not: `gpu-accept torchrun`'s options and exit codes,
and the one line a rank says when it could not join (the live runs are in test_cluster_live.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuaccept.cli import main
from gpuaccept.facts.record import Unavailable
from gpuaccept.measure.cluster import join_failure
from gpuaccept.measure.ranks import Launch
from gpuaccept.measure.torchrun import exit_code_of_ranks, with_join_timeout
from tests.helpers import DATA, ROOT

LAUNCH = Launch(rank=1, world=4, local_rank=1, local_world=2, node=0, master_addr="head", master_port=29400, launcher="torchrun")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (["--nnodes", "2"], ["--nnodes", "2", "--rdzv-conf", "join_timeout=90"]),
        (["--rdzv-conf", "read_timeout=30"], ["--rdzv-conf", "read_timeout=30,join_timeout=90"]),
        (["--rdzv-conf=read_timeout=30"], ["--rdzv-conf=read_timeout=30,join_timeout=90"]),
        (["--rdzv_conf="], ["--rdzv_conf=join_timeout=90"]),
        (["--rdzv-conf", "join_timeout=7"], ["--rdzv-conf", "join_timeout=7"]),  # the user's own wait stands
    ],
)
def test_the_rendezvous_waits_the_profiles_time_unless_told_otherwise(given: list[str], expected: list[str]) -> None:
    assert with_join_timeout(given, 90) == expected


def test_the_jobs_exit_code_is_the_ranks_own() -> None:
    assert exit_code_of_ranks([]) == 0
    assert exit_code_of_ranks([1, 1]) == 1  # a check failed
    assert exit_code_of_ranks([1, 2]) == 2  # one rank could not judge: the job could not
    assert exit_code_of_ranks([-15]) == 2  # a rank ended by a signal judged nothing


def test_a_rank_that_never_met_the_others_says_where_and_how_long_it_waited() -> None:
    error = join_failure(LAUNCH, 120, RuntimeError("Socket Timeout\nsecond line"))
    assert str(error) == "rank 1 of 4: not every rank joined at head:29400 within 120 s (Socket Timeout)"


def test_ranks_that_met_but_nccl_could_not_connect_say_ncclss_own_words(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("NCCL_DEBUG_FILE", str(tmp_path / "nccl.%h.%p.log"))
    monkeypatch.setattr(socket, "gethostname", lambda: "node1.cluster.example.com")
    log = tmp_path / f"nccl.node1.{os.getpid()}.log"  # NCCL's %h: the host name up to its first dot
    log.write_text(
        "vm:1:1 [1] NCCL INFO Channel 00/01 : 0 1\n"
        "vm:1:1 [1] init.cc:1204 NCCL WARN Mismatched number of channels across ranks: 1 on this rank, 8 on rank 0\n",
        encoding="utf-8",
    )
    nccl = type("DistBackendError", (RuntimeError,), {})("NCCL error in: ProcessGroupNCCL.cpp:3780, internal error")
    error = join_failure(LAUNCH, 120, nccl)
    assert str(error) == (
        "rank 1 of 4: NCCL could not connect the job's ranks: Mismatched number of channels across ranks: 1 on this rank, 8 on rank 0"
    )
    log.unlink()  # no log to read: torch's own line stands
    torch_said = "could not connect the job's ranks: NCCL error in: ProcessGroupNCCL.cpp:3780, internal error"
    assert str(join_failure(LAUNCH, 120, nccl)).endswith(torch_said)


def test_gpu_accept_torchrun_without_its_separator_is_one_line_and_exit_2(capsys) -> None:
    assert main(["torchrun", "--nnodes", "2", "--profile", "cluster-cpu-gloo"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "gpu-accept: torchrun: give torchrun's options, then --, then gpu-accept cluster's (see gpu-accept torchrun --help)"
    ]


@pytest.mark.slow  # torchrun's own parser: imports torch
def test_gpu_accept_torchrun_names_a_torchrun_option_it_does_not_know(tmp_path: Path, capsys) -> None:
    profile = Path(__file__).parents[1] / "examples" / "profiles" / "cluster-cpu-gloo.yaml"
    code = main(["torchrun", "--nodes-please", "2", "--", "--profile", str(profile), "--out", str(tmp_path / "out")])
    assert code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("gpu-accept: torchrun options: unrecognized arguments: --nodes-please")


@pytest.mark.slow  # torchrun itself: imports torch
@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--nnodes", "abc"], "invalid literal for int() with base 10: 'abc' (ValueError"),
        (["--nproc-per-node", "0"], "an option it could not use (AssertionError"),
        (["--rdzv-backend", "bogus"], "The rendezvous backend 'bogus' is not registered"),
    ],
)
def test_a_torchrun_option_torchrun_refuses_only_as_it_starts_is_one_line(tmp_path: Path, capsys, options, said) -> None:
    profile = Path(__file__).parents[1] / "examples" / "profiles" / "cluster-cpu-gloo.yaml"
    code = main(["torchrun", *options, "--", "--profile", str(profile), "--out", str(tmp_path / "out")])
    assert code == 2
    lines = [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("gpu-accept:")]
    assert len(lines) == 1 and lines[0].startswith(f"gpu-accept: torchrun options: {said}")


@pytest.mark.parametrize(
    ("environment", "said"),
    [
        ({"MASTER_PORT": "xyz"}, "MASTER_PORT='xyz' is not a number"),
        ({"LOCAL_WORLD_SIZE": "0"}, "rank 0 of 2, local rank 0 of 0: not a rank of this job (the environment variables disagree)"),
        ({"RANK": "5"}, "rank 5 of 2, local rank 0 of 1: not a rank of this job"),
        ({"WORLD_SIZE": "-2"}, "WORLD_SIZE=-2 is below 0"),
        # where the ranks meet, refused before any rank waits its rendezvous time there
        ({"MASTER_PORT": "99999"}, "MASTER_PORT=99999 is not a TCP port (1 to 65535): no rank can meet there"),
        ({"MASTER_PORT": "0"}, "MASTER_PORT=0 is not a TCP port"),
        ({"MASTER_ADDR": ""}, "MASTER_ADDR is empty: name the host the ranks meet at"),
        ({"MASTER_ADDR": "no-such-host.invalid"}, "MASTER_ADDR='no-such-host.invalid' does not resolve ("),
    ],
)
def test_launcher_variables_that_name_no_rank_of_the_job_are_one_line(environment: dict[str, str], said: str) -> None:
    from gpuaccept.measure.cluster import RendezvousError, launch_from_environment

    given = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    with pytest.raises(RendezvousError) as raised:
        launch_from_environment({**given, **environment})
    assert str(raised.value).startswith(said)


def test_a_ranks_deadline_is_every_timeout_of_the_profile_together() -> None:
    from gpuaccept.cluster.runner import deadline_s
    from gpuaccept.profile import ProfileCatalog

    cpu = ProfileCatalog([Path(__file__).parents[1] / "examples" / "profiles"]).load("cluster-cpu-gloo")
    # rendezvous 60 s; 1 collective + 2 x 2 nodes + 4 localization rounds at 60 s each; DDP twice at 90 s
    assert deadline_s(cpu, nodes=2) == 60 + (1 + 2 * 2 + 4) * 60 + 2 * 90


@pytest.mark.slow
def test_a_rank_past_its_deadline_ends_in_one_line_with_exit_2() -> None:
    hung = "from gpuaccept.cluster.runner import start_watchdog; import time; start_watchdog(0.5, 3, 8); time.sleep(60)"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1] / "src"))
    done = subprocess.run([sys.executable, "-c", hung], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "gpu-accept: rank 3 of 8: no verdict after 0.5 s, longer than every timeout of the profile allows together "
        "(a peer or a collective hung past its own timeout)"
    ]


def test_nccl_lines_the_user_sends_elsewhere_are_read_there_only_this_runs(tmp_path: Path, monkeypatch) -> None:
    from gpuaccept.measure import nccl_logs as measure_cluster
    from gpuaccept.probe.network import read_nccl_logs

    monkeypatch.setattr(measure_cluster, "_CAPTURE_BEGAN", [])
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.setenv("NCCL_DEBUG_FILE", str(tmp_path / "mine" / "debug-%h-%p.txt"))
    (tmp_path / "mine").mkdir()
    monkeypatch.setattr(socket, "gethostname", lambda: "node1.cluster.example.com")
    host = "node1"  # as NCCL writes %h
    earlier = tmp_path / "mine" / f"debug-{host}-17.txt"  # an earlier job's, left behind
    earlier.write_text((DATA / "nccl-info" / "socket.log").read_text(encoding="utf-8"), encoding="utf-8")
    os.utime(earlier, (1_000_000_000, 1_000_000_000))
    assert measure_cluster.capture_nccl_info(tmp_path / "ours") == []  # before NCCL started
    assert os.environ["NCCL_DEBUG"] == "INFO" and os.environ["NCCL_DEBUG_FILE"] == str(tmp_path / "mine" / "debug-%h-%p.txt")
    this_run = tmp_path / "mine" / f"debug-{host}-4242.txt"
    this_run.write_text((DATA / "nccl-info" / "ib-gdrdma.log").read_text(encoding="utf-8"), encoding="utf-8")
    found = measure_cluster.capture_nccl_info(tmp_path / "ours")
    assert found == [this_run] and not (tmp_path / "ours").exists()
    transport = read_nccl_logs(found)
    assert not isinstance(transport, Unavailable) and transport.networks == ["IB"]


def test_our_own_nccl_files_are_this_runs_an_earlier_runs_in_the_folder_removed(tmp_path: Path, monkeypatch) -> None:
    from gpuaccept.measure import nccl_logs as measure_cluster

    monkeypatch.setattr(measure_cluster, "_CAPTURE_BEGAN", [])
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)
    monkeypatch.setenv("NCCL_DEBUG", "WARN")  # both are set by the call: restored after the test
    monkeypatch.setattr(socket, "gethostname", lambda: "gpu-17.example.com")
    folder = tmp_path / "node0-gpu-17"
    folder.mkdir()
    (folder / "nccl.gpu-17.99.log").write_text("an earlier run's lines\n", encoding="utf-8")
    assert measure_cluster.capture_nccl_info(folder) == []
    assert os.environ["NCCL_DEBUG_FILE"] == str(folder / "nccl.%h.%p.log")
    written = folder / "nccl.gpu-17.4242.log"  # what NCCL writes for %h on gpu-17.example.com
    written.write_text("lines\n", encoding="utf-8")
    assert measure_cluster.capture_nccl_info(folder) == [written]


def test_a_port_beyond_tcp_is_refused_by_the_command_before_any_rank_waits(tmp_path: Path, capsys, monkeypatch) -> None:
    from gpuaccept.cli import main

    for name, value in {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": "99999"}.items():
        monkeypatch.setenv(name, value)
    profile = ROOT / "examples" / "profiles" / "cluster-cpu-gloo.yaml"
    began = time.monotonic()
    assert main(["cluster", "--profile", str(profile), "--out", str(tmp_path / "out"), "--backend", "gloo"]) == 2
    assert time.monotonic() - began < 10  # not the profile's rendezvous time
    assert capsys.readouterr().err.strip().splitlines() == [
        "gpu-accept: MASTER_PORT=99999 is not a TCP port (1 to 65535): no rank can meet there"]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, (0, 1, 0)),  # started by hand: one rank of one
        ({"RANK": "3", "LOCAL_RANK": "1", "GROUP_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}, (3, 4, 1)),  # torchrun
        ({"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NODEID": "2", "SLURM_NTASKS": "6", "SLURM_NNODES": "3",
          "SLURM_JOB_NODELIST": "gpu[07-09]"}, (5, 6, 1)),  # srun
        ({"RANK": "2", "LOCAL_RANK": "2", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4"}, (2, 4, 2)),  # gpu-accept's own launcher
    ],
    ids=["none", "torchrun", "srun", "ours"],
)
def test_a_worker_of_one_host_reads_its_rank_as_a_rank_of_a_cluster_does(monkeypatch, given, expected) -> None:
    """One reader of the launchers' variables (measure/ranks.py) for both runners."""
    from gpuaccept.measure.ranks import launch_of
    from gpuaccept.measure.worker import rank_from_environment

    for name in [*os.environ]:
        if name.startswith(("RANK", "LOCAL_", "GROUP_RANK", "WORLD_SIZE", "SLURM_")):
            monkeypatch.delenv(name)
    for name, value in given.items():
        monkeypatch.setenv(name, value)
    assert rank_from_environment() == expected
    if given:
        launch = launch_of(given)
        assert (launch.rank, launch.world, launch.local_rank) == expected


def test_a_worker_whose_launcher_variables_disagree_is_one_line(monkeypatch) -> None:
    from gpuaccept.measure.ranks import RendezvousError
    from gpuaccept.measure.worker import rank_from_environment

    monkeypatch.setenv("RANK", "4")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    with pytest.raises(RendezvousError, match=r"^rank 4 of 4, local rank 0 of 4: not a rank of this job"):
        rank_from_environment()
