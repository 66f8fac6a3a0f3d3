"""`gpu-accept health-check` as Slurm runs it (HealthCheckProgram, prolog, epilog), with a fake
`scontrol` on PATH that records every call; the NHC check file and the wrapper script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuaccept.facts.run_record import load_results
from gpuaccept.report.slurm import REASON_MAX, drain_reason
from tests.helpers import EXAMPLES, write
from tests.test_cli import without_driver

ROOT = Path(__file__).resolve().parents[1]
SLURM = ROOT / "deploy" / "slurm"
REPLAY = str(ROOT / "tests" / "data" / "nvml" / "h200x4.json")
# judged against these recorded 4xH200 answers: the 8xH200 profile finds four GPUs missing (a check
# fails); the 4xH200 profile fails nothing, but this machine has no CUDA driver, so CUDA's P2P
# answers cannot be established (could not judge)
FAILS, NOT_JUDGED = "h200-8-nvswitch", "h200-4-nvswitch"
FAKE_SCONTROL = """#!/bin/sh
# records its arguments, one a line, each call ended by ---
for argument in "$@"; do printf '%s\\n' "$argument"; done >> "$SCONTROL_LOG"
echo --- >> "$SCONTROL_LOG"
exit "${SCONTROL_EXIT:-0}"
"""


def fake_slurm(tmp_path: Path, base: dict | None = None, exit_code: int = 0) -> tuple[dict, Path]:
    scontrol = write(tmp_path / "bin" / "scontrol", FAKE_SCONTROL)
    scontrol.chmod(0o755)
    log = tmp_path / "scontrol.log"
    env = dict(os.environ if base is None else base)
    env.update(PATH=f"{scontrol.parent}{os.pathsep}{env['PATH']}", SCONTROL_LOG=str(log), SCONTROL_EXIT=str(exit_code))
    return env, log


def calls(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [block.strip("\n").split("\n") for block in log.read_text().split("---\n") if block.strip()]


def health_check(tmp_path: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuaccept", "health-check", "--reports", str(tmp_path / "reports"), *args],
        capture_output=True, text=True, env=env, timeout=300,
    )


def test_the_reason_names_the_failing_tests_and_stays_one_short_line():
    record = load_results(EXAMPLES.parent / "results" / "h200x4-nccl-p2p-disabled.json")
    reason = drain_reason(record, 1)
    # causes first: the collectives (the run recorded its DDP tests first; NCCL is the layer below)
    assert reason.startswith("gpu-accept: test_busbw[all_reduce-256MiB,all_reduce-1GiB,all_reduce-4GiB,")
    assert reason.endswith("more; exit 1, profile h200-4-calibrated)") and len(reason) <= REASON_MAX and "\n" not in reason
    failing = sum(t.did_not_pass for t in record.tests)
    ids = reason.partition(" (+")[0]
    shown = ids.count(",") + ids.count("[")  # each id shown is one parameter
    assert f"(+{failing - shown} more;" in reason


def test_the_reason_of_a_run_that_wrote_nothing_says_so():
    assert drain_reason(None, 2) == "gpu-accept: could not judge the node (exit 2; no results were written)"


@pytest.mark.slow
def test_a_failed_node_is_drained_with_its_failing_tests_as_the_reason(tmp_path):
    env, log = fake_slurm(tmp_path)
    env["GPUACCEPT_NVML_REPLAY"] = REPLAY
    env["SLURMD_NODENAME"] = "gpu-node-07"
    done = health_check(tmp_path, env, "--profile", FAILS, "--on-fail", "drain", "--metrics", str(tmp_path / "m.prom"))
    assert done.returncode == 1, done.stderr
    [call] = calls(log)
    assert call[:3] == ["update", "nodename=gpu-node-07", "state=drain"]
    assert call[3].startswith("reason=gpu-accept: test_") and "test_gpu_count" in call[3] and len(call) == 4, call
    assert call[3].endswith("exit 1, profile h200-8-nvswitch)")
    assert done.stdout.splitlines()[-1] == f"gpu-accept health-check: FAIL: {call[3].removeprefix('reason=')}"
    assert "gpu_accept_run_exit_code{" in (tmp_path / "m.prom").read_text()


@pytest.mark.slow
def test_a_node_that_could_not_be_judged_is_not_proven_good_and_drains_saying_so(tmp_path):
    env, log = fake_slurm(tmp_path)
    env["GPUACCEPT_NVML_REPLAY"] = REPLAY
    done = health_check(tmp_path, env, "--profile", NOT_JUDGED, "--on-fail", "drain", "--node", "gpu-node-08")
    assert done.returncode == 2, done.stderr
    assert done.stdout.splitlines()[-1].startswith("gpu-accept health-check: COULD NOT JUDGE: gpu-accept: could not judge: test_p2p")
    [call] = calls(log)
    assert call[3].startswith("reason=gpu-accept: could not judge: test_p2p_cuda_agrees[gpu0-gpu1,gpu0-gpu2,") and len(call) == 4
    assert call[3].endswith("exit 2, profile h200-4-nvswitch)")
    assert done.stdout.splitlines()[-1] == f"gpu-accept health-check: COULD NOT JUDGE: {call[3].removeprefix('reason=')}"


@pytest.mark.slow
def test_a_passing_node_is_left_alone_and_nothing_is_ever_resumed(tmp_path):
    env, log = fake_slurm(tmp_path)
    env["GPUACCEPT_NVML_REPLAY"] = REPLAY
    done = health_check(tmp_path, env, "--profile", "h200-4-nvswitch", "--on-fail", "drain", "--on-error", "drain",
                        "-k", "not p2p_cuda_agrees")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "gpu-accept health-check: PASS"
    assert calls(log) == []


@pytest.mark.slow
def test_without_on_fail_a_failed_node_is_only_reported(tmp_path):
    env, log = fake_slurm(tmp_path)
    env["GPUACCEPT_NVML_REPLAY"] = REPLAY
    done = health_check(tmp_path, env, "--profile", FAILS)
    assert done.returncode == 1 and calls(log) == []
    assert done.stdout.splitlines()[-1].startswith("gpu-accept health-check: FAIL: gpu-accept: test_")


@pytest.mark.slow
def test_a_node_that_cannot_be_judged_drains_only_where_asked(tmp_path):
    env, log = fake_slurm(tmp_path, without_driver(tmp_path))
    done = health_check(tmp_path, env, "--profile", "h200-4-nvswitch", "--on-fail", "drain", "--node", "n1")
    assert done.returncode == 2 and calls(log) == [], done.stdout + done.stderr
    done = health_check(tmp_path, env, "--profile", "h200-4-nvswitch", "--on-error", "drain", "--node", "n1")
    assert done.returncode == 2
    [call] = calls(log)
    assert call[:3] == ["update", "nodename=n1", "state=drain"] and call[3].startswith("reason=gpu-accept: could not judge the node")


@pytest.mark.slow
def test_bad_options_are_refused_before_anything_runs_and_never_drain(tmp_path):
    env, log = fake_slurm(tmp_path)
    env["GPUACCEPT_NVML_REPLAY"] = REPLAY
    for args in (["--metrics", "/sys/gpu.prom"], ["--profile", "no-such-profile"], ["--node", " "], ["--profile-dir", "/no/such"]):
        done = health_check(tmp_path, env, "--on-fail", "drain", "--on-error", "drain", *args)
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, (args, done.stderr)
        assert done.stdout == "" and calls(log) == []
    assert not (tmp_path / "reports" / "results.json").exists()


@pytest.mark.slow
def test_a_drain_that_scontrol_refuses_is_said_and_the_verdict_stands(tmp_path):
    env, log = fake_slurm(tmp_path, exit_code=1)
    env["GPUACCEPT_NVML_REPLAY"] = REPLAY
    done = health_check(tmp_path, env, "--profile", FAILS, "--on-fail", "drain", "--node", "n2")
    assert done.returncode == 1 and len(calls(log)) == 1
    assert "gpu-accept: could not drain n2: scontrol exited 1" in done.stderr


def gpu_accept_command(tmp_path: Path) -> str:
    """gpu-accept as a command for shell scripts: this interpreter's module, whatever is on PATH."""
    command = write(tmp_path / "bin" / "gpu-accept-here", f'#!/bin/sh\nexec "{sys.executable}" -m gpuaccept "$@"\n')
    command.chmod(0o755)
    return str(command)


