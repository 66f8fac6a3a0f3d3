"""Reading a file given to this tool without waiting or swallowing forever; writing a file whole or not at all."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from gpuaccept.errors import GpuAcceptError

# Facts and results of a day-long burn-in on 8 GPUs (1 Hz telemetry) stay far below this.
MAX_INPUT_BYTES = 1 << 30


def read_input_bytes(path: Path | str, count: int) -> bytes:
    """At most `count` bytes from the start of a file a user gave. A named pipe that nothing writes
    to reads as empty instead of waiting for a writer forever."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except ValueError:  # a NUL in the name (from a file's text, not a command line): no file is called that
        raise OSError(errno.EINVAL, "a NUL character in the file's name") from None
    with open(descriptor, "rb") as handle:
        os.set_blocking(descriptor, True)  # a pipe with a writer: wait for what it writes
        return handle.read(count)


def read_input_text(path: Path | str, limit: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of a file a user gave (read as `read_input_bytes` reads). More than `limit`
    bytes (the path may be /dev/zero) is an OSError whose strerror says so, as is every other reason
    it cannot be read. Text that is not UTF-8 raises UnicodeDecodeError."""
    data = read_input_bytes(path, limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit >> 20} MiB, more than this tool reads")
    return data.decode("utf-8")


class OutputError(GpuAcceptError):
    """A file could not be written (a full disk, a folder taken away): nothing half-written is left."""


def write_atomically(path: Path | str, text: str) -> None:
    """Write `text` to a temporary file beside `path`, then rename it over `path`: a reader, or a run
    killed mid-write, never sees half a file. The folder is created where missing. A link is written
    where it points; a device or a pipe (/dev/null, /dev/stdout) is written as given, never replaced."""
    path = Path(path)
    try:
        path = path.resolve() if path.is_symlink() else path
    except (RuntimeError, OSError):  # Python 3.11 says RuntimeError for a loop of links, later ones OSError
        raise OutputError(f"{path}: cannot write it (a symbolic link that loops, or cannot be followed)") from None
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
