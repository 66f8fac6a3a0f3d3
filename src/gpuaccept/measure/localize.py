"""Which node makes a cluster collective slow: measured groups of nodes, in rounds, until it is named.

A pure algorithm over one callback, `measure(groups)`, that measures disjoint groups of nodes at the
same time and returns one value per group (the busbw of the profile's localizing collective over
every GPU of those nodes). A group passes when its value meets the floor. A group holding a slow
node fails; a group of healthy nodes passes: that is the only assumption, and the one a ring
collective gives, since its busbw is set by its slowest link.

1. Halves (N >= `halves_from`): each group still suspected is split in two and both halves are
   measured at once, until the groups that fail have at most three nodes. log2(N) rounds instead
   of the many pairs a large cluster would need to clear one by one.
2. Disjoint pairs of the suspects, each suspect once, all at once; where none has passed yet,
   every other pair of suspects too (round-robin, N-1 rounds at most), until one passes.
3. Each remaining suspect with a node proven good: a reference. The pair fails: the suspect is
   slow, and named. It passes: the suspect is cleared and serves as a reference itself.
4. Where no pair passed at all (two nodes, or every pair slow) nothing tells a node from the link
   between them, except the nodes alone: `solo(groups)` measures each node by itself, and a node
   below `solo_ratio` of the best node is named. Without it the suspects stay undecided, said so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations

Group = tuple[int, ...]  # node indices, ascending
Measure = Callable[[list[Group]], dict[Group, float]]


@dataclass(frozen=True)
class Trial:
    """One group measured: in which round, what it gave, and whether that met the floor."""

    round: int
    nodes: Group
    value: float
    passed: bool
    alone: bool = False  # a node by itself: judged against the other nodes, not the floor


@dataclass(frozen=True)
class Localization:
    slow: tuple[int, ...]  # the nodes named
    cleared: tuple[int, ...]  # proven good
    undecided: tuple[int, ...]  # suspects nothing could tell apart
    trials: tuple[Trial, ...]
    reason: str  # how the slow nodes were named, or why none could be


@dataclass
class _Search:
    nodes: int
    measure: Measure
    floor: float
    good: set[int] = field(default_factory=set)
    slow: set[int] = field(default_factory=set)
    trials: list[Trial] = field(default_factory=list)
    tried: set[Group] = field(default_factory=set)

    def round(self, groups: list[Group]) -> dict[Group, bool]:
        """Measure `groups` at once: whether each passed."""
        seen: set[int] = set()
        for group in groups:
            if seen & set(group):
                raise ValueError(f"groups measured at once must be disjoint: {groups}")
            seen |= set(group)
        values = self.measure(groups)
        number = 1 + max((trial.round for trial in self.trials), default=0)
        passed = {}
        for group in groups:
            value = values[group]
            passed[group] = value >= self.floor
            self.trials.append(Trial(number, group, value, passed[group]))
            self.tried.add(group)
            if passed[group]:
                self.good |= set(group)
        return passed

    @property
    def suspects(self) -> list[int]:
        return [node for node in range(self.nodes) if node not in self.good and node not in self.slow]


def localize(
    nodes: int,
    measure: Measure,
    floor: float,
    *,
    solo: Measure | None = None,
    solo_ratio: float = 0.8,
    halves_from: int = 8,
) -> Localization:
    """Name the slow nodes among `nodes` (0..nodes-1); see the module's docstring for how."""
    if nodes < 2:
        raise ValueError("localizing needs at least two nodes")
    search = _Search(nodes, measure, floor)
    if nodes >= halves_from:
        _halves(search)
    if not search.good:
        _pairs(search)
    if search.good:
        _references(search)
        reason = "each suspect measured with a node proven good"
    elif solo is not None:
        reason = _alone(search, solo, solo_ratio)
    else:
        reason = "every group of nodes missed the floor and no node could be measured alone"
    undecided = tuple(search.suspects)
    return Localization(tuple(sorted(search.slow)), tuple(sorted(search.good)), undecided, tuple(search.trials), reason)


def _halves(search: _Search) -> None:
    pending: list[Group] = [tuple(range(search.nodes))]
    while pending:
        halves = [half for group in pending for half in (group[: len(group) // 2], group[len(group) // 2 :])]
        passed = search.round(halves)
        pending = [half for half in halves if not passed[half] and len(half) >= 4]


def _pairs(search: _Search) -> None:
    suspects = search.suspects
    disjoint: list[Group] = [(suspects[i], suspects[i + 1]) for i in range(0, len(suspects) - 1, 2)]
    if disjoint:
        search.round(disjoint)
    # no pair passed: every pair of suspects in turn, as disjoint as a round allows, until one does
    rest: list[Group] = [pair for pair in combinations(suspects, 2) if pair not in search.tried]
    while rest and not search.good:
        busy: set[int] = set()
        batch: list[Group] = []
        for pair in rest:
            if not busy & set(pair):
                batch.append(pair)
                busy |= set(pair)
        search.round(batch)
        rest = [pair for pair in rest if pair not in batch]


def _references(search: _Search) -> None:
    while search.suspects:
        references = sorted(search.good)
        batch = [tuple(sorted((suspect, reference))) for suspect, reference in zip(search.suspects, references, strict=False)]
        for group, passed in search.round(batch).items():
            if not passed:
                search.slow |= set(group) - search.good


def _alone(search: _Search, solo: Measure, ratio: float) -> str:
    suspects = search.suspects
    groups: list[Group] = [(node,) for node in suspects]
    values = solo(groups)
    best = max(values[group] for group in groups)
    number = 1 + max((trial.round for trial in search.trials), default=0)
    for group in groups:
        alone_ok = values[group] >= ratio * best
        search.trials.append(Trial(number, group, values[group], alone_ok, alone=True))
        if not alone_ok:
            search.slow |= set(group)
    if search.slow:
        search.good |= {node for (node,) in groups if node not in search.slow}
        return f"every group missed the floor; measured alone, the named nodes gave less than {ratio:.0%} of the best node"
    return f"every group missed the floor, yet alone every node gives {ratio:.0%} of the best or more: the network between them"
