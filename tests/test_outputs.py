"""No command writes over what it reads or over another of its outputs: refused in one line before
it runs, whether the same file is named as given, through a link, as `./a` or as a hard link; a
link planted at a file the run names itself is never written through; a reports folder is one
run's at a time; a cluster's output folder named like a glob deletes no other run's files."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuaccept.cli import main
from gpuaccept.errors import OptionError
from gpuaccept.outputs import refuse_overlaps
from tests.helpers import EXAMPLES, ROOT
from tests.test_store import run_document, written

RESULTS = ROOT / "examples" / "results" / "h200x4.json"


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    (line,) = err.splitlines()
    assert line.startswith("gpu-accept: ") and "Traceback" not in err
    return line


@pytest.fixture
def results(tmp_path) -> Path:
    copy = tmp_path / "results.json"
    shutil.copy(RESULTS, copy)
    return copy


def the_same_file(tmp_path: Path, target: Path) -> dict[str, str]:
    """`target` named four ways: as given, through a link, with ./ and .., and as a hard link."""
    (tmp_path / "sub").mkdir(exist_ok=True)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    hard = tmp_path / "hard.json"
    os.link(target, hard)
    return {"given": str(target), "link": str(link), "dotted": str(tmp_path / "sub" / ".." / "." / target.name), "hard": str(hard)}


@pytest.mark.parametrize("way", ["given", "link", "dotted", "hard"])
def test_every_command_refuses_an_output_that_is_one_of_its_inputs(tmp_path, results, capsys, way):
    before = results.read_bytes()
    same = the_same_file(tmp_path, results)[way]
    db = tmp_path / "f.db"
    assert main(["store", "add", str(RESULTS), "--db", str(db)]) == 0
    capsys.readouterr()
    commands = [
        ["report", "html", str(results), "-o", same],
        ["report", "junit", str(results), "-o", same],
        ["report", "fleet", str(results), "-o", same],
        ["report", "metrics", str(results), "-o", same],
        ["report", "cluster", str(results), "-o", same],
        ["baseline", "save", str(results), "-o", same],
        ["profile", "init", "--from", str(results), "--name", "golden", "-o", same],
        ["import", str(results), "-o", same],
        ["store", "add", str(results), "--db", same],
        ["report", "fleet", "--db", str(db), "--html", str(db)],
        ["report", "history", "--db", str(db), "--json", str(db)],
    ]
    for command in commands:
        assert main(command) == 2, command
        line = one_line(capsys)
        assert "which this command reads: writing it would lose it; name another file" in line, line
    assert results.read_bytes() == before


def test_two_outputs_of_one_command_may_not_be_one_file(tmp_path, capsys):
    db = tmp_path / "f.db"
    assert main(["store", "add", str(RESULTS), "--db", str(db)]) == 0
    capsys.readouterr()
    page = tmp_path / "fleet.html"
    assert main(["report", "fleet", "--db", str(db), "-o", str(page), "--html", f"{tmp_path}/./fleet.html"]) == 2
    assert "--html" in one_line(capsys) and not page.exists()
    assert main(["record", "-o", str(tmp_path / "f.json"), "--nvml-log", str(tmp_path / "f.json")]) == 2
    assert "is also -o" in one_line(capsys)


def test_a_device_may_take_several_outputs():
    refuse_overlaps([("--facts", os.devnull)], [("-o", os.devnull), ("--html", os.devnull)])
    with pytest.raises(OptionError, match="is also -o"):
        refuse_overlaps([], [("-o", "a.json"), ("--html", "./a.json")])


@pytest.mark.parametrize("option", ["--metrics", "--save-baseline", "--facts", "--baseline", "--junitxml"])
def test_a_run_refuses_an_output_or_an_input_that_is_one_of_its_reports_before_anything_runs(tmp_path, capsys, option):
    reports = tmp_path / "reports"
    reports.mkdir()
    earlier = reports / "results.json"
    shutil.copy(RESULTS, earlier)  # the run before's, kept until this one writes its own
    before = earlier.read_bytes()
    arguments = ["run", "--profile", "h200-4-nvswitch", "--reports", str(reports)]
    if option != "--facts":
        arguments += ["--facts", str(EXAMPLES / "h200x4.json")]
    arguments += [f"{option}={reports}/./results.json"] if option == "--junitxml" else [option, str(reports / "results.json")]
    assert main(arguments) == 2
    line = one_line(capsys)
    assert "reports/./results.json" in line or "reports/results.json" in line, line
    assert earlier.read_bytes() == before and sorted(p.name for p in reports.iterdir()) == ["results.json"]


@pytest.mark.parametrize("name", ["results.json", "results.json.journal", "junit.xml", "report.html", "facts.json"])
def test_a_link_planted_in_the_reports_folder_is_never_written_through(tmp_path, capsys, name):
    reports = tmp_path / "reports"
    reports.mkdir()
    precious = tmp_path / "precious.txt"
    precious.write_text("not a report\n")
    (reports / name).symlink_to(precious)
    assert main(["run", "--profile", "h200-4-nvswitch", "--facts", str(EXAMPLES / "h200x4.json"), "--reports", str(reports)]) == 2
    line = one_line(capsys)
    assert f"{reports / name} is a symbolic link (to {precious})" in line
    assert precious.read_text() == "not a report\n"


def test_the_journal_is_never_opened_through_a_link(tmp_path):
    from gpuaccept.facts.run_record import RunRecord
    from gpuaccept.report.results import ResultsWriter

    precious = tmp_path / "precious.txt"
    precious.write_text("not a journal\n")
    (tmp_path / "results.json.journal").symlink_to(precious)
    record = RunRecord.model_validate_json(RESULTS.read_text(encoding="utf-8"))
    writer = ResultsWriter(record.with_tests([]), tmp_path / "results.json", idle_s=None)
    journal = tmp_path / "results.json.journal"
    assert writer.write_errors == [f"{journal}: cannot write it (a symbolic link: the run writes its own journal there)"]
    writer.finish(0)
    assert precious.read_text() == "not a journal\n"


@pytest.mark.slow
def test_a_second_run_writing_the_same_reports_folder_is_refused_and_the_first_keeps_its_results(tmp_path):
    reports = tmp_path / "reports"
    # the first run holds the folder while a test of its own sleeps: the second starts meanwhile
    first = subprocess.Popen(
        [sys.executable, "-m", "gpuaccept", "run", "--profile", "h200-4-nvswitch", "--facts", str(EXAMPLES / "h200x4.json"),
         "--reports", str(reports), "-k", "test_gpu_count", "-p", "tests.slow_session"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "GPUACCEPT_TEST_SLEEP": "10"},
    )
    deadline = time.monotonic() + 120
    while not (reports / ".gpu-accept.lock").is_file() or not (reports / "results.json").is_file():
        assert time.monotonic() < deadline and first.poll() is None, first.communicate()
        time.sleep(0.1)
    second = subprocess.run(
        [sys.executable, "-m", "gpuaccept", "run", "--profile", "h200-4-nvswitch", "--facts", str(EXAMPLES / "h200x4-measured.json"),
         "--reports", str(reports), "-k", "test_gpu_count"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    out, err = first.communicate(timeout=180)
    assert first.returncode == 0, out + err
    assert second.returncode == 2
    (line,) = second.stderr.splitlines()
    assert f"--reports {reports}: another gpu-accept run (pid {first.pid}) is writing its reports there" in line
    record = json.loads((reports / "results.json").read_text(encoding="utf-8"))
    assert record["complete"] and record["run"]["facts_source"] == str(EXAMPLES / "h200x4.json")


def test_a_cluster_folder_named_like_a_glob_removes_no_other_runs_nccl_files(tmp_path, monkeypatch):
    from gpuaccept.measure import nccl_logs as measure_cluster

    monkeypatch.setattr(measure_cluster, "_CAPTURE_BEGAN", [])
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.setattr(socket, "gethostname", lambda: "gpu-17")
    other = tmp_path / "run1"  # another run's folder, which `run[1]` matches as a glob
    other.mkdir()
    theirs = other / "nccl.gpu-17.99.log"
    theirs.write_text("another run's lines\n")
    ours = tmp_path / "run[1]"
    ours.mkdir()
    assert measure_cluster.capture_nccl_info(ours) == []
    assert theirs.read_text() == "another run's lines\n"
    written_here = ours / "nccl.gpu-17.4242.log"
    written_here.write_text("lines\n")
    assert measure_cluster.capture_nccl_info(ours) == [written_here]
    assert measure_cluster.nccl_files_pattern("/x/[a]*?/nccl.%h.%p.log", "h[1]") == "/x/[[]a][*][?]/nccl.h[[]1].*.log"


def test_store_add_refuses_a_results_file_the_store_would_write_over(tmp_path, capsys):
    path = written(tmp_path, "f.db.wal", run_document(0, 0))  # named as the store's write-ahead log
    assert main(["store", "add", path, "--db", str(tmp_path / "f.db")]) == 2
    assert "which this command reads" in one_line(capsys) and not (tmp_path / "f.db").exists()
