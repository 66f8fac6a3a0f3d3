"""Hostile and impossible inputs, each made from a real capture, recording or run the way a round
of them was made: one line naming the file or option and what is wrong, the exit code that tells
the truth (2: could not judge), no traceback, nothing written where nothing should be.

Each row names the class it stands for; the facts a probe could never give are in
test_facts_relations.py, the health readings in test_health.py, the import shapes in
test_import_shapes.py: this table runs the commands people type.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuaccept.cli import main
from tests.helpers import DATA, EXAMPLES, ROOT

IMPORTS = DATA / "imports"
REFERENCE = DATA / "reference" / "h200x4"
RUN = ROOT / "examples" / "results" / "h200x4.json"
FAILED_RUN = ROOT / "examples" / "results" / "h200x4-nccl-p2p-disabled.json"


def copy_of(source: Path, change: Callable[[str], str] = lambda text: text, name: str | None = None) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        path = folder / (name or source.name)
        path.write_text(change(source.read_text(encoding="utf-8")), encoding="utf-8")
        return path

    return make


def facts_with(change: Callable[[dict], None], source: Path = EXAMPLES / "h200x4-measured.json") -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        data = json.loads(source.read_text(encoding="utf-8"))
        change(data)
        path = folder / "facts.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        return path

    return make


def busbw_times(factor: float) -> Callable[[str], str]:
    """The out-of-place busbw of the rows from 1 GiB up of a reference log times `factor`; algbw and
    time untouched."""
    def change(text: str) -> str:
        out = []
        for line in text.splitlines():
            cells = line.split()
            if len(cells) > 8 and cells[0].isdigit() and cells[2] == "bfloat16" and int(cells[0]) >= 1 << 30:
                line = line.replace(f" {cells[7]} ", f" {float(cells[7]) * factor:.2f} ", 1)
            out.append(line)
        return "\n".join(out) + "\n"

    return change


def sick(data: dict) -> None:
    data["gpus"][2]["pcie"]["width_current"] = 4  # a GPU down to x4: test_pcie_width fails it


def three_installed(data: dict) -> None:
    data["system"]["installed_gpus"] = data["system"]["installed_gpus"][:3]


def nothing(folder: Path) -> Path:
    return folder


@dataclass(frozen=True)
class Hostile:
    what: str  # the class of input it stands for
    make: Callable[[Path], Path]  # the input, made in the test's folder
    argv: Callable[[Path, Path], list[str]]  # the command, given the input and the folder
    said: str  # the last line on stderr ends with this
    code: int = 2
    runs_the_suites: bool = False  # `gpu-accept run`: pytest in this process, seconds each


ROWS = [
    Hostile("a multi-node log whose # Using devices block is empty, alone", copy_of(
        IMPORTS / "a100-2node-roce-nccl-tests-all_reduce.txt",
        lambda t: "".join(line for line in t.splitlines(keepends=True) if "Rank " not in line)),
        lambda path, tmp: ["import", str(path)],
        "its 16 ranks ran as several processes; import it with the machine's nvidia-smi topo -m or nvlink -s"),
    Hostile("an nccl-tests log of nGpus 0", copy_of(REFERENCE / "nccl-tests-all_reduce_perf-g4.txt",
                                                   lambda t: t.replace("nGpus 4", "nGpus 0")),
            lambda path, tmp: ["import", str(path), "-o", str(tmp / "facts.json")],
            "the header says nThread 1 nGpus 0: a run on no GPU; its rows are no measurement of one"),
    Hostile("run --import of a log whose busbw is 209x the links' peak", copy_of(
        REFERENCE / "nccl-tests-all_reduce_perf-g4.txt", busbw_times(209), "all_reduce_perf.log"),
        lambda path, tmp: ["run", "--import", str(path), str(REFERENCE / "nvidia-smi-topo-m.txt"),
                           str(REFERENCE / "nvidia-smi-nvlink-s-head.txt"), "--profile", "h200-4-nvswitch", "--reports",
                           str(tmp / "reports")],
        "all_reduce_perf.log:25: 74042.4 GB/s is more than 956.232 GB/s, 2x the most a GPU's links carry here: not a measurement "
        "of a machine"),
    Hostile("profile init -o a full disk", nothing,
            lambda path, tmp: ["profile", "init", "--from-text", str(IMPORTS / "rtxa6000-3-bridged-pair-topo-m-nvlink-s.txt"),
                               "--name", "x", "-o", "/dev/full"],
            "/dev/full: cannot write it (No space left on device)"),
    Hostile("profile init --from a run that failed (baseline save refuses it too)", nothing,
            lambda path, tmp: ["profile", "init", "--from", str(FAILED_RUN), "--name", "x", "-o", str(tmp / "x.yaml")],
            "a golden machine's run is a picture of a healthy machine; make the profile from runs that passed"),
    Hostile("profile init of a model that is a wildcard: written as itself, matching no other GPU", copy_of(
        IMPORTS / "rtxa6000-3-bridged-pair-topo-m-nvlink-s.txt", lambda t: t.replace("NVIDIA RTX A6000", "NVIDIA*")),
        lambda path, tmp: ["profile", "init", "--from-text", str(path), "--name", "x", "-o", str(tmp / "x.yaml")],
        "review it, then gpu-accept profile validate {tmp}/x.yaml", code=0),
    Hostile("an endless --confirm", nothing,
            lambda path, tmp: ["run", "--facts", str(EXAMPLES / "h200x4.json"), "--profile", "h200-4-nvswitch", "--confirm",
                               "1" + "0" * 30, "--reports", str(tmp / "reports")],
            "the number of measurements more to make, 0 to 10 (a value that misses its criterion 10 times more is no one-off dip)"),
    Hostile("facts of 3 installed GPUs where NVML counts 4", facts_with(three_installed),
            lambda path, tmp: ["run", "--facts", str(path), "--profile", "h200-4-nvswitch", "--reports", str(tmp / "reports")],
            "system.installed_gpus: lists 3 GPU(s) and system.nvml_gpu_count is 4: NVML lists every GPU it counts"),
    Hostile("sick facts listed with --co: nothing judged is no pass", facts_with(sick),
            lambda path, tmp: ["run", "--facts", str(path), "--profile", "h200-4-nvswitch", "--reports", str(tmp / "reports"),
                               "--co", "-q"],
            "nothing judged: --collect-only lists the tests without running them (exit 2)", runs_the_suites=True),
    Hostile("sick facts planned with --setup-plan: nothing judged is no pass", facts_with(sick),
            lambda path, tmp: ["run", "--facts", str(path), "--profile", "h200-4-nvswitch", "--reports", str(tmp / "reports"),
                               "--setup-plan", "-q", "-k", "pcie_width"],
            "nothing judged: --setup-plan plans the tests without running them (exit 2)", runs_the_suites=True),
]


@pytest.mark.parametrize("row", [r for r in ROWS if not r.runs_the_suites] +
                         [pytest.param(r, marks=pytest.mark.slow) for r in ROWS if r.runs_the_suites],
                         ids=lambda row: row.what)
def test_a_hostile_input_gets_one_line_and_the_exit_code_that_tells_the_truth(tmp_path, capsys, row):
    given = row.make(tmp_path)
    assert main(row.argv(given, tmp_path)) == row.code
    err = capsys.readouterr().err
    # what the command says of the input: not what an import read, nor a profile's warnings
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("gpu-accept: import:", "gpu-accept: warning:"))]
    assert "Traceback" not in err and lines, err
    assert lines[-1].endswith(row.said.format(tmp=tmp_path)), lines[-1]
    if row.code == 2:
        assert len(lines) == 1, lines  # one line says what is wrong
        assert not (tmp_path / "x.yaml").exists()
