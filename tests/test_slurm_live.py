"""deploy/slurm/gpu-accept-health.sh under a real one-node Slurm (munge, slurmctld and slurmd from
Debian's packages, started here on 127.0.0.1): slurmd itself runs the wrapper as HealthCheckProgram
and as Prolog, in its own environment (SLURMD_NODENAME alone, or SLURM_* alone: no PATH). The facts
come from recorded NVML answers of a 4xH200 machine (GPUACCEPT_NVML_REPLAY): judged against the
8xH200 profile four GPUs are missing and checks fail; against the 4xH200 profile (without the CUDA
test this machine cannot answer) every check passes.

The wrapper's settings come from a defaults file named by GPU_ACCEPT_DEFAULTS, the one variable the
test adds to what slurmd passes: slurmd gives the program no SLURM_CONF, and the host's
/etc/default/gpu-accept and /etc/slurm are never read."""

from __future__ import annotations

import contextlib
import itertools
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuaccept.facts import run_verdict
from tests.helpers import write
from tests.real_software import OneNodeSlurm, daemons, wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
WRAPPER = ROOT / "deploy" / "slurm" / "gpu-accept-health.sh"
REPLAY = str(ROOT / "tests" / "data" / "nvml" / "h200x4.json")
FAILS = {"GPU_ACCEPT_PROFILE": "h200-8-nvswitch"}


