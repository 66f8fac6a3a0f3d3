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
