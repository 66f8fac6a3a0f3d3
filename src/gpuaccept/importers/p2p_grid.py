"""`nvidia-smi topo -p2p r|w|n|a|p`: one peer-to-peer capability for every ordered GPU pair.

The grid itself does not say which capability it shows. The command line does, where the file
keeps it (`nvidia-smi topo -p2p r`, or a report's caption `(topo -p2p rw)`); failing that, the
file's name (`...-p2p-r.txt`). A grid whose capability cannot be told is refused: read as the
wrong capability it would pass or fail the wrong check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from gpuaccept.importers.text import Finding, TextFile, refuse, refuse_a_matrix_beyond_any_host
from gpuaccept.importers.topo_matrix import gpu_header, refuse_gpu_columns_out_of_order, rows_look_like
from gpuaccept.vocabulary.nvml_codes import P2P_STATUS_CODES, P2PCapability

# nvidia-smi's letters -> the capability names of P2P facts (NVML's index 4, "prop", is PCI there)
_LETTERS = {"r": P2PCapability.READ, "w": P2PCapability.WRITE, "n": P2PCapability.NVLINK, "a": P2PCapability.ATOMICS,
            "p": P2PCapability.PCI}
CAPABILITY_LETTERS = {letter: capability.name.lower() for letter, capability in _LETTERS.items()}
_COMMAND = re.compile(r"-p2p\s+([A-Za-z]+)")
_FILE_NAME = re.compile(r"p2p[-_]?([rwnap]{1,5})(?![a-z])", re.IGNORECASE)
KIND = "nvidia-smi topo -p2p"
_GPU_COLUMN = re.compile(r"GPU\d+")


@dataclass
class P2PGrid:
    file: str
    line: int
    gpu_count: int
    capabilities: list[str]  # read, write, ...: what every cell says about its pair
    statuses: dict[tuple[int, int], str | None] = field(default_factory=dict)  # NVML's status name; None: unreadable
    findings: list[Finding] = field(default_factory=list)

    def describe(self) -> str:
        letters = "".join(k for k, v in CAPABILITY_LETTERS.items() if v in self.capabilities) or "(capability not said)"
        return f"{KIND} {letters} ({self.gpu_count} GPUs)"


def find_p2p_grids(text: TextFile) -> list[P2PGrid]:
    found = []
    position = 0
    while position < len(text.lines):
        tokens = text.lines[position].text.split()
        header = gpu_header(tokens)
        if header and all(_GPU_COLUMN.fullmatch(token) for token in tokens) and rows_look_like(text, position, "p2p"):
            refuse_gpu_columns_out_of_order(text, position, tokens, KIND)
            refuse_a_matrix_beyond_any_host(text, position, header[1], KIND)
            grid, position = _read_grid(text, position, header[1])
            found.append(grid)
        else:
            position += 1
    return found


UNTOLD = (f"a {KIND} grid whose capability the file does not say: not used (keep the command line above it, "
          "nvidia-smi topo -p2p r, or name the file ...-p2p-r.txt)")


def _capabilities(text: TextFile, position: int) -> tuple[list[str], str]:
    """The capabilities the grid shows and what told them ("line 12", "the file name"); none: ([], "")."""
    for line in reversed(text.lines[max(0, position - 40) : position]):
        match = _COMMAND.search(line.text)
        if match:
            return _letters(match.group(1), text, line.number), f"line {line.number}"
    match = _FILE_NAME.search(Path(text.name).name)
    if match:
        return _letters(match.group(1), text, None), "the file name"
    return [], ""


def _letters(letters: str, text: TextFile, line: int | None) -> list[str]:
    unknown = [c for c in letters.lower() if c not in CAPABILITY_LETTERS]
    if unknown:
        raise refuse(text.name, line, f"-p2p {letters}: {unknown[0]!r} is not a capability nvidia-smi shows (r, w, n, a, p)")
    return [CAPABILITY_LETTERS[c] for c in dict.fromkeys(letters.lower())]


def _read_grid(text: TextFile, position: int, gpu_count: int) -> tuple[P2PGrid, int]:
    capabilities, told_by = _capabilities(text, position)
    grid = P2PGrid(text.name, text.lines[position].number, gpu_count, capabilities)
    if not capabilities:
        grid.findings.append(Finding(text.name, grid.line, UNTOLD, damaged=False))
    if told_by == "the file name":
        grid.findings.append(Finding(text.name, grid.line, f"the grid's capability ({', '.join(capabilities)}) "
                                     "is taken from the file name: the command line is not in the file", damaged=False))
    rows: dict[int, list[str]] = {}
    position += 1
    while position < len(text.lines):
        line = text.lines[position]
        tokens = line.text.split()
        if not tokens or not tokens[0].startswith("GPU") or not tokens[0][3:].isdigit():
            break
        index = int(tokens[0][3:])
        cells = tokens[1:]
        if index >= gpu_count or index in rows:
            grid.findings.append(Finding(text.name, line.number, f"row {tokens[0]} does not fit the header: ignored"))
        else:
            if len(cells) < gpu_count:
                grid.findings.append(Finding(text.name, line.number, f"row {tokens[0]} has {len(cells)} of {gpu_count} "
                                             "cells: the output is cut here; the missing pairs are unknown"))
            rows[index] = cells
        position += 1
    for src in range(gpu_count):
        if src not in rows:
            grid.findings.append(Finding(text.name, grid.line, f"no row for GPU{src}: its pairs from GPU{src} are unknown"))
        for dst in range(gpu_count):
            if src == dst:
                continue
            cell = rows.get(src, [])[dst] if dst < len(rows.get(src, [])) else None
            if cell is not None and cell not in P2P_STATUS_CODES:
                grid.findings.append(Finding(text.name, grid.line, f"GPU{src} to GPU{dst} reads {cell!r}: not a P2P status; not used"))
                cell = None
            grid.statuses[(src, dst)] = P2P_STATUS_CODES[cell] if cell else None
    return grid, position
