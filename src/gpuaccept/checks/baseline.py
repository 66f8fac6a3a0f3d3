"""The regression gate: each value a baseline holds (`--baseline FILE`), measured again in this run,
is at most `--max-regression` worse than it was."""

from __future__ import annotations

from gpuaccept.checks.declare import Subjects, check
from gpuaccept.checks.verdict import AtLeast, AtMost, Criterion, Judge, Verdict
from gpuaccept.facts import Facts
from gpuaccept.profile.model import Profile
from gpuaccept.report.baseline import Baseline, measured_values

# the values a baseline holds are its subjects: the baseline file names them, not the profile (the
# plugin parametrizes `baseline_metric` from the file given)
BASELINE_VALUE = Subjects(
    "", lambda profile: [], str, "no baseline", "each value the baseline holds", "busbw-all_reduce-1GiB"
)


@check(subjects=BASELINE_VALUE, headline=True)
def no_regression(judge: Judge, profile: Profile, facts: Facts, key: str, baseline: Baseline, max_regression: float) -> Verdict:
    """This run's value is at most `--max-regression` (a share) worse than the baseline's: more where
    the baseline's own runs varied more (twice their spread, up to a cap)."""
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
