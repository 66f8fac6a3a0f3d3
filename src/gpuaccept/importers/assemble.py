"""Command outputs of one machine, read together into the facts the checks judge.

Each file may hold several outputs (a report with `topo -m`, `nvlink -s` and a P2P grid); the
files together describe one machine, so they must agree on its GPU count, and two outputs of the
same thing must say the same. Whatever no output tells (the GPU model from `topo -m` alone, PCIe
state, the driver, CUDA's view of peers) is `not_probed`, which the checks report as "could not
be established", never as a pass.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from gpuaccept import __version__
from gpuaccept.errors import ImportedTextError, Problem, format_path
from gpuaccept.facts.machine import GpuFacts, LinkFacts, NvLinkFacts, P2PFacts, PcieFacts, SystemFacts
from gpuaccept.facts.measurements import CollectiveResult, CollectiveSweep, Measurements, StepFailure
from gpuaccept.facts.model import Facts, TextSource
from gpuaccept.facts.record import Unavailable, not_probed
from gpuaccept.facts.relations import Contradiction
from gpuaccept.importers.nccl_tests import Device, NcclRun, find_nccl_runs, untagged
from gpuaccept.importers.nvlink_status import KIND as KIND_NVLINK
from gpuaccept.importers.nvlink_status import GpuLinks, NvLinkStatus, find_nvlink_status
from gpuaccept.importers.p2p_grid import UNTOLD, P2PGrid, find_p2p_grids
from gpuaccept.importers.text import MAX_GPU_INDEX, Finding, TextFile, read_text_file
from gpuaccept.importers.topo_matrix import TopoMatrix, find_topo_matrices
from gpuaccept.vocabulary.links import pair_key
from gpuaccept.vocabulary.sizes import format_size, human_size
from gpuaccept.vocabulary.steps import CollectiveKey, collective_label

NOT_IN_TEXT = "not in the imported text"
NOTHING = ("not an output this tool reads: no nvidia-smi topo -m table, topo -p2p grid, nvlink -s listing or "
           "nccl-tests log in it")

Output = TopoMatrix | P2PGrid | NvLinkStatus | NcclRun  # one command's output found in a file
Listed = tuple[NvLinkStatus, GpuLinks]  # a GPU's links, and the nvlink -s listing they are in


@dataclass
class FileOutputs:
    text: TextFile
    matrices: list[TopoMatrix] = field(default_factory=list)
    grids: list[P2PGrid] = field(default_factory=list)
    statuses: list[NvLinkStatus] = field(default_factory=list)
    runs: list[NcclRun] = field(default_factory=list)

    @property
    def parts(self) -> list[Output]:
        return [*self.matrices, *[g for g in self.grids if g.capabilities], *self.statuses, *self.runs]

    def findings(self) -> list[Finding]:
        every: list[Output] = [*self.matrices, *self.grids, *self.statuses, *self.runs]
        return [f for part in every for f in part.findings]

    def kinds(self) -> list[str]:
        cleaned = f" [{' and '.join(self.text.cleaned)} removed]" if self.text.cleaned else ""
        return [part.describe() + cleaned for part in self.parts]


@dataclass(frozen=True)
class Imported:
    facts: Facts
    files: tuple[FileOutputs, ...]

    def lines(self) -> list[str]:
        """What was read from each file, then every finding: one line each."""
        out = [f"{f.text.name}: {'; '.join(f.kinds())}" for f in self.files]
        return out + [str(finding) for f in self.files for finding in f.findings()]


def read_outputs(text: TextFile) -> FileOutputs:
    return FileOutputs(text, find_topo_matrices(text), find_p2p_grids(text), find_nvlink_status(text), find_nccl_runs(text))


def import_files(paths: list[Path]) -> Imported:
    problems: list[Problem] = []
    files = []
    for path in paths:
        try:
            outputs = read_outputs(read_text_file(Path(path), str(path)))
        except ImportedTextError as error:
            problems += error.problems
            continue
        if not outputs.parts:
            problems.append(_why_nothing(outputs))
            continue
        problems += [Problem(outputs.text.name, run.line, "", _NO_COLLECTIVE) for run in outputs.runs if run.collective is None]
        files.append(outputs)
    if problems:
        raise ImportedTextError(problems)
    return Imported(build_facts(files), tuple(files))


_NO_HEADER = "the log lacks its `# nThread ...` header, which says it"
_NO_COLLECTIVE = ("an nccl-tests log that does not say which collective ran (no `Collective test starting` line or "
                  "*_perf command in it): name the file after it, e.g. all_reduce_perf.log")


def _why_nothing(outputs: FileOutputs) -> Problem:
    name = outputs.text.name
    untold = [g for g in outputs.grids if not g.capabilities]
    if untold:
        return Problem(name, untold[0].line, "", UNTOLD.replace(": not used", ""))
    rows = [line for line in outputs.text.lines if _looks_like_row(untagged(line.text))]
    if rows:
        return Problem(name, rows[0].number, "", "rows of an nccl-tests log without its header (`# nThread ... nGpus ...`, "
                       "`# Using devices`): which collective ran, on how many ranks, cannot be told; nothing is used")
    return Problem(name, None, "", NOTHING)


_ROW_DTYPES = ("float", "half", "bfloat16", "double", "int8", "int32")  # the types nccl-tests rows are most often of


def _looks_like_row(text: str) -> bool:
    tokens = text.split()
    return len(tokens) >= 6 and tokens[0].isdigit() and tokens[1].isdigit() and tokens[2] in _ROW_DTYPES


def _refuse(lines: list[tuple[str, int | None, str]]) -> ImportedTextError:
    return ImportedTextError([Problem(name, line, "", message) for name, line, message in lines])


def _gpu_count(files: list[FileOutputs]) -> int:
    said: list[tuple[int, str, int, str]] = []  # (GPUs, file, line, which output): outputs that show every GPU
    at_least: list[tuple[int, str, int, str]] = []  # outputs with parts left out: the machine has at least these GPUs
    for f in files:
        said += [(m.gpu_count, m.file, m.line, m.describe()) for m in f.matrices]
        said += [(g.gpu_count, g.file, g.line, g.describe()) for g in f.grids if g.capabilities]
        said += [(max(s.gpus) + 1, s.file, s.line, s.describe()) for s in f.statuses if s.tells_gpu_count]
        at_least += [(max(s.gpus) + 1, s.file, s.line, s.describe()) for s in f.statuses if not s.tells_gpu_count]
        for run in f.runs:
            on_first_host = [d.device for d in run.devices if d.host == run.hosts[0]] if run.devices else []
            host = run.hosts[0] if run.hosts else "one host"
            if on_first_host or run.one_process:  # the ranks of a launch of several processes are not one host's GPUs
                said.append((max(on_first_host) + 1 if on_first_host else run.ranks, run.file, run.line,
                             f"{run.collective}_perf on {host}"))
    if not said:
        raise _refuse([_no_gpu_count(files)])
    # a record is made per GPU: a count no machine has (nGpus 999999999) is damage, never allocated
    beyond = next((s for s in said if s[0] > MAX_GPU_INDEX + 1), None)
    if beyond:
        raise _refuse([(beyond[1], beyond[2], f"{beyond[3]} has {beyond[0]} GPUs, beyond any machine (this tool reads at most "
                        f"{MAX_GPU_INDEX + 1}): a damaged output")])
    counts = {count for count, *_ in said}
    if len(counts) > 1:
        first, other = said[0], next(s for s in said if s[0] != said[0][0])
        raise _refuse([(other[1], other[2], f"{other[3]} has {other[0]} GPUs but {first[1]}:{first[2]} ({first[3]}) has "
                        f"{first[0]}: outputs of one machine only")])
    count = counts.pop()
    beyond = next((s for s in at_least if s[0] > count), None)
    if beyond:
        raise _refuse([(beyond[1], beyond[2], f"{beyond[3]} names GPU {beyond[0] - 1} but {said[0][1]}:{said[0][2]} "
                        f"({said[0][3]}) has {count} GPUs: outputs of one machine only")])
    return count


def _no_gpu_count(files: list[FileOutputs]) -> tuple[str, int | None, str]:
    """Why no output tells how many GPUs the machine has: each was shortened, or counts ranks of
    several processes."""
    status = next((s for f in files for s in f.statuses), None)
    if status is not None:
        return (status.file, status.gpus_left_out, f"how many GPUs the machine has cannot be told: the {KIND_NVLINK} listing "
                "has lines left out where GPUs may be; import it with the machine's nvidia-smi topo -m, or the whole listing")
    run = next(run for f in files for run in f.runs)
    return (run.file, run.line, f"how many GPUs the machine has cannot be told: the log names no device (no rank lines under "
            f"`# Using devices`) and its {run.ranks} ranks ran as several processes; import it with the machine's "
            "nvidia-smi topo -m or nvlink -s")


def _one_matrix(files: list[FileOutputs]) -> TopoMatrix | None:
    matrices = [m for f in files for m in f.matrices]
    for other in matrices[1:]:
        differing = [pair for pair, link in matrices[0].links.items() if other.links.get(pair) != link]
        if differing:
            a, b = differing[0]
            raise _refuse([(other.file, other.line, f"this topo -m says {pair_key(a, b)} is {other.links.get((a, b))} but "
                            f"{matrices[0].file}:{matrices[0].line} says {matrices[0].links[(a, b)]}: outputs of one machine only")])
    return matrices[0] if matrices else None


def build_facts(files: list[FileOutputs]) -> Facts:
    try:
        return _facts_of(files)
    except ValidationError as error:
        rows = [(run.file, row.line) for f in files for run in f.runs for row in run.rows]  # in the order of the results
        raise _contradicted(error, files[0].text.name, rows) from None


def _facts_of(files: list[FileOutputs]) -> Facts:
    count = _gpu_count(files)
    matrix = _one_matrix(files)
    statuses = {i: (s, g) for f in files for s in f.statuses for i, g in s.gpus.items()}
    runs = [run for f in files for run in f.runs]
    devices = {d.device: d for run in runs for d in run.devices if run.hosts and d.host == run.hosts[0]}
    gpus = [_gpu(i, matrix, statuses, devices, bool([s for f in files for s in f.statuses])) for i in range(count)]
    links = []
    if matrix is not None:
        for (a, b), link in sorted(matrix.links.items()):
            reading = link if link else not_probed(f"the {matrix.file} cells of this pair are unreadable or disagree")
            links.append(LinkFacts(gpus=(a, b), link_type=reading, direct_nvlinks=0, topology_level=not_probed(NOT_IN_TEXT),
                                   via_switch=False, evidence=f"nvidia-smi topo -m, {matrix.file}:{matrix.line}"))
    hosts = [h for run in runs for h in run.hosts]
    source = TextSource(
        files=[f.text.name for f in files],
        kinds={f.text.name: f.kinds() for f in files},
        notes=[str(finding) for f in files for finding in f.findings()],
    )
    return Facts(
        recorded_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        tool_version=__version__,
        system=SystemFacts(
            hostname=hosts[0] if hosts else f"imported:{Path(files[0].text.name).stem}",
            driver_version=not_probed(NOT_IN_TEXT),
            cuda_driver_version=not_probed(NOT_IN_TEXT),
            nvml_version=not_probed(NOT_IN_TEXT),
            nvml_gpu_count=count,
        ),
        cuda=not_probed("facts read from command outputs: CUDA was not asked"),
        gpus=gpus,
        links=links,
        p2p=_p2p(files, count),
        measurements=Measurements(collectives=_sweep(runs)) if runs else Measurements(),
        imported_from=source,
    )


def _contradicted(error: ValidationError, first_file: str, rows: list[tuple[str, int]]) -> ImportedTextError:
    """Outputs whose facts contradict each other (a busbw no rank count explains, more than the
    links carry): one line each, at the log's row where the contradiction is in one."""
    problems = []
    for detail in error.errors():
        found = detail.get("ctx", {}).get("error")
        path = found.path if isinstance(found, Contradiction) else tuple(detail["loc"])
        message = str(found) if isinstance(found, Contradiction) else detail["msg"]
        if path[:3] == ("measurements", "collectives", "results") and len(path) > 3 and isinstance(path[3], int):
            file, line = rows[path[3]]
            problems.append(Problem(file, line, "", f"{message}: not a measurement of a machine"))
        else:
            problems.append(Problem(first_file, None, format_path(path), f"{message}: not outputs of one machine"))
    return ImportedTextError(problems)


