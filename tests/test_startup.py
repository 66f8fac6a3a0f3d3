"""The quick level imports no torch and starts no worker: peer access and the rest of what it asks
CUDA come from the CUDA driver API (the fake driver of tests/cuda_driver.py here)."""

from __future__ import annotations

import pytest


def quick_level(folder, *, command=("run", "--level", "quick"), no_peer=()):
    """`gpu-accept` at the quick level on the 4xH200 NVML recording, with the fake CUDA driver
    (tests/cuda_driver.py) answering for the same GPUs, and a torch first on the path that leaves a
    mark and refuses to be imported."""
    import os
    import subprocess
    import sys

    from gpuaccept.resources import shipped_dir
    from tests.cuda_driver import driver_environment, fake_cuda_driver
    from tests.helpers import DATA, nvml_replay, write

    replay = nvml_replay("h200x4")
    uuids = [replay.query("uuid", i).removeprefix("GPU-") for i in range(4)]
    mark = folder / "torch-was-imported"
    write(folder / "poisoned" / "torch" / "__init__.py", f"open({str(mark)!r}, 'w').close()\nraise ImportError('no torch here')\n")
    (folder / "tmp").mkdir()
    env = {
        **os.environ, **driver_environment(uuids, no_peer=no_peer),
        "GPUACCEPT_NVML_REPLAY": str(DATA / "nvml" / "h200x4.json"),
        "LD_LIBRARY_PATH": str(fake_cuda_driver(folder / "cuda")),
        "PYTHONPATH": os.pathsep.join([str(folder / "poisoned"), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "TMPDIR": str(folder / "tmp"),  # where a measurement worker would make its folder
    }
    env.pop("CUDA_VISIBLE_DEVICES", None)
    done = subprocess.run(
        [sys.executable, "-m", "gpuaccept", *command, "--profile", "h200-4-nvswitch", "--profile-dir", str(shipped_dir("profiles")),
         "--reports", str(folder / "reports")],
        capture_output=True, text=True, env=env, timeout=300,
    )
    return done, mark


def outcomes_of(folder) -> dict[str, str]:
    from gpuaccept.facts.run_record import load_results

    return {test.id: test.outcome for test in load_results(folder / "reports" / "results.json").tests}


@pytest.mark.slow
def test_the_quick_level_asks_cuda_through_the_driver_and_never_imports_torch_or_starts_a_worker(tmp_path):
    done, mark = quick_level(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    found = outcomes_of(tmp_path)
    agrees = {test: outcome for test, outcome in found.items() if test.startswith("test_p2p_cuda_agrees[")}
    assert len(agrees) == 12 and set(agrees.values()) == {"passed"}  # every ordered pair, from the driver's answer
    assert not mark.exists(), "torch was imported"
    assert list((tmp_path / "tmp").glob("gpuaccept-measure-*")) == []  # no measurement worker started


@pytest.mark.slow
def test_the_health_check_fails_a_pair_the_driver_says_has_no_peer_access(tmp_path):
    done, mark = quick_level(tmp_path, command=("health-check",), no_peer=[(0, 3)])
    assert done.returncode == 1, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("gpu-accept health-check: FAIL: ") and "test_p2p_cuda_agrees[gpu0-gpu3]" in last
    failed = {test for test, outcome in outcomes_of(tmp_path).items() if outcome == "failed"}
    assert failed == {"test_p2p_cuda_agrees[gpu0-gpu3]"} and not mark.exists()
