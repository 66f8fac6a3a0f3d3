"""Running `gpu-accept run` for real on a CPU machine: the probe answered from a recording made on
a 4xH200 machine, measurement workers on gloo with sizes a CPU can move."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gpuaccept.resources import shipped_dir
from tests.helpers import DATA, write

CPU_PROFILE = """
    schema: 1
    extends: bases/hgx-h200
    description: the 4xH200 recording, with measurement floors a CPU can meet
    gpus: {count: 4}
    compute: null  # the per-GPU loads have their own CPU profile (test_compute_live.py)
    nccl:
      dtype: float32
      warmup: 1
      iterations: 2
      timeout_s: 30
      busbw:
        all_reduce: {64KiB: 0.0001, 256KiB: 0.0001}
        alltoall: {64KiB: 0.0001}
    pairwise: {size: 64KiB, dtype: float32, iterations: 2, concurrent: true, min_busbw: 0.0001}
    ddp:
      model: tiny
      dtype: float32
      world_sizes: [1, 2]
      batches: [4]
      warmup_steps: 1
      steps: 2
      min_efficiency: {2gpu-bs4: 0.0001}
      max_exposed_comm: {2gpu-bs4: 1.0}
"""


def cpu_profile(folder: Path, text: str = CPU_PROFILE) -> Path:
    return write(folder / "cpu.yaml", text)


def gpu_accept_run(folder: Path, *extra: str, env: dict | None = None, profile: Path | None = None, wait: bool = True):
    environment = {**os.environ, "GPUACCEPT_NVML_REPLAY": str(DATA / "nvml" / "h200x4.json"), **(env or {})}
    command = [
        sys.executable, "-m", "gpuaccept", "run", "--profile", str(profile or cpu_profile(folder)),
        "--profile-dir", str(shipped_dir("profiles")), "--reports", str(folder / "reports"), "-q", *extra,
    ]
    if not wait:
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment)
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=600)
