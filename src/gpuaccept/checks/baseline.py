"""The regression check: a measured value against the same value in a baseline."""

from __future__ import annotations

from gpuaccept.checks.verdict import AtLeast, AtMost, Judge, Verdict
from gpuaccept.facts import Facts
from gpuaccept.report.baseline import Baseline, measured_values


def no_regression(baseline: Baseline, facts: Facts, key: str, max_regression: float, profile_name: str) -> Verdict:
    judge = Judge("no_regression", profile_name)
    before = baseline.metrics[key]
    if before.higher_is_better:
        criterion = AtLeast(round(before.value * (1 - max_regression), 4), before.unit)
    else:
        criterion = AtMost(round(before.value * (1 + max_regression), 4), before.unit)
    now = measured_values(facts).get(key)
    if now is None:
        return judge.error(key, f"measured in the baseline ({before.value:g} {before.unit}) but not in this run", criterion)
    change = (now.value - before.value) / before.value if before.value else 0.0
    note = f"baseline {before.value:g} {before.unit}".rstrip() + f", {change:+.1%}; at most {max_regression:.0%} worse allowed"
    return judge(key, "measured", now.value, criterion, note=note, scope=f"baseline {baseline.path}")
