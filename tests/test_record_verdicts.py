"""bench/record_verdicts.py: every run kept under bench/runs judged again by the profiles
gpu-accept gives them today. No healthy run may fail and no fault drill may pass; a change of
floors that does either fails here, naming the run."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from bench import record_verdicts
from gpuaccept.profile.catalogue import load_catalogue

ROOT = Path(__file__).resolve().parents[1]
MEASURED_4 = ROOT / "examples" / "facts" / "h200x4-measured.json"
P2P_OFF_4 = ROOT / "examples" / "results" / "h200x4-nccl-p2p-disabled.json"


@pytest.fixture(scope="module")
def record() -> tuple[list[record_verdicts.Judged], list[str]]:
    """The whole record judged, once for the tests that read it (its captures take seconds to read)."""
    unread: list[str] = []
    return record_verdicts.judge_all(record_verdicts.RUNS, unread), unread


def capture(folder: Path, runs: dict[str, Path]) -> None:
    """A capture as scripts/gpu-session.sh keeps one: each run's facts.json or results.json in a
    folder of its name, in one tar.gz."""
    folder.mkdir(parents=True)
    with tarfile.open(folder / "runs.tar.gz", "w:gz") as archive:
        for name, path in runs.items():
            archive.add(path, arcname=f"{name}/{'results' if 'results' in path.parts else 'facts'}.json")


@pytest.mark.slow  # reads every archived run
def test_the_kept_runs_pass_where_healthy_and_fail_where_a_fault_was_injected(record):
    judged, unread = record
    assert record_verdicts.exit_code(judged) == 0, [j.name for j in judged if j.kind == "healthy" and j.failed]
    assert record_verdicts.markdown(judged, unread) == (ROOT / "bench" / "record-verdicts.md").read_text(), (
        "bench/record-verdicts.md is stale: python bench/record_verdicts.py --markdown bench/record-verdicts.md"
    )


def test_a_healthy_run_that_fails_and_a_drill_that_passes_are_named_and_the_exit_says_so(tmp_path, capsys):
    capture(tmp_path / "ok", {"trust1": MEASURED_4, "nop2p": P2P_OFF_4})
    assert record_verdicts.main(["--runs", str(tmp_path / "ok")]) == 0
    said = capsys.readouterr().out
    assert "| h200-4-nvswitch | 1 | 1 | 0 | 1 | 0 |" in said
    assert "runs.tar.gz:nop2p (h200-4-nvswitch): 24 failed: busbw[all_reduce 256 MiB]: 27.87 (>= 307.4 GB/s)" in said

    # the same facts under each other's names: the P2P-off run taken for healthy, the healthy one for a drill
    capture(tmp_path / "swapped", {"trust1": P2P_OFF_4, "hog": MEASURED_4})
    assert record_verdicts.main(["--runs", str(tmp_path / "swapped")]) == 1
    said = capsys.readouterr().out
    assert "| h200-4-nvswitch | 1 | 1 | 1 | 1 | 1 |" in said
    failing = said.split("## Healthy runs that fail")[1].split("## Drills")[0]
    assert "runs.tar.gz:trust1 (h200-4-nvswitch): " in failing and "busbw[all_reduce 1 GiB]" in failing
    assert "runs.tar.gz:hog (h200-4-nvswitch): **passes**" in said


def test_what_a_run_was_is_read_from_its_folder_name_and_the_runs_named_otherwise():
    assert record_verdicts.kind_of("2026-11-28-session7/call3-h200-4/trust-h200-4.tar.gz:trust12") == "healthy"
    assert record_verdicts.kind_of("x.tar.gz:derived-nop2p-auto") == "drill"
    assert record_verdicts.kind_of("x.tar.gz:burn-SLOW_GEMM") == "drill"
    assert record_verdicts.kind_of("x.tar.gz:dip") == "healthy"  # a one-off dip its round must ride out
    assert record_verdicts.kind_of("x.tar.gz:standard-this-1gpu") == "part"
    assert record_verdicts.kind_of("x.tar.gz:profiled-standard") == "profiled"
    assert record_verdicts.kind_of("x.tar.gz:standard-this", "vm/59116112") == "faulty"
    assert record_verdicts.kind_of("2026-11-27/call4/drills-x1.tar.gz:stop") == "healthy"  # stopped after it delivered


@pytest.mark.slow  # reads every archived run
def test_the_catalogue_lists_the_runs_this_bench_reads_where_it_draws_a_limit_from_the_record(record):
    """Each value profiles/catalogue/measured.yaml draws from the record (rule record_floor or
    record_ceiling) holds every machine's healthy runs as this bench gives them."""
    catalogue = load_catalogue()
    from_record = {
        (name, key): set(_runs(entry))
        for name, machine_kind in catalogue.records.items()
        for key, entry in machine_kind.values.items()
        if entry.rule is not None and entry.rule.startswith("record_")
    }
    assert {key for _, key in from_record} == {
        "ddp.min_efficiency.2gpu-bs8", "ddp.max_exposed_comm.2gpu-bs8", "ddp.min_efficiency.4gpu-bs8",
        "ddp.max_exposed_comm.4gpu-bs8", "ddp.nvlink_ab.4gpu-bs8", "copies.host_to_device_min",
    }
    given = record_verdicts.catalogue_runs(record[0]).splitlines()
    for profile in ("h200-2-nvswitch", "h200-4-nvswitch"):
        for key in [key for name, key in from_record if name == profile]:
            line = next(line for line in given if line.startswith(f"{profile} {key}:"))
            runs = {tuple(entry.split(", ")) for entry in line.split(": [", 1)[1].strip("[]").split("], [")}
            listed = {(machine, str(count), f"{low:g}", f"{high:g}") for machine, count, low, high in from_record[(profile, key)]}
            assert runs <= listed, f"profiles/catalogue/measured.yaml's {profile} {key} lacks {sorted(runs - listed)}"


def _runs(entry) -> list[tuple[str, int, float, float]]:
    return [(run.machine, run.runs, run.low, run.high) for run in entry.runs or []]
