"""Wall time of a standard run and of the quick level, this commit beside a previous one, in one
call on one GPU machine, with where each run's time went; and a projection for 8 GPUs from the
cost of each GPU, measured on 1, 2 and 4 GPUs of the same machine (CUDA_VISIBLE_DEVICES).

Here, before the device call (the GPU machine has no git): the previous commit's installable tree

    python bench/run_time.py prepare --ref cb471ea          # git archive into .prev/ (git-ignored)

On the GPU machine (scripts/gpu-session.sh TAG run-time installs both and calls this):

    python bench/run_time.py measure --previous-site /tmp/site-prev --out "$OUT" --tag h200-4 [--profile FILE]

Both commits run as `python -m gpuaccept` with the same environment but for which gpuaccept comes
first on PYTHONPATH. Order, so that neither commit is favoured by a warmer machine: the probe and the
quick level alternate (previous first: it imports torch, which warms torch's files for both); then
the standard run of this commit, then the previous one's (second, on the machine the first warmed);
then this commit on fewer GPUs (the projection), then both under `-n <GPUs>`. Items that would not
fit `--budget-s` are left out, and the report says which. Each run has an empty CUDA kernel cache of
its own (CUDA_CACHE_PATH): none inherits the kernels a run before it compiled, as a first run on a
new server; where the session script compiled Python's bytecode once for the call, every run reads it.

Where the time went, per run, from its results.json: the start-up before the session (process,
imports, probe: to the telemetry's first moment, or the run's start where it sampled none, as the
quick level), then to the first stage (collection, the tests that load nothing), each stage's
windows of load (the telemetry's `loads`, confirmation rounds included), the time between stages
(health snapshots, the tests that judge), and after the last stage (the rest of the tests, the
reports, the exit). Inside each stage, where a commit's sweeps keep them, its phases (rank 0's
start-up by part, the wait for the machine, the hold, each step and the parts a step times itself: a
DDP world's wrap, warm-up and timed steps, the memory test's passes); and the probe's own parts
(`python -m gpuaccept.probe --phases`, where the commit has it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

COMMITS = ("previous", "this")
STAGE_COLUMNS = ("copies", "compute", "ddp", "nccl")
# the sweeps whose phases are shown (the pairwise sweep shares the collectives' workers, and their phases)
PHASED_SWEEPS = ("copies", "compute", "ddp", "ddp_without_p2p", "collectives")
# what each item is expected to take, in seconds, to leave out those that would not fit the budget
# (a standard run of the previous commit, fe97046: 77.5 s on 4xH200, 65.0 s on 2, 30.9 s on 1)
# a stage window shorter than this measured nothing: one that cannot run on the GPUs shown (NCCL on one)
MIN_STAGE_S = 0.1
EXPECTED_S = {"probe": 6, "quick": 10, "health-check": 10}


def expected_standard_s(commit: str, gpus: int, xdist: bool = False) -> float:
    if commit == "previous":
        return 30 + (17 if xdist else 12) * gpus
    return 30 + 8 * gpus


@dataclass
class Run:
    label: str
    commit: str
    what: str  # probe | quick | health-check | standard
    gpus: int
    options: str
    exit: int | None
    wall_s: float
    tests: dict[str, int] = field(default_factory=dict)
    startup_s: float | None = None  # process start to the session's first moment (the telemetry's start)
    to_first_stage_s: float | None = None  # session start to the first stage's load
    stages: dict[str, float] = field(default_factory=dict)  # stage -> seconds under load, summed over its windows
    windows: dict[str, int] = field(default_factory=dict)  # stage -> number of windows (one per GPU before)
    between_s: float | None = None  # between the first stage's start and the last one's end, outside every window
    after_s: float | None = None  # the last stage's end to the process's end
    rounds_s: float = 0.0  # the confirmation rounds' wall time (values measured again after a miss)
    note: str = ""
    # sweep -> its phases, as the commit's workers timed them (results.json; none before they were kept)
    phases: dict[str, dict[str, float]] = field(default_factory=dict)
    wall_of_sweep: dict[str, float] = field(default_factory=dict)  # sweep -> its wall_s
    probe_phases: dict[str, float] = field(default_factory=dict)  # the probe's parts (python -m gpuaccept.probe --phases)


def environment(commit: str, previous_site: Path) -> dict[str, str]:
    env = dict(os.environ)
    if commit == "previous":
        env["PYTHONPATH"] = os.pathsep.join([str(previous_site), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _moment(text: str) -> float:
    return datetime.datetime.fromisoformat(text).timestamp()


def timed(label: str, commit: str, what: str, gpus: int, options: list[str], command: list[str], env: dict[str, str], work: Path) -> Run:
    """One command, its wall time, and where its time went (from its results.json, where it wrote one)."""
    reports = work / label
    # a kernel cache of the run's own, empty: CUDA keeps the kernels it compiled for a process (cuDNN's
    # attention, the DDP workers' first step: seconds) in ~/.nv/ComputeCache, so a run after another
    # would start warm where the run before it started cold; each run starts as on a new server
    env = {**env, "CUDA_CACHE_PATH": str(work / f"{label}.cuda-cache")}
    began = time.time()
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
        code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as expired:
        code, output = None, f"timed out after 900 s\n{expired.stdout or ''}"
    ended = time.time()
    work.mkdir(parents=True, exist_ok=True)
    (work / f"{label}.out").write_text(output if isinstance(output, str) else str(output), encoding="utf-8")
    run = Run(label, commit, what, gpus, " ".join(options), code, round(ended - began, 2))
    if what == "probe":
        run.probe_phases = _probe_phases(output if isinstance(output, str) else "")
        return run
    results = reports / "results.json"
    if not results.is_file():
        return run
    record = json.loads(results.read_text(encoding="utf-8"))
    for test in record.get("tests", []):
        run.tests[test["outcome"]] = run.tests.get(test["outcome"], 0) + 1
    measurements = (record.get("facts") or {}).get("measurements") or {}
    run.rounds_s = round(sum(round_["wall_s"] for round_ in measurements.get("rounds") or []), 2)
    for sweep in PHASED_SWEEPS:
        found = measurements.get(sweep) or {}
        if found.get("phases"):
            run.phases[sweep] = found["phases"]
        if "wall_s" in found:
            run.wall_of_sweep[sweep] = round(found["wall_s"], 2)
    # the session's first moment: the telemetry's start where the run sampled it (its start-up
    # ends there), else the run's own start (the quick level samples no telemetry: it loads nothing)
    telemetry = (record.get("facts") or {}).get("telemetry")
    started = telemetry["started_at"] if telemetry else (record.get("run") or {}).get("started_at")
    if not started:
        return run
    session = _moment(started)
    run.startup_s = round(session - began, 2)
    loads = (telemetry or {}).get("loads") or []
    if not loads:
        run.after_s = round(ended - session, 2)
        return run
    for window in loads:
        seconds = window["ended_s"] - window["started_s"]
        run.stages[window["stage"]] = round(run.stages.get(window["stage"], 0.0) + seconds, 2)
        run.windows[window["stage"]] = run.windows.get(window["stage"], 0) + 1
    first, last = min(w["started_s"] for w in loads), max(w["ended_s"] for w in loads)
    run.to_first_stage_s = round(first, 2)
    run.between_s = round((last - first) - sum(run.stages.values()), 2)
    run.after_s = round(ended - (session + last), 2)
    return run


def _probe_phases(output: str) -> dict[str, float]:
    """The probe's parts, from the JSON line `--phases` ends its stderr with ({} where there is none)."""
    for line in reversed(output.splitlines()):
        if line.startswith('{"probe_phases_s"'):
            return json.loads(line)["probe_phases_s"]
    return {}


