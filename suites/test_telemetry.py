"""Telemetry sampled while the loads ran, per GPU: clock slowdowns (hardware, thermal, power brake)
under load, the hottest temperature against NVML's slowdown limit, SM clocks under load."""

from gpuaccept.checks import telemetry


def test_clock_slowdown(gpu, profile, facts_with_telemetry, verdict):
    verdict(telemetry.clock_slowdown(profile, facts_with_telemetry, gpu))


def test_max_temperature(gpu, profile, facts_with_telemetry, verdict):
    verdict(telemetry.max_temperature(profile, facts_with_telemetry, gpu))


def test_sm_clock_under_load(gpu, profile, facts_with_telemetry, verdict):
    verdict(telemetry.sm_clock_under_load(profile, facts_with_telemetry, gpu))