def _gpu(i: int, matrix: TopoMatrix | None, statuses: dict[int, Listed], devices: dict[int, Device], any_status: bool) -> GpuFacts:
    status = statuses.get(i)
    device = devices.get(i)
    name: str | Unavailable = not_probed("the imported text does not name the GPU model")
    if status:
        name = status[1].name
    elif device and device.name:
        name = device.name
    missing_matrix = "no nvidia-smi topo -m among the imported files"
    return GpuFacts(
        index=i,
        nvml_index=i,
        name=name,
        uuid=status[1].uuid if status else "",
        pci_bus_id=_bus_id(device.bus) if device else "",
        serial=not_probed(NOT_IN_TEXT),
        vbios=not_probed(NOT_IN_TEXT),
        memory_total_bytes=not_probed(NOT_IN_TEXT),
        ecc_enabled=not_probed(NOT_IN_TEXT),
        persistence_mode=not_probed(NOT_IN_TEXT),
        numa_node=not_probed(NOT_IN_TEXT),
        clock_event_reasons=not_probed(NOT_IN_TEXT),
        pcie=PcieFacts(**{k: not_probed(NOT_IN_TEXT) for k in PcieFacts.model_fields}),
        nvlinks=_nvlinks(i, status, any_status),
        fabric=not_probed(NOT_IN_TEXT),
        cpu_affinity=matrix.cpu.get(i, not_probed(NOT_IN_TEXT)) if matrix else not_probed(missing_matrix),
        numa_affinity=matrix.numa.get(i, not_probed(NOT_IN_TEXT)) if matrix else not_probed(missing_matrix),
        nics=matrix.nics.get(i, not_probed(NOT_IN_TEXT)) if matrix else not_probed(missing_matrix),
    )


