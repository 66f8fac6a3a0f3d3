"""The localization of a slow node, as a pure algorithm: every position of one slow node, and of two."""

from __future__ import annotations

from itertools import combinations

import pytest

from gpuaccept.measure.localize import Group, localize

FLOOR = 10.0


def fabric(slow: set[int], calls: list[list[Group]]):
    """A cluster where any group holding a slow node misses the floor, and a slow node alone is slow."""

    def measure(groups: list[Group]) -> dict[Group, float]:
        calls.append(groups)
        return {group: 4.0 if slow & set(group) else 12.0 for group in groups}

    return measure


@pytest.mark.parametrize("halves_from", [2, 8, 100])
@pytest.mark.parametrize("nodes", range(2, 10))
def test_one_slow_node_is_named_wherever_it_sits(nodes: int, halves_from: int) -> None:
    for position in range(nodes):
        calls: list[list[Group]] = []
        measure = fabric({position}, calls)
        found = localize(nodes, measure, FLOOR, solo=measure, halves_from=halves_from)
        assert found.slow == (position,), (position, found)
        assert found.undecided == ()
        assert set(found.cleared) == set(range(nodes)) - {position}
        for groups in calls:  # groups measured at once never share a node
            members = [node for group in groups for node in group]
            assert len(members) == len(set(members))


@pytest.mark.parametrize("halves_from", [2, 8, 100])
@pytest.mark.parametrize("nodes", range(3, 10))
def test_two_slow_nodes_are_both_named(nodes: int, halves_from: int) -> None:
    for slow in combinations(range(nodes), 2):
        measure = fabric(set(slow), [])
        found = localize(nodes, measure, FLOOR, solo=measure, halves_from=halves_from)
        assert found.slow == slow, (slow, found)
        assert found.undecided == ()


def test_two_nodes_without_a_solo_measure_stay_undecided() -> None:
    found = localize(2, fabric({1}, []), FLOOR)
    assert found.slow == ()
    assert found.undecided == (0, 1)
    assert "no node could be measured alone" in found.reason


def test_a_slow_network_is_not_blamed_on_a_node() -> None:
    """Every pair slow, every node fine alone: the links between them, said so, no node named."""

    def network(groups: list[Group]) -> dict[Group, float]:
        return {group: 4.0 if len(group) > 1 else 12.0 for group in groups}

    found = localize(4, network, FLOOR, solo=network)
    assert found.slow == ()
    assert found.undecided == (0, 1, 2, 3)
    assert "the network between them" in found.reason


def test_pairs_first_then_references() -> None:
    calls: list[list[Group]] = []
    found = localize(4, fabric({2}, calls), FLOOR, halves_from=100)
    assert calls == [[(0, 1), (2, 3)], [(0, 2), (1, 3)]]
    assert [(trial.round, trial.nodes, trial.passed) for trial in found.trials] == [
        (1, (0, 1), True), (1, (2, 3), False), (2, (0, 2), False), (2, (1, 3), True),
    ]


def test_halves_take_log_rounds_on_a_large_cluster() -> None:
    calls: list[list[Group]] = []
    found = localize(64, fabric({37}, calls), FLOOR)
    assert found.slow == (37,)
    assert len(calls) <= 6


def test_a_single_node_cannot_be_localized() -> None:
    with pytest.raises(ValueError, match="at least two nodes"):
        localize(1, fabric(set(), []), FLOOR)


def test_a_miss_that_does_not_repeat_names_nobody() -> None:
    found = localize(3, fabric(set(), []), FLOOR)
    assert (found.slow, found.undecided, found.cleared) == ((), (), (0, 1, 2))
