"""Burn-in (--level burn-in, `gpu-accept burn-in`): every value the burn-in's stages measure, judged
in every round it was measured in; a miss in two rounds fails, one round alone is transient, and
every round's value is reported."""

from gpuaccept.checks import burnin


def test_burnin_value(burnin_case, profile, facts_with_burnin, verdict):
    verdict(burnin.over_rounds(profile, facts_with_burnin, burnin_case))
