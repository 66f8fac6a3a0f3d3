"""deploy/slurm/nhc/gpu-accept.nhc under LBNL NHC itself, against a real one-node Slurm on this machine.

NHC has no Debian or PyPI package: build it from its public source (mej/nhc) in a git-ignored folder
and name its install prefix:

    git clone <mej/nhc> .nhc/src && cd .nhc/src && ./autogen.sh && \\
      ./configure --prefix=$PWD/../install --sysconfdir=$PWD/../install/etc && make install
    python -m bench.nhc_under_slurm .nhc/install > transcript.txt

It starts munge, slurmctld and slurmd (tests/real_software.py: Debian's packages, 127.0.0.1, a
folder of its own) and runs `nhc` with NHC_RM=slurm, NHC's own PATH and helpers, four times:
  1. the check fails (recorded 4xH200 answers judged against the 8xH200 profile): gpu-accept drains
     the node with its reason, NHC's die calls node-mark-offline, which keeps that reason;
  2. the check passes: NHC's node-mark-online leaves the node drained ("non-NHC reason");
  3. an operator resumes the node, and a drain with an "NHC:" note is made by hand;
  4. the check passes: node-mark-online resumes that node: what NHC does to its own notes.
Each step prints NHC's log, the node's state and reason (sinfo) and `sinfo -R`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.real_software import OneNodeSlurm, daemons  # noqa: E402

REPLAY = str(ROOT / "tests" / "data" / "nvml" / "h200x4.json")


def main(prefix: Path) -> int:
    nhc = prefix / "sbin" / "nhc"
    folder = Path(tempfile.mkdtemp(prefix="gpu-accept-nhc-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        with daemons() as running:
            slurm = OneNodeSlurm(folder, running, "")
            slurm.start()
            slurm.wait_state("the node idle", lambda state, reason: state == "idle", 120)
            scripts = folder / "nhc-scripts"
            scripts.mkdir()
            shutil.copy(ROOT / "deploy" / "slurm" / "nhc" / "gpu-accept.nhc", scripts)
            shutil.copy(prefix / "etc" / "nhc" / "scripts" / "common.nhc", scripts)
            for name, extra in (("failing", ""), ("passing", ' -k "not p2p_cuda_agrees"')):
                shim = folder / f"gpu-accept-{name}"
                shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gpuaccept "$@"{extra}\n')
                shim.chmod(0o755)

            def run_nhc(step: str, profile: str, command: str) -> None:
                conf = folder / "nhc.conf"
                conf.write_text(f"* || check_gpu_accept {profile}\n")
                log = folder / "nhc.log"
                log.write_text("")
                env = {**slurm.env, "GPU_ACCEPT": str(folder / f"gpu-accept-{command}"), "GPUACCEPT_NVML_REPLAY": REPLAY,
                       "GPU_ACCEPT_REPORTS": str(folder / "reports"), "GPU_ACCEPT_TIMEOUT": "100"}
                done = subprocess.run(
                    [str(nhc), "-c", str(conf), "-l", str(log), "-t", "120", "NHC_RM=slurm", f"HELPERDIR={prefix}/libexec/nhc",
                     f"INCDIR={scripts}", "RESULTFILE=" + str(folder / "nhc.status")],
                    capture_output=True, text=True, env=env, timeout=300,
                )
                print(f"\n## {step}: nhc exited {done.returncode}")
                print(log.read_text().rstrip())
                state, reason = slurm.state()
                print(f"-- sinfo: state {state!r}, reason {reason!r}")
                print("-- sinfo -R:\n" + slurm.run("sinfo", "-R").stdout.rstrip())

            described = subprocess.run(["git", "-C", str(prefix.parent / "src"), "describe", "--tags"], capture_output=True, text=True)
            print(f"nhc: {nhc} ({described.stdout.strip()})")
            print(f"slurm: {slurm.run('sinfo', '--version').stdout.strip()}")
            run_nhc("1. the check fails", "h200-8-nvswitch", "failing")
            run_nhc("2. the check passes", "h200-4-nvswitch", "passing")
            slurm.run("scontrol", "update", f"nodename={slurm.node}", "state=resume")
            slurm.wait_state("the node resumed", lambda state, reason: state == "idle", 60)
            slurm.run("scontrol", "update", f"nodename={slurm.node}", "state=drain", "reason=NHC: a check of NHC's own failed")
            print(f"\n## 3. an operator resumed the node; then a drain with an NHC note by hand: sinfo {slurm.state()}")
            run_nhc("4. the check passes", "h200-4-nvswitch", "passing")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    raise SystemExit(main(Path(sys.argv[1]).resolve()))
