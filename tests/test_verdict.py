"""verdict.json: the one verdict every integration reads, written by run, burn-in and health-check
at their start ("in progress") and their end, also where the run ended before any test; bad
options write none. And a missing or broken torch, found before any probe at a level that measures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuaccept.facts import run_verdict
from gpuaccept.facts.coverage import causes_first
from gpuaccept.facts.run_record import load_results
from tests.helpers import EXAMPLES, older_example, write
from tests.test_cli import one_error_line, without_driver

ROOT = Path(__file__).resolve().parents[1]
REPLAY = str(ROOT / "tests" / "data" / "nvml" / "h200x4.json")
RESULTS = EXAMPLES.parent / "results"


def gpu_accept(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuaccept", *args], capture_output=True, text=True, env=env, timeout=300)


def test_a_record_judges_itself_as_the_outcome_policy_does():
    failed = load_results(RESULTS / "h200x4-nccl-p2p-disabled.json")
    verdict = failed.judged()
    assert verdict.exit_code == failed.exit_code() == 1 and verdict.result == "failed"
    # root causes first, then by area from the bottom up (facts/coverage.py)
    assert verdict.failed == [t.id for t in causes_first(failed.tests) if t.outcome == "failed"]
    first = next(t for t in causes_first(failed.tests) if t.outcome == "failed")
    assert verdict.cause.startswith(f"{first.id}: ") and verdict.cause.endswith(f"(+{len(verdict.failed) - 1} more failed)")
    healthy = load_results(RESULTS / "h200x4.json").judged()
    assert (healthy.exit_code, healthy.result, healthy.cause, healthy.failed) == (0, "passed", "", [])


def test_a_cause_is_one_line_with_control_characters_escaped():
    verdict = run_verdict.could_not_judge("bad\n\x1b]0;title\x07 file " + "x" * 1000, host="n1")
    assert verdict.cause.startswith("could not judge: bad \\x1b]0;title\\x07 file x") and verdict.cause.isprintable()
    assert len(verdict.cause) <= run_verdict.CAUSE_MAX and verdict.cause.endswith("...")


def test_a_verdict_file_reads_back_and_a_wrong_one_is_one_line(tmp_path):
    verdict = run_verdict.in_progress(host="n1", profile="p", started_at="2026-11-27T10:00:00+00:00")
    path = write(tmp_path / "verdict.json", verdict.to_json())
    assert run_verdict.load_verdict(path) == verdict and verdict.in_progress
    for text, said in (("{", "not JSON"), ('{"format": "x"}', "not a gpu-accept verdict file"), ("", "not JSON")):
        with pytest.raises(run_verdict.InputFileError, match=said):
            run_verdict.load_verdict(write(tmp_path / "bad.json", text))


def test_report_verdict_prints_one_ascii_line_for_scripts(tmp_path, capsys):
    from gpuaccept.cli import main

    verdict = run_verdict.could_not_judge("no NVIDIA driver found: n\u00f6de \u202e", host="n1", profile="p")
    write(tmp_path / "verdict.json", verdict.to_json())
    assert main(["report", "verdict", str(tmp_path), "--width", "60"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    code, reason = line.split(" ", 1)
    assert code == "2" and reason.startswith("could not judge: no NVIDIA driver found: n\\xf6de \\u202e (")
    assert len(reason) <= 60 and reason.endswith("...") and line.isascii() and line.isprintable()
    assert main(["report", "verdict", str(tmp_path / "none.json")]) == 2


@pytest.mark.slow
def test_a_run_without_a_driver_leaves_a_verdict_with_its_cause(tmp_path):
    env = without_driver(tmp_path)
    done = gpu_accept("run", "--reports", str(tmp_path / "r"), "--level", "quick", env=env)
    assert done.returncode == 2
    verdict = run_verdict.load_verdict(tmp_path / "r" / "verdict.json")
    assert verdict.result == "not_judged" and not verdict.in_progress
    assert verdict.cause.startswith("could not judge: no NVIDIA driver found: NVML could not start")
    assert not (tmp_path / "r" / "results.json").exists()  # no test ran


@pytest.mark.slow
def test_the_verdict_of_a_finished_run_is_in_results_json_too(tmp_path):
    done = gpu_accept("run", "--profile", "h200-4-nvswitch", "--facts", str(older_example("h200x4-measured")), "--reports",
                      str(tmp_path), "-q")
    # those facts predate the health readings, the per-GPU loads and the telemetry: could not judge them
    assert done.returncode == 2, done.stderr
    record = load_results(tmp_path / "results.json")
    assert record.verdict == run_verdict.load_verdict(tmp_path / "verdict.json") == record.judged()
    assert record.verdict is not None and record.verdict.result == "not_judged" and record.verdict.not_checked[1:] == [
        "not checked: compute — the facts hold no per-GPU loads (24 test(s) not judged)",
        "not checked: telemetry — the facts hold no telemetry (12 test(s) not judged)",
    ]


@pytest.mark.slow
def test_bad_options_write_no_verdict_and_leave_the_last_one(tmp_path):
    last = write(tmp_path / "verdict.json", run_verdict.could_not_judge("earlier", host="n1").to_json())
    for args in (["--reprots", "x"], ["-k"], ["--metrics", "/sys/gpu.prom"], ["--confirm", "-1"]):
        one_error_line(gpu_accept("run", "--reports", str(tmp_path), *args))
        assert last.read_text() == run_verdict.could_not_judge("earlier", host="n1").to_json()
    # a profile that does not load is found as the run starts: its verdict says so
    one_error_line(gpu_accept("run", "--reports", str(tmp_path), "--profile", "no-such-profile"))
    assert run_verdict.load_verdict(last).cause.startswith("could not judge: no profile named 'no-such-profile'")


def torch_that(tmp_path: Path, source: str | None) -> dict[str, str]:
    """This environment with a torch that raises as it is imported (source), or with none (None)."""
    folder = tmp_path / "other-torch"
    if source is None:
        write(folder / "sitecustomize.py", "import sys\nsys.modules['torch'] = None  # as if not installed\n")
    else:
        write(folder / "torch" / "__init__.py", source)
    return {**os.environ, "GPUACCEPT_NVML_REPLAY": REPLAY,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}


@pytest.mark.slow
@pytest.mark.parametrize("command", ["run", "burn-in"])
@pytest.mark.parametrize("torch", ["missing", "broken"])
def test_a_level_that_measures_without_a_working_torch_could_not_judge_in_one_line(tmp_path, command, torch):
    """Found before any test (asked beside the probe, as a missing driver is found): one line,
    exit 2, the cause in the verdict; not every measurement failing at its start-up, and not said twice."""
    env = torch_that(tmp_path, None if torch == "missing" else 'raise ImportError("libcudart.so.12: cannot open shared object file")\n')
    args = ["--duration", "1s"] if command == "burn-in" else []
    done = gpu_accept(command, "--profile", "h200-4-nvswitch", "--reports", str(tmp_path / "r"), *args, env=env)
    line = one_error_line(done)
    expected = ("torch is not installed" if torch == "missing"
                else "torch cannot be imported (ImportError: libcudart.so.12: cannot open shared object file)")
    assert line.startswith(f"ERROR: gpu-accept: {expected}") and done.stdout == "", line  # as a run without a driver says it
    verdict = run_verdict.load_verdict(tmp_path / "r" / "verdict.json")
    assert verdict.cause.startswith(f"could not judge: {expected}") and verdict.exit_code == 2


@pytest.mark.parametrize(
    "source, limit_s, answer",
    [
        # imported, then its process does not end: the answer is the import's, not the exit's
        ("import atexit, time\natexit.register(time.sleep, 3600)\n", 60, None),
        # a banner on stdout and more warnings than a pipe holds on stderr, then imported
        ("import sys\nprint('a banner')\nsys.stderr.write('warning\\n' * 30000)\n", 60, None),
        ("raise ImportError('libcudart.so.12: cannot open shared object file')\n", 60,
         "torch cannot be imported (ImportError: libcudart.so.12: cannot open shared object file)"),
        ("import time\ntime.sleep(3600)\n", 3, "torch did not import within 3 s"),  # a hung import is no torch
    ],
    ids=["slow-exit", "noisy", "broken", "hung"],
)
def test_torch_is_judged_as_its_import_ends_not_as_its_process_exits(tmp_path, monkeypatch, source, limit_s, answer):
    # a limit a loaded machine's Python start cannot reach, but for the import that never ends
    from gpuaccept.errors import NoDriverError
    from gpuaccept.plugin import torch_check

    monkeypatch.setattr(torch_check, "TORCH_IMPORT_LIMIT_S", limit_s)
    monkeypatch.setenv("PYTHONPATH", torch_that(tmp_path, source)["PYTHONPATH"])
    check = torch_check.TorchCheck("standard")
    child = check.child
    if answer is None:
        check.passed()  # waiting for the exit, it would have said "did not import within 60 s"
    else:
        with pytest.raises(NoDriverError) as raised:
            check.passed()
        assert str(raised.value).startswith(answer), raised.value
    assert child is not None and child.wait(timeout=60) is not None  # ended either way: nothing is left running


@pytest.mark.slow
def test_the_quick_level_needs_no_torch(tmp_path):
    env = torch_that(tmp_path, None)
    done = gpu_accept("health-check", "--profile", "h200-8-nvswitch", "--reports", str(tmp_path / "r"), env=env)
    assert done.returncode == 1, done.stdout + done.stderr  # judged: four GPUs missing
