"""Telemetry: every GPU under test read at a fixed period while a run goes on, in a daemon thread.

What one sample holds (clocks, temperatures, power, clock event reasons, utilization) is read
through the NVML door, so a recording replayed on a CPU machine drives the same code. A reading
NVML does not give is kept as `Unavailable`, never as 0. The sampler only reads and hands samples
on; the session keeps them (stages/telemetry.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from gpuaccept.facts.telemetry import TelemetryLimits, TelemetrySample
from gpuaccept.probe.collect import read
from gpuaccept.probe.nvml import Nvml


def read_limits(nvml: Nvml, gpu: int, nvml_index: int) -> TelemetryLimits:
    return TelemetryLimits(
        gpu=gpu,
        slowdown_temperature_c=read(nvml, "slowdown_temperature_c", nvml_index),
        max_sm_clock_mhz=read(nvml, "max_sm_clock_mhz", nvml_index),
        power_limit_w=read(nvml, "power_limit_mw", nvml_index, convert=lambda mw: mw / 1000.0),
    )


def read_sample(nvml: Nvml, gpu: int, nvml_index: int, t_s: float) -> TelemetrySample:
    return TelemetrySample(
        t_s=round(t_s, 3),
        gpu=gpu,
        sm_clock_mhz=read(nvml, "sm_clock_mhz", nvml_index),
        memory_clock_mhz=read(nvml, "memory_clock_mhz", nvml_index),
        temperature_c=read(nvml, "temperature_c", nvml_index),
        memory_temperature_c=read(nvml, "memory_temperature_c", nvml_index),
        power_w=read(nvml, "power_mw", nvml_index, convert=lambda mw: mw / 1000.0),
        clock_event_reasons=read(nvml, "clock_event_reasons", nvml_index),
        utilization_pct=read(nvml, "utilization_pct", nvml_index),
    )


class TelemetrySampler:
    """Reads every GPU of `gpus` ((CUDA ordinal, NVML index) pairs) every `period_s` seconds from
    `start()` to `stop()`, in a daemon thread, and hands each moment's samples to `on_samples`.

    NVML is opened inside the thread (`open_nvml`), so a driver that hangs on start holds no test
    up. A sample is due every period counted from the start, not from the last read: slow reads do
    not stretch the series."""

    def __init__(
        self,
        open_nvml: Callable[[], Nvml],
        gpus: list[tuple[int, int]],
        period_s: float,
        on_limits: Callable[[list[TelemetryLimits]], None],
        on_samples: Callable[[list[TelemetrySample]], None],
        started: float | None = None,
        on_error: Callable[[str], None] | None = None,
    ):
        self.open_nvml = open_nvml
        self.gpus = gpus
        self.period_s = period_s
        self.on_limits = on_limits
        self.on_samples = on_samples
        self.on_error = on_error
        self.started = time.time() if started is None else started  # what t_s counts from
        self.error = ""  # why sampling could not start, where it could not
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gpu-accept telemetry", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)  # a read stuck in the driver is left behind: the thread is a daemon

    def _run(self) -> None:
        try:
            nvml = self.open_nvml()
        except Exception as error:  # no driver, a recording that does not read: said, and no samples
            self.error = f"telemetry not sampled: {error}"
            if self.on_error:
                self.on_error(str(error))
            return
        try:
            self.on_limits([read_limits(nvml, gpu, index) for gpu, index in self.gpus])
            tick = 0
            while not self._stop.is_set():
                now = time.time()
                self.on_samples([read_sample(nvml, gpu, index, now - self.started) for gpu, index in self.gpus])
                # the next tick after now: a read slower than a period skips ticks instead of bunching them
                tick = max(tick + 1, int((time.time() - self.started) / self.period_s) + 1)
                due = self.started + tick * self.period_s
                self._stop.wait(max(0.0, due - time.time()))
        finally:
            nvml.close()