def _bus_id(text: str) -> str:
    """nccl-tests' [0000:19:00] or [0x19] as NVML writes bus ids: 00000000:19:00.0. The reader has
    checked the text is hex (or made it "")."""
    text = text.strip().lower()
    if text.startswith("0x"):
        return f"00000000:{int(text, 16):02X}:00.0" if int(text, 16) else ""
    parts = text.split(":")
    if len(parts) == 3:
        domain, bus, device = (int(part, 16) for part in parts)
        return f"{domain:08X}:{bus:02X}:{device:02X}.0"
    return ""


def _nvlinks(i: int, status: Listed | None, any_status: bool) -> list[NvLinkFacts] | Unavailable:
    if status is None:
        return not_probed("an nvidia-smi nvlink -s listing that leaves this GPU out" if any_status else
                          "no nvidia-smi nvlink -s among the imported files")
    listing, gpu = status
    if gpu.twice is not None:
        return not_probed(f"the nvidia-smi nvlink -s listing in {listing.file} lists link {gpu.twice} of this GPU twice")
    if gpu.elided:
        return not_probed(f"the nvidia-smi nvlink -s listing in {listing.file} leaves some of this GPU's links out")
    return [
        NvLinkFacts(
            link=link,
            active=up,
            version=not_probed("nvidia-smi nvlink -s does not show the NVLink version"),
            remote_type=not_probed(NOT_IN_TEXT),
            remote_bus_id=not_probed(NOT_IN_TEXT),
            speed_GBps=speed if speed is not None else not_probed("the link is down"),
        )
        for link, up, speed in gpu.links
    ]


