"""How a value is written for people, in verdict messages, the terminal summary and the reports."""

from __future__ import annotations

from typing import Any


def show(value: Any, unit: str = "", digits: int = 4) -> str:
    """A value for people: 4 significant digits (one decimal from 1000 up), then the unit."""
    if isinstance(value, float):
        text = f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:.{max(1, digits - 3)}f}"
    else:
        text = str(value)
    return f"{text} {unit}".rstrip() if unit else text


def show_apart(value: Any, limit: Any, unit: str = "") -> tuple[str, str]:
    """`value` and `limit` for a message, with as many digits as it takes to tell them apart:
    329.996 against 330 reads "329.996 < 330", never "330 < 330"."""
    for digits in range(4, 13):
        shown = show(value, unit, digits), show(limit, unit, digits)
        if shown[0] != shown[1] or value == limit:
            return shown
    return shown
