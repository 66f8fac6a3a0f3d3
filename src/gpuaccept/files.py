"""Writing a file whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path | str, text: str) -> None:
    """Write `text` to a temporary file beside `path`, then rename it over `path`: a reader, or a run
    killed mid-write, never sees half a file. The folder is created where missing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.partial")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)
