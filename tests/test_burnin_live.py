"""`gpu-accept burn-in` and the levels for real on a CPU machine: the probe and the telemetry answered
from a replayed 4xH200 NVML recording (gpu2 held in hardware slowdown), the NCCL stage on gloo."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import jsonschema
import pytest
from lxml import etree

from gpuaccept.facts.run_record import load_results
from gpuaccept.resources import shipped_dir
from tests.helpers import DATA, ROOT, needs_torch, write
from tests.live_cpu import CPU_PROFILE, gpu_accept_run
from tests.telemetry_nvml import telemetry_recording

pytestmark = [pytest.mark.slow, needs_torch]  # live runs: probe, gloo workers, reports

# the NCCL stage of the CPU profile, one size: a few seconds on CPU; the sustained load a 64x64 product per
# "GPU" in rounds of 4 s, the memory test every 8 s. The recording's GPUs draw 452 W of 700: a power share of
# 0.6 holds, the H200 base's 0.9 would not. Four "GPUs" on two loaded cores run at whatever speed the
# machine gives them: hot rounds are held to a twentieth of the first.
ONE_SIZE = (
    "        all_reduce: {64KiB: 0.0001, 256KiB: 0.0001}\n        alltoall: {64KiB: 0.0001}\n",
    "        all_reduce: {64KiB: 0.0001}\n",
)
SUSTAINED = """
    compute:
      gemm: {size: 64, min_tflops: 0.00001, within_best: 0.99}
      hbm: {size: 1MiB, iterations: 5, copy_min: 0.01, triad_min: 0.01}
      memtest: {fraction: 0.9, max_size: 4MiB, chunk: 1MiB, time_cap_s: 30}
    burnin:  # the fabric beside the load every 35 s: on 2 cores it takes 7-8 s (28 s loaded three runs over), and
      # power is judged on what is left of the load after it
      {fabric_interval: 35s, telemetry_period_s: 0.2, round_s: 4, memtest_interval: 8s, steady_window_s: 10, min_power_share: 0.6,
       hot_throughput_min: 0.05}
