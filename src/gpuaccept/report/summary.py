"""The terminal summary: failures first, grouped by cause and root causes first; values that passed
only when measured again or close to their limit; then the key measured values beside their
thresholds."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuaccept.facts.run_record import TestRecord
from gpuaccept.facts.verdict import Verdict
from gpuaccept.vocabulary.display import show

# checks whose numbers are worth seeing even when they pass, in the order they are shown
KEY_CHECKS = (
    "busbw",
    "pair_busbw",
    "p2p_copy",
    "p2p_copy_bidirectional",
    "local_copy",
    "host_to_device",
    "device_to_host",
    "ddp_scaling",
    "ddp_exposed_comm",
    "ddp_nvlink_speedup",
    "gemm_throughput",
    "hbm_copy",
    "hbm_triad",
    "no_regression",
)
PER_CHECK_LIMIT = 8
# the suites from the bottom up: a GPU that is missing (inventory) fails the links, pairs, copies and
# DDP settings that need it, so its own failure is shown before the ones it causes
LAYERS = ("inventory", "health", "topology", "p2p", "nccl", "bandwidth", "ddp", "baseline")
IDS_PER_TEST = 2  # parameters shown per test function in a group of failures, before "and N more"
LISTED = 8  # tests named in a line of transient or marginal values, before "and N more"


def layer_of(test: TestRecord) -> int:
    """Where a test's suite sits in LAYERS (from its node id: `test_nccl.py::...`); unknown last."""
    name = test.module.removeprefix("test_")
    return LAYERS.index(name) if name in LAYERS else len(LAYERS)


def in_layer_order(tests: list[TestRecord]) -> list[TestRecord]:
    """Tests by layer, in run order within one (a stable sort)."""
    return sorted(tests, key=layer_of)


def did_not_pass(tests: list[TestRecord]) -> list[TestRecord]:
    return in_layer_order([t for t in tests if t.did_not_pass])


def cause_of(test: TestRecord) -> str:
    """A failure's message without its subject: `gpu2-gpu3: the facts hold no pairwise sweep (...)`
    and the same for gpu0-gpu1 share the cause `the facts hold no pairwise sweep (...)`."""
    message = test.message
    verdict = test.verdict
    if verdict is None:
        return message
    subject, own = verdict.subject, verdict.message
    if subject and own.startswith(f"{subject}: ") and message.endswith(own):
        # the test's message is its verdict's, perhaps behind "could not be established: "
        return message[: len(message) - len(own)] + own[len(subject) + 2:]
    return message


@dataclass
class Cause:
    outcome: str  # the tests' outcome: failed or error
    text: str
    tests: list[TestRecord] = field(default_factory=list)

    def line(self) -> str:
        mark = f"{self.outcome.upper():6}"
        if len(self.tests) == 1:
            test = self.tests[0]
            return f"  {mark} {test.id}: {test.message}".rstrip()
        return f"  {mark} {len(self.tests)} tests: {self.text}; {abbreviated([t.id for t in self.tests])}"


def causes(tests: list[TestRecord]) -> list[Cause]:
    """The tests that did not pass, grouped by outcome and cause, root causes first."""
    found: dict[tuple[str, str], Cause] = {}
    for test in did_not_pass(tests):
        key = (test.outcome, cause_of(test))
        found.setdefault(key, Cause(*key)).tests.append(test)
    return list(found.values())


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


def summary_lines(tests: list[TestRecord]) -> list[str]:
    lines = []
    bad = did_not_pass(tests)
    if bad:
        grouped = causes(tests)
        shared = f", {len(grouped)} cause(s)" if len(grouped) < len(bad) else ""
        lines.append(f"{len(bad)} test(s) did not pass{shared}, in layer order ({', '.join(LAYERS)}):")
        lines.extend(cause.line() for cause in grouped)
        crashed = [t for t in bad if t.verdict is None]
        if crashed:
            lines.append(
                f"{len(crashed)} of them ended without a verdict (an exception in the suite or a fixture): "
                "run again with --tb=short for the traceback"
            )
    lines.extend(watch_lines(tests))
    verdicts = [t.verdict for t in tests if t.verdict is not None and t.verdict.outcome in ("passed", "failed")]
    for check in KEY_CHECKS:
        rows = [(value, v) for v in verdicts if v.check == check and (value := v.numeric) is not None]
        if not rows:
            continue
        rows.sort(key=lambda row: (row[1].outcome == "passed", row[0]))  # failures, then the lowest values
        lines.append(f"{check}:")
        for _, verdict in rows[:PER_CHECK_LIMIT]:
            mark = "ok  " if verdict.outcome == "passed" else "FAIL"
            lines.append(f"  {mark} {verdict.subject:24} {show(verdict.measured, verdict.unit):>14}   expected {verdict.expected}")
        if len(rows) > PER_CHECK_LIMIT:
            lines.append(f"  ... {len(rows) - PER_CHECK_LIMIT} more (all in results.json)")
    return lines
