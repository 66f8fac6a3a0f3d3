"""The live path end to end on a CPU machine: the probe in its child process (NVML answers replayed
from a real recording), measurement workers on gloo, checks, JUnit, facts out, exit codes."""

import json
import xml.etree.ElementTree as ET

import pytest

from tests.helpers import needs_torch
from tests.live_cpu import CPU_PROFILE, cpu_profile, gpu_accept_run

pytestmark = [pytest.mark.slow, needs_torch]  # each test is a live run: probe, gloo workers, reports

# the CPU profile's NCCL stage alone (30 s a step); the hang test names its hung step at 20 s, a limit
# the steps that must finish (64 KiB each, milliseconds) keep on a loaded machine too
PROFILE = CPU_PROFILE.split("    ddp:")[0]
HANG_PROFILE = PROFILE.replace("timeout_s: 30", "timeout_s: 20")


def run(tmp_path, *extra, env=None, profile=PROFILE):
    return gpu_accept_run(tmp_path, "-k", "busbw or correct", *extra, env=env, profile=cpu_profile(tmp_path, profile))


def failed_cases(tmp_path):
    root = ET.parse(tmp_path / "reports" / "junit.xml").getroot()
    return {case.get("name"): case.find("failure").get("message") for case in root.iter("testcase") if case.find("failure") is not None}


def test_live_run_measures_once_and_passes(tmp_path):
    done = run(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "12 passed" in done.stdout  # 3 busbw, 3 correctness, 6 pairs
    assert done.stdout.count("gpu-accept: NCCL stage on 4 GPUs") == 1  # measured once for all twelve
    assert "gpu-accept: measuring all_reduce 256 KiB" in done.stdout
    facts = json.loads((tmp_path / "reports" / "facts.json").read_text())
    sweep = facts["measurements"]["collectives"]
    assert sweep["backend"] == "gloo" and sweep["ranks"] == 4 and len(sweep["results"]) == 3
    assert len(facts["measurements"]["pairwise"]["results"]) == 6


def test_a_hung_collective_fails_its_tests_and_the_run_goes_on(tmp_path):
    done = run(tmp_path, env={"GPUACCEPT_INJECT_HANG": "all_reduce 256 KiB"}, profile=HANG_PROFILE)
    assert done.returncode == 1, done.stdout + done.stderr
    failed = failed_cases(tmp_path)
    assert set(failed) == {"test_busbw[all_reduce-256KiB]", "test_collective_correct[all_reduce-256KiB]"}
    assert failed["test_busbw[all_reduce-256KiB]"] == "all_reduce 256 KiB: all_reduce 256 KiB did not finish within 20 s (profile cpu)"
    facts = json.loads((tmp_path / "reports" / "facts.json").read_text())
    assert [r["nominal_size"] for r in facts["measurements"]["collectives"]["results"]] == ["64KiB", "64KiB"]
    assert facts["environment"]["GPUACCEPT_INJECT_HANG"] == "all_reduce 256 KiB"  # the drill is on the record
