"""The terminal summary: what was not checked, by area; failures first, grouped by cause, root causes
first with what follows from them; values that passed only when measured again or close to their
limit; then the headline measured values beside their thresholds. Everything is read from the
verdicts' data (their area, the GPUs they involve, whether they are a root cause, whether their value
is a headline: checks/declare.py), never from a list of check names."""

from __future__ import annotations

from gpuaccept.facts.coverage import CauseGroup, coverage, root_causes, unchecked_lines
from gpuaccept.facts.run_record import RunRecord, TestRecord
from gpuaccept.facts.verdict import Verdict
from gpuaccept.outcomes import EXIT_FAILED, EXIT_PASSED
from gpuaccept.vocabulary.areas import area_order
from gpuaccept.vocabulary.display import show

PER_CHECK_LIMIT = 8
IDS_PER_TEST = 2  # parameters shown per test function in a group of failures, before "and N more"
LISTED = 8  # tests named in a line of transient or marginal values, before "and N more"


def banner(record: RunRecord) -> str:
    """The run's verdict in one line, with the areas it did not check: what the HTML's banner and the
    terminal say first ('' where the run holds no test). A run that judged nothing of an area never
    reads as a plain pass."""
    summary = record.summary
    if not record.tests:
        return ""  # nothing ran (--collect-only) or nothing was selected: the run's notes say which
    unchecked = [area.area or "other tests" for area in record.coverage if area.state in ("not checked", "partly checked")]
    not_checked = f"; not checked: {', '.join(unchecked)}" if unchecked else ""
    if not record.complete:
        return "INCOMPLETE: the run stopped before its end; what finished is below" + not_checked
    code = record.exit_code()
    if code == EXIT_PASSED:
        # the checks that ran passed, and some the profile asks for were left out (-k, -m, test ids)
        return f"PARTLY CHECKED: every check judged passed{not_checked}" if unchecked else "PASS: every check passed"
    if code == EXIT_FAILED:
        return f"FAIL: {summary.failed} test(s) failed" + (f", {summary.error} could not judge" if summary.error else "") + not_checked
    if summary.error:
        return f"COULD NOT JUDGE: {summary.error} test(s) could not judge, none failed{not_checked}"
    verdict, status = record.verdict, record.run.exit_status
    why = verdict.cause.removeprefix("could not judge: ") if verdict else f"the run did not judge the machine (exit status {status})"
    return f"COULD NOT JUDGE: {why}{not_checked}"


def _mark(outcome: str) -> str:
    return f"{outcome.upper():6}"


def cause_lines(group: CauseGroup, tests: dict[str, TestRecord]) -> list[str]:
    """A cause's lines: one test with its message; tests that share a message, once; a root cause
    with its own message, then the tests that follow from it."""
    if group.root is not None:
        root = tests[group.root]
        lines = [f"  {_mark(group.outcome)} {root.id}: {root.message}".rstrip()]
        if group.followers:
            lines.append(f"         and {len(group.followers)} test(s) that follow from it: {abbreviated(group.followers)}")
        return lines
    if len(group.tests) == 1:
        test = tests[group.tests[0]]
        return [f"  {_mark(group.outcome)} {test.id}: {test.message}".rstrip()]
    return [f"  {_mark(group.outcome)} {len(group.tests)} tests: {group.text}; {abbreviated(group.tests)}"]


def abbreviated(test_ids: list[str]) -> str:
    """`test_busbw[all_reduce-256MiB, all_reduce-1GiB and 13 more], test_collective_correct[...]`."""
    by_function: dict[str, list[str]] = {}
    for test_id in test_ids:
        function, _, parameters = test_id.partition("[")
        by_function.setdefault(function, []).append(parameters.removesuffix("]"))
    parts = []
    for function, parameters in by_function.items():
        shown = [p for p in parameters if p]
        if not shown:
            parts.append(function if len(parameters) == 1 else f"{function} ({len(parameters)}x)")
            continue
        more = len(shown) - IDS_PER_TEST
        listed = ", ".join(shown[:IDS_PER_TEST]) + (f" and {more} more" if more > 0 else "")
        parts.append(f"{function}[{listed}]")
    return ", ".join(parts)


