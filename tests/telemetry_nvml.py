"""Telemetry for tests: an NVML recording that answers the telemetry's queries too (the 4xH200
recording, with each GPU busy and cool, HBM temperature not supported, as on older GPUs, and where
asked one GPU held in hardware slowdown), and telemetry built sample by sample."""

from __future__ import annotations

import json
from pathlib import Path

from gpuaccept.facts.record import Unavailable
from gpuaccept.facts.telemetry import LoadWindow, Telemetry, TelemetryLimits, TelemetrySample
from tests.helpers import DATA

HW_SLOWDOWN = 0x8
SW_POWER_CAP = 0x4


def telemetry_recording(path: Path, slowdown_gpu: int | None = None, gpus: int = 4) -> Path:
    document = json.loads((DATA / "nvml" / "h200x4.json").read_text(encoding="utf-8"))
    answers = [a for a in document["answers"] if a["query"] != "clock_event_reasons"]
    for gpu in range(gpus):
        values = {
            "sm_clock_mhz": 1980, "memory_clock_mhz": 3201, "max_sm_clock_mhz": 1980, "temperature_c": 45,
            "slowdown_temperature_c": 89, "power_mw": 452000, "power_limit_mw": 700000, "utilization_pct": 97,
            "clock_event_reasons": SW_POWER_CAP | (HW_SLOWDOWN if gpu == slowdown_gpu else 0),
        }
        answers += [{"query": query, "args": [gpu], "value": value} for query, value in values.items()]
        answers.append({"query": "memory_temperature_c", "args": [gpu], "error": "NOT_SUPPORTED", "message": "Not Supported"})
    path.write_text(json.dumps({**document, "answers": answers}), encoding="utf-8")
    return path


def sample(
    t: float, gpu: int, reasons: int = SW_POWER_CAP, temperature: int = 60, sm: int = 1980, busy: int = 100
) -> TelemetrySample:
    return TelemetrySample(
        t_s=t, gpu=gpu, sm_clock_mhz=sm, memory_clock_mhz=3201, temperature_c=temperature,
        memory_temperature_c=Unavailable(unavailable="not_supported", detail="memory_temperature_c(0): NOT_SUPPORTED"),
        power_w=650.0, clock_event_reasons=reasons, utilization_pct=busy,
    )


def telemetry(samples: list[TelemetrySample], loads=((0.0, 200.0),), gpus: int = 4) -> Telemetry:
    return Telemetry(
        started_at="2026-11-22T23:00:00+00:00", period_s=1.0,
        limits=[TelemetryLimits(gpu=g, slowdown_temperature_c=89, max_sm_clock_mhz=1980, power_limit_w=700.0) for g in range(gpus)],
        samples=samples, loads=[LoadWindow(stage="nccl", started_s=a, ended_s=b) for a, b in loads],
    )
