"""The manual as a reader follows it: every profile it shows validates, and every `gpu-accept`
command it shows runs here as shown (in a folder holding the files it names, made from the
project's real captures and runs) or is named below as one that needs a GPU or another machine.

Examples are found in the markdown itself (README.md and docs/*.md), so a new one is covered
the day it is written: a command in neither list fails test_every_command_is_run_or_named.
Where a console block shows a command's output (`$ gpu-accept ...` and the lines under it), the
command prints those lines.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from gpuaccept.profile import ProfileCatalog, load_profile
from gpuaccept.profile.spec import ProfileSpec
from tests.helpers import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PROFILE_KEYS = {field.alias or name for name, field in ProfileSpec.model_fields.items()}
_COMMAND = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S+\s+)*gpu-accept\s+[a-z][\w-]*(?=\s|$)(?!:)")


@dataclass(frozen=True)
class Example:
    doc: Path
    line: int
    command: str  # as shown, without its prompt and its trailing comment
    output: tuple[str, ...] | None  # the lines a console block shows under it, where it shows them
    files: tuple[tuple[str, str], ...]  # files the block writes before it (`$ cat NAME` and their text)

    def __str__(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}: {self.command}"


def _without_comment(line: str) -> str:
    """A shell line without its trailing `# comment` (a # inside quotes or a word is kept), its
    spaces as one."""
    quote = ""
    for at, character in enumerate(line):
        if quote:
            quote = "" if character == quote else quote
        elif character in "'\"":
            quote = character
        elif character == "#" and (at == 0 or line[at - 1].isspace()):
            line = line[:at]
            break
    return " ".join(line.split())


def examples_of(doc: Path) -> list[Example]:
    text = doc.read_text(encoding="utf-8")
    found = []
    for block in re.finditer(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M):
        first = text[: block.start(1)].count("\n") + 1
        lines = block.group(1).splitlines()
        console = any(line.startswith("$ ") for line in lines)
        files: list[tuple[str, str]] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            shown = line[2:] if line.startswith("$ ") else line
            if console and not line.startswith("$ "):
                i += 1
                continue
            cat = re.fullmatch(r"cat (\S+)", shown.strip())
            if cat:
                body = []
                while i + 1 < len(lines) and not lines[i + 1].startswith("$ "):
                    i += 1
                    body.append(lines[i])
                files.append((cat.group(1), "\n".join(body) + "\n"))
            elif _COMMAND.match(shown.strip()):
                command, start = shown.strip(), i
                while command.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command[:-1] + " " + lines[i].strip()
                output = None
                if console:
                    after = []
                    while i + 1 < len(lines) and not lines[i + 1].startswith("$ "):
                        i += 1
                        after.append(lines[i])
                    output = tuple(after)
                found.append(Example(doc, first + start, _without_comment(command), output, tuple(files)))
            i += 1
    return found


EXAMPLES = [example for doc in DOCS for example in examples_of(doc)]

# Commands that touch this machine's GPUs, or need a Slurm node, a cluster or a node_exporter's
# folder: run on the GPU machines by scripts/gpu-session.sh, and by the tests named, not here.
NEEDS_ANOTHER_MACHINE = {
    "gpu-accept run": "probes and measures this machine's GPUs",
    'gpu-accept run --profile h200-4-nvswitch -k "nvlink or busbw"': "probes a 4xH200",
    "gpu-accept record -o facts.json --measure": "probes and measures this machine's GPUs",
    "gpu-accept run --save-baseline base.json": "probes and measures this machine's GPUs",
    "gpu-accept run --level quick": "probes this machine's GPUs (tests/test_live_path_cpu.py runs the level on replayed NVML)",
    "gpu-accept burn-in --duration 30m": "loads the GPUs for 30 minutes",
    "gpu-accept run --baseline base.json --max-regression 5%": "measures this machine's GPUs",
    "GPUACCEPT_INJECT_SLOW_GEMM=gpu1 GPUACCEPT_INJECT_CORRUPT_GEMM=gpu2 GPUACCEPT_INJECT_MEMTEST_FLIP=gpu3 gpu-accept run "
    "--profile h100-1": "fault drills on an H100's GPUs (scripts/gpu-session.sh drills)",
    "GPUACCEPT_INJECT_CORRUPT_GEMM=gpu0 gpu-accept burn-in --duration 5m": "a burn-in drill on a GPU (gpu-session.sh burn-drills)",
    "gpu-accept torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint node01:29400 --rdzv-id "
    "accept-$(date +%Y%m%d) -- --profile examples/profiles/cluster-h100-8-ndr.yaml --out reports/cluster":
        "two 8-GPU nodes (tests/test_cluster_live.py runs two nodes on gloo)",
    "gpu-accept run --metrics /var/lib/node_exporter/textfile/gpu-accept-run.prom": "probes this machine, writes node_exporter's folder",
    "gpu-accept health-check --metrics /var/lib/node_exporter/textfile/gpu-accept-health.prom":
        "probes this machine, writes node_exporter's folder (tests/test_metrics.py)",
    "gpu-accept burn-in --duration 2h --metrics /var/lib/node_exporter/textfile/gpu-accept-burnin.prom": "a 2-hour burn-in",
    "gpu-accept health-check --on-fail drain": "drains a Slurm node (tests/test_slurm.py runs it under slurmd)",
    "gpu-accept health-check --on-fail drain --on-error drain": "drains a Slurm node (tests/test_slurm.py)",
    "gpu-accept health-check --on-fail drain --node gpu017": "drains a Slurm node (tests/test_slurm.py)",
}


def results_of_host(source: str, host: str) -> str:
    document = json.loads((ROOT / "examples" / "results" / source).read_text(encoding="utf-8"))
    document["environment"]["host"] = host
    return json.dumps(document)


REFERENCE = ROOT / "tests" / "data" / "reference" / "h200x4"  # command outputs of the reference 4xH200
# the files the examples name, made from the project's own captures and runs
WORKSPACE = {
    "topo.txt": lambda: (REFERENCE / "nvidia-smi-topo-m.txt").read_text(encoding="utf-8"),
    "nvlink-s.txt": lambda: (REFERENCE / "nvidia-smi-nvlink-s-head.txt").read_text(encoding="utf-8"),
    "all_reduce_perf.log": lambda: (REFERENCE / "nccl-tests-all_reduce_perf-g4.txt").read_text(encoding="utf-8"),
    "vendor-nccl-tests.log": lambda: (REFERENCE / "nccl-tests-all_reduce_perf-g4.txt").read_text(encoding="utf-8"),
    "facts.json": lambda: (ROOT / "examples" / "facts" / "h200x4-measured.json").read_text(encoding="utf-8"),
    "reports/results.json": lambda: (ROOT / "examples" / "results" / "h200x4.json").read_text(encoding="utf-8"),
    "burnin/r12-07/results.json": lambda: results_of_host("h200x4.json", "r12-07"),
    "burnin/r12-08/results.json": lambda: results_of_host("h200x4-nccl-p2p-disabled.json", "r12-08"),
}
# absolute paths the examples write to, kept inside the test's folder
OUTSIDE = {"/var/lib/node_exporter/textfile/": "textfile/"}


def named_files() -> dict[str, str]:
    """Files the manual itself writes out: a YAML block that begins `# NAME.yaml`."""
    files = {}
    for doc in DOCS:
        for block in re.finditer(r"^```ya?ml\n(# (\S+\.ya?ml)\n.*?)^```", doc.read_text(encoding="utf-8"), re.S | re.M):
            files[block.group(2)] = block.group(1)
    return files


def test_every_command_is_run_or_named():
    assert EXAMPLES, "no example found: the extraction is broken"
    unknown = [str(e) for e in EXAMPLES if e.command not in NEEDS_ANOTHER_MACHINE and not runs_here(e)]
    assert unknown == [], "a command in the docs that no test runs: make it run in test_docs.py, or name what it needs"
    stale = set(NEEDS_ANOTHER_MACHINE) - {e.command for e in EXAMPLES}
    assert stale == set(), "named as needing another machine, but no longer in the docs"


def runs_here(example: Example) -> bool:
    return example.command not in NEEDS_ANOTHER_MACHINE


def _gpu_accept_on_path(folder: Path) -> dict[str, str]:
    command = folder / "bin" / "gpu-accept"
    command.parent.mkdir(parents=True, exist_ok=True)
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gpuaccept "$@"\n')
    command.chmod(0o755)
    environment = {key: value for key, value in os.environ.items() if not key.startswith("GPUACCEPT_")}
    environment["PATH"] = f"{command.parent}{os.pathsep}{environment.get('PATH', '')}"
    return environment


@pytest.mark.slow
@pytest.mark.parametrize("doc", [doc for doc in DOCS if any(runs_here(e) for e in EXAMPLES if e.doc == doc)],
                         ids=lambda doc: doc.name)
def test_the_commands_of_a_page_run_as_shown(tmp_path, doc):
    workspace = tmp_path / "work"
    for name, text in {**{name: make() for name, make in WORKSPACE.items()}, **named_files()}.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(text, encoding="utf-8")
    (workspace / "textfile").mkdir()
    (workspace / "examples").symlink_to(ROOT / "examples")  # the paths the pages name, as from a checkout
    environment = _gpu_accept_on_path(tmp_path)
    for example in (e for e in EXAMPLES if e.doc == doc and runs_here(e)):
        for name, text in example.files:
            (workspace / name).write_text(text, encoding="utf-8")
        command = example.command
        for outside, inside in OUTSIDE.items():
            command = command.replace(outside, inside)
        done = subprocess.run(["bash", "-c", command], cwd=workspace, env=environment, capture_output=True, text=True,
                              timeout=300)
        said = done.stdout + done.stderr
        assert done.returncode in (0, 1, 2) and "Traceback" not in said, f"{example}\n{said[-3000:]}"
        for written in re.findall(r"(?:-o|--output|--html|--save-baseline|--db)\s+(\S+)", command):
            assert (workspace / written).exists(), f"{example}: {written} not written\n{said[-2000:]}"
        if example.output:
            shown = [_comparable(line) for line in example.output if _its_own(line)]
            printed = iter(_comparable(line.replace(f"{ROOT}/", "")) for line in said.splitlines())
            missing = [line for line in shown if not any(line == other for other in printed)]  # in the order shown
            assert missing == [], f"{example}: the page shows lines it does not print (in that order): {missing}"


# pytest's own lines in a page's output: its progress and counts, shown trimmed
_PYTEST_LINE = re.compile(r"^(collected \d+ items|suites/\S+ [.sFExX]*|=+ .* in [\d.]+s =+|=+ test session starts =+|"
                          r"(platform|rootdir|configfile|plugins)\b.*)$")


def _its_own(line: str) -> bool:
    """A line the command itself prints, as a page shows it: not a `...` where lines were left out,
    not pytest's progress."""
    return bool(line.strip()) and line.strip() != "..." and not _PYTEST_LINE.match(line.strip())


def _comparable(line: str) -> str:
    return " ".join(line.split())


def profile_blocks() -> list[tuple[str, str]]:
    """Every YAML block of the docs that is a profile or a part of one (its keys are profile
    sections), as a whole profile: a part goes on top of a shipped profile."""
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for block in re.finditer(r"^```ya?ml\n(.*?)^```", text, re.S | re.M):
            data = yaml.safe_load(block.group(1))
            if not isinstance(data, dict) or not set(data) <= PROFILE_KEYS:
                continue
            body = block.group(1)
            if "schema" not in data:
                body = "schema: 1\nextends: h200-4-nvswitch\n" + body
            found.append((f"{doc.relative_to(ROOT)}:{text[: block.start()].count(chr(10)) + 1}", body))
    return found


@pytest.mark.parametrize("where, body", profile_blocks(), ids=lambda value: value if ":" in str(value)[:40] else "")
def test_every_profile_in_the_docs_validates(tmp_path, where, body):
    path = tmp_path / "documented.yaml"
    path.write_text(body, encoding="utf-8")
    load_profile(path, ProfileCatalog.with_shipped().base_folders())  # a ProfileError names the line and key


def test_the_docs_find_the_examples_they_hold():
    # the extraction itself: the demo of the README, a console block's output and the file it writes
    commands = {e.command for e in EXAMPLES}
    assert "gpu-accept run --profile h200-4-nvswitch --facts examples/facts/h200x4-measured.json" in commands
    validate = next(e for e in EXAMPLES if e.command == "gpu-accept profile validate my-server.yaml")
    assert validate.files[0][0] == "my-server.yaml" and "memory_gib: 140" in validate.files[0][1]
    assert validate.output and validate.output[0].startswith("my-server.yaml:6: gpus.memory_gib: unknown key")
    assert len(profile_blocks()) >= 7 and "my-server.yaml" in named_files()


def test_no_page_repeats_a_heading():
    for doc in DOCS:
        text = re.sub(r"^```.*?^```", "", doc.read_text(encoding="utf-8"), flags=re.S | re.M)  # comments in code are no headings
        headings = re.findall(r"^#+ .*$", text, re.M)
        repeated = {heading for heading in headings if headings.count(heading) > 1}
        assert repeated == set(), f"{doc.name} repeats {sorted(repeated)}"
