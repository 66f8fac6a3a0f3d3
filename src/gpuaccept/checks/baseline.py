"""The regression check: a measured value against the same value in a baseline."""

from __future__ import annotations

from gpuaccept.checks.verdict import AtLeast, AtMost, Criterion, Judge, Verdict
from gpuaccept.facts import Facts
from gpuaccept.report.baseline import Baseline, measured_values


def no_regression(baseline: Baseline, facts: Facts, key: str, max_regression: float, profile_name: str) -> Verdict:
    judge = Judge("no_regression", profile_name)
    before = baseline.metrics[key]
    allowed = before.tolerance(max_regression)
    criterion: Criterion
    if before.higher_is_better:
        criterion = AtLeast(before.value * (1 - allowed), before.unit)
    else:
        criterion = AtMost(before.value * (1 + allowed), before.unit)
    now = measured_values(facts).get(key)
    if now is None:
        return judge.error(key, f"measured in the baseline ({before.value:g} {before.unit}) but not in this run", criterion)
    change = (now.value - before.value) / before.value if before.value else 0.0
    why = before.tolerance_reason(max_regression)
    note = f"baseline {before.value:g} {before.unit}".rstrip() + f", {change:+.1%}; at most {allowed:.0%} worse allowed{why}"
    return judge(key, "measured", now.value, criterion, note=note, scope=f"baseline {baseline.path}")
