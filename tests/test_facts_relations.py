"""Facts that cannot all be true are refused at load, one line naming the key and the contradiction.

Each case is a real recording (examples/facts, tests/data/facts) with one relation between its
facts broken: a judged verdict on such a file would be a verdict on a machine that does not exist.
"""

from __future__ import annotations

import json

import pytest

from gpuaccept.errors import FactsError
from gpuaccept.facts import load_facts, parse_facts
from tests.helpers import DATA, EXAMPLES

H200X4 = EXAMPLES / "h200x4-measured.json"
HEALTH = DATA / "facts" / "h200x2-health-measured.json"


def _set(path: str, value):
    def change(data: dict) -> None:
        *parents, last = path
        for part in parents:
            data = data[part]
        data[last] = value

    return change


def _copy(source: tuple, target: tuple):
    def change(data: dict) -> None:
        def at(where: tuple):
            node = data
            for part in where:
                node = node[part]
            return node

        *parents, last = target
        at(tuple(parents))[last] = json.loads(json.dumps(at(source)))

    return change


def _append_copy(where: tuple, index: int, **changes):
    def change(data: dict) -> None:
        node = data
        for part in where:
            node = node[part]
        node.append({**json.loads(json.dumps(node[index])), **changes})

    return change


def _measured_again_ten_times_slower(where: tuple, index: int):
    def change(data: dict) -> None:
        node = data
        for part in where:
            node = node[part]
        first = node[index]
        slower = {"time_us": first["time_us"] * 10, "algbw_GBps": first["algbw_GBps"] / 10, "busbw_GBps": first["busbw_GBps"] / 10}
        node.append({**first, **slower})

    return change


def _scale(where: tuple, field: str, factor: float):
    def change(data: dict) -> None:
        node = data
        for part in where:
            node = node[part]
        node[field] = node[field] * factor

    return change


CASES = [
    # (recording, change, the key named, words of the contradiction)
    (H200X4, _copy(("gpus", 0, "uuid"), ("gpus", 2, "uuid")), "gpus[2].uuid", "is also the uuid of gpus[0]"),
    (H200X4, _copy(("gpus", 1, "pci_bus_id"), ("gpus", 3, "pci_bus_id")), "gpus[3].pci_bus_id", "is also the pci_bus_id of gpus[1]"),
    (H200X4, _copy(("gpus", 0, "nvml_index"), ("gpus", 1, "nvml_index")), "gpus[1].nvml_index", "two GPUs cannot share one"),
    (H200X4, _set(("links", 0, "gpus"), [0, 7]), "links[0].gpus", "names gpu7, which is not in these facts (4 GPU(s)"),
    (H200X4, _set(("links", 0, "gpus"), [2, 2]), "links[0].gpus", "links gpu2 to itself"),
    (H200X4, _append_copy(("links",), 0, link_type="PIX"), "links[6].gpus", "is also links[0]: a pair is listed once"),
    (H200X4, _set(("p2p", 0, "gpus"), [0, 4]), "p2p[0].gpus", "names gpu4"),
    (H200X4, _set(("p2p", 0, "gpus"), [1, 1]), "p2p[0].gpus", "to itself"),
    (H200X4, _append_copy(("p2p",), 3, cuda_can_access_peer=False), "p2p[12].gpus", "is also p2p[3]"),
    (
        H200X4,
        _measured_again_ten_times_slower(("measurements", "collectives", "results"), 0),
        "measurements.collectives.results[15]",
        "is measured again here (first at [0])",
    ),
    (H200X4, _set(("measurements", "collectives", "results", 0, "time_us"), 0.0), "measurements.collectives.results[0].time_us", "in 0 us"),
    (
        H200X4,
        _scale(("measurements", "collectives", "results", 0), "busbw_GBps", 2000),
        "measurements.collectives.results[0].busbw_GBps",
        "the most a GPU's links carry here",
    ),
    (
        H200X4,
        _scale(("measurements", "collectives", "results", 0), "algbw_GBps", 1.5),
        "measurements.collectives.results[0].algbw_GBps",
        "GB/s is not 268435456 bytes in",
    ),
    (H200X4, _scale(("measurements", "collectives", "results", 0), "busbw_GBps", 0.5), "results[0].busbw_GBps", "nccl-tests' factor"),
    (H200X4, _set(("measurements", "pairwise", "results", 0, "gpus"), [0, 9]), "measurements.pairwise.results[0].gpus", "names gpu9"),
    (HEALTH, _set(("health", "snapshots", 2, "taken_at"), "2026-11-23T00:50:00.000+00:00"), "health.snapshots[2].taken_at", "before"),
    (HEALTH, _set(("health", "snapshots", 3, "taken_at"), "yesterday"), "health.snapshots[3].taken_at", "'yesterday' is not a time"),
    (HEALTH, _set(("health", "snapshots", 3, "taken_at"), "2026-11-23T00:58:50"), "health.snapshots[3].taken_at", "is not a time"),
    (HEALTH, _set(("health", "snapshots", 5, "gpu"), 2), "health.snapshots[5].gpu", "names gpu2"),
    (HEALTH, _set(("measurements", "compute", "results", 0, "gpu"), 3), "measurements.compute.results[0].gpu", "names gpu3"),
    (HEALTH, _set(("measurements", "copies", "results", 0, "gpus"), [4]), "measurements.copies.results[0].gpus", "names gpu4"),
    (
        HEALTH,
        _append_copy(("measurements", "compute", "results"), 0),
        "measurements.compute.results[",
        "measured again here",
    ),
]


@pytest.mark.parametrize("recording, change, key, words", CASES, ids=[f"{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_facts_that_contradict_each_other_are_refused_naming_the_key(recording, change, key, words):
    data = json.loads(recording.read_text(encoding="utf-8"))
    change(data)
    with pytest.raises(FactsError) as refused:
        parse_facts(json.dumps(data), "sick.json")
    lines = refused.value.lines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("sick.json: ") and key in lines[0] and words in lines[0], lines[0]


@pytest.mark.parametrize("recording", sorted(EXAMPLES.glob("*.json")) + [HEALTH], ids=lambda path: path.name)
def test_every_real_recording_holds_no_contradiction(recording):
    assert load_facts(recording).gpu_count >= 1