def suite_command(what: str, reports: Path, profile: str, extra: list[str]) -> list[str]:
    if what == "health-check":
        return [sys.executable, "-m", "gpuaccept", "health-check", "--profile", profile, "--reports", str(reports), *extra]
    level = ["--level", "quick"] if what == "quick" else []
    return [sys.executable, "-m", "gpuaccept", "run", "--profile", profile, "--reports", str(reports), "-q", *level, *extra]


def gpus_of_machine() -> tuple[int, str]:
    names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, check=True)
    models = [line.strip() for line in names.stdout.splitlines() if line.strip()]
    return len(models), models[0] if models else ""


def profile_for(model: str, gpus: int) -> str | None:
    """The name of the shipped profile for `gpus` GPUs of `model`, where one matches (as --profile
    auto picks it): each commit reads it from its own shipped profiles (a previous commit may not
    read this one's file: a key added since is refused)."""
    from gpuaccept.profile import ProfileCatalog

    matching = [p for p in ProfileCatalog.with_shipped().load_all() if p.matches_machine(model, gpus)]
    return matching[0].path.stem if matching else None


def measure(args: argparse.Namespace) -> int:
    out, work = Path(args.out), Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    out.mkdir(parents=True, exist_ok=True)
    gpus, model = gpus_of_machine()
    deadline = time.monotonic() + args.budget_s
    runs: list[Run] = []
    left_out: list[str] = []

    def fits(label: str, seconds: float) -> bool:
        left = deadline - time.monotonic()
        if left < seconds:
            left_out.append(f"{label} (needs about {seconds:.0f} s, {max(0.0, left):.0f} s left)")
            return False
        return True

    def one(label: str, commit: str, what: str, count: int, options: list[str], profile: str) -> None:
        env = environment(commit, Path(args.previous_site))
        if count < gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(gpu) for gpu in range(count))
        if what == "probe":
            # this commit's probe says where its time went; the previous one's may not know the option
            command = [sys.executable, "-m", "gpuaccept.probe", *(["--phases"] if commit == "this" else [])]
        else:
            command = suite_command(what, work / label, profile, options)
        run = timed(label, commit, what, count, options, command, env, work)
        runs.append(run)
        print(f"{label}: exit {run.exit}, {run.wall_s:.1f} s {run.stages or ''}", flush=True)

    whole = args.profile or "auto"
    for index in range(args.quick_runs):
        for commit in COMMITS:  # the previous one first: it imports torch, warming its files for both
            for what in ("probe", "quick", "health-check"):
                if what == "probe" and index > 0:
                    continue
                label = f"{what}-{commit}-{index + 1}"
                if fits(label, EXPECTED_S[what]):
                    one(label, commit, what, gpus, [], whole)
    for commit in ("this", "previous"):
        label = f"standard-{commit}"
        if fits(label, expected_standard_s(commit, gpus)):
            one(label, commit, "standard", gpus, [], whole)
    for count in (1, 2, 4):
        if count >= gpus:
            continue
        subset = profile_for(model, count)
        label = f"standard-this-{count}gpu"
        if subset is None:
            left_out.append(f"{label} (no shipped profile for {count}x {model})")
        elif fits(label, expected_standard_s("this", count)):
            one(label, "this", "standard", count, [], subset)
    if gpus > 1:
        for commit in ("this", "previous"):
            label = f"standard-{commit}-xdist"
            if fits(label, expected_standard_s(commit, gpus, xdist=True)):
                one(label, commit, "standard", gpus, ["-n", str(gpus)], whole)
    text = report(runs, left_out, gpus, model, args.tag)
    print(text)
    (out / f"run-time-{args.tag}.md").write_text(text, encoding="utf-8")
    (out / f"run-time-{args.tag}.json").write_text(json.dumps([asdict(run) for run in runs], indent=1), encoding="utf-8")
    with tarfile.open(out / f"run-time-{args.tag}.tar.gz", "w:gz") as archive:
        for path in sorted(work.glob("*/results.json")) + sorted(work.glob("*.out")):
            archive.add(path, arcname=str(path.relative_to(work)))
    standard = [run for run in runs if run.what == "standard" and run.options == ""]
    return 1 if any(run.exit not in (0, None) for run in standard if run.gpus == gpus) else 0


