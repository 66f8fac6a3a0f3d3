"""Errors that end a run before any check is made.

Each carries a message meant to be printed as is, one line per problem, and the exit code the
command line gives for it. Hardware faults are not errors here: they are verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass

KeyPath = tuple[str | int, ...]  # where a value sits in an input file: str keys and int list indices

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2


class GpuAcceptError(Exception):
    """A problem with the input or the environment: bad usage, a bad file, no driver."""

    exit_code = EXIT_USAGE

    def lines(self) -> list[str]:
        return str(self).splitlines() or [type(self).__name__]


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
    """('nccl', 'busbw', 'all_reduce') -> 'nccl.busbw.all_reduce'; list indices as [0]."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


class InputFileError(GpuAcceptError):
    """An input file (profile, facts, baseline) that cannot be used; lists every problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

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
