"""Command output as people keep it: read once, cleaned the same way for every reader.

Outputs arrive pasted into tickets and logs: with Windows line ends, with the terminal's colour and
underline codes, between shell prompts and Markdown fences. Every reader sees the same cleaned
lines, each with its number in the file, so a finding can name the line it is about.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gpuaccept.errors import ImportedTextError, Problem
from gpuaccept.files import read_input_bytes

# CSI sequences (colours, underline: ESC [ ... letter) and OSC sequences (ESC ] ... BEL)
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]")
MAX_BYTES = 64 * 2**20
# The highest GPU index an output may name. A record is made for every index up to the highest
# named, so a damaged index (GPU 999999999) must not be believed: no machine comes near this many
# GPUs (an NVL72 rack holds 72), and 1024 records are still cheap.
MAX_GPU_INDEX = 1023
# The most GPUs one host's `nvidia-smi topo -m` or `topo -p2p` may show: the largest single hosts
# hold 16 to 20 GPUs (an NVL72 rack shows each tray's 4). A matrix is read pair by pair, so a header
# of 100,000 GPU columns would make billions of cells: it is refused before a row is read.
MAX_MATRIX_GPUS = 128


@dataclass(frozen=True)
class Line:
    number: int  # 1-based, in the file as given
    text: str  # without line end and terminal escapes; tabs kept


@dataclass(frozen=True)
class TextFile:
    name: str  # as given on the command line
    lines: tuple[Line, ...]
    cleaned: tuple[str, ...] = ()  # what was taken out before reading: "CRLF line ends", "terminal escapes"

    def find(self, number: int) -> int:
        """The position in `lines` of the line with this number."""
        return next(i for i, line in enumerate(self.lines) if line.number == number)


@dataclass(frozen=True)
class Finding:
    """Something in a file that does not fit, and what was done about it: one line for people."""

    file: str
    line: int | None
    message: str
    damaged: bool = True  # False: a note on how the text was read, where nothing is wrong with it

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {'damaged' if self.damaged else 'note'}: {self.message}"


def refuse(name: str, line: int | None, message: str) -> ImportedTextError:
    return ImportedTextError([Problem(name, line, "", message)])


def read_text_file(path: Path, name: str | None = None) -> TextFile:
    name = name or str(path)
    try:
        raw = read_input_bytes(path, MAX_BYTES + 1)  # never more: the path may be /dev/zero
    except OSError as exc:
        raise refuse(name, None, f"cannot read it: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise refuse(name, None, f"larger than any command output this tool reads ({MAX_BYTES >> 20} MiB)")
    if b"\x00" in raw[:65536]:
        raise refuse(name, None, "a binary file (it holds NUL bytes), not the text of a command's output")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")  # a log from an old terminal: every byte is a character
    return text_file(text, name)


def text_file(text: str, name: str) -> TextFile:
    cleaned = []
    if "\r\n" in text:
        cleaned.append("CRLF line ends")
    if "\x1b" in text:
        cleaned.append("terminal escape codes")
    text = text.lstrip("\ufeff")
    lines = []
    for number, raw in enumerate(re.split(r"\r\n|\n|\r", text), start=1):
        lines.append(Line(number, _ESCAPES.sub("", raw).replace("\x1b", "")))
    while lines and not lines[-1].text.strip():
        lines.pop()
    if not lines:
        raise refuse(name, None, "the file is empty")
    too_long = next((line for line in lines if _TOO_MANY_DIGITS.search(line.text)), None)
    if too_long is not None:  # Python will not read it (4300 digits and more), and no output holds one
        raise refuse(name, too_long.number, f"a number of more than {MAX_DIGITS} digits: not the output of a command this tool reads")
    return TextFile(name, tuple(lines), tuple(cleaned))


MAX_DIGITS = 100  # more than any count, size, id or time these commands print
_TOO_MANY_DIGITS = re.compile(rf"\d{{{MAX_DIGITS + 1},}}")


def refuse_a_matrix_beyond_any_host(text: TextFile, position: int, gpu_count: int, kind: str) -> None:
    if gpu_count > MAX_MATRIX_GPUS:
        raise refuse(text.name, text.lines[position].number, f"{kind}: a header of {gpu_count} GPU columns, beyond any host "
                     f"(this tool reads at most {MAX_MATRIX_GPUS}): a damaged output")
