"""Levels: three depths of a run, picked by name (`--level`), as DCGM's run levels are.

- quick: health readings, inventory, topology, P2P capability; no load stage: seconds, for CI gates
  between jobs;
- standard: the quick level, and every measurement the profile asks for (NCCL, copies, DDP, the
  per-GPU loads), the telemetry sampled meanwhile, and the baseline gate;
- burn-in: the quick level, then the load stages round after round for the duration
  (`--burn-in-duration`, else the profile's burnin.duration), each burn-in value judged over every
  round, and the telemetry of the whole time.

A level selects suites by module name (vocabulary/levels.py), so suites that join later
(test_health, test_compute) are placed there by name; the suites of other levels are not collected.
Each collected test also carries its levels as markers (`-m quick`). Modules that are not suites of
gpu-accept are always collected.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaccept.vocabulary.levels import KNOWN_SUITES, LEVEL_SUITES, LEVELS


def marker_name(level: str) -> str:
    return level.replace("-", "")  # `-m burnin`


def register_markers(config: pytest.Config) -> None:
    for level in LEVELS:
        config.addinivalue_line("markers", f"{marker_name(level)}: a test of gpu-accept's {level} level")


def module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")


def outside_level(path: Path, level: str) -> bool:
    """Whether `path` is a suite of gpu-accept that `level` does not run: not collected at all, so
    a level's run says nothing of the other levels' tests (no "deselected" count)."""
    return path.stem in KNOWN_SUITES and path.stem not in LEVEL_SUITES[level]


def mark_levels(items: list[pytest.Item]) -> None:
    """Each suite test marked with the levels that run it (`-m quick`)."""
    for item in items:
        module = module_of(item)
        for name, suites in LEVEL_SUITES.items():
            if module in suites:
                item.add_marker(marker_name(name))
