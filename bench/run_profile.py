"""Where a run's own process spends its time, from py-spy's samples of it (`scripts/gpu-session.sh
TAG run-profile`: `py-spy record --idle --threads --rate R --format raw`, waits included).

The main thread's samples are counted by the part of the run they fall in (the command before
pytest, pytest's configure with what it waits for, the collection, the tests with the stages'
waits, the reports at the end), each as seconds at the sampling rate; the other threads by name.
py-spy slows the process it samples (more at higher rates): the parts are to be compared with
each other, not with a run's wall time.

    python bench/run_profile.py runs/.../run-profile-h200-4-standard.txt --rate 200
"""

from __future__ import annotations

import argparse
import collections
import gzip
from pathlib import Path

# the parts of a run, by a frame its main thread's stack holds: the first that matches names it
# (the order matters: a wait inside pytest_configure is named by the wait)
PARTS = [
    ("configure: waiting for torch's check", "TorchCheck.passed"),
    ("configure: waiting for the probe", "RunContext.build"),
    ("configure: stages set up ahead", "MeasurementStore.expect"),
    ("configure: the rest", "pytest_configure"),
    ("the command's argument check (pytest's plugins imported)", "_refuse_what_pytest_refuses"),
    ("collection", "pytest_collection ("),
    ("session start", "pytest_sessionstart"),
    ("tests: a stage measured (its workers' wait and run)", "MeasurementStore._measure"),
    ("tests: health snapshot after a stage", "SnapshotAfterStage.__call__"),
    ("tests: the rest (judging, recording)", "pytest_runtestloop"),
    ("end: report.html drawn", "render_html"),
    ("end: the other reports", "pytest_sessionfinish"),
    ("end: pytest's unconfigure", "pytest_unconfigure"),
    ("the command before pytest (imports, options)", "_Prepared.__init__"),
]


def read(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text(encoding="utf-8")
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    return stacks


def part_of(frames: list[str]) -> str:
    for name, marker in PARTS:
        if any(frame.startswith(marker) for frame in frames):
            return name
    if any(frame.startswith("_find_and_load") for frame in frames[:8]):
        return "the command's imports"
    return "elsewhere (pytest between hooks, exit)"


def summarize(stacks: list[tuple[list[str], int]], rate: float) -> tuple[dict[str, float], dict[str, float]]:
    threads: collections.Counter[str] = collections.Counter()
    parts: collections.Counter[str] = collections.Counter()
    for frames, count in stacks:
        thread = frames[0].split(": ", 1)[-1] if frames and frames[0].startswith("thread") else "?"
        threads[thread] += count
        if thread == "MainThread":
            parts[part_of(frames[1:])] += count
    return ({name: count / rate for name, count in parts.most_common()},
            {name: count / rate for name, count in threads.most_common()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profiles", nargs="+", type=Path, help="py-spy's raw output (--format raw --threads), or it gzipped")
    parser.add_argument("--rate", type=float, default=200, help="the samples a second it was recorded at")
    args = parser.parse_args(argv)
    for path in args.profiles:
        parts, threads = summarize(read(path), args.rate)
        print(f"### {path.name}\n\n| the main thread's time in | s (sampled) |\n| --- | ---: |")
        for name, seconds in parts.items():
            print(f"| {name} | {seconds:.2f} |")
        print(f"| **the main thread, in all** | **{sum(parts.values()):.2f}** |\n")
        print("threads: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in threads.items()) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