def test_the_scripts_parse():
    for script in (SLURM / "gpu-accept-health.sh", SLURM / "nhc" / "gpu-accept.nhc"):
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0, script


@pytest.mark.slow
@pytest.mark.parametrize("job, code", [(None, 0), ("4242", 2)], ids=["health-check-program", "prolog"])
def test_the_health_check_program_drains_an_unproven_node_as_slurmd_runs_it(tmp_path, job, code):
    env, log = fake_slurm(tmp_path)
    env.update(GPUACCEPT_NVML_REPLAY=REPLAY, SLURMD_NODENAME="gpu-node-09", GPU_ACCEPT=gpu_accept_command(tmp_path),
               GPU_ACCEPT_PROFILE="h200-4-nvswitch", GPU_ACCEPT_REPORTS=str(tmp_path / "r"),
               GPU_ACCEPT_METRICS=str(tmp_path / "textfile" / "gpu-accept.prom"))
    env.pop("SLURM_JOB_ID", None)
    if job:
        env["SLURM_JOB_ID"] = job  # slurmd sets it for a prolog or epilog, not for HealthCheckProgram
    done = subprocess.run(["bash", str(SLURM / "gpu-accept-health.sh")], capture_output=True, text=True, env=env, timeout=300)
    # a prolog's or epilog's exit code is Slurm's verdict; HealthCheckProgram's action is the drain alone
    assert done.returncode == code, done.stdout + done.stderr
    [call] = calls(log)
    assert call[1] == "nodename=gpu-node-09" and call[3].startswith("reason=gpu-accept: could not judge: test_p2p_cuda_agrees[")
    assert (tmp_path / "textfile" / "gpu-accept.prom").is_file()


