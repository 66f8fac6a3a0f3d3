"""Where a command will write, proven writable before any work is done, and never over what it reads.

A report or baseline that cannot be written is otherwise found at the end of a full run. Write
permission is proven by creating a file: permission bits do not tell (root ignores them, and
/proc or /sys refuse even root).

Every command names its inputs and outputs to `refuse_overlaps` before it runs: an output that is
one of its inputs (`--metrics` pointed at the run's own results.json, `baseline save -o` at a
results file it reads) or another of its outputs would otherwise lose the first, with exit 0.
Paths are compared as the files they are: resolved (links, `./a` and `a`), and by device and inode
where both exist (hard links). A device or a pipe (/dev/null, /dev/stdout) is written as given, and
may take several outputs.

A run's reports folder is one run's at a time (`reports_folder_lock`): a second run writing the same
folder would mix its files with the first's, and is refused in one line before it writes anything.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from gpuaccept.errors import OptionError

Named = tuple[str, Path | str | None]  # (the option that names it, the path); None where not given
REPORTS_LOCK = ".gpu-accept.lock"  # in a reports folder, held by the run writing it


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


def refuse_overlaps(inputs: Sequence[Named], outputs: Sequence[Named]) -> None:
    """OptionError where an output is one of the inputs or another output (module docstring)."""
    seen: list[tuple[str, str, _Identity]] = []
    for option, path in inputs:
        if path is not None and str(path).strip():
            seen.append(("input", option, _Identity(path)))
    for option, path in outputs:
        if path is None or not str(path).strip():
            continue
        mine = _Identity(path)
        if mine.stream:
            continue
        for kind, other, theirs in seen:
            if mine.same_as(theirs):
                shown_as = f"{other} {theirs.given}" if other else str(theirs.given)
                if kind == "input":
                    raise OptionError(
                        f"{option} {path}: is {shown_as}, which this command reads: writing it would lose it; name another file"
                    )
                raise OptionError(f"{option} {path}: is also {shown_as}: one would be written over the other; name another file")
        seen.append(("output", option, mine))


class _Identity:
    """A path as the file it is: its resolved form, and its device and inode where it exists."""

    def __init__(self, given: Path | str):
        self.given = given
        try:
            self.resolved = os.path.realpath(os.path.abspath(given))
            found = os.stat(self.resolved)
        except ValueError:  # a NUL in it: no file has that name
            self.resolved, self.inode, self.stream = str(given), None, False
            return
        except OSError:
            self.inode: tuple[int, int] | None = None
            self.stream = False
        else:
            self.inode = (found.st_dev, found.st_ino)
            self.stream = not stat.S_ISREG(found.st_mode) and not stat.S_ISDIR(found.st_mode)

    def same_as(self, other: _Identity) -> bool:
        return self.resolved == other.resolved or (self.inode is not None and self.inode == other.inode)


def refuse_links(folder: Path | str, names: Sequence[str], option: str) -> None:
    """A file this command names itself in `folder` (a reports folder's results.json, its journal,
    junit.xml) must be its own: a symbolic link planted there would have the run write wherever it
    points."""
    for name in names:
        path = Path(folder) / name
        if path.is_symlink():
            raise OptionError(
                f"{option} {folder}: {path} is a symbolic link (to {os.readlink(path)}): the run writes its own {name} there; "
                "remove the link, or choose another folder"
            )


_HELD: dict[str, int] = {}  # the reports folders this process holds, by resolved path: a run inside a run holds its folder once


@contextlib.contextmanager
def reports_folder_lock(folder: Path | str, option: str) -> Iterator[None]:
    """Hold `folder` for this run's reports, or refuse in one line where another run holds it. The
    lock is a flock on FOLDER/.gpu-accept.lock, the holder's pid inside; it goes with the process
    however it ends, and the file with a run that ends as it should."""
    key = os.path.realpath(folder)
    if key in _HELD:
        yield
        return
    lock = Path(folder) / REPORTS_LOCK
    handle = _take(lock, folder, option)
    _HELD[key] = handle
    try:
        yield
    finally:
        del _HELD[key]
        with contextlib.suppress(OSError):
            lock.unlink()  # while still held: a run that opened it meanwhile finds it gone, and takes a new one
        os.close(handle)


def _take(lock: Path, folder: Path | str, option: str) -> int:
    while True:
        try:
            handle = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as error:
            why = "a symbolic link" if error.errno == errno.ELOOP else error.strerror or str(error)
            raise OptionError(f"{option} {folder}: cannot lock the folder for this run ({lock}: {why})") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(handle, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(handle)
            raise OptionError(
                f"{option} {folder}: another gpu-accept run (pid {holder}) is writing its reports there: wait for it to end, "
                "or choose another folder"
            ) from None
        try:
            same = os.stat(lock, follow_symlinks=False).st_ino == os.fstat(handle).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(handle, 0)
            os.pwrite(handle, f"{os.getpid()}\n".encode(), 0)
            return handle
        os.close(handle)  # the run before removed it as we took it: take the one there now