def _ratio(mine: list[float], theirs: list[float]) -> str:
    if not mine or not theirs:
        return "-"
    return f"{statistics.median(mine) / statistics.median(theirs):.2f}"


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _stage_cell(run: Run, stage: str) -> str:
    """Seconds under load, and the windows they came in where more than one (a GPU after another)."""
    if stage not in run.stages:
        return "-"
    windows = run.windows.get(stage, 0)
    return f"{run.stages[stage]:.1f}" + (f" ({windows} windows)" if windows > 1 else "")


def projection(runs: list[Run], gpus: int) -> list[str]:
    """Each GPU's cost from this commit's standard runs: a least-squares line through (GPUs, wall time
    less the confirmation rounds, which a noisy machine adds and a healthy one need not) over the
    runs that measured the same stages as the run on the most GPUs (a run on one GPU has no DDP or
    NCCL stage: on the same line, its missing stages would count as a cost of the second GPU); the
    8-GPU run it predicts. The previous commit's per-GPU cost is its compute windows' mean (it
    loaded one GPU after another)."""
    standard = [run for run in runs if run.commit == "this" and run.what == "standard" and run.options == ""]
    standard.sort(key=lambda run: run.gpus)
    lines = ["", "### Each GPU's cost, and 8 GPUs projected", ""]
    alike = [run for run in standard if _stages_measured(run) == _stages_measured(standard[-1])] if standard else []
    points = [(run.gpus, run.wall_s - run.rounds_s) for run in alike]
    for run in standard:
        rounds = f" less {run.rounds_s:.1f} s of confirmation rounds" if run.rounds_s else ""
        left_out = "" if run in alike else f" (left out: it measured {', '.join(sorted(_stages_measured(run))) or 'no stage'} only)"
        lines.append(f"- {run.gpus} GPU(s): {run.wall_s:.1f} s{rounds}: {run.wall_s - run.rounds_s:.1f} s{left_out}")
    if len({count for count, _ in points}) >= 2:
        slope, base = _slope(points)
        lines += ["", (
            f"this commit, over the runs that measured the same stages: **{slope:.1f} s per GPU** (target <= 3 s); "
            f"**8 GPUs projected: {base + 8 * slope:.1f} s** (without confirmation rounds)"
        )]
        if all(run.phases for run in alike):
            measuring, _ = _slope([(run.gpus, measuring_s(run)) for run in alike])
            lines.append(
                f"of which the measurement alone (the steps the stages' workers timed: "
                f"{', '.join(f'{measuring_s(run):.1f} s on {run.gpus}' for run in alike)}): {measuring:.2f} s per GPU; "
                f"set-up, waits and the rest: {slope - measuring:.2f} s per GPU"
            )
            lines += _contexts_beside_memory_test(alike, base + 8 * slope)
    else:
        lines += ["", "this commit: fewer than two GPU counts that measured the same stages, no slope"]
    previous = next((run for run in runs if run.label == "standard-previous"), None)
    if previous is not None and previous.windows.get("compute"):
        per_gpu = previous.stages["compute"] / previous.windows["compute"]
        lines.append(
            f"previous commit: its compute stage ran one window per GPU, {per_gpu:.1f} s each: "
            f"8 GPUs projected {previous.wall_s + (8 - gpus) * per_gpu:.1f} s from its {gpus}-GPU run of {previous.wall_s:.1f} s"
        )
    return lines


