"""Regression against a baseline (--baseline FILE --max-regression 5%): one test per value the
baseline holds, failing when this run's value is more than the allowed share worse."""

from gpuaccept.checks.baseline import no_regression


def test_no_regression(baseline_metric, baseline, profile, facts_with_everything, verdict):
    verdict(no_regression(baseline.baseline, facts_with_everything, baseline_metric, baseline.max_regression, profile.name))
