"""nccl-tests logs (`all_reduce_perf` and the other `*_perf`): one measured row per size.

Logs arrive as runs leave them: under `mpirun --tag-output` or `srun -l` tags (`[1,0]<stdout>:`,
`0:`), with NCCL INFO and MPI warnings among the rows, in the older layout (an `error` column,
`N/A` where validation was off), with rank lines elided, cut short, or ended by a crash. Each row
gives the out-of-place time, algbw and busbw as nccl-tests printed them (busbw is nccl-tests' own
figure, already scaled by its bus factor) and the wrong-element counts of both halves.

Sizes the header's range promised but the log lacks are failures where the run crashed, and
unknown where the log only ends early: a log cut by a ticket's size limit says nothing of them.

How many ranks ran is read from the rank lines under `# Using devices`. Where they are missing (a
log pasted from its table, a launcher that lost them), it is read from what the rows themselves
say: busbw is algbw times a factor that depends on the rank count (2(n-1)/n for all_reduce), and
NCCL's INFO lines name `nranks`. `nThread x nGpus` is only the GPUs of one process: it counts the
ranks only of a run that was one process.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from gpuaccept.importers.text import MAX_GPU_INDEX, Finding, TextFile, refuse
from gpuaccept.vocabulary.collectives import COLLECTIVES, bus_factor

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
_NRANKS = re.compile(r"NCCL INFO .*\bnranks (\d+)\b")
# what a launch of several processes leaves in its log: the launcher's command, its tags, an MPI build
_SEVERAL_PROCESSES = re.compile(r"\b(mpirun|mpiexec|srun|torchrun|orterun|prterun)\b|_perf_mpi\b|\bSLURM_NTASKS=|<std(out|err)>")
_TABLE_HEADER = re.compile(r"^#\s*size\s+(count|bytes|N)\b")
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
# The most ranks one job may have: the largest jobs run tens of thousands of GPUs
MAX_RANKS = 1 << 20


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
    rounding: float = 0.005  # how far algbw and busbw may be from what was measured: half their last printed digit
    kind: str = ""  # the data type and reduction as printed: "float sum"


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
    line: int  # the `nThread ...` header, or the first line of the run where the log lacks it
    collective: str | None = None
    told_by: str = ""
    nccl_version: str | None = None
    # None below: the `# nThread ...` header is not in the log
    n_threads: int | None = None
    n_gpus: int | None = None
    sizes: tuple[int, int, int, str] | None = None  # min, max, step, factor|bytes
    warmup: int | None = None
    iterations: int | None = None
    devices: list[Device] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    crash: tuple[int, str] | None = None
    complete: bool = False  # the closing lines were seen
    old_layout: bool = False  # an `error` column instead of `#wrong`
    has_root: bool = True
    findings: list[Finding] = field(default_factory=list)
    out_of_bounds: tuple[int, int] | None = None  # (line, count) where nccl-tests' own data check FAILED
    row_of_size: dict[int, int] = field(default_factory=dict)  # size -> its position in `rows`
    nranks_said: dict[int, int] = field(default_factory=dict)  # NCCL INFO's `nranks N` -> the first line saying it
    kinds: dict[str, int] = field(default_factory=dict)  # data type and reduction -> first line, where a run has several
    ranks: int = 0  # how many ranks ran, decided once the run is read (count_ranks)
    ranks_told_by: str = ""
    one_process: bool = False  # the rank count is nThread x nGpus of a run that was one process

    @property
    def hosts(self) -> list[str]:
        return list(dict.fromkeys(d.host for d in self.devices))

    @property
    def per_process(self) -> int | None:
        """The GPUs one process drove: nThread x nGpus, where the header is in the log."""
        return self.n_threads * self.n_gpus if self.n_threads is not None and self.n_gpus is not None else None

    @property
    def wants_a_new_run(self) -> bool:
        """Whether a header part seen now starts the next run: this one has its rows, or ended."""
        return bool(self.rows) or self.complete or self.crash is not None

    def expected_sizes(self) -> list[int]:
        if self.sizes is None:
            return []  # the header is missing: the sizes asked for are not known
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
    several: tuple[int, str] | None = None  # the first line that shows a launch of several processes
    nranks_before: dict[int, int] = {}  # NCCL INFO's nranks seen before any run began

    def begin(new: NcclRun) -> NcclRun:
        runs.append(new)
        new.nranks_said.update(nranks_before)
        nranks_before.clear()
        return new

    for line in text.lines:
        clean = untagged(line.text)
        if several is None:
            launch = _SEVERAL_PROCESSES.search(line.text)
            if launch:
                several = (line.number, launch.group(0))
        nranks = _NRANKS.search(clean)
        if nranks:
            (run.nranks_said if run is not None else nranks_before).setdefault(int(nranks.group(1)), line.number)
            continue
        found_version = _VERSION.search(clean)
        if found_version:
            version = next(g for g in found_version.groups() if g)
            if run is not None and run.nccl_version is None:
                run.nccl_version = version
        header = _HEADER.search(clean)
        if header:
            run = begin(_start(text, line.number, header, command, version))
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
        if (run is None or run.wants_a_new_run) and _begins_a_run_without_its_header(clean):
            run = begin(NcclRun(text.name, line.number, nccl_version=version))
            if command:
                run.collective, run.told_by = command
        if run is None:
            continue
        _read_line(run, line.number, clean, text.name)
    for run in runs:
        _finish(run, text, several)
    return runs


def _begins_a_run_without_its_header(clean: str) -> bool:
    """`# Using devices`, a rank line or the table's column header: parts of a run's header that
    show a run began, where its `# nThread ...` line is not in the log."""
    stripped = clean.strip()
    return stripped == "# Using devices" or bool(_RANK.match(stripped)) or bool(_TABLE_HEADER.match(stripped))


def _start(
    text: TextFile, number: int, header: re.Match[str], command: tuple[str, str] | None, version: str | None
) -> NcclRun:
    threads, gpus, low, high, step, kind, warmup, iterations = header.groups()
    if int(iterations) < 1:
        raise refuse(text.name, number, f"the header says iters: {iterations}: a run that timed nothing; its rows are no measurement")
    if int(threads) < 1 or int(gpus) < 1:
        raise refuse(text.name, number, f"the header says nThread {threads} nGpus {gpus}: a run on no GPU; its rows are no "
                     "measurement of one")
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
    if int(index) >= MAX_RANKS:
        run.findings.append(Finding(name, number, f"rank {index} is beyond any job (this tool reads ranks below {MAX_RANKS}): "
                                    "a damaged line; it is not used"))
        return
    earlier = next((d for d in run.devices if d.rank == int(index)), None)
    if earlier is not None and earlier.host != host:
        # every process is rank 0 of a test of its own: nccl-tests built without MPI=1, started by mpirun or srun
        raise refuse(name, number, f"rank {index} is on {earlier.host} and on {host}: each process ran a test of its own "
                     "(nccl-tests built without MPI=1, started by a launcher), so no row measures the job; rebuild it with "
                     "MPI=1 and run it again")
    if earlier is not None:
        run.findings.append(Finding(name, number, f"rank {index} is listed again (on {host} device {device}; first on "
                                    f"{earlier.host} device {earlier.device}): the first is kept"))
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
    op = ""
    if rest and _number(rest[0]) is None and rest[0] != "N/A":
        op, rest = rest[0], rest[1:]  # the reduction (sum, none, ...); alltoall leaves it blank in the older layout
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
    rounding = max(_half_last_digit(rest[1]), _half_last_digit(rest[2]))
    row = Row(number, size, count, DTYPES[dtype], values[0], values[1], values[2], total, rounding, f"{dtype} {op}".strip())
    earlier = run.row_of_size.get(size)
    if earlier is not None:
        # the same size measured twice: the slower row is the machine's, and wrong elements in
        # either stand; a better figure must hide neither
        first = run.rows[earlier]
        slower = row if row.busbw < first.busbw else first
        merged = dataclasses.replace(slower, wrong=_worst_wrong(first.wrong, row.wrong))
        if row.kind == first.kind:  # one kind measured twice: two runs in one log
            run.findings.append(Finding(name, number, f"{size} bytes appears twice (first at line {first.line}, busbw "
                                        f"{first.busbw:g} then {row.busbw:g} GB/s): the slower row, line {slower.line}, is kept"))
        else:  # -d all, -o all: each size once per data type and reduction
            run.kinds.setdefault(row.kind, number)
            run.kinds.setdefault(first.kind, first.line)
        run.rows[earlier] = merged
        return
    if len(run.rows) >= MAX_ROWS:
        raise refuse(name, number, f"more than {MAX_ROWS} sizes in one run: no nccl-tests sweep of a machine has as many; "
                     "a damaged or generated log")
    run.row_of_size[size] = len(run.rows)
    run.rows.append(row)


def _worst_wrong(first: int | None, second: int | None) -> int | None:
    """Wrong elements of one size measured twice: any counted stands; else unknown where either is."""
    counted = [w for w in (first, second) if w is not None]
    if any(counted):
        return max(counted)
    return None if None in (first, second) else 0


def _half_last_digit(text: str) -> float:
    """0.005 for 184.57, 0.05 for 1845.7: nccl-tests prints six characters, fewer decimals as values grow."""
    if "e" in text.lower():
        return abs(float(text)) * 0.5  # 1e+04: one digit of the mantissa
    decimals = len(text.partition(".")[2])
    return 0.5 * 10.0**-decimals


def _wrong(text: str, old_layout: bool) -> int | None:
    if old_layout or not re.fullmatch(r"\d+", text):
        return None  # N/A (not validated), or the older layout's largest error, which is not a count
    return int(text)


def _finish(run: NcclRun, text: TextFile, several: tuple[int, str] | None) -> None:
    if run.collective is None:
        match = _FILE_COLLECTIVE.search(Path(text.name).name.lower())
        if match:
            run.collective, run.told_by = FILE_NAMES[match.group(1).replace("_", "")], "the file name"
            run.findings.append(Finding(text.name, run.line, f"which collective ran ({run.collective}) is taken from the file "
                                        "name: the log names none", damaged=False))
    last = max((row.size for row in run.rows), default=0)
    after = f"after {last} bytes" if last else "before its first result row"
    if run.sizes is None:
        if run.crash:
            raise refuse(text.name, run.crash[0], f"the run crashed {after} and the log lacks its `# nThread ... minBytes ... "
                         "maxBytes` header: which sizes it did not reach cannot be told")
        run.findings.append(Finding(text.name, run.line, "the log lacks the run's `# nThread ... nGpus ...` header: the sizes "
                                    "it was asked for, its warm-up and iteration counts are unknown; its rows are read"))
    if run.crash:
        line, text_of_crash = run.crash
        run.findings.append(Finding(text.name, line, f"the run crashed {after}: {text_of_crash[:120]}; the sizes it did not "
                                    "reach fail"))
    elif not run.complete:
        run.findings.append(Finding(text.name, run.line, f"the log ends {after} without nccl-tests' closing lines "
                                    "(# Avg bus bandwidth): the sizes it did not reach are unknown"))
    _count_ranks(run, text, several)
    if run.kinds:
        run.findings.append(Finding(text.name, run.line, f"each size was measured in {len(run.kinds)} data types or reductions "
                                    f"({', '.join(run.kinds)}): each is judged by its slowest row, its wrong elements by any",
                                    damaged=False))
    if run.old_layout and run.rows:
        run.findings.append(Finding(text.name, run.line, "the older layout reports the largest error, not a count of wrong "
                                    "elements: whether results were right is not established", damaged=False))
    elif any(row.wrong is None for row in run.rows):
        run.findings.append(Finding(text.name, run.line, "#wrong reads N/A (validation off): whether results were right is "
                                    "not established for those sizes", damaged=False))


# the collectives whose busbw/algbw depends on the rank count: 2(n-1)/n for all_reduce, (n-1)/n for the others
_FACTOR_LIMITS = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0, "alltoall": 1.0}


def _count_ranks(run: NcclRun, text: TextFile, several: tuple[int, str] | None) -> None:
    """How many ranks ran: what the rows' busbw/algbw says, else NCCL's `nranks`, else the rank
    lines, else nThread x nGpus of a run that was one process. A count none of them tells is refused."""
    listed = max((d.rank for d in run.devices), default=-1) + 1
    from_rows = _ranks_from_rows(run)
    said = sorted(run.nranks_said)
    counted, told_by = None, ""
    if from_rows is not None:
        counted, told_by = from_rows, "busbw/algbw of its rows"
    elif len(said) == 1:
        counted, told_by = said[0], f"NCCL INFO nranks, line {run.nranks_said[said[0]]}"
    if counted is not None and listed > counted:
        raise refuse(text.name, run.line, f"the rank lines list {listed} ranks but {told_by} says {counted}: not the lines and "
                     "rows of one run")
    if counted is not None:
        run.ranks, run.ranks_told_by = counted, told_by
    elif listed:
        run.ranks, run.ranks_told_by = listed, "its rank lines"
    elif run.per_process is not None and several is None:
        run.ranks, run.ranks_told_by, run.one_process = run.per_process, "nThread x nGpus of one process", True
    else:
        why = ["no rank lines under `# Using devices`"]
        why.append(f"busbw/algbw of {run.collective} does not depend on it" if run.collective not in _FACTOR_LIMITS else
                   "no row large enough to tell it by busbw/algbw")
        if run.per_process is None:
            why.append("no `# nThread ... nGpus ...` header")
        elif several is not None:
            why.append(f"nThread x nGpus counts one process's GPUs, and line {several[0]} ({several[1]}) shows several")
        raise refuse(text.name, run.line, f"how many ranks ran cannot be told: {'; '.join(why)}")
    if run.per_process is not None and run.ranks == run.per_process and several is None:
        run.one_process = True
    if run.devices and (listed < run.ranks or len(run.devices) < listed):
        shown = ", ".join(str(d.rank) for d in run.devices)
        run.findings.append(Finding(text.name, run.line, f"rank lines elided (ranks {shown} shown of {run.ranks}): "
                                    "each host's GPU count is taken from its highest device number"))
    if not run.devices:
        run.findings.append(Finding(text.name, run.line, f"no rank lines: {run.ranks} rank(s), from {run.ranks_told_by}",
                                    damaged=False))


def _ranks_from_rows(run: NcclRun) -> int | None:
    """The one rank count whose bus factor turns every row's algbw into its busbw, within the digits
    printed; None where the collective's factor does not depend on it, or the rows fit several counts."""
    collective = run.collective or ""
    limit = _FACTOR_LIMITS.get(collective)
    if limit is None:
        return None
    fitting: set[int] | None = None
    for row in run.rows:
        if row.algbw < 1.0 or row.busbw >= limit * row.algbw:
            continue  # too few digits to tell, or a row no rank count explains (the facts' relations name it)
        estimate = limit / (limit - row.busbw / row.algbw)  # the factor is limit * (n - 1) / n
        if estimate > MAX_RANKS:
            continue
        fits = set()
        for n in range(max(1, math.floor(estimate) - 1), math.ceil(estimate) + 2):
            factor = bus_factor(collective, n)
            if abs(row.busbw - row.algbw * factor) <= row.rounding * (1 + factor) + 1e-9:
                fits.add(n)
        fitting = fits if fitting is None else fitting & fits
    return next(iter(fitting)) if fitting is not None and len(fitting) == 1 else None
