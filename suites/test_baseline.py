"""Regression against a baseline (--baseline FILE --max-regression 5%): one test per value the
baseline holds, failing when this run's value is more than the allowed share worse."""

import pytest

from gpuaccept.checks.baseline import no_regression

pytestmark = [pytest.mark.levels("standard"), pytest.mark.needs("every_stage")]


def test_no_regression(baseline_metric, baseline, profile, facts, verdict):
    verdict(no_regression(profile, facts, baseline_metric, baseline.baseline, baseline.max_regression))
