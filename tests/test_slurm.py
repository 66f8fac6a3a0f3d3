"""`gpu-accept health-check` as Slurm runs it (HealthCheckProgram, prolog, epilog), with a fake
`scontrol` on PATH that records every call; the NHC check file and the wrapper script, in the bare
environments slurmd and NHC give them. These check our side; tests/test_slurm_live.py runs the same
program under a real slurmd and slurmctld."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuaccept.errors import OptionError
from gpuaccept.facts import run_verdict
from gpuaccept.facts.run_record import load_results
from gpuaccept.report.slurm import REASON_MAX, check_node_name, drain_asked, drain_reason, node_to_drain
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


def test_the_reason_names_the_failing_tests_first_and_stays_one_short_line():
    record = load_results(EXAMPLES.parent / "results" / "h200x4-nccl-p2p-disabled.json")
    reason = drain_reason(record.judged())
    # sinfo -R shows 20 characters: a failing test's name, not "gpu-accept: "; causes first: the
    # collectives (the run recorded its DDP tests first; NCCL is the layer below)
    assert reason.startswith("test_busbw[all_reduce-256MiB,all_reduce-1GiB,all_reduce-4GiB,")
    assert reason.endswith("more; gpu-accept exit 1, profile h200-4-calibrated)") and len(reason) <= REASON_MAX and "\n" not in reason
    failing = sum(t.outcome == "failed" for t in record.tests)
    ids = reason.partition(" (+")[0]
    shown = ids.count(",") + ids.count("[")  # each id shown is one parameter
    assert f"(+{failing - shown} more;" in reason


def test_the_reason_of_a_run_that_judged_nothing_is_its_cause():
    verdict = run_verdict.could_not_judge("no NVIDIA driver found: NVML could not start (NVML Shared Library Not Found)",
                                          host="n1", profile="h100-8-nvswitch")
    assert drain_reason(verdict) == ("could not judge: no NVIDIA driver found: NVML could not start (NVML Shared Library Not "
                                     "Found) (gpu-accept exit 2, profile h100-8-nvswitch)")


def test_control_characters_reach_the_reason_escaped():
    verdict = run_verdict.could_not_judge("profiles/\x1b]0;owned\x07evil\n.yaml: no such file", host="n1",
                                          profile="\x1b[2Jp\u202e")
    reason = drain_reason(verdict)
    assert reason.isprintable() and reason.isascii(), reason
    assert "\\x1b]0;owned\\x07evil" in reason and "\\u202e" in reason


@pytest.mark.parametrize("name", ["gpu017", "node-1.rack_2", "a" * 64, "N1"])
def test_one_plain_node_name_is_taken(name):
    assert check_node_name(name, "--node") == name


@pytest.mark.parametrize(
    "name",
    ["gpu[01-64]", "a,b", "a b", "gpu01 ", "-n1", "", " ", "a\nb", "n1\x1b", "a" * 65, "gpu[1]", "n1;reboot", "nöde", "ALL ", "n*"],
)
def test_anything_slurm_could_read_as_several_nodes_is_refused(name):
    """scontrol reads a node name as a hostlist expression: brackets are ranges, commas and spaces
    separate names. Such a name would drain every node it expands to: refused, one line."""
    with pytest.raises(OptionError) as refused:
        check_node_name(name, "SLURMD_NODENAME")
    [line] = str(refused.value).splitlines()
    assert line.startswith("SLURMD_NODENAME") and line.isprintable()


FAILED_RUN = run_verdict.RunVerdict(exit_code=1, result="failed", cause="test_gpu_count", failed=["test_gpu_count"])
NOT_ESTABLISHED = run_verdict.RunVerdict(
    exit_code=2, result="not_judged", cause="could not judge: test_busbw[all_reduce-1GiB]",
    not_judged=[run_verdict.NotJudged(id="test_busbw[all_reduce-1GiB]", reason="the NCCL stage timed out")],
)
NOTHING_JUDGED = run_verdict.could_not_judge("no NVIDIA driver found", host="n1")


@pytest.mark.parametrize(
    "verdict, on_fail, on_error, drains",
    [
        (FAILED_RUN, "drain", "none", True),
        (FAILED_RUN, "none", "drain", False),
        # checks that ran and could not establish a value: the node is not proven good, --on-fail drains it
        (NOT_ESTABLISHED, "drain", "none", True),
        (NOT_ESTABLISHED, "none", "drain", False),
        # nothing judged at all (no driver, a probe that hung): only --on-error drains
        (NOTHING_JUDGED, "drain", "none", False),
        (NOTHING_JUDGED, "none", "drain", True),
    ],
    ids=["failed-on-fail", "failed-on-error", "not-established-on-fail", "not-established-on-error", "nothing-on-fail",
         "nothing-on-error"],
)
def test_which_runs_drain_by_on_fail_and_on_error(verdict, on_fail, on_error, drains):
    assert drain_asked(verdict, on_fail, on_error) is drains


def test_the_node_a_drain_names_is_given_else_slurmds_else_the_short_host_name(monkeypatch):
    monkeypatch.setenv("SLURMD_NODENAME", "gpu-node-07")
    assert node_to_drain("n1", "host.example.org") == "n1"
    assert node_to_drain(None, "host.example.org") == "gpu-node-07"
    monkeypatch.delenv("SLURMD_NODENAME")
    assert node_to_drain(None, "host.example.org") == "host"
    with pytest.raises(OptionError, match=r"^--node 'gpu\[1-2\]': not one plain Slurm node name"):
        node_to_drain("gpu[1-2]", "host")


@pytest.mark.slow
def test_a_failed_node_is_drained_with_its_failing_tests_as_the_reason(tmp_path):
    env, log = fake_slurm(tmp_path)
    env["GPUACCEPT_NVML_REPLAY"] = REPLAY
    env["SLURMD_NODENAME"] = "gpu-node-07"
    done = health_check(tmp_path, env, "--profile", FAILS, "--on-fail", "drain", "--metrics", str(tmp_path / "m.prom"))
    assert done.returncode == 1, done.stderr
    [call] = calls(log)
    assert call[:3] == ["update", "nodename=gpu-node-07", "state=drain"]
    assert call[3].startswith("reason=test_gpu_count ") and len(call) == 4, call
    assert call[3].endswith("gpu-accept exit 1, profile h200-8-nvswitch)")
    reason = call[3].removeprefix("reason=")
    assert done.stdout.splitlines() == [f"gpu-accept health-check: FAIL: {reason} [drained gpu-node-07 in Slurm]"]
    assert "gpu_accept_run_exit_code{" in (tmp_path / "m.prom").read_text()
    verdict = run_verdict.load_verdict(tmp_path / "reports" / "verdict.json")
    assert verdict.exit_code == 1 and "test_gpu_count" in verdict.failed and verdict.cause.startswith("test_gpu_count: ")
    assert "collected" in (tmp_path / "reports" / "health-check.log").read_text()  # pytest's output, not the terminal's


@pytest.mark.slow
def test_a_node_that_could_not_be_judged_is_not_proven_good_and_drains_saying_so(tmp_path):
    env, log = fake_slurm(tmp_path)
    env["GPUACCEPT_NVML_REPLAY"] = REPLAY
    done = health_check(tmp_path, env, "--profile", NOT_JUDGED, "--on-fail", "drain", "--node", "gpu-node-08")
    assert done.returncode == 2, done.stderr
    [call] = calls(log)
    assert call[3].startswith("reason=could not judge: test_p2p_cuda_agrees[gpu0-gpu1,gpu0-gpu2,") and len(call) == 4
    assert call[3].endswith("gpu-accept exit 2, profile h200-4-nvswitch)")
    [line] = done.stdout.splitlines()
    assert line.startswith(f"gpu-accept health-check: COULD NOT JUDGE: {call[3].removeprefix('reason=')} [drained gpu-node-08")
    verdict = run_verdict.load_verdict(tmp_path / "reports" / "verdict.json")
    assert verdict.result == "not_judged" and verdict.not_judged[0].id.startswith("test_p2p_cuda_agrees[")
    assert verdict.not_judged[0].reason and verdict.cause.startswith("could not judge: test_p2p_cuda_agrees[")


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
    assert done.stdout.splitlines()[-1].startswith("gpu-accept health-check: FAIL: test_gpu_count ")


@pytest.mark.slow
def test_a_node_that_cannot_be_judged_drains_only_where_asked(tmp_path):
    env, log = fake_slurm(tmp_path, without_driver(tmp_path))
    done = health_check(tmp_path, env, "--profile", "h200-4-nvswitch", "--on-fail", "drain", "--node", "n1")
    assert done.returncode == 2 and calls(log) == [], done.stdout + done.stderr
    done = health_check(tmp_path, env, "--profile", "h200-4-nvswitch", "--on-error", "drain", "--node", "n1")
    assert done.returncode == 2
    [call] = calls(log)
    assert call[:3] == ["update", "nodename=n1", "state=drain"]
    assert call[3] == "reason=could not judge: no NVIDIA driver found: NVML could not start (NVML Shared Library Not Found) " \
                      "(gpu-accept exit 2, profile h200-4-nvswitch)"
    assert run_verdict.load_verdict(tmp_path / "reports" / "verdict.json").cause.startswith("could not judge: no NVIDIA driver found")


@pytest.mark.slow
def test_bad_options_are_refused_before_anything_runs_and_never_drain(tmp_path):
    env, log = fake_slurm(tmp_path)
    env["GPUACCEPT_NVML_REPLAY"] = REPLAY
    for args in (["--metrics", "/sys/gpu.prom"], ["--profile", "no-such-profile"], ["--node", " "], ["--profile-dir", "/no/such"],
                 ["--reprots", "x"], ["-k"], ["--node", "gpu[01-64]"], ["--node", "a,b"]):
        done = health_check(tmp_path, env, "--on-fail", "drain", "--on-error", "drain", *args)
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, (args, done.stderr)
        assert done.stdout == "" and calls(log) == []
    assert "--reprots x" in health_check(tmp_path, env, "--on-fail", "drain", "--reprots", "x").stderr
    env["SLURMD_NODENAME"] = "gpu[01-64]"
    done = health_check(tmp_path, env, "--on-fail", "drain")
    assert done.returncode == 2 and done.stderr.startswith("gpu-accept: SLURMD_NODENAME 'gpu[01-64]': not one plain Slurm node name")
    assert calls(log) == []
    assert not (tmp_path / "reports" / "results.json").exists() and not (tmp_path / "reports" / "verdict.json").exists()


@pytest.mark.slow
def test_a_drain_that_scontrol_refuses_is_said_and_the_verdict_stands(tmp_path):
    env, log = fake_slurm(tmp_path, exit_code=1)
    env["GPUACCEPT_NVML_REPLAY"] = REPLAY
    done = health_check(tmp_path, env, "--profile", FAILS, "--on-fail", "drain", "--node", "n2")
    assert done.returncode == 1 and len(calls(log)) == 1
    assert done.stdout.splitlines()[-1].endswith("[could not drain n2: scontrol exited 1: no output]") and done.stderr == ""


def gpu_accept_command(tmp_path: Path, *extra: str) -> str:
    """gpu-accept as a command for shell scripts: this interpreter's module, whatever is on PATH."""
    command = write(tmp_path / "bin" / "gpu-accept-here", f'#!/bin/sh\nexec "{sys.executable}" -m gpuaccept "$@" {" ".join(extra)}\n')
    command.chmod(0o755)
    return str(command)


