"""`nvidia-smi topo -m`: every GPU pair's link, each GPU's NICs, CPU and NUMA affinity.

The table is read as nvidia-smi prints it and as people paste it: tab- or space-separated, with
NIC columns named NIC0.. (and a NIC legend) or mlx5_0.. (older drivers), NIC rows, affinity
fields that are empty or N/A, `SOC` where older drivers meant SYS, after a shell prompt, inside a
longer log. What does not fit is a finding that says what was still used: a row cut short keeps
the cells it has and takes the rest of its GPU's links from the other rows, which say the same
thing the other way round.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuaccept.facts.machine import NicLink
from gpuaccept.facts.record import Unavailable, not_probed
from gpuaccept.importers.text import Finding, TextFile, refuse, refuse_a_matrix_beyond_any_host
from gpuaccept.vocabulary.affinity import is_cpu_list
from gpuaccept.vocabulary.links import is_link_type, pair_key
from gpuaccept.vocabulary.nvml_codes import P2P_STATUS_CODES

_GPU = re.compile(r"^GPU(\d+)$")
_NIC_LEGEND = re.compile(r"^\s*(\S+):\s*(\S+)\s*$")
AFFINITY_COLUMNS = (("CPU Affinity", "cpu"), ("NUMA Affinity", "numa"), ("GPU NUMA ID", "gpu_numa"))
OLDER_NAMES = {"SOC": "SYS"}  # what older drivers print for a link type
KIND = "nvidia-smi topo -m"

Cells = list[str | None]  # a row's cells, None where unreadable
GpuRows = dict[int, tuple[int, Cells]]  # GPU -> (its line, its cells)
# GPU -> (its line, its affinity fields by column key: a value, or None where the field is left empty)
AffinityFields = dict[int, tuple[int, dict[str, str | None]]]
Report = Callable[[int, str], None]  # (line, message): a finding


def is_cell(text: str) -> bool:
    """A cell of the table: a link type, an older driver's name for one, or X (a device to itself)."""
    return text == "X" or text in OLDER_NAMES or is_link_type(text)


@dataclass
class TopoMatrix:
    file: str
    line: int  # the header's line
    gpu_count: int
    nic_names: list[str]  # the columns after the GPUs, named as the NIC legend names them
    links: dict[tuple[int, int], str | None] = field(default_factory=dict)  # (a, b), a < b; None: unreadable
    nics: dict[int, list[NicLink] | Unavailable] = field(default_factory=dict)
    cpu: dict[int, str | Unavailable] = field(default_factory=dict)
    numa: dict[int, str | Unavailable] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def describe(self) -> str:
        nics = f", {len(self.nic_names)} NIC(s)" if self.nic_names else ""
        return f"{KIND} ({self.gpu_count} GPUs{nics})"


def gpu_header(tokens: list[str]) -> tuple[int, int] | None:
    """(where GPU0 is, how many GPU columns follow in order) for a header line, else None."""
    if "GPU0" not in tokens:
        return None
    start = tokens.index("GPU0")
    count = 0
    while start + count < len(tokens) and tokens[start + count] == f"GPU{count}":
        count += 1
    return start, count


def refuse_gpu_columns_out_of_order(text: TextFile, position: int, tokens: list[str], kind: str) -> None:
    """A header whose GPU columns are not GPU0, GPU1, ... in order: every cell would be read under the
    wrong GPU (or the GPUs after a swap as NICs), so nothing in it can be used."""
    named = [token for token in tokens if _GPU.fullmatch(token)]
    if named != [f"GPU{i}" for i in range(len(named))]:
        shown = " ".join(named[:8]) + (" ..." if len(named) > 8 else "")
        raise refuse(text.name, text.lines[position].number, f"the {kind} header's GPU columns are not in order ({shown}): "
                     "which cell is which GPU's cannot be told")


