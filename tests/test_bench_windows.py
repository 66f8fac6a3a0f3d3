"""The gpu-burn comparison judges each tool over its load window, by one rule for both: gpu-burn's
from its first progress report to "Killing processes" (it then waits for its workers, at idle power,
before it exits), never its process's whole life. Run here with a stand-in for gpu-burn that speaks
as gpu-burn does, and NVML answered from a recording."""

from __future__ import annotations

import os
import sys

import pytest

from tests.telemetry_nvml import telemetry_recording

pytestmark = pytest.mark.slow  # a process and the telemetry sampler, for seconds

# gpu-burn's parent prints its progress as "\r<percent>  proc'd: ..." lines, flushed, then
# "\nKilling processes with SIGTERM (soft kill)\n", waits for its workers, and prints "done"
STAND_IN = """#!{python}
import sys, time
print("Burning for 2 seconds.", flush=True)
time.sleep(1.0)  # initialization: no work reported yet
for step in range(5):
    sys.stdout.write(f"\\r{{step * 20:.1f}}%  proc'd: {{step * 100}} (350000 Gflop/s)   errors: 0   temps: 60 C ")
    sys.stdout.flush()
    time.sleep(0.5)
print("\\nKilling processes with SIGTERM (soft kill)", flush=True)
time.sleep(3.0)  # its workers end, at idle power
print("done\\n\\nTested 1 GPUs:\\n\\tGPU 0: OK", flush=True)
"""


def test_gpu_burn_is_judged_over_its_load_and_its_tear_down_is_shown_apart(tmp_path, monkeypatch):
    from bench.burnin_power import gpu_burn

    monkeypatch.setenv("GPUACCEPT_NVML_REPLAY", str(telemetry_recording(tmp_path / "nvml.json", gpus=4)))
    binary = tmp_path / "gpu_burn"
    binary.write_text(STAND_IN.format(python=sys.executable), encoding="utf-8")
    os.chmod(binary, 0o755)
    rows = gpu_burn(binary, 2, tensor=True, out=tmp_path)
    assert [row["gpu"] for row in rows] == [0, 1, 2, 3]
    row = rows[0]
    assert row["tool"] == "gpu-burn -tc" and row["window"] == "first \"proc'd:\" to 'Killing processes'"
    # the window: five progress reports half a second apart; the tear-down after it, three seconds
    assert 2.0 <= row["load_s"] < row["process_s"] and row["after_load_s"] >= 2.9
    assert row["load_s"] + row["after_load_s"] < row["process_s"]  # the second of initialization is in neither
    assert row["throughput"] == 350.0  # its own count, TFLOP/s
    assert row["after_load_power_median_pct"] == pytest.approx(64.6)  # the recording's 452 W of 700, shown apart


def test_a_gpu_burn_that_never_reports_work_has_no_window_and_says_so(tmp_path, monkeypatch):
    from bench.burnin_power import gpu_burn

    monkeypatch.setenv("GPUACCEPT_NVML_REPLAY", str(telemetry_recording(tmp_path / "nvml.json", gpus=1)))
    binary = tmp_path / "gpu_burn"
    binary.write_text(f"#!{sys.executable}\nprint('No CUDA devices')\n", encoding="utf-8")
    os.chmod(binary, 0o755)
    (row,) = gpu_burn(binary, 1, tensor=False, out=tmp_path)
    assert row == {"tool": "gpu-burn", "missing": "its output holds no \"proc'd:\" or 'Killing processes': no load window"}
