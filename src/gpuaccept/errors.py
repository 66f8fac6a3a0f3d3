"""Errors that end a run before any check is made.

Each carries a message meant to be printed as is, one line per problem, and the exit code the
command line gives for it. Hardware faults are not errors here: they are verdicts.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

KeyPath = tuple[str | int, ...]  # where a value sits in an input file: str keys and int list indices

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2


class GpuAcceptError(Exception):
    """A problem with the input or the environment: bad usage, a bad file, no driver."""

    exit_code = EXIT_USAGE

    def lines(self) -> list[str]:
        """What to print, a line each: the message is one line, whatever the input it quotes holds
        (a name with a line break is shown escaped on its line, never as a second one)."""
        return [str(self)] if str(self) else [type(self).__name__]


@dataclass(frozen=True)
class Problem:
    """One thing wrong in an input file, located as precisely as the file allows."""

    file: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


def excerpt(value: object, limit: int = 60) -> str:
    """An input value as a message quotes it: its repr, cut to `limit` characters with an ellipsis.
    A file may hold anything, a whole document in one string, and a message must stay a line to read."""
    try:
        text = repr(value)
    except ValueError:  # an integer too long for Python to print
        return f"an integer of {value.bit_length()} bits" if isinstance(value, int) else "a value too long to show"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_path(path: KeyPath) -> str:
    r"""('nccl', 'busbw', 'all_reduce') -> 'nccl.busbw.all_reduce'; list indices as [0]. A key that
    is not plain printable ASCII is quoted with its other characters escaped: 'gp\u0443s' is not
    'gpus', though a terminal shows both alike, and an invisible character shows as what it is."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            key = str(part) if str(part).isascii() and str(part).isprintable() else ascii(str(part))
            text += f".{key}" if text else key
    return text


# Shown as escapes: controls (ESC starts the sequences that set a window's title, clear the screen or
# move the cursor over a line to forge another), format characters (zero width, bidirectional
# overrides), separators other than the space, and code points that are no character
_NOT_SHOWN_AS_IS = frozenset(("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))
LONGEST_LINE = 2000


def shown(text: str, limit: int = LONGEST_LINE) -> str:
    r"""Text from a machine or an input file as one terminal line may show it: every character a
    terminal would act on or not show is written as its escape (\x1b, \u200b), and a line longer
    than `limit` is cut, saying how long it was. The one helper every printed line goes through."""
    if text.isascii() and text.isprintable() and len(text) <= limit:
        return text
    line = _escaped(text, kept="\t")
    return line if len(line) <= limit else f"{line[: limit - 40]}... (cut: {len(line)} characters)"


def visible(text: str) -> str:
    r"""Text from a machine or an input file as a page shows it: `shown`'s escapes (a bidirectional
    override or a zero-width character would make a name read as another; a carriage return or a NUL
    would not come back from the page as written), with its line breaks and tabs kept and nothing cut."""
    if text.isascii() and text.isprintable():
        return text
    return _escaped(text, kept="\t\n")


def _escaped(text: str, kept: str) -> str:
    out = []
    for character in text:
        category = unicodedata.category(character)
        if character not in kept and (category in _NOT_SHOWN_AS_IS or (category == "Zs" and character != " ")):
            out.append(ascii(character)[1:-1])
        else:
            out.append(character)
    return "".join(out)


class InputFileError(GpuAcceptError):
    """An input file (profile, facts, baseline) that cannot be used; lists every problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def lines(self) -> list[str]:
        return [str(problem) for problem in self.problems] or super().lines()

    def __reduce__(self) -> tuple[type, tuple[list[Problem]]]:
        # rebuilt from its problems where it crosses processes (a fleet read by a process pool):
        # from its joined text, each character would be taken for a problem
        return (type(self), (self.problems,))


class ProfileError(InputFileError):
    pass


class FactsError(InputFileError):
    pass


class ImportedTextError(InputFileError):
    """A command output given to `gpu-accept import` that cannot be read at all."""


class ProfileNotFound(GpuAcceptError):
    pass


class OptionError(GpuAcceptError):
    """An option that cannot work as given: a path that cannot be written, a folder that does not
    exist, an option that needs another. Found before any work is done."""


class NoDriverError(GpuAcceptError):
    """No NVIDIA driver or no GPU on this machine: nothing can be probed."""


class ProbeError(GpuAcceptError):
    """The probe itself could not run (it crashed or hung): the run cannot say anything."""