def rows_look_like(text: TextFile, header: int, vocabulary: str) -> bool:
    """Whether the first row under the header holds link types ("topo") or P2P codes ("p2p")."""
    for line in text.lines[header + 1 : header + 3]:
        tokens = line.text.split()
        if not tokens:
            continue
        if tokens[0] != "GPU0":
            return False
        cells = [c for c in tokens[1:] if c != "X"]
        links = sum(1 for c in cells if is_cell(c))
        codes = sum(1 for c in cells if c in P2P_STATUS_CODES)
        if vocabulary == "topo" and links == codes == 0 and tokens[1:2] == ["X"]:
            return "Affinity" in text.lines[header].text  # one GPU, no NIC: only its affinity follows the X
        return links > codes if vocabulary == "topo" else codes > links
    return False


def find_topo_matrices(text: TextFile) -> list[TopoMatrix]:
    found = []
    position = 0
    while position < len(text.lines):
        header = gpu_header(text.lines[position].text.split())
        if header and header[1] and rows_look_like(text, position, "topo"):
            refuse_a_matrix_beyond_any_host(text, position, header[1], KIND)
            refuse_gpu_columns_out_of_order(text, position, text.lines[position].text.split(), KIND)
            matrix, position = _read_matrix(text, position, *header)
            found.append(matrix)
        else:
            position += 1
    return found


def _read_matrix(text: TextFile, position: int, start: int, gpu_count: int) -> tuple[TopoMatrix, int]:
    header_line = text.lines[position]
    tokens = header_line.text.split()
    devices: list[str] = []
    rest = start + gpu_count
    while rest < len(tokens) and tokens[rest] not in ("CPU", "NUMA") and tokens[rest : rest + 2] != ["GPU", "NUMA"]:
        devices.append(tokens[rest])
        rest += 1
    tail = " ".join(tokens[rest:])
    columns = [key for title, key in AFFINITY_COLUMNS if title in tail]
    layout = _Layout.of(header_line.text, start, gpu_count + len(devices))
    matrix = TopoMatrix(text.name, header_line.number, gpu_count, list(devices))

    def finding(line: int, message: str) -> None:
        matrix.findings.append(Finding(text.name, line, message))

    names = [f"GPU{i}" for i in range(gpu_count)] + devices
    width = len(names)
    gpu_cells: GpuRows = {}
    device_cells: dict[str, Cells] = {}
    affinity: AffinityFields = {}
    unnamed_rows: dict[str, Cells] = {}  # device rows the header has no column for: their GPU cells
    soc_seen = False
    position += 1
    while position < len(text.lines):
        line = text.lines[position]
        row = line.text.split()
        if not row or row[0].rstrip(":") == "Legend":
            break
        name = row[0]
        cells = row[1:]
        if name not in names:
            if len(cells) >= gpu_count and all(is_cell(c) for c in cells[:gpu_count]) and name not in unnamed_rows:
                # a NIC row the header (cut at the terminal's width, columns taken out) has no column for:
                # its GPU cells still say how each GPU reaches that NIC
                finding(line.number, f"row {name} names a device the header has no column for: its GPU cells are read "
                        "as how each GPU reaches it")
                unnamed_rows[name] = [c if is_cell(c) else None for c in cells[:gpu_count]]
                position += 1
                continue
            break
        if name in device_cells or (_GPU.match(name) and int(name[3:]) in gpu_cells):
            finding(line.number, f"row {name} appears twice: the first one is kept")
            position += 1
            continue
        if len(cells) < width:
            finding(line.number, f"row {name} has {len(cells)} of {width} cells: the output is cut here; "
                    "what the row lacks is read from the other rows where they say it")
        links: list[str | None] = []
        clipped = False
        for column, cell in zip(names, cells[:width], strict=False):  # a row cut short has fewer cells
            if cell in OLDER_NAMES:
                soc_seen, cell = True, OLDER_NAMES[cell]
            if is_cell(cell):
                links.append(cell)
            else:
                finding(line.number, f"row {name}, column {column} reads {cell!r}: not a link type (a clipped field); "
                        "that cell is not used" + (", nor the row's affinity fields after it" if _GPU.match(name) else ""))
                links.append(None)
                clipped = True
        links += [None] * (width - len(links))
        if _GPU.match(name):
            gpu_cells[int(name[3:])] = (line.number, links)
            if len(cells) >= width and not clipped:
                affinity[int(name[3:])] = (line.number, _affinity_fields(layout, line.text, cells, width, columns))
        else:
            device_cells[name] = links
        position += 1
    if soc_seen:
        matrix.findings.append(Finding(text.name, header_line.number, "SOC read as SYS (the name older drivers print for "
                                       "the same path)", damaged=False))

    missing_rows = [d for d in devices if d not in device_cells]
    if device_cells and missing_rows:
        finding(text.lines[position - 1].number, f"the table ends without the rows of {', '.join(missing_rows)}: the output "
                "is cut here; how the GPUs reach them is read from the GPU rows")
    legend = _nic_legend(text, position)
    matrix.nic_names = [legend.get(d, d) for d in devices] + [legend.get(d, d) for d in unnamed_rows]
    _resolve_links(matrix, gpu_cells, finding)
    _resolve_nics(matrix, devices, gpu_cells, device_cells, unnamed_rows)
    _resolve_affinity(matrix, columns, affinity, finding)
    return matrix, position


