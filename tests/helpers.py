"""Shared helpers for the project's own tests: real recordings, and faults made from them."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path

import pytest

from gpuaccept.facts import Facts, load_facts, parse_facts
from gpuaccept.facts.machine import CudaFacts
from gpuaccept.facts.run_record import RunRecord, TestRecord, parse_results
from gpuaccept.facts.verdict import Verdict
from gpuaccept.probe.collect import collect_facts
from gpuaccept.probe.nvml import ReplayNvml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
EXAMPLES = ROOT / "examples" / "facts"
REFERENCE = DATA / "reference" / "h200x4"  # captures from a real 4xH200 machine


def checks_of_areas(*areas: str) -> set[str]:
    """The names of the checks of these areas (vocabulary/areas.py), as they declare them: what facts
    without health readings, per-GPU loads or telemetry could not judge."""
    from gpuaccept.checks.declare import declared_checks

    return {found.declaration.name for found in declared_checks() if found.declaration.area in areas}

# Tests that run torch skip where it is not installed. Asked of the installed packages, not by importing
# torch: its import costs about 2 s of CPU, which collection would pay even where those tests are deselected.
needs_torch = pytest.mark.skipif(find_spec("torch") is None, reason="torch is not installed")


def example_facts(name: str) -> Facts:
    return load_facts(EXAMPLES / f"{name}.json")


def older_example(name: str) -> Path:
    """The example's facts as first recorded, before the health readings, the per-GPU loads and the
    telemetry existed (h200x4-measured, h200x2-measured): what facts that lack areas the profile asks
    for are judged on."""
    return DATA / "facts" / f"{name}-older.json"


def older_example_facts(name: str) -> Facts:
    return load_facts(older_example(name))


def nvml_replay(name: str) -> ReplayNvml:
    return ReplayNvml.from_file(DATA / "nvml" / f"{name}.json")


def cuda_seeing(replay: ReplayNvml, nvml_indices: list[int], peer: bool = True, visible: str | None = None) -> CudaFacts:
    """CUDA facts as a process would see them with the given NVML GPUs visible, in that order."""
    uuids = [replay.query("uuid", i).removeprefix("GPU-") for i in nvml_indices]
    n = len(uuids)
    return CudaFacts(
        torch_version="2.11.0+cu130",
        cuda_runtime="13.0",
        device_count=n,
        visible_devices=visible,
        uuids=uuids,
        peer_access=[[None if i == j else peer for j in range(n)] for i in range(n)],
    )


def probe_replay(replay: ReplayNvml, nvml_indices: list[int] | None = None, **cuda_options) -> Facts:
    count = replay.query("device_count")
    indices = list(range(count)) if nvml_indices is None else nvml_indices
    environ = {} if cuda_options.get("visible") is None else {"CUDA_VISIBLE_DEVICES": cuda_options["visible"]}
    return collect_facts(replay, cuda_seeing(replay, indices, **cuda_options), environ)


def mutated(facts: Facts, change: Callable[[dict], None]) -> Facts:
    """A copy of `facts` with `change` applied to its JSON form: how a fault is made from a real recording."""
    data = facts.model_dump(mode="json")
    change(data)
    return parse_facts(json.dumps(data), "mutated facts")


def cuda_sees_only(data: dict, count: int) -> None:
    """The facts' CUDA record as CUDA reports the first `count` GPUs alone (CUDA_VISIBLE_DEVICES, a
    GPU lost): its count, UUIDs and peer-access matrix of those, as a probe records them. Facts of
    fewer GPUs beside CUDA's record of more are facts no probe gives."""
    cuda = data["cuda"]
    cuda["device_count"] = count
    cuda["uuids"] = cuda["uuids"][:count]
    cuda["peer_access"] = [row[:count] for row in cuda["peer_access"][:count]]
    if isinstance(cuda.get("multicast"), list):
        cuda["multicast"] = cuda["multicast"][:count]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def alias_bomb(merge_keys: bool) -> str:
    """A profile of a few hundred bytes that stands for billions of values: nine aliases of nine ..."""
    lines = ['schema: 1\ngpus: {count: 4, model: "NVIDIA H200"}', "x-0: &l0 {a: lol, b: lol, c: lol, d: lol, e: lol, f: lol, g: lol}"]
    for level in range(1, 10):
        if merge_keys:
            # merged keys are not new keys: each level adds one of its own
            lines.append(f"x-{level}: &l{level} {{<<: [{', '.join([f'*l{level - 1}'] * 9)}], k{level}: lol}}")
        else:
            lines.append(f"x-{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


def results_data(path: Path) -> dict:
    """A results file as plain JSON data: what a fault or an older file is made from."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def run_record(data: dict, name: str = "edited results") -> RunRecord:
    """Plain results data read as the command reads a file."""
    return parse_results(json.dumps(data), name)


def with_verdicts(record: RunRecord, pick: Callable[[TestRecord], bool], **changes) -> RunRecord:
    """`record` with `changes` made to the verdict of every test `pick` chooses."""

    def changed(test: TestRecord) -> TestRecord:
        if not pick(test) or test.verdict is None:
            return test
        data = {**test.verdict.model_dump(mode="json"), **changes}
        return test.model_copy(update={"verdict": Verdict.from_data(data)})

    return record.with_tests([changed(test) for test in record.tests])


def with_verdict(record: RunRecord, test_id: str, **changes) -> RunRecord:
    if not any(test.id == test_id for test in record.tests):
        raise KeyError(test_id)
    return with_verdicts(record, lambda test: test.id == test_id, **changes)