def test_the_scripts_parse():
    for script in (SLURM / "gpu-accept-health.sh", SLURM / "nhc" / "gpu-accept.nhc"):
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0, script


def as_slurmd_runs_it(tmp_path: Path, settings: dict[str, str], **slurmd: str) -> subprocess.CompletedProcess:
    """The wrapper as slurmd starts a HealthCheckProgram: SLURMD_NODENAME and nothing else, no PATH
    (a prolog: SLURM_* too); its settings in a defaults file named by GPU_ACCEPT_DEFAULTS, never the
    host's /etc/default/gpu-accept. The fake scontrol is found first on the PATH the defaults give."""
    scontrol = write(tmp_path / "bin" / "scontrol", FAKE_SCONTROL)
    scontrol.chmod(0o755)
    lines = [f"PATH={scontrol.parent}:$PATH", f"SCONTROL_LOG={tmp_path / 'scontrol.log'}",
             *(f"{key}={value}" for key, value in settings.items())]
    defaults = write(tmp_path / "gpu-accept.defaults", "\n".join(lines) + "\n")
    env = {"GPU_ACCEPT_DEFAULTS": str(defaults), **slurmd}
    return subprocess.run(["/bin/bash", str(SLURM / "gpu-accept-health.sh")], capture_output=True, text=True, env=env, timeout=300,
                          cwd=tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("job, code", [(None, 2), ("4242", 2)], ids=["health-check-program", "prolog"])
def test_the_health_check_program_drains_an_unproven_node_as_slurmd_runs_it(tmp_path, job, code):
    # the wrapper's own limit (45 s) is Slurm's; on a busy test machine the check is given longer
    settings = {"GPUACCEPT_NVML_REPLAY": REPLAY, "GPU_ACCEPT": gpu_accept_command(tmp_path), "GPU_ACCEPT_PROFILE": NOT_JUDGED,
                "GPU_ACCEPT_REPORTS": str(tmp_path / "r"), "GPU_ACCEPT_METRICS": str(tmp_path / "textfile" / "gpu-accept.prom"),
                "GPU_ACCEPT_TIMEOUT": "240"}
    slurmd = {"SLURMD_NODENAME": "gpu-node-09", **({"SLURM_JOB_ID": job} if job else {})}
    done = as_slurmd_runs_it(tmp_path, settings, **slurmd)
    assert done.returncode == code, done.stdout + done.stderr
    [call] = calls(tmp_path / "scontrol.log")
    assert call[1] == "nodename=gpu-node-09" and call[3].startswith("reason=could not judge: test_p2p_cuda_agrees[")
    [line] = done.stdout.splitlines()  # one line for slurmd.log, not pytest's progress
    assert line.startswith("gpu-accept health-check: COULD NOT JUDGE: could not judge: test_p2p_cuda_agrees[") and done.stderr == ""
    assert (tmp_path / "textfile" / "gpu-accept.prom").is_file()


@pytest.mark.slow
def test_a_program_that_cannot_start_is_could_not_judge_and_drains_saying_why(tmp_path):
    """slurmd's bare environment: gpu-accept is not on the PATH the wrapper builds (exit 127)."""
    done = as_slurmd_runs_it(tmp_path, {"GPU_ACCEPT": "gpu-accept-not-installed"}, SLURMD_NODENAME="n4")
    assert done.returncode == 2
    [call] = calls(tmp_path / "scontrol.log")
    assert call[:3] == ["update", "nodename=n4", "state=drain"]
    assert call[3].startswith("reason=could not judge: gpu-accept not found: gpu-accept-not-installed on PATH=")
    assert call[3].endswith("(exit 127) (gpu-accept-health)")
    [line] = done.stdout.splitlines()
    assert line.startswith("gpu-accept-health: could not judge: gpu-accept not found") and line.endswith("[drained n4]")
    not_executable = write(tmp_path / "bin" / "not-executable", "#!/bin/sh\n")
    done = as_slurmd_runs_it(tmp_path, {"GPU_ACCEPT": str(not_executable), "GPU_ACCEPT_ON_ERROR": "none"}, SLURMD_NODENAME="n4")
    assert done.returncode == 2 and "is not executable (exit 126)" in done.stdout and len(calls(tmp_path / "scontrol.log")) == 1


@pytest.mark.slow
@pytest.mark.parametrize("signal_number", [9, 15])
def test_a_check_killed_by_a_signal_is_could_not_judge(tmp_path, signal_number):
    killed = write(tmp_path / "bin" / "killed", f"#!/bin/sh\nkill -{signal_number} $$\n")
    killed.chmod(0o755)
    done = as_slurmd_runs_it(tmp_path, {"GPU_ACCEPT": str(killed)}, SLURMD_NODENAME="n5", SLURM_JOB_ID="12")
    assert done.returncode == 2
    [call] = calls(tmp_path / "scontrol.log")
    assert call[3] == f"reason=could not judge: gpu-accept was killed by signal {signal_number} (gpu-accept-health)"


@pytest.mark.slow
def test_the_health_check_program_drains_a_check_that_ran_past_its_time(tmp_path):
    hang = write(tmp_path / "bin" / "hangs", "#!/bin/sh\nexec sleep 30\n")
    hang.chmod(0o755)
    done = as_slurmd_runs_it(tmp_path, {"GPU_ACCEPT": str(hang), "GPU_ACCEPT_TIMEOUT": "1"}, SLURMD_NODENAME="n3", SLURM_JOB_ID="77")
    assert done.returncode == 2
    reason = "reason=could not judge: health check did not finish within 1 s (exit 124) (gpu-accept-health)"
    assert calls(tmp_path / "scontrol.log") == [["update", "nodename=n3", "state=drain", reason]]


@pytest.mark.parametrize("name", ["gpu[01-64]", "a,b", "n1 n2", "n1\x1b[2J"])
def test_the_wrapper_refuses_a_node_name_slurm_would_read_as_several(tmp_path, name):
    done = as_slurmd_runs_it(tmp_path, {"GPU_ACCEPT": "/bin/false"}, SLURMD_NODENAME=name)
    assert done.returncode == 2 and calls(tmp_path / "scontrol.log") == []
    [line] = done.stdout.splitlines()
    assert line.startswith("gpu-accept-health: could not judge: the node name ") and line.isprintable()


def test_the_defaults_file_is_the_one_named_never_the_hosts(tmp_path):
    """GPU_ACCEPT_DEFAULTS names the file: a test never reads the host's /etc/default/gpu-accept."""
    shown = write(tmp_path / "bin" / "shows", "#!/bin/sh\necho \"$GPU_ACCEPT_MARK $*\"\nexit 0\n")
    shown.chmod(0o755)
    done = as_slurmd_runs_it(tmp_path, {"GPU_ACCEPT": str(shown), "GPU_ACCEPT_MARK": "from-the-named-file"}, SLURMD_NODENAME="n6")
    assert done.returncode == 0
    [line] = done.stdout.splitlines()
    assert line.startswith("from-the-named-file health-check --profile auto --reports /var/lib/gpu-accept/health --node n6")


# NHC's own environment for its checks (nhc: PATH=/sbin:/usr/sbin:/bin:/usr/bin, HOSTNAME and
# HOSTNAME_S set) with a `die` of our own that records its message: this checks our side of NHC.
# docs/slurm.md records the module under NHC 1.4.3 itself, against a real slurmctld.
NHC_HARNESS = """
die() { echo "die $1: $2"; }
source "$1"
check_gpu_accept "$2"
echo "status $?"
"""
NHC_PATH = "/sbin:/usr/sbin:/bin:/usr/bin"


def as_nhc_runs_it(tmp_path: Path, profile: str, **settings: str) -> subprocess.CompletedProcess:
    scontrol = write(tmp_path / "bin" / "scontrol", FAKE_SCONTROL)
    scontrol.chmod(0o755)
    # the fake scontrol first; gpu-accept only where GPU_ACCEPT names it (this interpreter's, not on NHC's PATH)
    env = {"PATH": f"{scontrol.parent}:{NHC_PATH}", "HOSTNAME": "gpu-node-10.cluster", "HOSTNAME_S": "gpu-node-10",
           "SCONTROL_LOG": str(tmp_path / "scontrol.log"), "GPU_ACCEPT_REPORTS": str(tmp_path / "r"), **settings}
    return subprocess.run(["/bin/bash", "-c", NHC_HARNESS, "nhc", str(SLURM / "nhc" / "gpu-accept.nhc"), profile],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize(
    "select, profile, expected, drained",
    [
        ("not p2p_cuda_agrees", NOT_JUDGED, ["status 0"], False),
        ("", FAILS, ["die 1: test_gpu_count test_gpu_model[gpu4,", "status 1"], True),
        ("", NOT_JUDGED, ["die 1: could not judge: test_p2p_cuda_agrees[gpu0-gpu1,", "status 1"], True),
    ],
    ids=["passes", "fails", "could-not-judge"],
)
def test_the_nhc_check_drains_with_its_own_reason_and_dies_with_it(tmp_path, select, profile, expected, drained):
    """gpu-accept drains with a reason that does not begin "NHC:", so that NHC's node-mark-online
    never resumes it; NHC's die gets the same reason, read from verdict.json."""
    runner = gpu_accept_command(tmp_path, f'-k "{select}"' if select else "")
    # the module's own limit (25 s) is NHC's; on a busy test machine the check is given longer
    done = as_nhc_runs_it(tmp_path, profile, GPU_ACCEPT=runner, GPUACCEPT_NVML_REPLAY=REPLAY, GPU_ACCEPT_TIMEOUT="240")
    lines = done.stdout.splitlines()
    assert len(lines) == len(expected) and all(line.startswith(want) for line, want in zip(lines, expected, strict=True)), lines
    found = calls(tmp_path / "scontrol.log")
    assert len(found) == int(drained)
    if drained:
        assert found[0][:3] == ["update", "nodename=gpu-node-10", "state=drain"]
        assert found[0][3].removeprefix("reason=") == lines[0].removeprefix("die 1: ") and not found[0][3].startswith("reason=NHC:")


@pytest.mark.slow
def test_the_nhc_check_that_cannot_find_gpu_accept_drains_and_dies_saying_so(tmp_path):
    """Under NHC's PATH a gpu-accept installed elsewhere is not found (exit 127): a failure of its own."""
    done = as_nhc_runs_it(tmp_path, "auto", GPU_ACCEPT="gpu-accept-not-installed")
    [die, status] = done.stdout.splitlines()
    assert die.startswith("die 1: could not judge: gpu-accept not found (gpu-accept-not-installed on PATH=") and status == "status 1"
    [call] = calls(tmp_path / "scontrol.log")
    assert call[3] == f"reason={die.removeprefix('die 1: ')} (gpu-accept.nhc)"


@pytest.mark.slow
def test_the_nhc_message_never_carries_a_quote_nhc_would_evaluate(tmp_path):
    """NHC hands a check's message to its helpers through eval, inside single quotes."""
    quoting = write(tmp_path / "bin" / "quoting", "#!/bin/sh\necho \"it's \\033[2J bad\"; exit 3\n")
    quoting.chmod(0o755)
    done = as_nhc_runs_it(tmp_path, "auto", GPU_ACCEPT=str(quoting))
    die = done.stdout.splitlines()[0]
    assert die == "die 1: could not judge: gpu-accept could not run (exit 3)" and "'" not in die
