"""The quick level's and `gpu-accept health-check`'s wall time on a CPU machine, this checkout beside
another commit (main's, by default) in one call: both run against the same recorded 4xH200 (its
NVML answers replayed, the telemetry's queries answered too, as a GPU answers them; the fake CUDA
driver of tests/cuda_driver.py answering for the same four GPUs), N rounds, the two commits
alternating and each round's first commit alternating, after one round each that is not counted
(Python's bytecode caches written, as on any machine after its first run).

    python bench/quick_cpu.py --ref main --runs 7 [--markdown bench-quick.md]

Each commit runs as `python -m gpuaccept` from its own tree (`src/` first on PYTHONPATH: the
other commit's from `git archive` into .prev-cpu/, git-ignored). Almost all of these commands' time
is CPU work (Python's start, imports, pytest, the probe's child, the reports, the exit), which this
measures; what NVML and the CUDA driver take on a GPU machine is not here (bench/run_time.py measures
that, on the GPU machine). Per run: the wall time; the start-up, from the process's start to the
session's (results.json's run.started_at); the session to the end of the last test (its finished_at);
and the end: the reports, pytest's summary and the process's exit; and the CPU time the command and
its children used (user and system), which a machine busy with other work moves less than the wall
time. Every run's reports are checked:
results.json, junit.xml, report.html and verdict.json written and readable, the exit code the
verdict's, the same tests and outcomes from both commits.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import run_time  # noqa: E402
from tests.cuda_driver import driver_environment, fake_cuda_driver  # noqa: E402
from tests.helpers import nvml_replay  # noqa: E402
from tests.telemetry_nvml import telemetry_recording  # noqa: E402

COMMANDS = ("quick", "health-check")
REPORTS = ("results.json", "junit.xml", "report.html", "verdict.json")


@dataclass
class Timed:
    commit: str
    what: str
    exit: int | None
    wall_s: float
    startup_s: float | None  # process start to the session's start
    session_s: float | None  # the session's start to the last test's end
    end_s: float | None  # the last test's end to the process's end: reports, summary, exit
    cpu_s: float  # user and system time of the command and its children (the probe): less moved by a busy machine
    outcomes: dict[str, str]


def _moment(text: str) -> float:
    return datetime.datetime.fromisoformat(text).timestamp()


def machine(folder: Path) -> dict[str, str]:
    """The environment of a replayed 4xH200 with a CUDA driver (what every run gets)."""
    recording = telemetry_recording(folder / "h200x4-telemetry.json")
    uuids = [nvml_replay("h200x4").query("uuid", gpu).removeprefix("GPU-") for gpu in range(4)]
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONDONTWRITEBYTECODE", "CUDA_VISIBLE_DEVICES")}
    return {
        **env, **driver_environment(uuids), "GPUACCEPT_NVML_REPLAY": str(recording),
        "LD_LIBRARY_PATH": str(fake_cuda_driver(folder / "cuda")),
    }


def one_run(commit: str, tree: Path, what: str, env: dict[str, str], work: Path, label: str) -> Timed:
    env = {**env, "PYTHONPATH": os.pathsep.join([str(tree / "src"), *filter(None, [env.get("PYTHONPATH")])])}
    reports = work / label
    shutil.rmtree(reports, ignore_errors=True)
    command = run_time.suite_command(what, reports, "auto", [])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = run_time.timed(label, commit, what, 4, [], command, env, work)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    record = json.loads((reports / "results.json").read_text(encoding="utf-8"))
    began = _moment(record["run"]["started_at"]) - (run.startup_s or 0.0)
    finished = _moment(record["run"]["finished_at"]) - began
    check_reports(reports, run.exit, label)
    return Timed(
        commit, what, run.exit, run.wall_s, run.startup_s, round(finished - (run.startup_s or 0.0), 2), round(run.wall_s - finished, 2),
        round(cpu_s, 2), {test["id"]: test["outcome"] for test in record["tests"]},
    )


def check_reports(reports: Path, exit_code: int | None, label: str) -> None:
    """Every report written and readable, its verdict the exit code."""
    for name in REPORTS:
        if not (reports / name).is_file() or (reports / name).stat().st_size == 0:
            raise SystemExit(f"{label}: {name} was not written")
    ElementTree.parse(reports / "junit.xml")
    verdict = json.loads((reports / "verdict.json").read_text(encoding="utf-8"))
    if verdict["exit_code"] != exit_code:
        raise SystemExit(f"{label}: exit {exit_code}, but verdict.json says {verdict['exit_code']}")
    if not (reports / "report.html").read_text(encoding="utf-8").rstrip().endswith("</html>"):
        raise SystemExit(f"{label}: report.html is cut short")


def median(values: list[float | None]) -> str:
    found = [v for v in values if v is not None]
    return f"{statistics.median(found):.2f}" if found else "-"


def report(runs: list[Timed], reference: str, this: str, cpus: int) -> str:
    day = datetime.date.today().isoformat()
    lines = [
        f"{day}, this checkout ({this}) beside {reference}, CPU replay of the 4xH200 recording on a {cpus}-core machine, "
        f"not a GPU; {sum(1 for r in runs if r.commit == 'this' and r.what == 'quick')} runs of each, medians (s):",
        "",
        "| command | commit | exit | wall | min wall | start-up | session (tests) | end (reports, exit) | CPU |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for what in COMMANDS:
        for commit, name in (("reference", reference), ("this", this)):
            mine = [r for r in runs if r.what == what and r.commit == commit]
            exits = sorted({str(r.exit) for r in mine})
            lines.append(
                f"| {what} | {name} | {', '.join(exits)} | {median([r.wall_s for r in mine])} | {min(r.wall_s for r in mine):.2f} | "
                f"{median([r.startup_s for r in mine])} | {median([r.session_s for r in mine])} | {median([r.end_s for r in mine])} | "
                f"{median([r.cpu_s for r in mine])} |"
            )
    lines += ["", "| command | this / reference, median wall | median CPU |", "| --- | ---: | ---: |"]
    for what in COMMANDS:
        walls = {c: statistics.median(r.wall_s for r in runs if r.what == what and r.commit == c) for c in ("this", "reference")}
        cpus = {c: statistics.median(r.cpu_s for r in runs if r.what == what and r.commit == c) for c in ("this", "reference")}
        lines.append(f"| {what} | **{walls['this'] / walls['reference']:.2f}** | {cpus['this'] / cpus['reference']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python bench/quick_cpu.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", default="main", help="the commit to compare with (default: main)")
    parser.add_argument("--runs", type=int, default=7, help="counted runs of each command per commit")
    parser.add_argument("--markdown", help="also write the table here")
    args = parser.parse_args()
    reference = ROOT / ".prev-cpu"
    run_time.prepare(argparse.Namespace(ref=args.ref, to=str(reference)))
    revision = (reference / "REVISION").read_text(encoding="utf-8").strip()
    git = ["git", "-C", str(ROOT)]
    this = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout
    this += " with uncommitted changes" if dirty.strip() else ""
    trees = {"reference": reference, "this": ROOT}
    runs: list[Timed] = []
    with tempfile.TemporaryDirectory(prefix="gpuaccept-quick-cpu-") as folder:
        work = Path(folder)
        env = machine(work)
        for round_number in range(args.runs + 1):  # round 0 writes the bytecode caches: not counted
            order = ("reference", "this") if round_number % 2 == 0 else ("this", "reference")
            for what in COMMANDS:
                for commit in order:
                    timed = one_run(commit, trees[commit], what, env, work, f"{what}-{commit}-{round_number}")
                    print(f"round {round_number} {what} {commit}: exit {timed.exit}, {timed.wall_s:.2f} s "
                          f"(start-up {timed.startup_s}, session {timed.session_s}, end {timed.end_s})", flush=True)
                    if round_number:
                        runs.append(timed)
    for what in COMMANDS:
        outcomes = {c: [r.outcomes for r in runs if r.what == what and r.commit == c] for c in trees}
        exits = {r.exit for r in runs if r.what == what}
        if len(exits) != 1 or any(found != outcomes["reference"][0] for c in trees for found in outcomes[c]):
            raise SystemExit(f"{what}: the two commits did not judge the same tests the same way (exits {sorted(map(str, exits))})")
    table = report(runs, revision, this, os.cpu_count() or 0)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
