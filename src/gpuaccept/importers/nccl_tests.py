"""nccl-tests logs (`all_reduce_perf` and the other `*_perf`): one measured row per size.

Logs arrive as runs leave them: under `mpirun --tag-output` or `srun -l` tags (`[1,0]<stdout>:`,
`0:`), with NCCL INFO and MPI warnings among the rows, in the older layout (an `error` column,
`N/A` where validation was off), with rank lines elided, cut short, or ended by a crash. Each row
gives the out-of-place time, algbw and busbw as nccl-tests printed them (busbw is nccl-tests' own
figure, already scaled by its bus factor) and the wrong-element counts of both halves.

Sizes the header's range promised but the log lacks are failures where the run crashed, and
unknown where the log only ends early: a log cut by a ticket's size limit says nothing of them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from gpuaccept.importers.text import MAX_GPU_INDEX, Finding, TextFile, refuse
from gpuaccept.vocabulary.collectives import COLLECTIVES

_TAGS = re.compile(r"\[\d+(?:,\d+)*\](?:<std(?:out|err)>)?:?")
_SRUN = re.compile(r"^\s*\d+:(?=\s)")
_HEADER = re.compile(
    r"nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+) step: (\d+)\((factor|bytes)\) "
    r"warmup iters: (\d+)\s+iters: (\d+)"
)
_RANK = re.compile(r"^#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$")
# a bus id as nccl-tests prints it: [domain:bus:device] (%04x:%02x:%02x), or [0x19] (the bus alone) in older versions
_BUS = re.compile(r"0x[0-9a-f]{1,2}|[0-9a-f]{1,8}:[0-9a-f]{1,2}:[0-9a-f]{1,2}", re.IGNORECASE)
_PERF = re.compile(r"\b([a-z_]+?)_perf(?:_mpi)?\b")
_STARTING = re.compile(r"Collective test starting: ([a-z_]+?)_perf")
_FILE_COLLECTIVE = re.compile(r"(all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast|send_?recv)")
_VERSION = re.compile(r"NCCL version (\S+)|nccl-library=(\d+)|compiled with NCCL (\S+)")
_CRASH = re.compile(
    r"Test (NCCL|CUDA) failure|NCCL failure|Segmentation fault|Bus error|terminate called|"
    r"mpirun noticed|srun: error|Killed|Aborted \(core dumped\)|NCCL WARN .*(Cuda failure|unhandled)",
)
_FOOTER = re.compile(r"# (Out of bounds values|Avg bus bandwidth)|Collective test concluded")
_OUT_OF_BOUNDS = re.compile(r"Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")
DTYPES = {"float": "float32", "half": "float16", "double": "float64", "bfloat16": "bfloat16", "int8": "int8",
          "uint8": "uint8", "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
          "int": "int32", "f8e4m3": "float8_e4m3", "f8e5m2": "float8_e5m2"}
# the collectives this project measures, and the other tests nccl-tests ships
KNOWN = (*COLLECTIVES, "reduce", "sendrecv", "scatter", "gather", "hypercube")
# a collective as a file name may spell it, without underscores: allreduce_perf.log
FILE_NAMES = {name.replace("_", ""): name for name in (*COLLECTIVES, "sendrecv")}
KIND = "nccl-tests"
# The most sizes one run may print: a sweep by factor 2 from 1 byte to 16 EiB has 64, by a fixed step
# nccl-tests users keep to a few hundred. expected_sizes() stops at the same count.
MAX_ROWS = 4096


@dataclass
class Row:
    line: int
    size: int
    count: int
    dtype: str
    time_us: float
    algbw: float
    busbw: float
    wrong: int | None  # None: not validated (N/A), or the older layout's largest error, not a count


@dataclass
class Device:
    rank: int
    host: str
    device: int
    bus: str  # as the log prints it, checked against _BUS; "" where the log's is unreadable
    name: str


@dataclass
class NcclRun:
    file: str
    line: int  # the `nThread ...` header
    collective: str | None = None
    told_by: str = ""
    nccl_version: str | None = None
    n_threads: int = 1
    n_gpus: int = 1
    sizes: tuple[int, int, int, str] = (0, 0, 2, "factor")  # min, max, step, factor|bytes
    warmup: int = 0
    iterations: int = 0
    devices: list[Device] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    crash: tuple[int, str] | None = None
    complete: bool = False  # the closing lines were seen
    old_layout: bool = False  # an `error` column instead of `#wrong`
    has_root: bool = True
    findings: list[Finding] = field(default_factory=list)
    out_of_bounds: tuple[int, int] | None = None  # (line, count) where nccl-tests' own data check FAILED
    row_of_size: dict[int, int] = field(default_factory=dict)  # size -> its position in `rows`

    @property
    def ranks(self) -> int:
        return max(d.rank for d in self.devices) + 1 if self.devices else self.n_threads * self.n_gpus

    @property
    def hosts(self) -> list[str]:
        return list(dict.fromkeys(d.host for d in self.devices))

    def expected_sizes(self) -> list[int]:
        low, high, step, kind = self.sizes
        sizes: list[int] = []
        size = max(low, 1) if kind == "factor" else low
        while size <= high and len(sizes) < MAX_ROWS:
            sizes.append(size)
            if (kind == "factor" and step <= 1) or (kind == "bytes" and step <= 0):
                break
            size = size * step if kind == "factor" else size + step
        return sizes

    def describe(self) -> str:
        hosts = self.hosts
        where = f" on {len(hosts)} hosts" if len(hosts) > 1 else ""
        ending = "crashed" if self.crash else ("complete" if self.complete else "cut short")
        return f"{KIND} {self.collective}_perf ({self.ranks} ranks{where}, {len(self.rows)} sizes, {ending})"


def untagged(text: str) -> str:
    """A line without the launcher's tags: `[1,0]<stdout>:`, `[0]`, `srun -l`'s `0:`."""
    return _TAGS.sub(" ", _SRUN.sub("", text, count=1))


def find_nccl_runs(text: TextFile) -> list[NcclRun]:
    runs: list[NcclRun] = []
    run: NcclRun | None = None
    command: tuple[str, str] | None = None  # (collective, "line N") from the last *_perf command seen
    version: str | None = None
    for line in text.lines:
        clean = untagged(line.text)
        found_version = _VERSION.search(clean)
        if found_version:
            version = next(g for g in found_version.groups() if g)
            if run is not None and run.nccl_version is None:
                run.nccl_version = version
        header = _HEADER.search(clean)
        if header:
            run = _start(text, line.number, header, command, version)
            runs.append(run)
            continue
        starting = _STARTING.search(clean)
        if starting:
            command = (starting.group(1), f"line {line.number}")
            if run is not None and run.collective is None:
                run.collective, run.told_by = starting.group(1), f"line {line.number}"
            continue
        perf = _PERF.search(clean)
        if perf and perf.group(1) in KNOWN and "NCCL INFO" not in clean:
            command = (perf.group(1), f"line {line.number}")
        if run is None:
            continue
        _read_line(run, line.number, clean, text.name)
    for run in runs:
        _finish(run, text)
    return runs


def _start(
    text: TextFile, number: int, header: re.Match[str], command: tuple[str, str] | None, version: str | None
) -> NcclRun:
    threads, gpus, low, high, step, kind, warmup, iterations = header.groups()
    if int(iterations) < 1:
        raise refuse(text.name, number, f"the header says iters: {iterations}: a run that timed nothing; its rows are no measurement")
    run = NcclRun(text.name, number, n_threads=int(threads), n_gpus=int(gpus), warmup=int(warmup), iterations=int(iterations),
                  sizes=(int(low), int(high), int(step), kind), nccl_version=version)
    if command:
        run.collective, run.told_by = command
    return run


def _read_line(run: NcclRun, number: int, clean: str, name: str) -> None:
    rank = _RANK.match(clean.strip())
    if rank:
        _read_rank(run, number, rank, name)
        return
    stripped = clean.strip()
    if stripped.startswith("#") and "size" in stripped and ("count" in stripped or "bytes" in stripped):
        run.old_layout = " error " in f" {stripped} " or " res " in f" {stripped} "
        run.has_root = "root" in stripped
        return
    if stripped.startswith("#") and "bytes" in stripped and " N " in f" {stripped} ":
        run.old_layout = True
        return
    out_of_bounds = _OUT_OF_BOUNDS.search(clean)
    if out_of_bounds and out_of_bounds.group(2) == "FAILED":
        run.out_of_bounds = (number, int(out_of_bounds.group(1)))
        run.findings.append(Finding(name, number, f"nccl-tests reports {out_of_bounds.group(1)} out-of-bounds values: its own "
                                    "data check FAILED, so every size of the run fails"))
    if _FOOTER.search(clean):
        run.complete = True
        return
    if run.crash is None and _CRASH.search(clean):
        run.crash = (number, stripped)
        return
    tokens = clean.split()
    if len(tokens) >= 3 and tokens[0].isdigit() and tokens[1].isdigit() and tokens[2] in DTYPES:
        _read_row(run, number, tokens, name)


def _read_rank(run: NcclRun, number: int, rank: re.Match[str], name: str) -> None:
    index, host, device, bus, model = rank.groups()
    if int(device) > MAX_GPU_INDEX:
        run.findings.append(Finding(name, number, f"rank {index} is on device {device}, beyond any machine (GPU indices stop at "
                                    f"{MAX_GPU_INDEX} here): a damaged line; this rank line is not used"))
        return
    if not _BUS.fullmatch(bus.strip()):
        run.findings.append(Finding(name, number, f"rank {index}'s bus id [{bus}] is not a PCI bus id: it is not used"))
        bus = ""
    run.devices.append(Device(int(index), host, int(device), bus, model.strip()))


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _read_row(run: NcclRun, number: int, tokens: list[str], name: str) -> None:
    size, count, dtype = int(tokens[0]), int(tokens[1]), tokens[2]
    rest = tokens[3:]
    if rest and _number(rest[0]) is None and rest[0] != "N/A":
        rest = rest[1:]  # the reduction (sum, none, ...); alltoall leaves it blank in the older layout
    if run.has_root and len(rest) == 9 and re.fullmatch(r"-?\d+", rest[0]):
        rest = rest[1:]
    values = [value for value in map(_number, rest[:3]) if value is not None]
    if len(rest) < 4 or len(values) < 3:
        run.findings.append(Finding(name, number, f"the row for {size} bytes is cut or broken by other output "
                                    f"({' '.join(tokens[3:])[:60]!r}): not used"))
        return
    if size == 0:
        return  # nccl-tests' empty warm-up sizes: nothing measured
    if not all(math.isfinite(value) and value >= 0 for value in values):
        run.findings.append(Finding(name, number, f"the row for {size} bytes reads {' '.join(rest[:3])!r} as its time, algbw "
                                    "and busbw: a negative or not-a-number figure is no measurement: not used"))
        return
    wrong = [_wrong(v, run.old_layout) for v in (rest[3], rest[7] if len(rest) >= 8 else "N/A")]
    known = [w for w in wrong if w is not None]
    total = sum(known) if known and wrong[0] is not None else None
    row = Row(number, size, count, DTYPES[dtype], values[0], values[1], values[2], total)
    earlier = run.row_of_size.get(size)
    if earlier is not None:
        # the same size measured twice (two runs in one log): the worse row is the machine's, a
        # better first figure must not hide it
        first = run.rows[earlier]
        worse = row if (row.busbw, -(row.wrong or 0)) < (first.busbw, -(first.wrong or 0)) else first
        run.findings.append(Finding(name, number, f"{size} bytes appears twice (first at line {first.line}, busbw {first.busbw:g} "
                                    f"then {row.busbw:g} GB/s): the worse row, line {worse.line}, is kept"))
        run.rows[earlier] = worse
        return
    if len(run.rows) >= MAX_ROWS:
        raise refuse(name, number, f"more than {MAX_ROWS} sizes in one run: no nccl-tests sweep of a machine has as many; "
                     "a damaged or generated log")
    run.row_of_size[size] = len(run.rows)
    run.rows.append(row)


def _wrong(text: str, old_layout: bool) -> int | None:
    if old_layout or not re.fullmatch(r"\d+", text):
        return None  # N/A (not validated), or the older layout's largest error, which is not a count
    return int(text)


def _finish(run: NcclRun, text: TextFile) -> None:
    if run.collective is None:
        match = _FILE_COLLECTIVE.search(Path(text.name).name.lower())
        if match:
            run.collective, run.told_by = FILE_NAMES[match.group(1).replace("_", "")], "the file name"
            run.findings.append(Finding(text.name, run.line, f"which collective ran ({run.collective}) is taken from the file "
                                        "name: the log names none", damaged=False))
    last = max((row.size for row in run.rows), default=0)
    after = f"after {last} bytes" if last else "before its first result row"
    if run.crash:
        line, text_of_crash = run.crash
        run.findings.append(Finding(text.name, line, f"the run crashed {after}: {text_of_crash[:120]}; the sizes it did not "
                                    "reach fail"))
    elif not run.complete:
        run.findings.append(Finding(text.name, run.line, f"the log ends {after} without nccl-tests' closing lines "
                                    "(# Avg bus bandwidth): the sizes it did not reach are unknown"))
    devices = run.devices
    if devices and len(devices) < run.ranks:
        shown = ", ".join(str(d.rank) for d in devices)
        run.findings.append(Finding(text.name, run.line, f"rank lines elided (ranks {shown} shown of {run.ranks}): "
                                    "each host's GPU count is taken from its highest device number"))
    if not devices:
        run.findings.append(Finding(text.name, run.line, f"no rank lines: {run.ranks} rank(s) assumed from nThread x nGpus",
                                    damaged=False))
    if run.old_layout and run.rows:
        run.findings.append(Finding(text.name, run.line, "the older layout reports the largest error, not a count of wrong "
                                    "elements: whether results were right is not established", damaged=False))
    elif any(row.wrong is None for row in run.rows):
        run.findings.append(Finding(text.name, run.line, "#wrong reads N/A (validation off): whether results were right is "
                                    "not established for those sizes", damaged=False))
