"""Burn-in (--level burn-in, `gpu-accept burn-in`): every value the burn-in's stages measure, judged
in every round it was measured in; the worst round decides and every round's value is reported."""

from gpuaccept.checks import burnin


def test_burnin_value(burnin_case, profile, facts_with_burnin, verdict):
    verdict(burnin.worst_round(profile, facts_with_burnin, burnin_case))
