"""How GPUs are connected and named: link types as `nvidia-smi topo -m` prints them, the GPU block
of such a table (or of a `topo -p2p` grid) read back, and the keys that name a GPU (`gpu3`) and a
pair (`gpu0-gpu1`).

A link type is what nvidia-smi prints for a GPU pair: `NV#` (a bonded set of # NVLinks) or the
PCIe path: PIX (at most one bridge), PXB (several bridges), PHB (through a host bridge), NODE
(between host bridges of one NUMA node), SYS (across the SMP interconnect).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

from gpuaccept.vocabulary.nvml_codes import P2P_STATUS_CODES

PcieLevel = Literal["PIX", "PXB", "PHB", "NODE", "SYS"]  # nearest first
PCIE_LEVELS: tuple[PcieLevel, ...] = get_args(PcieLevel)
LINK_TYPE_PATTERN = r"^(NV[1-9][0-9]*|" + "|".join(PCIE_LEVELS) + r")$"
_LINK_TYPE = re.compile(LINK_TYPE_PATTERN)
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_GPU_NAME = re.compile(r"^GPU(\d+)$")

# `gpuN` is the CUDA ordinal as the run sees it: the subject of every per-GPU test and the key of
# per-GPU profile settings; a pair is two of them, `gpu0-gpu1`.
# One spelling per GPU (gpu3, never gpu03 or a non-ASCII digit): a key spelled otherwise would name no
# test and its rule would silently judge nothing.
_INDEX = "(0|[1-9][0-9]*)"
GPU_KEY_PATTERN = rf"^gpu{_INDEX}$"
PAIR_KEY_PATTERN = rf"^gpu{_INDEX}-gpu{_INDEX}$"
_PAIR_KEY = re.compile(PAIR_KEY_PATTERN)

# nvmlGpuTopologyLevel_t as nvidia-smi labels it. INTERNAL (two GPUs on one board) has no label of
# its own in nvidia-smi's legend; it is kept distinct rather than guessed.
TOPOLOGY_LEVEL_LABELS = {0: "INTERNAL", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def is_link_type(text: str) -> bool:
    return bool(_LINK_TYPE.match(text))


def nvlink_type(link_count: int) -> str:
    return f"NV{link_count}"


def gpu_key(index: int) -> str:
    return f"gpu{index}"


def parse_gpu_key(key: str) -> int:
    """'gpu3' -> 3, for a key that matches GPU_KEY_PATTERN."""
    return int(key.removeprefix("gpu"))


def normalize_uuid(uuid: str) -> str:
    """A GPU's UUID as NVML ("GPU-3c05...") and CUDA ("3c05...") both name it: lower case, no prefix."""
    text = uuid.strip().lower()
    return text[4:] if text.startswith("gpu-") else text


def pair_key(a: int, b: int) -> str:
    return f"{gpu_key(a)}-{gpu_key(b)}"


def parse_pair_key(key: str) -> tuple[int, int] | None:
    match = _PAIR_KEY.match(key)
    return (int(match.group(1)), int(match.group(2))) if match else None


@dataclass(frozen=True)
class MatrixParseError(Exception):
    line: int  # 1-based line within the pasted text
    message: str

    def __str__(self) -> str:
        return f"line {self.line} of the matrix: {self.message}"


def parse_gpu_matrix(text: str) -> list[list[str]]:
    """The GPU-by-GPU block of a `nvidia-smi topo -m` (or `topo -p2p r`) table, as pasted.

    Columns after the GPU columns (NICs, CPU and NUMA affinity) and rows of other devices are
    ignored, as are terminal escape codes and the legend. The diagonal is returned as "X".
    """
    header = None
    rows: dict[int, tuple[int, list[str]]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _ANSI_ESCAPE.sub("", raw).strip()
        if not line:
            continue
        cells = line.split()
        if header is None:
            if _GPU_NAME.match(cells[0]):  # the first GPU-led line is the header
                names = []
                for cell in cells:
                    found = _GPU_NAME.match(cell)
                    if not found:
                        break
                    names.append(int(found.group(1)))
                if names != list(range(len(names))):
                    raise MatrixParseError(number, f"header names GPUs {names}: expected GPU0, GPU1, ... in order")
                header = names
            continue
        found = _GPU_NAME.match(cells[0])
        if not found:
            if cells[0].rstrip(":") == "Legend":
                break
            continue  # a NIC row, or a NUMA/affinity note
        index = int(found.group(1))
        values = cells[1 : 1 + len(header)]
        if len(values) < len(header):
            raise MatrixParseError(number, f"row GPU{index} has {len(values)} entries for {len(header)} GPU columns")
        if index in rows:
            raise MatrixParseError(number, f"row GPU{index} appears twice (first on line {rows[index][0]})")
        rows[index] = (number, values)
    if header is None:
        raise MatrixParseError(1, "no header row naming GPU0 GPU1 ... was found")
    missing = [i for i in header if i not in rows]
    if missing:
        raise MatrixParseError(1, "no row for " + ", ".join(f"GPU{i}" for i in missing))
    return [rows[i][1] for i in header]


def parse_p2p_matrix(text: str) -> list[list[str]]:
    """`parse_gpu_matrix` of a `topo -p2p` grid, checked: X on the diagonal, a status code elsewhere."""
    matrix = parse_gpu_matrix(text)
    for i, row in enumerate(matrix):
        for j, value in enumerate(row):
            if i == j:
                if value != "X":
                    raise MatrixParseError(1, f"GPU{i} to itself reads {value!r}: expected X")
            elif value not in P2P_STATUS_CODES:
                codes = ", ".join(P2P_STATUS_CODES)
                raise MatrixParseError(1, f"GPU{i} to GPU{j} reads {value!r}: not a P2P status ({codes})")
    return matrix


def parse_link_matrix(text: str) -> list[list[str]]:
    """`parse_gpu_matrix`, checked to be a link-type matrix: X on the diagonal, symmetric."""
    matrix = parse_gpu_matrix(text)
    size = len(matrix)
    for i in range(size):
        for j in range(size):
            value = matrix[i][j]
            if i == j:
                if value != "X":
                    raise MatrixParseError(1, f"GPU{i} to itself reads {value!r}: expected X")
            elif not is_link_type(value):
                raise MatrixParseError(1, f"GPU{i} to GPU{j} reads {value!r}: not a link type (NV#, PIX, PXB, PHB, NODE, SYS)")
            elif j < i and value != matrix[j][i]:
                raise MatrixParseError(1, f"GPU{i} to GPU{j} reads {value} but GPU{j} to GPU{i} reads {matrix[j][i]}")
    return matrix
