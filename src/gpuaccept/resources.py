"""Where the shipped suites and profiles are, installed or in a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def shipped_dir(name: str) -> Path:
    """`suites` or `profiles`: inside the package once installed, at the top of a source checkout."""
    installed = _PACKAGE / name
    if installed.is_dir():
        return installed
    return _PACKAGE.parents[1] / name
