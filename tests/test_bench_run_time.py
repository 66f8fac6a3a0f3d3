"""bench/run_time.py reads where each run's time went: the stages' phases from results.json and the
probe's parts from its --phases line, shown largest first."""

from __future__ import annotations

import json
import sys

import pytest

from bench import run_time


def test_the_probe_s_parts_are_read_from_its_last_line_and_missing_where_it_has_none():
    output = 'gpu-accept: a warning\n{"probe_phases_s": {"imports": 0.31, "CUDA": 0.72, "NVML facts": 0.4}}\n'
    assert run_time._probe_phases(output) == {"imports": 0.31, "CUDA": 0.72, "NVML facts": 0.4}
    assert run_time._probe_phases("usage: python -m gpuaccept.probe [-h]\nunrecognized arguments: --phases\n") == {}


@pytest.mark.slow  # runs a command, as the bench does
def test_a_run_s_stage_phases_come_from_its_results_and_are_shown_largest_first(tmp_path):
    ddp = {f"DDP on 2 GPUs: bs8: phase {index}": float(index) for index in range(20)}
    record = {
        "tests": [{"outcome": "passed"}, {"outcome": "passed"}, {"outcome": "skipped"}],
        "facts": {"measurements": {"ddp": {"wall_s": 21.5, "phases": ddp}, "copies": {"wall_s": 5.2}}},
    }
    (tmp_path / "standard-this").mkdir()
    (tmp_path / "standard-this" / "results.json").write_text(json.dumps(record))
    run = run_time.timed("standard-this", "this", "standard", 2, [], [sys.executable, "-c", "pass"], {}, tmp_path)
    assert run.tests == {"passed": 2, "skipped": 1} and run.phases == {"ddp": ddp}  # copies kept no phases
    assert run.wall_of_sweep == {"ddp": 21.5, "copies": 5.2}
    (table,) = [line for line in run_time.phase_tables([run]) if line.startswith("- **ddp**")]
    assert table.startswith("- **ddp** (wall 21.5 s): DDP on 2 GPUs: bs8: phase 19 19.00; DDP on 2 GPUs: bs8: phase 18 18.00")
    assert table.endswith(f"; 6 more {sum(range(6)):.2f}")  # the 14 largest, the rest summed


def _standard(gpus: int, wall_s: float, rounds_s: float, stages: dict[str, float]) -> run_time.Run:
    return run_time.Run(f"standard-this-{gpus}gpu", "this", "standard", gpus, "", 0, wall_s, stages=stages, rounds_s=rounds_s)


def test_each_gpu_s_cost_is_fitted_over_runs_of_the_same_stages_without_their_confirmation_rounds():
    every = {"copies": 7.0, "compute": 7.5, "ddp": 17.0, "nccl": 4.0}
    runs = [
        _standard(1, 19.5, 0.0, {"copies": 2.3, "compute": 7.6, "ddp": 0.0, "nccl": 0.0}),  # no DDP, no NCCL on one GPU
        _standard(2, 41.7, 0.0, every),
        _standard(4, 64.8, 16.0, every),  # one DDP round
    ]
    lines = run_time.projection(runs, 4)
    # (2, 41.7) and (4, 48.8): 3.55 s a GPU, 8 GPUs at 41.7 + 6 x 3.55
    assert "**3.5 s per GPU** (target <= 3 s); **8 GPUs projected: 63.0 s** (without confirmation rounds)" in " ".join(lines)
    assert "- 1 GPU(s): 19.5 s: 19.5 s (left out: it measured compute, copies only)" in lines
    assert "- 4 GPU(s): 64.8 s less 16.0 s of confirmation rounds: 48.8 s" in lines


def test_the_measurement_alone_is_the_steps_the_workers_timed_a_per_gpu_stage_s_slowest_gpu():
    phases = {
        "copies": {"start-up": 5.0, "waited for the machine": 2.3, "step: copy bandwidth 1 GiB": 3.0},
        "compute": {"gpu0: step: GEMM on gpu0": 1.2, "gpu0: step: memory test on gpu0": 5.0, "gpu0: held": 6.0,
                    "gpu1: step: GEMM on gpu1": 1.3, "gpu1: step: memory test on gpu1": 5.1,
                    "gpu1: memory test on gpu1: walking ones": 2.2},  # a part of a step: inside it already
        "ddp": {"step: DDP on 1 GPU": 1.0, "step: DDP on 2 GPUs": 1.5, "DDP on 2 GPUs: bs8: timed": 0.6},
    }
    run = _standard(2, 30.0, 0.0, {"copies": 3.4, "compute": 7.0, "ddp": 8.0})
    run.phases = phases
    assert run_time.measuring_s(run) == 3.0 + 6.4 + 2.5  # the copies' step, gpu1's steps, DDP's two worlds
    wider = _standard(4, 40.0, 0.0, {"copies": 7.0, "compute": 7.2, "ddp": 12.0})
    wider.phases = {**phases, "ddp": {**phases["ddp"], "step: DDP on 4 GPUs": 2.0}, "copies": {"step: copy bandwidth 1 GiB": 6.0}}
    lines = " ".join(run_time.projection([run, wider], 4))
    # (2, 30.0) and (4, 40.0): 5 s a GPU, of which (2, 11.9) and (4, 16.9): 2.5 s measuring
    assert "**5.0 s per GPU**" in lines
    assert "(the steps the stages' workers timed: 11.9 s on 2, 16.9 s on 4): 2.50 s per GPU;" in lines
    assert "set-up, waits and the rest: 2.50 s per GPU" in lines