def attempts_of(verdict: Verdict) -> str:
    """A verdict's attempts for people: `310.2, 331 GB/s`."""
    shown = ", ".join("-" if value is None else show(value) for value in verdict.attempts)
    return f"{shown} {verdict.unit}".rstrip()


def transient_tests(tests: list[TestRecord]) -> list[TestRecord]:
    """Tests whose value missed at first and passed when measured again (older results: none)."""
    return [t for t in tests if t.verdict is not None and t.verdict.transient]


def marginal_tests(tests: list[TestRecord]) -> list[TestRecord]:
    """Tests that passed within the profile's marginal band of their limit (older results: none)."""
    return [t for t in tests if t.verdict is not None and t.verdict.marginal]


def _listed(entries: list[str]) -> str:
    more = len(entries) - LISTED
    return ", ".join(entries[:LISTED]) + (f" and {more} more" if more > 0 else "")


def watch_lines(tests: list[TestRecord]) -> list[str]:
    """The values that passed but deserve a look: transient ones, then marginal ones."""
    lines = []
    transient = [(t.id, t.verdict) for t in transient_tests(tests) if t.verdict is not None]
    if transient:
        entries = [f"{test_id} (attempts {attempts_of(verdict)})" for test_id, verdict in transient]
        lines.append(f"{len(transient)} value(s) passed only when measured again (transient): {_listed(entries)}")
    marginal = [(t.id, t.verdict) for t in marginal_tests(tests) if t.verdict is not None]
    if marginal:
        entries = [
            f"{test_id} ({show(verdict.measured, verdict.unit)}, expected {verdict.expected}"
            + (f", {verdict.marginal_line})" if verdict.marginal_line else ")")
            for test_id, verdict in marginal
        ]
        lines.append(f"{len(marginal)} value(s) marginal, passed within the profile's marginal band of the limit: {_listed(entries)}")
    return lines


def summary_lines(tests: list[TestRecord], not_selected: dict[str, int] | None = None) -> list[str]:
    lines = unchecked_lines(coverage(tests, not_selected))
    bad = [t for t in tests if t.did_not_pass]
    if bad:
        groups = root_causes(tests)
        by_id = {t.id: t for t in tests}
        shared = f", {len(groups)} cause(s)" if len(groups) < len(bad) else ""
        lines.append(f"{len(bad)} test(s) did not pass{shared}, root causes first:")
        for group in groups:
            lines.extend(cause_lines(group, by_id))
        crashed = [t for t in bad if t.verdict is None]
        if crashed:
            lines.append(
                f"{len(crashed)} of them ended without a verdict (an exception in the suite or a fixture): "
                "run again with --tb=short for the traceback"
            )
    lines.extend(watch_lines(tests))
    lines.extend(headline_lines(tests))
    return lines


def headline_lines(tests: list[TestRecord]) -> list[str]:
    """The values their checks declare worth seeing when they pass, per check in area order: the
    failures, then the lowest values."""
    by_check: dict[str, list[tuple[float, Verdict]]] = {}
    for test in tests:
        verdict = test.verdict
        if verdict is None or not verdict.headline or verdict.outcome not in ("passed", "failed") or (value := verdict.numeric) is None:
            continue
        by_check.setdefault(verdict.check, []).append((value, verdict))
    lines = []
    for check, rows in sorted(by_check.items(), key=lambda item: area_order(item[1][0][1].area)):
        rows.sort(key=lambda row: (row[1].outcome == "passed", row[0]))  # failures, then the lowest values
        lines.append(f"{check}:")
        for _, verdict in rows[:PER_CHECK_LIMIT]:
            mark = "ok  " if verdict.outcome == "passed" else "FAIL"
            lines.append(f"  {mark} {verdict.subject:24} {show(verdict.measured, verdict.unit):>14}   expected {verdict.expected}")
        if len(rows) > PER_CHECK_LIMIT:
            lines.append(f"  ... {len(rows) - PER_CHECK_LIMIT} more (all in results.json)")
    return lines
