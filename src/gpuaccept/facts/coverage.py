"""What a run checked, by area of the machine, and why the tests that did not pass did not, causes
first: two views of a run record's tests that every writer reads as data (results.json holds both,
derived from the tests and recomputed whenever a record is read, so older files have them too).

Coverage: per area (vocabulary/areas.py), how many tests passed, failed, could not judge (and what
the facts lacked, where that is why: "the facts hold no per-GPU loads"), were skipped because the profile
asks nothing there, or were left out of the run by -k, -m or test ids. An area where nothing was
judged is "not checked", whatever else passed: no view shows it as healthy.

Causes: the tests that did not pass, in area order, grouped. A failed check that declares itself a
root cause (a GPU missing, someone else's process on a GPU) comes first with the tests that follow
from it: every check of a missing GPU, and the measurements that use a GPU someone else's load was
on (that GPU's own, and every collective and DDP setting it is part of). The rest are grouped by
their shared cause (the message without its subject: "the facts hold no NCCL sweep" once for 15
tests).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from gpuaccept.facts.record import Record
from gpuaccept.vocabulary.areas import AREA_OF_SUITE, UNKNOWN_AREA, area_order, follows

if TYPE_CHECKING:
    from gpuaccept.facts.run_record import TestRecord

REASONS_KEPT = 3  # reasons kept per area: the most frequent first
CoverageState = Literal["checked", "partly checked", "not checked", "not asked"]
NOT_SELECTED = "not selected (-k, -m or test ids)"


def area_of(test: TestRecord) -> str:
    """The area of the machine a test judges: its verdict's, else (results written before verdicts
    carried it, a test that ended without a verdict) its suite's."""
    verdict = test.verdict
    if verdict is not None and verdict.area:
        return verdict.area
    return AREA_OF_SUITE.get(test.module, UNKNOWN_AREA)


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


class AreaCoverage(Record):
    """What a run checked of one area: its tests by outcome, and why those not judged were not."""

    area: str
    passed: int = 0
    failed: int = 0
    not_judged: int = 0  # tests that could not judge (an error): asked for, not proven good
    skipped: int = 0  # tests of what the profile asks nothing of
    not_selected: int = 0  # tests the run left out (-k, -m, test ids)
    why: list[str] = Field(default_factory=list)  # what the facts lacked, where that is why tests were not judged

    @property
    def judged(self) -> int:
        return self.passed + self.failed

    @property
    def state(self) -> CoverageState:
        unchecked = self.not_judged + self.not_selected
        if self.judged and not unchecked:
            return "checked"
        if self.judged:
            return "partly checked"
        return "not checked" if unchecked else "not asked"

    def line(self) -> str:
        """`not checked: compute — the facts hold no per-GPU loads (24 test(s) not judged)`; '' for an area that
        was checked, or that the profile asks nothing of."""
        if self.state in ("checked", "not asked"):
            return ""
        said = []
        if self.not_judged:  # what the facts lack; any other reason is the test's cause, listed with the causes
            counted = f"{self.not_judged} test(s) not judged"
            said.append(f"{'; '.join(self.why)} ({counted})" if self.why else counted)
        if self.not_selected:
            said.append(f"{NOT_SELECTED}: {self.not_selected} test(s)")
        judged = f"; {self.judged} judged" if self.judged else ""
        return f"{self.state}: {self.area or 'other tests'} — {'; '.join(said)}{judged}"


