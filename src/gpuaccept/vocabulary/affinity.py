"""Where a GPU sits, as the affinity columns of `nvidia-smi topo -m` write it: lists of CPUs and
NUMA nodes ("0-47,96-143"), read the same in a profile, in imported text and in a check."""

from __future__ import annotations

import re

CPU_LIST_PATTERN = r"^\d+(-\d+)?(,\d+(-\d+)?)*$"
_CPU_LIST = re.compile(CPU_LIST_PATTERN)


def is_cpu_list(text: str) -> bool:
    return bool(_CPU_LIST.match(text))


def cpu_set(text: str) -> frozenset[int]:
    """'0-2,8' -> {0, 1, 2, 8}: lists compared as sets, however they are written."""
    found: set[int] = set()
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        found.update(range(int(first), int(last or first) + 1))
    return frozenset(found)