"""
NO_LOADS = "    compute: null  # the per-GPU loads have their own CPU profile (test_compute_live.py)\n"
BURNIN_PROFILE = CPU_PROFILE.split("    ddp:")[0].replace(*ONE_SIZE).replace(NO_LOADS, "") + SUSTAINED
# CUDA's view of P2P cannot be read without CUDA: left out, as in the other live CPU tests
NOT_CUDA = ("-k", "not cuda_agrees")


def burn_in(folder, *extra, wait=True):
    profile = write(folder / "cpu.yaml", BURNIN_PROFILE)
    recording = telemetry_recording(folder / "nvml.json", slowdown_gpu=2)
    command = [
        sys.executable, "-m", "gpuaccept", "burn-in", "--profile", str(profile), "--profile-dir", str(shipped_dir("profiles")),
        "--reports", str(folder / "reports"), *extra,
    ]
    env = {**os.environ, "GPUACCEPT_NVML_REPLAY": str(recording)}
    if not wait:
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


def valid_reports(folder):
    """results.json valid against its schema, JUnit valid against the JUnit schema, the HTML written: the record."""
    raw = json.loads((folder / "reports" / "results.json").read_text())
    jsonschema.validate(raw, json.loads((ROOT / "schemas" / "results.schema.json").read_text()))
    junit = etree.parse(str(folder / "reports" / "junit.xml"))
    assert etree.XMLSchema(etree.parse(str(DATA / "junit.xsd"))).validate(junit)
    assert (folder / "reports" / "report.html").stat().st_size > 0
    return load_results(folder / "reports" / "results.json")


def failed_tests(folder):
    root = ET.parse(folder / "reports" / "junit.xml").getroot()
    return {case.get("name") for case in root.iter("testcase") if case.find("failure") is not None}


def test_a_burn_in_sustains_its_load_runs_the_fabric_beside_it_and_fails_the_slowed_gpu_only(tmp_path):
    # the NCCL stage at rest (a few seconds for its workers to start on 2 cores, 16-25 s on cores loaded
    # seven times over), then the load and the fabric beside it once, at 35 s: rounds of 4 s, the steady
    # window of 10 s (the least a profile takes) within the load even after the longest stage at rest
    # seen, and the load's products alone after the fabric (7 s of it where the fabric took 28 s)
    done = burn_in(tmp_path, "--duration", "70s", *NOT_CUDA)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "gpu-accept: burn-in: sustained load on 4 GPU(s)" in done.stdout
    assert "gpu-accept: burn-in: load round 1 done;" in done.stdout and "gpu3 452 W 45 °C" in done.stdout
    record = valid_reports(tmp_path)
    burnin = record.facts.burnin
    assert burnin is not None and burnin.ended == "deadline" and burnin.load_started_s is not None
    load_rounds = [r for r in burnin.rounds if r.stages == ["compute"]]
    fabric = [r for r in burnin.rounds if r.stages == ["nccl"]]
    assert len(load_rounds) >= 2 and fabric[0].beside_load is False and fabric[0].index == 1
    # every round of the load holds every GPU's products, all compared with the first: none wrong
    for load_round in load_rounds:
        sweep = load_round.measurements.compute
        assert sweep is not None and not sweep.failures
        gemms = [r for r in sweep.results if r.load == "gemm"]
        assert sorted(r.gpu for r in gemms) == [0, 1, 2, 3] and all(r.repeats >= 8 and r.mismatches == 0 for r in gemms)
    assert any(r.load == "memtest" for r in load_rounds[0].measurements.compute.results)  # type: ignore[union-attr]
    # each value judged over the rounds that measured it
    tests = {t.id: t for t in record.tests}
    value = tests["test_burnin_value[busbw-all_reduce-64KiB]"]
    assert value.outcome == "passed" and value.verdict is not None
    assert value.verdict.context["burnin_rounds"] == [r.index for r in fabric if not r.beside_load]
    gemm = tests["test_burnin_value[gemm_correct-gpu1]"]
    assert gemm.outcome == "passed" and gemm.verdict is not None and gemm.verdict.context["burnin_rounds"] == [r.index for r in load_rounds]
    for check in ("thermal_steady_state", "hot_gemm_throughput", "power_under_load", "power_within_best"):
        assert tests[f"test_{check}[gpu0]"].outcome == "passed", tests[f"test_{check}[gpu0]"].message
    telemetry = record.facts.telemetry
    assert telemetry is not None and {s.gpu for s in telemetry.samples} == {0, 1, 2, 3}
    assert [w.stage for w in telemetry.loads].count("sustained") == 1  # the hook after the load ran
    assert failed_tests(tmp_path) == {"test_clock_slowdown[gpu2]"}
    assert tests["test_clock_slowdown[gpu2]"].message.startswith("gpu2: clock slowdown (hardware, thermal, power brake) 100 % > 1 %")
    # the standard suite's own measurement tests are not of this level
    assert not any(t.startswith(("test_busbw[", "test_ddp", "test_p2p_copy")) for t in tests)
    page = (tmp_path / "reports" / "report.html").read_text()
    assert "id='telemetry'" in page and "telemetry-sm-clock-mhz" in page and "burnin-round-0" in page


def test_sigterm_in_the_middle_of_a_burn_in_leaves_valid_reports_and_exit_2(tmp_path):
    run = burn_in(tmp_path, "--duration", "10m", "-k", "not cuda_agrees and not slowdown", wait=False)
    assert run.stdout is not None
    seen = []
    deadline = time.monotonic() + 300
    for line in run.stdout:
        seen.append(line)
        if "load round 1 done" in line or time.monotonic() > deadline:
            break
    run.send_signal(signal.SIGTERM)
    output, _ = run.communicate(timeout=120)
    assert run.returncode == 2, "".join(seen) + output  # no check failed, and the burn-in was cut short
    record = valid_reports(tmp_path)
    assert record.complete and record.run.exit_status == 2
    assert record.verdict is not None and record.verdict.exit_code == 2  # the exit code is the verdict recorded
    assert record.verdict.stopped[0].startswith("the burn-in was cut short by a signal: ")
    burnin = record.facts.burnin
    assert burnin is not None and burnin.ended == "interrupted" and len(burnin.rounds) >= 1
    assert burnin.elapsed_s < 600
    # the sustained load stopped with the signal: its round under way ended, the 150 rounds still planned gave nothing
    assert burnin.load_ended_s is not None and burnin.load_ended_s < 300
    assert 1 <= sum(r.stages == ["compute"] for r in burnin.rounds) < 20
    assert {t.outcome for t in record.tests if t.id.startswith("test_burnin_value")} == {"passed"}
    assert "burn-in ended by a signal" in output


def test_the_quick_level_runs_no_measurement_stage(tmp_path):
    profile = write(tmp_path / "cpu.yaml", CPU_PROFILE)
    done = gpu_accept_run(tmp_path, "--level", "quick", *NOT_CUDA, profile=profile)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stage" not in done.stdout  # no NCCL, copy or DDP stage started
    record = load_results(tmp_path / "reports" / "results.json")
    modules = {t.nodeid.split("::")[0].rsplit("/", 1)[-1] for t in record.tests}
    assert modules == {"test_inventory.py", "test_topology.py", "test_p2p.py", "test_health.py"}
    assert record.facts.measurements.collectives is None and record.facts.burnin is None
    # the health checks of the change over a load are not run: the quick level runs no load; the XIDs
    # heard over the run are judged (none was)
    over_the_run = {t.id.split("[")[0] for t in record.tests if "during_run" in t.nodeid or "after_run" in t.nodeid}
    assert over_the_run == {"test_xid_during_run"}
    assert {t.outcome for t in record.tests if t.id.startswith("test_xid_during_run")} == {"passed"}


@pytest.mark.parametrize(
    ("level", "present", "absent"),
    [
        ("quick", {"test_inventory", "test_topology", "test_p2p", "test_health"},
         {"test_nccl", "test_ddp", "test_burnin", "test_telemetry"}),
        ("standard", {"test_inventory", "test_nccl", "test_bandwidth", "test_ddp", "test_telemetry"}, {"test_burnin"}),
        ("burn-in", {"test_inventory", "test_p2p", "test_burnin", "test_telemetry"}, {"test_nccl", "test_bandwidth", "test_ddp"}),
    ],
)
def test_each_level_selects_its_suites(tmp_path, level, present, absent):
    command = [
        sys.executable, "-m", "gpuaccept", "run", "--facts", str(ROOT / "examples" / "facts" / "h200x4-measured.json"),
        "--profile", "h200-4-nvswitch", "--level", level, "--reports", str(tmp_path), "--collect-only", "-q",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    modules = {line.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py") for line in done.stdout.splitlines() if "::" in line}
    assert present <= modules and not (absent & modules), done.stdout[-2000:]


def test_a_burn_in_with_nothing_to_load_is_refused_in_one_line(tmp_path):
    # a one-GPU profile with no per-GPU loads, copies or NCCL: nothing for a burn-in to run
    profile = write(tmp_path / "bare.yaml", "schema: 1\ngpus: {count: 1, model: NVIDIA H200}\n")
    command = [sys.executable, "-m", "gpuaccept", "burn-in", "--duration", "5s", "--profile", str(profile), "--reports", str(tmp_path)]
    env = {**os.environ, "GPUACCEPT_NVML_REPLAY": str(DATA / "nvml" / "h200x1.json")}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == (
        f"ERROR: gpu-accept: --level burn-in: profile {profile.stem} asks for no stage a burn-in runs (compute, copies, nccl): "
        "nothing would load the GPUs"
    )


@pytest.mark.slow
def test_a_recorded_burn_in_that_was_cut_short_exits_2_when_judged_again(tmp_path):
    from gpuaccept.facts import save_facts
    from gpuaccept.facts.measurements import Measurements
    from gpuaccept.facts.telemetry import BurnIn, BurnInRound
    from tests.helpers import example_facts

    measured = example_facts("h200x4-measured")
    one_round = BurnInRound(
        index=1, started_s=0.0, wall_s=30.0, stages=["nccl"], measurements=Measurements(collectives=measured.measurements.collectives)
    )
    for ended, code in (("deadline", 0), ("interrupted", 2)):
        burnin = BurnIn(duration_s=300, elapsed_s=20.0, ended=ended, rounds=[one_round])
        facts = tmp_path / f"{ended}.json"
        save_facts(measured.model_copy(update={"burnin": burnin}), facts)
        command = [
            sys.executable, "-m", "gpuaccept", "run", "--facts", str(facts), "--profile", "h200-4-nvswitch", "--level", "burn-in",
            "--reports", str(tmp_path / ended), "-q", "-k", "test_burnin_value and busbw and not pair",
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == code, done.stdout[-3000:] + done.stderr[-3000:]
        said = "gpu-accept: the recorded burn-in was ended by a signal: 1 round(s) in 20s of 5m"
        assert (said in done.stdout + done.stderr) is (ended == "interrupted")
