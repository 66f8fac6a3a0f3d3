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
BURNIN = DATA / "facts" / "h200x1-burnin.json"


def _set(path: str, value):
    def change(data: dict) -> None:
        made = value.make(data) if isinstance(value, _Lazy) else value
        *parents, last = path
        for part in parents:
            data = data[part]
        data[last] = made

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


def _first(count: int, where: tuple):
    """The first `count` entries of the list at `where` in the recording (a value for _set)."""
    return _Lazy(lambda data: _at(data, where)[:count])


class _Lazy:
    def __init__(self, make):
        self.make = make


def _at(data, where: tuple):
    for part in where:
        data = data[part]
    return data


def _append_event(**changes):
    def change(data: dict) -> None:
        event = {"gpu": 0, "xid": 79, "kind": "xid", "time": "2026-11-23T00:55:00+00:00", "source": "nvml_event", "during_run": True}
        data["health"]["events"].append({**event, **changes})

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
    # the GPUs NVML counts, lists and CUDA sees are one set of GPUs
    (H200X4, _set(("system", "installed_gpus"), _first(3, ("system", "installed_gpus"))), "system.installed_gpus",
     "lists 3 GPU(s) and system.nvml_gpu_count is 4"),
    (H200X4, _set(("system", "nvml_gpu_count"), 3), "system.nvml_gpu_count", "NVML counts 3 GPU(s) and 4 are under test"),
    (H200X4, _set(("cuda", "device_count"), 8), "cuda.device_count", "CUDA counts 8 device(s) and 4 GPU(s) are under test"),
    (H200X4, _set(("cuda", "uuids"), _first(2, ("cuda", "uuids"))), "cuda.uuids", "names 2 device(s) and cuda.device_count is 4"),
    (H200X4, _set(("cuda", "uuids", 3), "00000000-dead-beef-0000-000000000000"), "cuda.uuids[3]", "is no GPU's UUID in these facts"),
    (H200X4, _set(("cuda", "peer_access", 1), [True, None, True]), "cuda.peer_access[1]", "one row and one column per device"),
    (H200X4, _copy(("system", "installed_gpus", 0, "uuid"), ("system", "installed_gpus", 1, "uuid")),
     "system.installed_gpus[1].uuid", "two GPUs cannot share one"),
    # NVLink 16 twice and 17 absent: 18 entries, not 18 links
    (H200X4, _set(("gpus", 2, "nvlinks", 17, "link"), 16), "gpus[2].nvlinks[17].link", "link 16 of gpu2 is also nvlinks[16]"),
    # an XID of a GPU the machine does not have, telemetry and burn-in times that run backwards
    (HEALTH, _append_event(gpu=9, xid=79), "health.events[", "names gpu9, which is not in these facts (2 GPU(s)"),
    (BURNIN, _set(("telemetry", "loads", 0, "ended_s"), 0.05), "telemetry.loads[0].ended_s", "ended at 0.05 s, before it began at 0.102 s"),
    (BURNIN, _set(("telemetry", "samples", 0, "gpu"), 5), "telemetry.samples[0].gpu", "names gpu5"),
    (BURNIN, _set(("burnin", "load_ended_s"), 0.0), "burnin.load_ended_s", "ended at 0 s, before it began at 0.002 s"),
    (BURNIN, _set(("burnin", "rounds", 0, "wall_s"), 0.0), "burnin.rounds[0].wall_s", "measured its stages in 0 s"),
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
