"""Burn-in (--level burn-in, `gpu-accept burn-in`): every value the burn-in's stages measure, judged
in every round it was measured in (a miss in two rounds fails, one round alone is transient, and
every round's value is reported); and per GPU, the sustained load judged while hot: when the GPU
reached thermal steady state, its GEMM throughput from then on against its first round, and the
power it drew against its limit and against its siblings."""

from gpuaccept.checks import burnin, heat


def test_burnin_value(burnin_case, profile, facts_with_burnin, verdict):
    verdict(burnin.over_rounds(profile, facts_with_burnin, burnin_case))


def test_thermal_steady_state(gpu, profile, facts_with_telemetry, verdict):
    verdict(heat.thermal_steady_state(profile, facts_with_telemetry, gpu))


def test_hot_gemm_throughput(gpu, profile, facts_with_telemetry, verdict):
    verdict(heat.hot_gemm_throughput(profile, facts_with_telemetry, gpu))


def test_power_under_load(gpu, profile, facts_with_telemetry, verdict):
    verdict(heat.power_under_load(profile, facts_with_telemetry, gpu))


def test_power_within_best(gpu, profile, facts_with_telemetry, verdict):
    verdict(heat.power_within_best(profile, facts_with_telemetry, gpu))