@pytest.mark.slow
def test_the_health_check_program_drains_a_check_that_ran_past_its_time(tmp_path):
    env, log = fake_slurm(tmp_path)
    hang = write(tmp_path / "bin" / "hangs", "#!/bin/sh\nexec sleep 30\n")
    hang.chmod(0o755)
    env.update(SLURMD_NODENAME="n3", GPU_ACCEPT=str(hang), GPU_ACCEPT_TIMEOUT="1", GPU_ACCEPT_REPORTS=str(tmp_path / "r"),
               SLURM_JOB_ID="77")
    done = subprocess.run(["bash", str(SLURM / "gpu-accept-health.sh")], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2
    assert calls(log) == [["update", "nodename=n3", "state=drain", "reason=gpu-accept: health check did not finish within 1 s"]]


NHC_HARNESS = """
die() { echo "die $1: $2"; }   # NHC's own: marks the node offline with the message
source "$1"
check_gpu_accept "$2"
echo "status $?"
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "select, profile, expected",
    [
        ("not p2p_cuda_agrees", NOT_JUDGED, ["status 0"]),
        ("", FAILS, ["die 1: gpu-accept: test_", "status 1"]),
        ("", NOT_JUDGED, ["die 1: gpu-accept: could not judge: test_p2p_cuda_agrees[gpu0-gpu1,", "status 1"]),
    ],
    ids=["passes", "fails", "could-not-judge"],
)
def test_the_nhc_check_passes_or_dies_with_the_failing_tests(tmp_path, select, profile, expected):
    env, log = fake_slurm(tmp_path)
    runner = write(tmp_path / "bin" / "gpu-accept-select",
                   f'#!/bin/sh\nexec "{sys.executable}" -m gpuaccept "$@" ' + (f'-k "{select}"\n' if select else "\n"))
    runner.chmod(0o755)
    # the module's own limit (25 s) is NHC's; on a busy test machine the check is given longer
    env.update(GPUACCEPT_NVML_REPLAY=REPLAY, GPU_ACCEPT=str(runner), GPU_ACCEPT_REPORTS=str(tmp_path / "r"), GPU_ACCEPT_TIMEOUT="240")
    done = subprocess.run(["bash", "-c", NHC_HARNESS, "nhc", str(SLURM / "nhc" / "gpu-accept.nhc"), profile],
                          capture_output=True, text=True, env=env, timeout=300)
    lines = done.stdout.splitlines()
    assert len(lines) == len(expected) and all(line.startswith(want) for line, want in zip(lines, expected, strict=True)), lines
    assert calls(log) == []  # NHC drains the node itself
