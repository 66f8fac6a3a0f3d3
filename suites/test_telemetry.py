"""Telemetry sampled while the loads ran, per GPU: clock slowdowns (hardware, thermal, power brake)
under load, the hottest temperature against NVML's slowdown limit, SM clocks under load."""

import pytest

from gpuaccept.checks import telemetry

pytestmark = [pytest.mark.levels("standard", "burn-in"), pytest.mark.needs("telemetry")]


def test_clock_slowdown(gpu, profile, facts, verdict):
    verdict(telemetry.clock_slowdown(profile, facts, gpu))


def test_max_temperature(gpu, profile, facts, verdict):
    verdict(telemetry.max_temperature(profile, facts, gpu))


def test_sm_clock_under_load(gpu, profile, facts, verdict):
    verdict(telemetry.sm_clock_under_load(profile, facts, gpu))