DRIVER_BEFORE_GO = "start-up: driver before the go"


def _contexts_beside_memory_test(runs: list[Run], projected_s: float) -> list[str]:
    """What a straight line does not see: the later stages' sets start the CUDA driver and make
    their contexts beside the memory test, one process's context after another (three a GPU), so
    the time that takes grows with the GPUs while the memory test's does not; past its end, it is
    on the run's path. Its span at each GPU count (the longest set's), drawn on to 8 GPUs, and what
    of that would outlast the memory test."""
    points = [(run.gpus, span, test) for run in runs if (span := driver_span(run)) and (test := memory_test_s(run))]
    if len({gpus for gpus, _, _ in points}) < 2:
        return []
    slope, base = _slope([(gpus, span) for gpus, span, _ in points])
    at_eight = base + 8 * slope
    test = statistics.fmean(test for _, _, test in points)
    past = max(0.0, at_eight - test)
    measured = ", ".join(f"{span:.1f} s on {gpus}" for gpus, span, _ in points)
    return [
        f"the later stages' CUDA contexts, made beside the memory test ({test:.1f} s): {measured}; at 8 GPUs about "
        f"{at_eight:.1f} s, {past:.1f} s past the memory test's end: **8 GPUs projected with it: {projected_s + past:.1f} s**"
    ]


