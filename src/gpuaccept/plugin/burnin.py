"""The hooks of the controlling process that load the GPUs beyond the stages' first measurement:
telemetry sampled from the session's start to its end (live runs of the levels that load), and at
the burn-in level the burn-in's rounds, run before the tests judge them.

Ctrl-C or SIGTERM during the rounds ends the rounds only: the tests then judge what ran, the
reports are written, and the run's verdict (decided by the recording, from the burn-in's record in
the facts) says the burn-in was cut short: exit 2, unless a check failed (1).
"""

from __future__ import annotations

import pytest

from gpuaccept.burnin.driver import BurninDriver
from gpuaccept.plugin.context import GpuAcceptRun
from gpuaccept.plugin.needs import needs_of
from gpuaccept.plugin.terminal import terminal_line
from gpuaccept.stages.telemetry import TelemetryLog
from gpuaccept.vocabulary.telemetry import parse_duration, show_duration


class BurninHooks:
    def __init__(self, config: pytest.Config, run: GpuAcceptRun, terminated: list[int]):
        self.config = config
        self.run = run
        self.terminated = terminated  # plugin/hooks.py's TERMINATED: the signals that asked the run to end
        self.telemetry: TelemetryLog | None = None

    def pytest_sessionstart(self) -> None:
        context = self.run.context
        # the quick level loads nothing and none of its tests reads the telemetry: sampled there it
        # would open NVML once more in this process and chart a second of an idle machine in report.html
        if context.live and self.run.options.level != "quick":
            period = context.profile.spec.burnin.telemetry_period_s
            self.telemetry = TelemetryLog(self.run.store.folder, context.facts, period)
            self.telemetry.start()

    @pytest.hookimpl(tryfirst=True)  # before pytest's (or pytest-xdist's) loop runs the tests
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        options, context = self.run.options, self.run.context
        if options.level != "burn-in" or self.config.option.collectonly:
            return
        if not context.live:
            # recorded facts are judged as they were when recorded: a burn-in cut short then is cut short now
            recorded = context.facts.burnin
            if recorded is not None and recorded.ended == "interrupted":
                terminal_line(self.config)(
                    f"gpu-accept: the recorded burn-in was ended by a signal: {len(recorded.rounds)} round(s) in "
                    f"{show_duration(recorded.elapsed_s)} of {show_duration(recorded.duration_s)}"
                )
            return
        # pytest-xdist's controller holds no items (its workers collect): it runs the rounds for them
        distributed = self.config.pluginmanager.hasplugin("dsession")
        # without a test that reads what the rounds measured there is nothing to run rounds for
        if not distributed and not any(needs_of(item).reads_burnin for item in session.items):
            return
        duration = options.burnin_s or parse_duration(context.profile.spec.burnin.duration)
        say = terminal_line(self.config)
        readings = self.telemetry.latest if self.telemetry is not None else dict
        driver = BurninDriver(self.run.store, context.facts, context.profile, duration, say=say, readings=readings)
        burnin = driver.run()
        if burnin.ended == "interrupted":
            # the signal ended the rounds; the tests still judge what ran, and the run's verdict says
            # the burn-in was cut short (the recording reads it from the facts)
            self.terminated.clear()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # before the recording's (trylast), which reads the telemetry and the burn-in's end from the facts
        if self.telemetry is not None:
            self.telemetry.stop()
            if self.telemetry.sampler.error:
                terminal_line(self.config)(f"gpu-accept: {self.telemetry.sampler.error}")
