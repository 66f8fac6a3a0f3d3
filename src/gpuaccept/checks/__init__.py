"""Checks: pure functions from (profile, facts, subject) to a Verdict. They never raise for a
hardware reason and never skip; the pytest layer turns their verdicts into passes, failures and skips."""

from gpuaccept.checks.verdict import Outcome, Verdict

__all__ = ["Outcome", "Verdict"]