def coverage(tests: list[TestRecord], not_selected: dict[str, int] | None = None) -> list[AreaCoverage]:
    """Every area a run has tests of (or left some out of), in area order."""
    counts: dict[str, Counter[str]] = {}
    reasons: dict[str, Counter[str]] = {}
    for test in tests:
        area = area_of(test)
        counts.setdefault(area, Counter())[test.outcome] += 1
        if test.outcome == "error" and test.verdict is not None and test.verdict.missing:
            reasons.setdefault(area, Counter())[test.verdict.missing] += 1
    left_out = not_selected or {}
    areas = sorted(set(counts) | set(left_out), key=area_order)
    return [
        AreaCoverage(
            area=area, passed=counts.get(area, Counter())["passed"], failed=counts.get(area, Counter())["failed"],
            not_judged=counts.get(area, Counter())["error"], skipped=counts.get(area, Counter())["skipped"],
            not_selected=left_out.get(area, 0), why=[why for why, _ in reasons.get(area, Counter()).most_common(REASONS_KEPT)],
        )
        for area in areas
    ]


def unchecked_lines(areas: list[AreaCoverage]) -> list[str]:
    """One line per area not wholly checked: what every view of a run says before any verdict."""
    return [line for area in areas if (line := area.line())]


class CauseGroup(Record):
    """Tests that did not pass for one cause: a root cause (`root`, its test id, first in `tests`)
    with the tests that follow from it, or tests whose messages share `text`."""

    outcome: str  # the root's outcome, or the shared one: failed or error
    text: str  # the cause: the root's message without its subject, or the shared message
    root: str | None = None
    tests: list[str] = Field(default_factory=list)  # test ids, the root first

    @property
    def followers(self) -> list[str]:
        return self.tests[1:] if self.root is not None else []


def in_area_order(tests: list[TestRecord]) -> list[TestRecord]:
    """Tests by area, in run order within one (a stable sort)."""
    return sorted(tests, key=lambda test: area_order(area_of(test)))


def did_not_pass(tests: list[TestRecord]) -> list[TestRecord]:
    """The tests that failed or could not judge, in area order."""
    return in_area_order([t for t in tests if t.did_not_pass])


def root_causes(tests: list[TestRecord]) -> list[CauseGroup]:
    """The tests that did not pass, grouped by cause, root causes first within their area."""
    bad = did_not_pass(tests)
    roots = [t for t in bad if t.outcome == "failed" and t.verdict is not None and t.verdict.root and t.verdict.gpus]
    root_ids = {t.id for t in roots}
    follower_of: dict[str, str] = {}
    for root in roots:
        verdict = root.verdict
        assert verdict is not None and verdict.root is not None
        for test in bad:
            if test.id in root_ids or test.id in follower_of or test.verdict is None:
                continue
            # facts that lack a whole stage lack it whatever a GPU does: that is the cause, not the GPU;
            # a check of the missing GPUs alone could not judge because they are not there
            if test.verdict.missing and not set(test.verdict.gpus) <= set(verdict.gpus):
                continue
            if follows(verdict.root, verdict.gpus, area_of(test), test.verdict.gpus):
                follower_of[test.id] = root.id
    groups: list[CauseGroup] = []
    shared: dict[tuple[str, str], CauseGroup] = {}
    for test in bad:
        if test.id in follower_of:
            continue
        if test.id in root_ids:
            followers = [t.id for t in bad if follower_of.get(t.id) == test.id]
            groups.append(CauseGroup(outcome=test.outcome, text=cause_of(test), root=test.id, tests=[test.id, *followers]))
            continue
        key = (test.outcome, cause_of(test))
        if key not in shared:
            shared[key] = CauseGroup(outcome=test.outcome, text=key[1])
            groups.append(shared[key])
        shared[key].tests.append(test.id)
    return groups


def causes_first(tests: list[TestRecord]) -> list[TestRecord]:
    """The tests that did not pass, cause by cause: each root cause followed by what follows from it,
    then the others in area order (what a line that names a few of them names first)."""
    by_id = {test.id: test for test in tests}
    return [by_id[test_id] for group in root_causes(tests) for test_id in group.tests]


def cause_of_each(groups: list[CauseGroup]) -> dict[str, str]:
    """Each follower's root cause: test id -> the root's test id."""
    return {follower: group.root for group in groups if group.root is not None for follower in group.followers}