def _affinity_fields(layout: _Layout | None, row: str, cells: list[str], width: int, columns: list[str]) -> dict[str, str | None]:
    """A GPU row's affinity fields by column: by where they sit where the row lines up with the
    header, else in order (fields left empty at the end of a row are not printed)."""
    found = layout.fields(row, width, columns) if layout else None
    if found is not None:
        return found
    values = cells[width:]
    found = dict(zip(columns, values, strict=False))
    if len(values) > len(columns):
        found["more"] = " ".join(values[len(columns):])
    return found


def _nic_legend(text: TextFile, position: int) -> dict[str, str]:
    legend: dict[str, str] = {}
    for at in range(position, min(len(text.lines), position + 80)):
        if text.lines[at].text.strip() == "NIC Legend:":
            for line in text.lines[at + 1 :]:
                if not line.text.strip():
                    if legend:
                        break
                    continue
                match = _NIC_LEGEND.match(line.text)
                if not match:
                    break
                legend[match.group(1)] = match.group(2)
            break
    return legend


def _resolve_links(matrix: TopoMatrix, gpu_cells: GpuRows, finding: Report) -> None:
    n = matrix.gpu_count
    for i in range(n):
        if i not in gpu_cells:
            finding(matrix.line, f"no row for GPU{i}: its links are read from the other rows; its NICs and affinity are unknown")
        elif gpu_cells[i][1][i] not in ("X", None):
            finding(gpu_cells[i][0], f"GPU{i} to itself reads {gpu_cells[i][1][i]!r}, not X: that row's cells are not used")
            gpu_cells[i] = (gpu_cells[i][0], [None] * len(gpu_cells[i][1]))
    for a in range(n):
        for b in range(a + 1, n):
            forward = gpu_cells[a][1][b] if a in gpu_cells else None
            backward = gpu_cells[b][1][a] if b in gpu_cells else None
            if forward and backward and forward != backward:
                finding(gpu_cells[b][0], f"GPU{b} to GPU{a} reads {backward} but GPU{a} to GPU{b} reads {forward}: "
                        f"the pair {pair_key(a, b)} is not used")
                matrix.links[(a, b)] = None
            else:
                matrix.links[(a, b)] = forward or backward


def _resolve_nics(
    matrix: TopoMatrix, devices: list[str], gpu_cells: GpuRows, device_cells: dict[str, Cells], unnamed_rows: dict[str, Cells]
) -> None:
    n = matrix.gpu_count
    for i in range(n):
        links: list[NicLink] = []
        missing = []
        for column, (device, name) in enumerate(zip([*devices, *unnamed_rows], matrix.nic_names, strict=True), start=n):
            cell = gpu_cells[i][1][column] if i in gpu_cells and device in devices else None
            if cell is None and device in device_cells:
                cell = device_cells[device][i]
            if cell is None and device in unnamed_rows:
                cell = unnamed_rows[device][i]
            if cell is None or cell == "X" or cell.startswith("NV"):
                missing.append(name)
                continue
            links.append(NicLink(nic=name, link=cell))
        if missing:
            matrix.nics[i] = not_probed(f"{KIND} does not say how GPU{i} reaches {', '.join(missing)}")
        else:
            matrix.nics[i] = links