def test_no_slope_is_drawn_through_runs_that_measured_different_stages():
    runs = [
        _standard(1, 19.5, 0.0, {"copies": 2.3, "compute": 7.6, "nccl": 0.0}),
        _standard(4, 64.8, 0.0, {"copies": 7.0, "compute": 7.5, "nccl": 4.0}),
    ]
    assert "this commit: fewer than two GPU counts that measured the same stages, no slope" in run_time.projection(runs, 4)


def test_a_run_s_confirmation_rounds_are_read_from_its_results(tmp_path):
    record = {"tests": [], "facts": {"measurements": {"rounds": [{"stage": "ddp", "wall_s": 17.9}, {"stage": "ddp", "wall_s": 15.4}]}}}
    (tmp_path / "standard-this").mkdir()
    (tmp_path / "standard-this" / "results.json").write_text(json.dumps(record))
    run = run_time.timed("standard-this", "this", "standard", 4, [], [sys.executable, "-c", "pass"], {}, tmp_path)
    assert run.rounds_s == 33.3


def test_a_profiled_run_s_main_thread_is_counted_by_the_part_of_the_run_its_stack_is_in(tmp_path):
    import gzip

    from bench import run_profile

    main = "thread (7): MainThread;main (gpuaccept/cli.py:74);pytest_configure (gpuaccept/plugin/hooks.py:60)"
    raw = "\n".join([
        f"{main};TorchCheck.passed (gpuaccept/plugin/torch_check.py:58);select (selectors.py:1) 400",
        f"{main};RunContext.build (gpuaccept/plugin/context.py:61) 100",
        "thread (7): MainThread;main (gpuaccept/cli.py:74);pytest_runtestloop (_pytest/main.py:1);"
        "MeasurementStore._measure (gpuaccept/stages/store.py:260) 1000",
        "thread (9): gpu-accept telemetry;_sample (gpuaccept/stages/telemetry.py:1) 1500",
    ]) + "\n"
    path = tmp_path / "run.txt.gz"
    path.write_bytes(gzip.compress(raw.encode()))
    parts, threads = run_profile.summarize(run_profile.read(path), rate=200)
    # a wait inside pytest_configure is named by the wait, not by the hook
    assert parts == {"tests: a stage measured (its workers' wait and run)": 5.0, "configure: waiting for torch's check": 2.0,
                     "configure: waiting for the probe": 0.5}
    assert threads == {"MainThread": 7.5, "gpu-accept telemetry": 7.5}


def test_the_later_stages_contexts_beside_the_memory_test_are_drawn_on_to_8_gpus():
    def run(gpus: int, wall_s: float, driver_s: float) -> run_time.Run:
        made = _standard(gpus, wall_s, 0.0, {"copies": 2.0, "compute": 7.0, "ddp": 6.0, "nccl": 3.0})
        made.phases = {
            "compute": {f"gpu{gpu}: step: memory test on gpu{gpu}": 5.2 - gpu / 100 for gpu in range(gpus)},
            "ddp": {"start-up: driver before the go": driver_s, "step: DDP on 1 GPU": 0.9},
            "collectives": {"start-up: driver before the go": driver_s - 0.1},
        }
        return made

    lines = " ".join(run_time.projection([run(2, 22.0, 1.75), run(4, 29.8, 4.5)], 4))
    # contexts (2, 1.75) and (4, 4.5): at 8, 10.0 s, 4.8 s past the memory test's 5.2 s; 22.0 + 6 x 3.9 = 45.4
    assert "**8 GPUs projected: 45.4 s**" in lines
    assert "made beside the memory test (5.2 s): 1.8 s on 2, 4.5 s on 4; at 8 GPUs about 10.0 s, 4.8 s past" in lines
    assert "**8 GPUs projected with it: 50.2 s**" in lines
    # where they stay within the memory test at 8, the projection stands
    lines = " ".join(run_time.projection([run(2, 22.0, 1.0), run(4, 29.8, 1.5)], 4))
    assert "at 8 GPUs about 2.5 s, 0.0 s past the memory test's end: **8 GPUs projected with it: 45.4 s**" in lines
