"""What a run sampled while it went on (clocks, temperatures, power and clock event reasons of every
GPU, when loads ran) and the rounds of a burn-in."""

from __future__ import annotations

import datetime
from typing import Any, ClassVar, Literal

from pydantic import Field

from gpuaccept.facts.measurements import Measurements
from gpuaccept.facts.record import Count, Finite, FloatReading, IntReading, OmitsLaterDefaults, Record


class TelemetrySample(Record):
    """One GPU's readings at one moment of a run. `t_s` is seconds since sampling began."""

    t_s: float
    gpu: Count  # the CUDA ordinal: gpuN
    sm_clock_mhz: IntReading
    memory_clock_mhz: IntReading
    temperature_c: IntReading
    memory_temperature_c: IntReading  # HBM, NVML field 82, where the GPU answers it
    power_w: FloatReading
    clock_event_reasons: IntReading  # nvmlClocksEventReasons bits (vocabulary/telemetry.py)
    utilization_pct: IntReading


class TelemetryLimits(Record):
    """What NVML says a GPU's readings may reach, read once when sampling starts."""

    gpu: Count
    slowdown_temperature_c: IntReading
    max_sm_clock_mhz: IntReading
    power_limit_w: FloatReading


class LoadWindow(Record):
    """A measurement stage that loaded the GPUs, in seconds since sampling began."""

    stage: str
    started_s: float
    ended_s: float


class Telemetry(Record):
    """Every GPU sampled at a fixed period while the run went on, and when loads ran."""

    started_at: str  # ISO 8601, UTC: the moment `t_s` counts from
    period_s: float
    not_sampled: str = ""  # why sampling could not start (NVML would not open for it); no samples then
    limits: list[TelemetryLimits] = Field(default_factory=list)
    samples: list[TelemetrySample] = Field(default_factory=list)
    loads: list[LoadWindow] = Field(default_factory=list)

    def of_gpu(self, gpu: int) -> list[TelemetrySample]:
        return [sample for sample in self.samples if sample.gpu == gpu]

    def limits_of(self, gpu: int) -> TelemetryLimits | None:
        return next((limit for limit in self.limits if limit.gpu == gpu), None)

    def under_load(self, sample: TelemetrySample) -> bool:
        return any(window.started_s <= sample.t_s <= window.ended_s for window in self.loads)


class BurnInRound(OmitsLaterDefaults):
    """One round of a burn-in: the stages it ran, what they measured, when (seconds since the start)."""

    index: int  # 1, 2, ...
    started_s: float
    wall_s: Finite
    stages: list[str]
    measurements: Measurements
    # the stages ran while the sustained load held every GPU (the fabric at its interval): their
    # results are checked for wrong data and hangs, their bandwidth is not held to an unloaded floor
    beside_load: bool = False

    later_fields: ClassVar[dict[str, Any]] = {"beside_load": False}


class BurnIn(OmitsLaterDefaults):
    """A burn-in: a sustained load on every GPU for the duration (or until it was ended), judged in
    rounds, with the fabric stages run before it and beside it."""

    duration_s: float  # asked for
    elapsed_s: float  # what ran
    ended: Literal["deadline", "interrupted"]
    rounds: list[BurnInRound] = Field(default_factory=list)
    # when the burn-in began (ISO 8601, UTC), and when its sustained load began and ended in
    # seconds from then: what places the rounds on the telemetry's time line
    started_at: str = ""
    load_started_s: float | None = None
    load_ended_s: float | None = None

    later_fields: ClassVar[dict[str, Any]] = {"started_at": "", "load_started_s": None, "load_ended_s": None}

    def rounds_with(self, stage: str) -> list[BurnInRound]:
        return [r for r in self.rounds if stage in r.stages]

    def offset_on(self, telemetry: Telemetry) -> float:
        """Where this burn-in began on the telemetry's time line (seconds since sampling began); 0
        where the burn-in was recorded without its start."""
        if not self.started_at:
            return 0.0
        moment = datetime.datetime.fromisoformat
        return moment(self.started_at).timestamp() - moment(telemetry.started_at).timestamp()
