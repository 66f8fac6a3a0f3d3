"""Byte sizes as people write them: in profiles and test ids (256MiB, 1GiB, 4K), and in messages (256 MiB)."""

from __future__ import annotations

import re

GIB = 2**30  # memory is stated in GiB

_UNITS = {"": 1, "B": 1, "K": 2**10, "KIB": 2**10, "M": 2**20, "MIB": 2**20, "G": 2**30, "GIB": 2**30, "T": 2**40, "TIB": 2**40}
_SIZE = re.compile(r"^\s*(\d+)\s*([A-Za-z]*)\s*$")
SIZE_PATTERN = r"^\s*\d+\s*([KMGT](iB)?|B)?\s*$"  # forms parse_size reads: 1GiB, 256MiB, 4K, 512B; not 1GB or 1Gi


def parse_size(text: str | int) -> int:
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    match = _SIZE.match(str(text))
    unit = match.group(2).upper() if match else None
    if not match or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a size: write bytes with a binary unit, e.g. 256MiB, 1GiB")
    return int(match.group(1)) * _UNITS[unit]


def format_size(size: int) -> str:
    """The shortest exact binary form: 1073741824 -> '1GiB', 1536 -> '1536B'... '1.5KiB' is never used."""
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"


def human_size(size: int) -> str:
    """A size for messages and step labels: 268435456 -> '256 MiB', 1536 -> '1536 B'."""
    text = format_size(size)
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        if text.endswith(unit):
            return f"{text[: -len(unit)]} {unit}"
    return f"{size} B"