def _p2p(files: list[FileOutputs], count: int) -> list[P2PFacts]:
    statuses: dict[tuple[int, int], dict[str, str | Unavailable]] = {}
    for grid in (g for f in files for g in f.grids if g.capabilities):
        for pair, status in grid.statuses.items():
            for capability in grid.capabilities:
                statuses.setdefault(pair, {})[capability] = status or not_probed(f"the {grid.file} cell is unreadable")
    return [
        P2PFacts(gpus=pair, nvml=statuses[pair], cuda_can_access_peer=not_probed("facts read from command outputs"))
        for pair in sorted(statuses)
        if max(pair) < count
    ]


def _sweep(runs: list[NcclRun]) -> CollectiveSweep:
    seen: dict[str, NcclRun] = {}
    for run in runs:
        collective = _collective(run)
        if collective in seen:
            first = seen[collective]
            raise _refuse([(run.file, run.line, f"a second {collective}_perf run (the first is {first.file}:{first.line}): "
                            "import one run of each collective at a time")])
        seen[collective] = run
    ranks = {run.ranks for run in runs}
    if len(ranks) > 1:
        raise _refuse([(runs[-1].file, runs[-1].line, f"runs on different numbers of ranks ({', '.join(map(str, sorted(ranks)))}): "
                        "import the runs of one machine, or one cluster, at a time")])
    results: list[CollectiveResult] = []
    failures: list[StepFailure] = []
    for run in runs:
        for row in run.rows:
            results.append(CollectiveResult(
                collective=_collective(run), size_bytes=row.size, nominal_size=format_size(row.size), dtype=row.dtype,
                ranks=run.ranks, time_us=row.time_us,
                warmup=run.warmup if run.warmup is not None else not_probed(_NO_HEADER),
                iterations=run.iterations if run.iterations is not None else not_probed(_NO_HEADER),
                algbw_GBps=row.algbw, busbw_GBps=row.busbw,
                wrong=row.wrong if row.wrong is not None else not_probed("the log does not count wrong elements at this size"),
            ))
        failures += _missing(run) + _data_check_failed(run)
    return CollectiveSweep(
        backend="nccl-tests",
        nccl_version=next((run.nccl_version for run in runs if run.nccl_version), None),
        torch_version="",
        ranks=ranks.pop(),
        environment={},
        wall_s=0.0,
        results=results,
        failures=failures,
    )


