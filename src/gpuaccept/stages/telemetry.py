"""The telemetry of a session, kept on disk beside the stage files: every process of the session
(the controller that samples, pytest-xdist workers that judge) reads the same series.

Two append-only JSON Lines files in the session folder:
- `telemetry.jsonl`: a first line with when sampling began and its period (written before NVML is
  opened: a sampler stuck opening it still leaves a series, with no samples), then a line with each
  GPU's limits, or with why sampling could not start, then one line per sample;
- `loads.jsonl`: one line per measurement stage that ran, with its start and end (epoch seconds),
  written by the process that ran it (stages/store.py's hook after a stage ran).
A line cut by a killed process is left out when read.
"""

from __future__ import annotations

import datetime
import json
import threading
from pathlib import Path
from typing import Any

from gpuaccept.facts import Facts
from gpuaccept.facts.telemetry import LoadWindow, Telemetry, TelemetryLimits, TelemetrySample
from gpuaccept.probe.nvml import nvml_of_this_machine
from gpuaccept.probe.telemetry import TelemetrySampler

TELEMETRY_FILE = "telemetry.jsonl"
LOADS_FILE = "loads.jsonl"


def _append(path: Path, data: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(data) + "\n")


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # the last line of a killed writer
    return found


def record_load(folder: Path, stage: str, began: float, ended: float) -> None:
    """A stage that loaded the GPUs from `began` to `ended` (time.time())."""
    _append(Path(folder) / LOADS_FILE, {"stage": stage, "began": began, "ended": ended})


class TelemetryLog:
    """Samples this session's GPUs into its folder from `start()` to `stop()`."""

    def __init__(self, folder: Path, facts: Facts, period_s: float):
        self.path = Path(folder) / TELEMETRY_FILE
        self._lock = threading.Lock()
        self._latest: dict[int, TelemetrySample] = {}
        gpus = [(gpu.index, gpu.nvml_index) for gpu in facts.gpus]
        self.sampler = TelemetrySampler(nvml_of_this_machine, gpus, period_s, self._limits, self._samples, on_error=self._not_sampled)

    def start(self) -> None:
        started = datetime.datetime.fromtimestamp(self.sampler.started, datetime.timezone.utc).isoformat(timespec="milliseconds")
        with self._lock:
            _append(self.path, {"started": self.sampler.started, "started_at": started, "period_s": self.sampler.period_s})
        self.sampler.start()

    def stop(self) -> None:
        self.sampler.stop()

    def _limits(self, limits: list[TelemetryLimits]) -> None:
        with self._lock:
            _append(self.path, {"limits": [limit.model_dump(mode="json") for limit in limits]})

    def _not_sampled(self, why: str) -> None:
        # said in the file, so that the processes judging (pytest-xdist workers) see it too
        with self._lock:
            _append(self.path, {"not_sampled": why})

    def latest(self) -> dict[int, TelemetrySample]:
        """Each GPU's latest sample: what the terminal shows while a burn-in runs."""
        with self._lock:
            return dict(self._latest)

    def _samples(self, samples: list[TelemetrySample]) -> None:
        with self._lock, open(self.path, "a", encoding="utf-8") as out:
            self._latest.update({sample.gpu: sample for sample in samples})
            out.write("".join(json.dumps({"sample": sample.model_dump(mode="json")}) + "\n" for sample in samples))


def read_telemetry(folder: Path) -> Telemetry | None:
    """The session's telemetry as far as it was sampled; None where none was (replayed facts, no NVML)."""
    lines = _lines(Path(folder) / TELEMETRY_FILE)
    if not lines or "started" not in lines[0]:
        return None
    header = lines[0]
    started = float(header["started"])
    loads = [
        LoadWindow(stage=load["stage"], started_s=round(load["began"] - started, 3), ended_s=round(load["ended"] - started, 3))
        for load in _lines(Path(folder) / LOADS_FILE)
    ]
    limits = next((line["limits"] for line in lines if "limits" in line), [])
    return Telemetry(
        started_at=header["started_at"],
        period_s=header["period_s"],
        not_sampled=next((line["not_sampled"] for line in lines if "not_sampled" in line), ""),
        limits=[TelemetryLimits.model_validate(limit) for limit in limits],
        samples=[TelemetrySample.model_validate(line["sample"]) for line in lines[1:] if "sample" in line],
        loads=loads,
    )
