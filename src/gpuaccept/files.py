"""Writing a file whole or not at all."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from gpuaccept.errors import GpuAcceptError


class OutputError(GpuAcceptError):
    """A file could not be written (a full disk, a folder taken away): nothing half-written is left."""


def write_atomically(path: Path | str, text: str) -> None:
    """Write `text` to a temporary file beside `path`, then rename it over `path`: a reader, or a run
    killed mid-write, never sees half a file. The folder is created where missing. A link is written
    where it points; a device or a pipe (/dev/null, /dev/stdout) is written as given, never replaced."""
    path = Path(path)
    if path.is_symlink():
        path = path.resolve()
    try:
        if path.exists() and not path.is_file() and not path.is_dir():
            with open(path, "w", encoding="utf-8") as device:
                device.write(text)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.partial")
        try:
            temporary.write_text(text, encoding="utf-8")
            temporary.replace(path)
        finally:
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write it ({exc.strerror or exc})") from None