def _resolve_affinity(matrix: TopoMatrix, columns: list[str], affinity: AffinityFields, finding: Report) -> None:
    for i in range(matrix.gpu_count):
        found: dict[str, str | Unavailable] = {}
        for key in ("cpu", "numa"):
            found[key] = not_probed(f"this {KIND} has no {key.upper()} Affinity column" if key not in columns else
                                    f"the row of GPU{i} does not reach its {key.upper()} Affinity field")
        if i in affinity:
            number, fields = affinity[i]
            if "more" in fields:
                finding(number, f"GPU{i} has more fields after its links than the {len(columns)} affinity column(s) "
                        f"({fields['more']!r} left over): its affinity is not used")
                fields = {}
            empty = [key.upper() for key in ("cpu", "numa") if key in fields and fields[key] is None]
            for key in ("cpu", "numa"):
                if key not in fields:
                    continue  # fields left empty at the end of a row are not printed
                cell = fields[key]
                if cell is None:
                    found[key] = Unavailable(unavailable="not_found", detail=f"{KIND} leaves the field empty")
                elif cell == "N/A":
                    found[key] = Unavailable(unavailable="not_found", detail=f"{KIND} prints N/A")
                elif is_cpu_list(cell):
                    found[key] = cell
                else:
                    finding(number, f"GPU{i} {key.upper()} Affinity reads {cell!r}: not a list of numbers (a clipped field); "
                            "not used")
                    found[key] = not_probed(f"{KIND} field reads {cell!r}")
            unreached = [key.upper() for key in columns if key != "gpu_numa" and key not in fields]
            if fields and (empty or unreached):
                finding(number, f"GPU{i} leaves its {', '.join(empty + unreached)} Affinity empty")
        matrix.cpu[i] = found["cpu"]
        matrix.numa[i] = found["numa"]


@dataclass(frozen=True)
class _Layout:
    """Where the header's columns begin, tabs expanded as a terminal shows them. nvidia-smi starts
    every link cell and the CPU Affinity field at its column (tab-separated or padded with spaces);
    a CPU field left empty starts the next value later. Read in order, that value (the NUMA node)
    would be taken for the CPU list and every field after it moved one column left."""

    cells: tuple[int, ...]  # where each GPU and NIC column begins
    cpu: int | None  # where the CPU Affinity title begins

    @classmethod
    def of(cls, header: str, first: int, count: int) -> _Layout | None:
        expanded = header.expandtabs(8)
        starts = [m.start() for m in re.finditer(r"\S+", expanded)][first : first + count]
        cpu = expanded.find("CPU Affinity")
        return cls(tuple(starts), cpu if cpu >= 0 else None) if len(starts) == count else None

    def fields(self, row: str, width: int, columns: list[str]) -> dict[str, str | None] | None:
        """The row's affinity fields by column (None: left empty); None where the row does not line
        up with the header (spaces squeezed out when it was pasted): then its fields are read in order."""
        tokens = [(m.start(), m.group()) for m in re.finditer(r"\S+", row.expandtabs(8))][1:]
        cells, rest = tokens[:width], tokens[width:]
        if len(cells) < width or any(abs(at - column) > _SLACK for (at, _), column in zip(cells, self.cells, strict=True)):
            return None
        if self.cpu is None or not columns or columns[0] != "cpu" or not rest or rest[0][0] < self.cpu - _SLACK:
            return None
        values: list[str | None] = [value for _, value in rest]
        if rest[0][0] > self.cpu + _SLACK:
            values.insert(0, None)  # the first value starts past the CPU column: the CPU field is empty
        found: dict[str, str | None] = dict(zip(columns, values, strict=False))  # fields empty at the end are not printed
        if len(values) > len(columns):
            found["more"] = " ".join(value for value in values[len(columns):] if value)
        return found


_SLACK = 3  # how far a cell may sit from its column's title: " X " and "NV18" are centred under "GPU0"