def _collective(run: NcclRun) -> str:
    if run.collective is None:  # import_files refuses such a log before facts are built
        raise _refuse([(run.file, run.line, _NO_COLLECTIVE)])
    return run.collective


def _data_check_failed(run: NcclRun) -> list[StepFailure]:
    """nccl-tests' own verdict on its results (`Out of bounds values : N FAILED`): every size of the
    run fails, whatever each row's #wrong reads (the count it closes with is the one it judged by)."""
    if run.out_of_bounds is None:
        return []
    line, count = run.out_of_bounds
    why = f"nccl-tests' data check FAILED with {count} out-of-bounds values ({run.file}:{line})"
    return [
        StepFailure(step=collective_label(_collective(run), row.size), reason="error", message=why,
                    keys=[CollectiveKey(_collective(run), row.size)])
        for row in run.rows
    ]


def _missing(run: NcclRun) -> list[StepFailure]:
    """The sizes the run was asked for beyond its last row: crashed, or not in a log cut short."""
    if run.complete and not run.crash:
        return []
    last = max((row.size for row in run.rows), default=0)
    after = f"after {human_size(last)}" if last else "before its first size"
    reason: Literal["crashed", "not_in_log"]
    if run.crash:
        line, text = run.crash
        reason, why = "crashed", f"the run crashed {after}: {text} ({run.file}:{line})"
    else:
        reason, why = "not_in_log", f"the log ends {after} ({run.file} is cut short)"
    return [
        StepFailure(step=collective_label(_collective(run), size), reason=reason, message=why, keys=[CollectiveKey(_collective(run), size)])
        for size in run.expected_sizes()
        if size > last
    ]
