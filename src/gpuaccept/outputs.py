"""Where a command will write, proven writable before any work is done.

A report or baseline that cannot be written is otherwise found at the end of a full run. Write
permission is proven by creating a file: permission bits do not tell (root ignores them, and
/proc or /sys refuse even root).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from gpuaccept.errors import OptionError


def check_output_folder(folder: Path | str, option: str) -> None:
    """A folder to write into, created if missing."""
    if not str(folder).strip():
        raise OptionError(f"{option}: the folder's name is empty")
    folder = Path(folder)
    where = f"{option} {folder}"
    if folder.exists() and not folder.is_dir():
        raise OptionError(f"{where}: is a file, not a folder")
    _prove_writable(folder, where)


def check_output_file(path: Path | str, option: str) -> None:
    """A file to write (or replace), its folder created if missing."""
    if not str(path).strip():
        raise OptionError(f"{option}: the file's name is empty")
    path = Path(path)
    where = f"{option} {path}"
    if path.is_dir():
        raise OptionError(f"{where}: is a folder: name a file to write")
    if path.exists() and not path.is_file():
        return  # /dev/null, a pipe: written as given
    try:
        target = path.resolve() if path.exists() or path.is_symlink() else path  # a link is written where it points
    except (RuntimeError, OSError):  # Python 3.11 says RuntimeError for a loop of links, later ones OSError
        raise OptionError(f"{where}: a symbolic link that loops, or cannot be followed") from None
    _prove_writable(target.parent, where)
    if target.exists():
        try:
            with open(target, "a"):
                pass
        except OSError as exc:
            raise OptionError(f"{where}: cannot write to it ({exc.strerror})") from None


def _prove_writable(folder: Path, where: str) -> None:
    if folder.exists() and not folder.is_dir():
        raise OptionError(f"{where}: {folder} is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OptionError(f"{where}: cannot create the folder {folder} ({exc.strerror})") from None
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".gpu-accept-write-test-"):
            pass
    except OSError as exc:
        raise OptionError(f"{where}: cannot write in {folder} ({exc.strerror})") from None