def driver_span(run: Run) -> float:
    """The longest time a set of the run took to start the CUDA driver before its go (0 where none did)."""
    return max((phases.get(DRIVER_BEFORE_GO, 0.0) for phases in run.phases.values()), default=0.0)


def memory_test_s(run: Run) -> float:
    """The slowest GPU's memory test in the run (0 where none ran)."""
    compute = run.phases.get("compute", {})
    return max((seconds for name, seconds in compute.items() if ": step: memory test on " in name), default=0.0)


def measuring_s(run: Run) -> float:
    """The seconds the run's stages spent measuring: the steps their workers timed (`step: ...`),
    without start-up, waits and holds; a per-GPU stage's GPUs measure at once, so its slowest GPU's
    steps count. 0 where the run kept no phases."""
    total = 0.0
    for phases in run.phases.values():
        per_gpu: dict[str, float] = {}
        for name, seconds in phases.items():
            gpu, _, part = name.partition(": ") if name.startswith("gpu") else ("", "", name)
            if part.startswith("step:"):
                per_gpu[gpu] = per_gpu.get(gpu, 0.0) + seconds
        total += max(per_gpu.values(), default=0.0)
    return round(total, 2)


def _slope(points: list[tuple[int, float]]) -> tuple[float, float]:
    """A least-squares line through (GPUs, seconds): its slope and its value at no GPU."""
    xs, ys = [float(x) for x, _ in points], [y for _, y in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum((x - mean_x) ** 2 for x in xs)
    return slope, mean_y - slope * mean_x


def _stages_measured(run: Run) -> frozenset[str]:
    """The stages that loaded the GPUs in `run` (a stage that cannot run there has a window of no length)."""
    return frozenset(stage for stage, seconds in run.stages.items() if seconds >= MIN_STAGE_S)


SHOWN_PHASES = 14  # the largest phases of a sweep shown; the rest summed on one line


def phase_tables(runs: list[Run]) -> list[str]:
    """Inside each stage of this commit's standard runs, and inside the probe: where the time went,
    the largest parts first. Phases overlap (a step holds the parts it timed; a GPU's phases run
    beside the other GPUs'): they are not meant to add up to the stage's time."""
    lines: list[str] = []
    for run in runs:
        if run.commit != "this" or not (run.phases or run.probe_phases):
            continue
        lines += ["", f"### Where the time went inside {run.label} ({run.gpus} GPU(s){', ' + run.options if run.options else ''})", ""]
        if run.probe_phases:
            shown = ", ".join(f"{name} {seconds:.2f}" for name, seconds in run.probe_phases.items())
            lines.append(f"probe (s): {shown}")
        for sweep, phases in run.phases.items():
            ordered = sorted(phases.items(), key=lambda item: -item[1])
            rest = ordered[SHOWN_PHASES:]
            parts = [f"{name} {seconds:.2f}" for name, seconds in ordered[:SHOWN_PHASES]]
            if rest:
                parts.append(f"{len(rest)} more {sum(seconds for _, seconds in rest):.2f}")
            wall = run.wall_of_sweep.get(sweep)
            lines.append(f"- **{sweep}**" + (f" (wall {wall:.1f} s)" if wall is not None else "") + ": " + "; ".join(parts))
    return lines


def report(runs: list[Run], left_out: list[str], gpus: int, model: str, tag: str) -> str:
    lines = [
        f"## Run time on {gpus}x {model} ({tag}), this commit beside the previous one",
        "",
        "| run | commit | GPUs | options | exit | tests | wall (s) | start-up | to first stage | "
        + " | ".join(STAGE_COLUMNS) + " | between stages | after last stage |",
        "| --- | --- | --- | --- | --- | --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in STAGE_COLUMNS) + " | ---: | ---: |",
    ]
    for run in runs:
        tests = ", ".join(f"{count} {outcome}" for outcome, count in sorted(run.tests.items()))
        stages = [_stage_cell(run, name) for name in STAGE_COLUMNS]
        lines.append(
            f"| {run.label} | {run.commit} | {run.gpus} | {run.options or '-'} | {run.exit} | {tests or '-'} | {run.wall_s:.1f} | "
            f"{_cell(run.startup_s)} | {_cell(run.to_first_stage_s)} | {' | '.join(stages)} | {_cell(run.between_s)} | "
            f"{_cell(run.after_s)} |"
        )

    def walls(commit: str, what: str, options: str = "", count: int = gpus) -> list[float]:
        return [r.wall_s for r in runs if r.commit == commit and r.what == what and r.options == options and r.gpus == count]

    xdist = f"-n {gpus}"
    lines += [
        "",
        "### Ratios, this commit over the previous one (medians of the runs above)",
        "",
        "| what | this (s) | previous (s) | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, mine, theirs in (
        ("standard run", walls("this", "standard"), walls("previous", "standard")),
        (f"standard run beside the previous one's `{xdist}`", walls("this", "standard"), walls("previous", "standard", xdist)),
        (f"standard run `{xdist}`", walls("this", "standard", xdist), walls("previous", "standard", xdist)),
        ("quick level", walls("this", "quick"), walls("previous", "quick")),
        ("health-check", walls("this", "health-check"), walls("previous", "health-check")),
        ("probe alone", walls("this", "probe"), walls("previous", "probe")),
    ):
        if mine or theirs:
            shown = [f"{statistics.median(w):.1f}" if w else "-" for w in (mine, theirs)]
            lines.append(f"| {name} | {shown[0]} | {shown[1]} | {_ratio(mine, theirs)} |")
    lines += projection(runs, gpus)
    lines += phase_tables(runs)
    if left_out:
        lines += ["", "Left out: " + "; ".join(left_out)]
    return "\n".join(lines) + "\n"


def prepare(args: argparse.Namespace) -> int:
    """The previous commit's installable files (pyproject, README, the package, its suites and
    profiles), from git, into a folder this checkout ignores, for a device call to carry."""
    target = Path(args.to)
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", args.ref, "pyproject.toml", "README.md", "src", "suites", "profiles"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    revision = subprocess.run(["git", "rev-parse", "--short", args.ref], capture_output=True, text=True, check=True).stdout.strip()
    (target / "REVISION").write_text(revision + "\n", encoding="utf-8")
    print(f"{target}: commit {revision}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python bench/run_time.py")
    commands = parser.add_subparsers(dest="command", required=True)
    before = commands.add_parser("prepare", help="here: the previous commit's tree into .prev/ for the device call to carry")
    before.add_argument("--ref", required=True, help="the commit to compare with (main's before this change)")
    before.add_argument("--to", default=".prev")
    before.set_defaults(handler=prepare)
    timing = commands.add_parser("measure", help="on the GPU machine: both commits' runs, timed")
    timing.add_argument("--previous-site", required=True, help="where the previous commit is installed (pip install --target)")
    timing.add_argument("--out", required=True)
    timing.add_argument("--work", default="/tmp/gpuaccept-run-time")
    timing.add_argument("--tag", default="machine")
    timing.add_argument("--profile", help="the whole machine's profile (default: --profile auto)")
    timing.add_argument("--quick-runs", type=int, default=2, help="quick levels and health checks per commit, alternating")
    timing.add_argument("--budget-s", type=float, default=480.0, help="items that would not fit are left out, and named")
    timing.set_defaults(handler=measure)
    args = parser.parse_args()
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
