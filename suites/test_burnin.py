"""Burn-in (--level burn-in, `gpu-accept burn-in`): every value the burn-in's stages measure, judged
in every round it was measured in (a miss in two rounds fails, one round alone is transient, and
every round's value is reported); and per GPU, the sustained load judged while hot: when the GPU
reached thermal steady state, its GEMM throughput from then on against its first round, and the
power it drew against its limit and against its siblings."""

import pytest

from gpuaccept.checks import burnin, heat

pytestmark = [pytest.mark.levels("burn-in"), pytest.mark.needs("telemetry")]


@pytest.mark.needs("burnin")
def test_burnin_value(burnin_case, profile, facts, verdict):
    verdict(burnin.over_rounds(profile, facts, burnin_case))


def test_thermal_steady_state(gpu, profile, facts, verdict):
    verdict(heat.thermal_steady_state(profile, facts, gpu))


def test_hot_gemm_throughput(gpu, profile, facts, verdict):
    verdict(heat.hot_gemm_throughput(profile, facts, gpu))


def test_power_under_load(gpu, profile, facts, verdict):
    verdict(heat.power_under_load(profile, facts, gpu))


def test_power_within_best(gpu, profile, facts, verdict):
    verdict(heat.power_within_best(profile, facts, gpu))
