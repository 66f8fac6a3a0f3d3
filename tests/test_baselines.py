"""Baselines that cannot mislead: made only of runs that passed, of one profile and one kind of
machine; a tolerance no spread can stretch past its cap; every value left out named; no value that
is not a finite number above 0; and never applied to other GPUs. From real runs: examples/results/
and the shipped-profile runs in bench/runs/2026-11-21."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from gpuaccept.checks.baseline import no_regression
from gpuaccept.checks.verdict import Outcome
from gpuaccept.cli import main as cli
from gpuaccept.errors import InputFileError
from gpuaccept.facts.run_record import load_results, parse_results
from gpuaccept.files import OutputError
from gpuaccept.profile import ProfileCatalog
from gpuaccept.report.baseline import SPREAD_TOLERANCE_CAP, load_baseline, save_baseline
from tests.helpers import EXAMPLES, ROOT, example_facts, mutated, results_data

SHIPPED = ProfileCatalog.with_shipped()

RESULTS = ROOT / "examples" / "results"
HEALTHY = RESULTS / "h200x4.json"
NO_P2P = RESULTS / "h200x4-nccl-p2p-disabled.json"
RUNS = ROOT / "bench" / "runs" / "2026-11-21"


def bench_results(archive: str, member: str, folder: Path) -> Path:
    with tarfile.open(RUNS / archive) as tar:
        data = tar.extractfile(member).read()
    target = folder / archive.removesuffix(".tar.gz") / member
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


def shipped_h200x4(folder: Path) -> list[Path]:
    return [bench_results("h200x4-shipped-runs.tar.gz", f"shipped{i}/results.json", folder) for i in range(1, 6)]


def written(path: Path, document: dict) -> Path:
    path.write_text(json.dumps(document))
    return path


def errors(capsys) -> list[str]:
    return capsys.readouterr().err.splitlines()


# -- what a baseline may be made of ---------------------------------------------------------------------


def test_a_run_that_did_not_pass_is_refused(tmp_path, capsys):
    target = tmp_path / "base.json"
    assert cli(["baseline", "save", str(HEALTHY), str(NO_P2P), "-o", str(target)]) == 2
    assert errors(capsys) == [
        f"gpu-accept: {NO_P2P}: 25 test(s) did not pass (test_busbw[all_reduce-256MiB], test_busbw[all_reduce-1GiB], "
        "test_busbw[all_reduce-4GiB] and 22 more): a baseline is a picture of a healthy machine; save one from runs that passed"
    ]
    assert not target.exists()


def test_a_run_that_did_not_finish_is_refused(tmp_path, capsys):
    stopped = written(tmp_path / "stopped.json", {**results_data(HEALTHY), "complete": False})
    assert cli(["baseline", "save", str(HEALTHY), str(stopped), "-o", str(tmp_path / "base.json")]) == 2
    assert errors(capsys) == [
        f"gpu-accept: {stopped}: the run did not finish (complete: false): a baseline is a picture of a healthy machine"
    ]


def test_a_run_cut_short_or_that_measured_nothing_is_refused(tmp_path, capsys):
    data = results_data(HEALTHY)
    interrupted = written(tmp_path / "interrupted.json", {**data, "run": {**data["run"], "exit_status": 2}})
    nothing = written(tmp_path / "quick.json", {**data, "facts": {**data["facts"], "measurements": {}}})
    assert cli(["baseline", "save", str(interrupted), str(nothing), "-o", str(tmp_path / "base.json")]) == 2
    assert errors(capsys) == [
        f"gpu-accept: {interrupted}: the run ended with exit status 2, not a pass: a baseline is a picture of a healthy machine",
        f"gpu-accept: {nothing}: the run measured nothing (a quick level, or recorded facts without measurements)",
    ]


def test_runs_of_other_profiles_or_gpu_counts_are_not_mixed(tmp_path, capsys):
    four = shipped_h200x4(tmp_path)[0]
    two = bench_results("h200x2-shipped-runs.tar.gz", "shipped1/results.json", tmp_path)
    assert cli(["baseline", "save", str(four), str(two), "-o", str(tmp_path / "base.json")]) == 2
    assert errors(capsys) == [
        f"gpu-accept: {two}: profile h200-2-nvswitch here, h200-4-nvswitch in {four}; gpu_count 2 here, 4 in {four}: "
        "one baseline holds runs of one profile on one kind of machine"
    ]


def test_values_not_measured_in_every_run_are_named(tmp_path, capsys):
    without_copies = results_data(HEALTHY)
    without_copies["facts"]["measurements"]["copies"] = None  # as a run with -k "not copy" records it
    partial = written(tmp_path / "partial.json", without_copies)
    target = tmp_path / "base.json"
    assert cli(["baseline", "save", str(HEALTHY), str(partial), "-o", str(target)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"wrote {target}: 33 values from 2 run(s) of profile h200-4-calibrated",
        "left out 30 value(s) not measured in every run: local-gpu0, local-gpu1, local-gpu2, local-gpu3, host_to_device-gpu0 and 25 more",
    ]
    assert len(load_baseline(target).metrics) == 33


# -- the tolerance a spread can earn --------------------------------------------------------------------


def test_the_tolerance_a_spread_earns_is_capped_and_the_values_at_the_cap_named(tmp_path, capsys):
    target = tmp_path / "base.json"
    assert cli(["baseline", "save", *map(str, shipped_h200x4(tmp_path)), "-o", str(target)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"wrote {target}: 57 values from 5 run(s) of profile h200-4-nvswitch",
        "2 value(s) hit the 25% cap on the tolerance a spread earns (twice their spread would allow more; a later run may be "
        "at most 25% worse there): busbw-alltoall-256MiB (spread 14.7%), p2p_bidirectional-gpu2-gpu3 (spread 22.7%)",
    ]
    baseline = load_baseline(target)
    copies = baseline.metrics["p2p_bidirectional-gpu2-gpu3"]
    assert copies.tolerance(0.05) == SPREAD_TOLERANCE_CAP == 0.25
    assert baseline.metrics["busbw-all_reduce-1GiB"].tolerance(0.05) == 0.05  # runs within 2.5%: the asked-for share
    # the shipped runs' NCCL_P2P_DISABLE=1 drill: every NCCL value regressed
    broken = load_results(bench_results("h200x4-faults-shipped.tar.gz", "nop2p/results.json", tmp_path))
    verdict = no_regression(SHIPPED.load("h200-4-nvswitch"), broken.facts, "busbw-all_reduce-1GiB", baseline, 0.05)
    assert verdict.outcome is Outcome.FAILED and "-92.0%; at most 5% worse allowed" in verdict.message


def test_a_healthy_and_a_broken_run_can_no_longer_make_a_gate_that_never_fires(tmp_path):
    healthy = load_results(HEALTHY).facts
    broken = load_results(NO_P2P).facts
    # the API makes what it is given (the command refuses the broken run); the gate still fires
    save_baseline(tmp_path / "b.json", healthy, "h200-4-calibrated", [broken])
    baseline = load_baseline(tmp_path / "b.json")
    assert baseline.metrics["busbw-all_reduce-256MiB"].spread > 1.6  # 355 and 28 GB/s
    verdict = no_regression(SHIPPED.load("h200-4-nvswitch"), broken, "busbw-all_reduce-1GiB", baseline, 0.05)
    assert verdict.outcome is Outcome.FAILED
    assert "at most 25% worse allowed (twice the 170.6% its baseline runs varied by, capped at 25%)" in verdict.message


# -- values that are not numbers ------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [math.nan, math.inf, -3.0, 0.0])
def test_a_value_that_is_not_a_finite_number_above_0_is_refused_on_save(tmp_path, capsys, bad):
    document = results_data(HEALTHY)
    document["facts"]["measurements"]["collectives"]["results"][1]["busbw_GBps"] = bad
    if bad == 0.0:  # one rank: busbw is algbw x 0, as nccl-tests' factor has it (any other 0 is refused as facts)
        document["facts"]["measurements"]["collectives"]["results"][1]["ranks"] = 1
    path = written(tmp_path / "odd.json", document)
    target = tmp_path / "base.json"
    assert cli(["baseline", "save", str(HEALTHY), str(path), "-o", str(target)]) == 2
    if bad == 0.0:  # a number a measurement can give (one rank moves nothing), but no baseline
        said = "busbw-all_reduce-1GiB: measured 0.0 GB/s: a baseline holds only finite values above 0"
    else:  # not a measurement at all: the results file itself is refused
        said = "facts.measurements.collectives.results[1].busbw_GBps: Input should be " + (
            "greater than or equal to 0 (got -3.0)" if bad == -3.0 else f"a finite number (got {bad!r})"
        )
    assert errors(capsys) == [f"gpu-accept: {path}: {said}"]
    assert not target.exists()


@pytest.mark.parametrize("bad", [math.nan, -1.0, 0])
def test_a_value_that_is_not_a_finite_number_above_0_is_refused_on_load(tmp_path, bad):
    save_baseline(tmp_path / "b.json", example_facts("h200x4-measured"), "h200-4-nvswitch")
    document = json.loads((tmp_path / "b.json").read_text())
    document["values"][2]["value"] = bad
    key = document["values"][2]["key"]
    written(tmp_path / "b.json", document)
    with pytest.raises(InputFileError) as caught:
        load_baseline(tmp_path / "b.json")
    assert caught.value.lines() == [f"{tmp_path / 'b.json'}: values[2]: {key}: value {bad!r} is not a finite number above 0"]


def test_a_negative_spread_is_refused_on_load(tmp_path):
    save_baseline(tmp_path / "b.json", example_facts("h200x4-measured"), "h200-4-nvswitch")
    document = json.loads((tmp_path / "b.json").read_text())
    document["values"][0]["spread"] = -0.5
    written(tmp_path / "b.json", document)
    with pytest.raises(InputFileError, match=r"values\[0\]: busbw-all_reduce-256MiB: spread -0.5 is not a finite number of at least 0"):
        load_baseline(tmp_path / "b.json")


def _drop_machine(document):
    del document["machine"]


def _drop_count(document):
    del document["machine"]["gpu_count"]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_drop_machine, "machine: expected the machine the baseline was saved on (missing): without it any machine would be judged"),
        (_drop_count, "machine.gpu_count: expected the number of GPUs, got None"),
        (lambda d: d["machine"].update(profile=7), "machine.profile: expected the profile's name, got 7"),
        (lambda d: d.update(values=[]), "values: expected the list of measured values a baseline gates on (it is empty)"),
        (lambda d: d.pop("values"), "values: expected the list of measured values a baseline gates on (missing)"),
        (lambda d: d["values"].insert(1, dict(d["values"][0])), "values[1]: busbw-all_reduce-256MiB is given twice"),
        (lambda d: d["values"][1].update(higher_is_better="false"), "values[1]: malformed entry (TypeError: higher_is_better is 'false'"),
    ],
    ids=["no-machine", "no-gpu-count", "profile-not-text", "no-values", "values-missing", "key-twice", "direction-as-text"],
)
def test_a_baseline_that_could_judge_the_wrong_machine_or_nothing_is_refused_on_load(tmp_path, change, said):
    save_baseline(tmp_path / "b.json", example_facts("h200x4-measured"), "h200-4-nvswitch")
    document = json.loads((tmp_path / "b.json").read_text())
    change(document)
    written(tmp_path / "b.json", document)
    with pytest.raises(InputFileError) as caught:
        load_baseline(tmp_path / "b.json")
    [line] = caught.value.lines()
    assert line.startswith(f"{tmp_path / 'b.json'}: {said}"), line


def test_a_baseline_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    target = tmp_path / "b.json"
    target.write_text("the baseline kept so far\n")

    def interrupted(self, other):
        raise OSError("disk full")

    monkeypatch.setattr(Path, "replace", interrupted)
    with pytest.raises(OutputError, match="disk full"):
        save_baseline(target, example_facts("h200x4-measured"), "h200-4-nvswitch")
    assert target.read_text() == "the baseline kept so far\n"  # never half a file in its place


# -- a baseline of other GPUs cannot judge a run --------------------------------------------------------


def gpu_accept(*args):
    return subprocess.run([sys.executable, "-m", "gpuaccept", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_baseline_of_four_gpus_cannot_judge_a_run_on_two(tmp_path):
    base = tmp_path / "h200x4-base.json"
    save_baseline(base, example_facts("h200x4-measured"), "h200-4-nvswitch")
    done = gpu_accept("run", "--profile", "h200-2-nvswitch", "--facts", str(EXAMPLES / "h200x2-measured.json"),
                      "--baseline", str(base), "--reports", str(tmp_path / "reports"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert [line for line in done.stderr.splitlines() if line.strip()] == [
        f"ERROR: gpu-accept: {base}: this baseline cannot judge this run: gpu_count 4 -> 2; profile h200-4-nvswitch -> h200-2-nvswitch "
        "(save a baseline on this kind of machine, against this profile)"
    ]
    assert "passed" not in done.stdout and not (tmp_path / "reports" / "results.json").exists()  # before any test ran


@pytest.mark.slow
def test_other_software_is_a_note_in_the_summary(tmp_path):
    base = tmp_path / "base.json"
    facts = example_facts("h200x4-measured")
    save_baseline(base, facts, "h200-4-nvswitch")
    document = json.loads(base.read_text())
    document["machine"].update(driver="575.57.08", nccl="2.27.3")
    base.write_text(json.dumps(document))
    done = gpu_accept("run", "--profile", "h200-4-nvswitch", "--facts", str(EXAMPLES / "h200x4-measured.json"),
                      "--baseline", str(base), "--reports", str(tmp_path / "reports"), "-k", "no_regression")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout[done.stdout.index("gpu-accept summary"):]
    assert (
        f"note: baseline {base} was saved with other software or on another host: driver 575.57.08 -> 580.159.04; nccl 2.27.3 -> 2.28.9\n"
        in summary
    )
    assert "warning" not in done.stdout.lower()


def test_the_same_gpus_on_another_host_are_judged(tmp_path):
    base = tmp_path / "base.json"
    save_baseline(base, example_facts("h200x4-measured"), "h200-4-nvswitch")
    golden = load_baseline(base)
    other = mutated(example_facts("h200x4-measured"), lambda d: d["system"].update(hostname="node17"))
    assert golden.mismatch(other, "h200-4-nvswitch") == []
    assert golden.differences(other) == ["host vm -> node17"]
    other_model = mutated(example_facts("h200x4-measured"), lambda d: d["gpus"][0].update(name="NVIDIA H100 80GB HBM3"))
    assert golden.mismatch(other_model, "h200-4-nvswitch") == ["gpu_model NVIDIA H200 -> NVIDIA H100 80GB HBM3"]


def test_a_gemm_that_lost_eight_percent_above_its_floor_fails_its_regression_test(tmp_path):
    # five healthy compute runs on a lent 2xH200 (bench/runs/2026-11-23c): GEMM 677.7-689.3 TFLOP/s, floor 594
    archive = ROOT / "bench" / "runs" / "2026-11-23c" / "loads-h200-2.tar.gz"
    with tarfile.open(archive) as tar:
        runs = [parse_results(tar.extractfile(f"loads{i}/results.json").read().decode(), f"loads{i}").facts for i in range(1, 6)]
    base = tmp_path / "base.json"
    save_baseline(base, runs[0], "h200-2-nvswitch", more_runs=runs[1:])
    golden = load_baseline(base)
    assert {"gemm-gpu0", "gemm-gpu1", "hbm_copy-gpu1", "hbm_triad-gpu0"} <= set(golden.metrics)

    def gemm_slower(data):
        for load in data["measurements"]["compute"]["results"]:
            if load["load"] == "gemm" and load["gpu"] == 1:
                load["tflops"] *= 0.92  # still above the floor of 594: only the baseline can see it

    after_update = mutated(runs[0], gemm_slower)
    profile = SHIPPED.load("h200-2-nvswitch")
    verdicts = {key: no_regression(profile, after_update, key, golden, 0.05) for key in golden.metrics}
    assert [key for key, v in verdicts.items() if v.outcome is not Outcome.PASSED] == ["gemm-gpu1"]
    assert "TFLOP/s" in verdicts["gemm-gpu1"].message


def test_one_run_named_twice_is_one_run_of_the_baseline(tmp_path, capsys):
    assert cli(["baseline", "save", str(HEALTHY), str(HEALTHY), "-o", str(tmp_path / "b.json")]) == 0
    out, err = capsys.readouterr()
    assert "values from 1 run(s)" in out and err == f"gpu-accept: note: {HEALTHY} is {HEALTHY} again: read once\n"
    assert all(metric.spread == 0.0 for metric in load_baseline(tmp_path / "b.json").metrics.values())