@contextlib.contextmanager
def slurm_folder() -> Iterator[Path]:
    # munged refuses a socket below a folder not open to all (pytest's tmp_path is 0700)
    folder = Path(tempfile.mkdtemp(prefix="gpu-accept-slurm-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class Site:
    """What a site installs: the wrapper where slurm.conf names it, and its defaults file."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.defaults = folder / "gpu-accept.defaults"
        self.reports = folder / "reports"
        # slurmd's environment as it reaches the program, then the real wrapper with the defaults file named
        self.program = write(folder / "gpu-accept-health", (
            "#!/bin/sh\n"
            f'env > "{folder}/environment.$$"\n'
            f'exec /usr/bin/env GPU_ACCEPT_DEFAULTS="{self.defaults}" /bin/bash "{WRAPPER}"\n'
        ))
        self.program.chmod(0o755)
        gpu_accept = write(folder / "gpu-accept", f'#!/bin/sh\nexec "{sys.executable}" -m gpuaccept "$@"\n')
        gpu_accept.chmod(0o755)
        passing = write(folder / "gpu-accept-passing", f'#!/bin/sh\nexec "{sys.executable}" -m gpuaccept "$@" -k "not p2p_cuda_agrees"\n')
        passing.chmod(0o755)
        self.commands = {"failing": str(gpu_accept), "passing": str(passing)}

    def configure(self, slurm: OneNodeSlurm, command: str, **settings: str) -> None:
        # slurmd kills a HealthCheckProgram at 60 s: the check gets all of it on a loaded test machine
        lines = {"SLURM_CONF": str(slurm.conf), "GPUACCEPT_NVML_REPLAY": REPLAY, "GPU_ACCEPT_REPORTS": str(self.reports),
                 "GPU_ACCEPT_TIMEOUT": "55", "GPU_ACCEPT": self.commands.get(command, command), **settings}
        write(self.defaults, "".join(f"{key}='{value}'\n" for key, value in lines.items()))

    def environments(self) -> list[dict[str, str]]:
        found = []
        for path in sorted(self.folder.glob("environment.*")):
            found.append(dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line))
        return found

    def verdict_after(self, since: float) -> run_verdict.RunVerdict | None:
        path = self.reports / "verdict.json"
        try:
            verdict = run_verdict.load_verdict(path)
        except Exception:
            return None
        return verdict if not verdict.in_progress and path.stat().st_mtime > since else None


SHELL = {"PWD", "SHLVL", "_", "OLDPWD"}  # what /bin/sh itself adds


def test_slurmd_runs_the_health_check_program_which_drains_and_nothing_resumes(capsys):
    with slurm_folder() as folder, daemons() as running:
        site = Site(folder)
        slurm = OneNodeSlurm(folder, running, f"HealthCheckProgram={site.program}\nHealthCheckInterval=15\n")
        site.configure(slurm, "failing", **FAILS)
        slurm.start()
        # slurmd runs the program at its start and every 15 s: a check fails, the node is drained
        state, reason = slurm.wait_state("the failing node drained", lambda s, r: s.startswith("drain") and r.startswith("test_"))
        assert reason.startswith("test_gpu_count test_gpu_model[gpu4,gpu5,gpu6,gpu7] ")
        assert reason.endswith("more; gpu-accept exit 1, profile h200-8-nvswitch)") and len(reason) <= 200
        listing = slurm.run("sinfo", "-R").stdout  # the default columns: REASON is 20 characters wide
        assert "test_gpu_count test_ root " in listing, listing
        # what slurmd gave the program: SLURMD_NODENAME alone, no PATH
        [first, *_] = site.environments()
        assert set(first) - SHELL == {"SLURMD_NODENAME"} and first["SLURMD_NODENAME"] == slurm.node, first
        logged = wait_for("slurmd logging the program's one line",
                          lambda: [line for line in slurm.slurmd_log.read_text().splitlines() if "health_check failed" in line], 60)
        assert isinstance(logged, list)
        assert logged[0].endswith(f"health_check failed: rc:1 output:gpu-accept health-check: FAIL: {reason} "
                                  f"[drained {slurm.node} in Slurm]"), logged[0]

        # the check passes now: the node stays drained, with gpu-accept's reason, until an operator resumes it
        site.configure(slurm, "passing", GPU_ACCEPT_PROFILE="h200-4-nvswitch")
        switched = time.time()
        passed = wait_for("a passing check", lambda: (lambda v: v if v and v.exit_code == 0 else None)(site.verdict_after(switched)),
                          120, every_s=0.5)
        assert isinstance(passed, run_verdict.RunVerdict)
        time.sleep(2)  # what the program would have done after its verdict, done
        assert slurm.state() == (state, reason)

        # an operator resumes it; then gpu-accept cannot run at all (not installed where the PATH looks)
        assert slurm.run("scontrol", "update", f"nodename={slurm.node}", "state=resume").returncode == 0
        slurm.wait_state("the node resumed", lambda s, r: s == "idle", 60)
        site.configure(slurm, "gpu-accept-not-installed")
        state, reason = slurm.wait_state("the node drained: gpu-accept not found",
                                         lambda s, r: s.startswith("drain") and r.startswith("could not judge"))
        assert reason.startswith("could not judge: gpu-accept not found: gpu-accept-not-installed on PATH=") and "(exit 127)" in reason
        with capsys.disabled():  # what the real programs said, for the record
            print(f"\nsinfo -R:\n{listing}{slurm.run('sinfo', '-R').stdout}slurmd.log: {logged[0]}")


def test_a_failing_prolog_stops_the_job_and_logs_one_line():
    with slurm_folder() as folder, daemons() as running:
        site = Site(folder)
        slurm = OneNodeSlurm(folder, running, f"Prolog={site.program}\n")
        site.configure(slurm, "failing", **FAILS)
        slurm.start()
        slurm.wait_state("the node idle", lambda s, r: s == "idle", 120)
        job = slurm.run("srun", "-N1", "-t", "1", "echo", "the job ran", timeout=300)
        assert job.returncode != 0 and "the job ran" not in job.stdout, job.stdout + job.stderr
        assert "Job prolog failed" in job.stderr, job.stderr
        _, reason = slurm.wait_state("the node drained by the failed prolog", lambda s, r: s.startswith("drain"), 60)
        assert reason.startswith("test_gpu_count test_gpu_model[gpu4,gpu5,gpu6,gpu7] "), reason  # ours, not "Prolog error"
        environment = site.environments()[0]
        assert all(key.startswith("SLURM") for key in set(environment) - SHELL), environment
        assert "PATH" not in environment
        log = slurm.slurmd_log.read_text().splitlines()
        [start] = [i for i, line in enumerate(log) if "prolog failed: rc:1 output:" in line]
        following = itertools.takewhile(lambda line: not line.startswith("["), log[start + 1:])  # the output's further lines
        output = [line for line in [log[start].split("output:", 1)[1], *following] if line.strip()]
        assert output == [f"gpu-accept health-check: FAIL: {reason} [drained {slurm.node} in Slurm]"], log[start:start + 5]
        assert " failed, " in (site.reports / "health-check.log").read_text()  # pytest's progress went there
