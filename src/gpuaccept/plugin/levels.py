"""Levels: three depths of a run, picked by name (`--level`), as DCGM's run levels are.

- quick: health readings, inventory, topology, P2P capability; no load stage: seconds, for CI gates
  between jobs;
- standard: the quick level, and every measurement the profile asks for (NCCL, copies, DDP, the
  per-GPU loads), the telemetry sampled meanwhile, and the baseline gate;
- burn-in: the quick level, then the load stages round after round for the duration
  (`--burn-in-duration`, else the profile's burnin.duration), each burn-in value judged over every
  round, and the telemetry of the whole time.

Each suite says which levels run its tests with a `levels` marker (plugin/needs.py); a level's run
does not collect the tests of other levels at all, so it says nothing of them (no "deselected"
count). Each collected test also carries its levels as markers (`-m quick`). Tests without a
`levels` marker (modules that are not suites of gpu-accept) are always collected.
"""

from __future__ import annotations

import pytest

from gpuaccept.plugin import needs
from gpuaccept.vocabulary.levels import LEVELS


def marker_name(level: str) -> str:
    return level.replace("-", "")  # `-m burnin`


def register_markers(config: pytest.Config) -> None:
    needs.register_markers(config)
    for level in LEVELS:
        config.addinivalue_line("markers", f"{marker_name(level)}: a test of gpu-accept's {level} level")


def levels_of(node: pytest.Item | pytest.Collector) -> tuple[str, ...] | None:
    """The levels that run `node`, by its closest `levels` marker; None where it has none. A
    usage error for a level that is not one."""
    marker = node.get_closest_marker(needs.LEVELS_MARK)
    if marker is None:
        return None
    unknown = [level for level in marker.args if level not in LEVELS]
    if unknown:
        named = ", ".join(map(repr, unknown))
        raise pytest.UsageError(f"gpu-accept: {node.nodeid}: levels({named}): a level is one of {', '.join(LEVELS)}")
    return tuple(marker.args)


def outside_level(node: pytest.Item | pytest.Collector, level: str) -> bool:
    """Whether `node` is a suite's test that `level` does not run."""
    levels = levels_of(node)
    return levels is not None and level not in levels


def mark_levels(items: list[pytest.Item]) -> None:
    """Each suite test marked with the levels that run it (`-m quick`)."""
    for item in items:
        for level in levels_of(item) or ():
            item.add_marker(marker_name(level))
