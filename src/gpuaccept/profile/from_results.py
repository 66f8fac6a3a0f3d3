"""A profile from golden machines: their facts become the expectations, their measured values times
a margin the floors, and every number says where it came from.

`gpu-accept profile init --from results.json [more results.json] --margin 0.9 --name SKU`

Runs may come from several machines of a kind: a machine is its hostname and its GPUs' UUIDs (a
re-provisioned VM may keep a hostname; the UUIDs name the hardware). Expectations must agree
across machines; each floor comes from every run of every machine, so that machine-to-machine
differences widen it as run-to-run noise does.
"""

from __future__ import annotations

import functools
import json
import math
import re
import textwrap
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, get_args

from gpuaccept.errors import shown
from gpuaccept.facts import Facts, Unavailable
from gpuaccept.facts.coverage import causes_first
from gpuaccept.facts.measurements import CollectiveResult
from gpuaccept.facts.run_record import RunRecord
from gpuaccept.profile.render import render_yaml
from gpuaccept.profile.spec import SCHEMA_VERSION, MeasureDtype
from gpuaccept.vocabulary.collectives import COLLECTIVES
from gpuaccept.vocabulary.copies import COPY_KINDS, HOST_COPIES, floor_key
from gpuaccept.vocabulary.links import PCIE_LEVELS, gpu_key, pair_key
from gpuaccept.vocabulary.nvml_codes import FABRIC_STATE_NAMES, NVLINK_VERSION_NAMES
from gpuaccept.vocabulary.sizes import GIB, format_size, parse_size
from gpuaccept.vocabulary.steps import ddp_case

Data = dict[str, Any]  # a profile being written, as YAML will hold it
Note = Callable[[str, str], None]  # (dotted key, where its value came from): the comment beside it
DdpKey = tuple[int, int, int]  # world, batch, accumulation
T = TypeVar("T")

ONE_MACHINE = "floors from one machine may not hold on the next one of its kind; add runs from another machine"

# values that are floors or ceilings: they may differ between runs; every run must have them all
MEASURED = re.compile(r"^(nccl\.busbw\..+|pairwise\.min_busbw|copies\.\w+_min|ddp\.(min_efficiency|max_exposed_comm|nvlink_ab)\..+)$")
# taken from every run, not from the first: the lowest memory and versions, a PCIe downshift seen in any
FROM_EVERY_RUN = ("gpus.memory_min_gib", "software.driver_min", "software.cuda_min", "pcie.idle_downshift")


@dataclass(frozen=True)
class Machine:
    """The runs of one machine, named by its hostname (and its first GPU's UUID where hostnames repeat)."""

    label: str
    runs: tuple[Facts, ...]
    sources: tuple[str, ...]


def machines_of(runs: list[Facts], sources: list[str]) -> list[Machine]:
    """Runs grouped by machine, in the order the machines first appear."""
    groups: dict[tuple[str, tuple[str, ...]], list[int]] = {}
    for index, run in enumerate(runs):
        key = (run.system.hostname, tuple(sorted(g.uuid for g in run.gpus)))
        groups.setdefault(key, []).append(index)
    hostnames = Counter(host for host, _ in groups)
    machines = []
    for (host, _), indices in groups.items():
        # a host name is the machine's word: shown as a line shows it in the profile's text and comments
        label = shown(host) if hostnames[host] == 1 else f"{shown(host)}/{short_uuid(runs[indices[0]])}"
        machines.append(Machine(label, tuple(runs[i] for i in indices), tuple(sources[i] for i in indices)))
    return machines


def short_uuid(facts: Facts) -> str:
    """The machine's first GPU's UUID, its first eight digits: how a machine is named beside its host name."""
    first = min(facts.gpus, key=lambda g: g.index).uuid if facts.gpus else "no-gpus"
    return first.removeprefix("GPU-")[:8]


def profile_from_results(
    golden: Sequence[RunRecord | Facts], sources: list[str], name: str, margin: float, warn: Callable[[str], None] = lambda line: None
) -> str:
    """Expectations from the first run's facts, which every other run must share; floors from the
    lowest value over every run of every machine, times the margin less the spread of all runs:
    (max - min) / max, so noisy values and unlike machines get wider margins. `warn` hears what the
    floors cannot know: a single machine, a machine with a single run. Each run is a run record
    (results.json), or facts alone (read from command outputs), dated by when they were recorded."""
    if not 0 < margin <= 1:
        raise ValueError(f"margin {margin} must be above 0 and at most 1 (0.9 keeps 90% of each measured value)")
    runs = [run.facts if isinstance(run, RunRecord) else run for run in golden]
    for run, source in zip(runs, sources, strict=True):
        if not run.gpus:
            raise ValueError(f"{source}: the facts hold no GPU: nothing to write a profile of")
    for record, source in zip(golden, sources, strict=True):
        unhealthy = record.not_a_pass(causes_first) if isinstance(record, RunRecord) else ""
        if unhealthy:  # its values would become the floors a healthy machine is held to: as baseline save refuses it
            raise ValueError(f"{source}: {unhealthy}: a golden machine's run is a picture of a healthy machine; make the "
                             "profile from runs that passed")
    machines = machines_of(runs, sources)
    _agree(machines, margin)
    days = sorted({(run.run.started_at if isinstance(run, RunRecord) else run.recorded_at)[:10] for run in golden})
    labels = machines[0].label if len(machines) == 1 else f"{len(machines)} machines ({', '.join(m.label for m in machines)})"
    imported = runs[0].imported_from
    seen = f"on {labels} {days[0] if len(days) == 1 else f'{days[0]} to {days[-1]}'}"
    if imported is not None:
        seen = f"in {', '.join(Path(file).name for file in imported.files)}"
    data, notes = _profile_data(machines, name, margin, seen, warn)
    counts = machines[0].label
    if len(machines) > 1:
        counts = f"{len(machines)} machines: {', '.join(f'{m.label} ({_runs(len(m.runs))})' for m in machines)}"
    header = [
        f"{name}: generated by gpu-accept profile init from {_runs(len(runs))} on {counts} (margin {margin:g}); review before use",
        *textwrap.wrap(f"runs: {', '.join(sources)}", 100, break_on_hyphens=False),
    ]
    if imported is not None:
        header = [
            f"{name}: generated by gpu-accept profile init from command outputs (margin {margin:g}); review before use",
            *textwrap.wrap(f"read from: {', '.join(imported.files)}", 100, break_on_hyphens=False),
            *[f"  {line}" for line in imported.notes],
        ]
    floors = any(section in data for section in ("nccl", "pairwise", "copies", "ddp"))
    if len(machines) == 1 and floors:
        warn(ONE_MACHINE)
    for machine in machines:
        if len(machine.runs) == 1 and floors:
            warn(f"{machine.label} has 1 run: its floors allow for no run-to-run spread; 3 to 5 runs per machine show it")
    return render_yaml(data, notes, header="\n".join(header))


def _runs(count: int) -> str:
    return f"{count} run" if count == 1 else f"{count} runs"


def _profile_data(
    machines: list[Machine], name: str, margin: float, seen: str, warn: Callable[[str], None] = lambda line: None
) -> tuple[Data, dict[str, str]]:
    runs = [run for machine in machines for run in machine.runs]
    facts = runs[0]
    model = _model(facts)
    golden = ", ".join(m.label for m in machines)
    golden = f"the golden machine {golden}" if len(machines) == 1 else f"the golden machines {golden}"
    data: Data = {"schema": SCHEMA_VERSION, "name": name, "description": shown(f"{facts.gpu_count}x {model}, from {golden}")}
    notes: dict[str, str] = {}

    def note(key: str, text: str) -> None:
        notes[key] = text

    data["match"] = {"gpu_model": literal_pattern(model), "gpu_count": facts.gpu_count}
    data["gpus"] = {"count": facts.gpu_count, "model": literal_pattern(model)}
    note("gpus.count", f"GPUs under test {seen}")
    note("gpus.model", f"NVML product name {seen}")
    memories = _known(g.memory_total_bytes for run in runs for g in run.gpus)
    if memories and len(memories) == sum(len(run.gpus) for run in runs):
        memory = min(memories) / GIB
        data["gpus"]["memory_min_gib"] = math.floor(memory * 10) / 10
        note("gpus.memory_min_gib", f"smallest GPU memory {memory:.2f} GiB {seen}, rounded down")
    ecc = {g.ecc_enabled for g in facts.gpus}
    if len(ecc) == 1 and isinstance(next(iter(ecc)), bool):
        data["gpus"]["ecc"] = "enabled" if ecc.pop() else "disabled"
        note("gpus.ecc", f"ECC mode of every GPU {seen}")

    software: Data = {}
    drivers_known = _known(run.system.driver_version for run in runs)
    if len(drivers_known) == len(runs):
        drivers = {machine.label: _lowest_version(_known(run.system.driver_version for run in machine.runs)) for machine in machines}
        software["driver_min"] = _lowest_version(drivers.values())
        if len(set(drivers.values())) == 1:
            note("software.driver_min", f"the driver {seen}: the numbers below were measured with it")
        else:
            note("software.driver_min", f"the lowest driver {seen} ({', '.join(f'{k} {v}' for k, v in drivers.items())})")
    cudas = _known(run.system.cuda_driver_version for run in runs)
    if len(cudas) == len(runs):
        software["cuda_min"] = _lowest_version(cudas)
        note("software.cuda_min", f"CUDA version of that driver {seen}")
    if software:
        data["software"] = software

    _pcie(runs, data, note, seen)
    _nvlink(facts, data, note, seen)
    _links_and_p2p(facts, data, note, seen)
    _affinity(facts, data, note, seen)
    _measured(machines, data, note, margin, warn)
    return data, notes


def _lowest_version(versions: Iterable[str]) -> str:
    return min(versions, key=lambda text: tuple(int(part) for part in re.findall(r"\d+", text)))


def _agree(machines: list[Machine], margin: float) -> None:
    """Every run must expect what the first one does: a profile cannot expect two link matrices.
    Measured values may differ, but each must be measured in every run, with the same settings."""
    shapes = []
    for machine in machines:
        for run, source in zip(machine.runs, machine.sources, strict=True):
            data, _ = _profile_data([Machine(machine.label, (run,), (source,))], "", margin, "")
            shapes.append((machine.label, source, _flat(data)))
    first_label, first_source, first = shapes[0]
    for label, source, shape in shapes[1:]:
        differing = [key for key in dict.fromkeys([*first, *shape]) if first.get(key, "absent") != shape.get(key, "absent")]
        if differing:
            key = differing[0]
            here, there = (f"{first_label} ({first_source})", f"{label} ({source})") if label == first_label else (first_label, label)
            more = f" (and {len(differing) - 1} more)" if len(differing) > 1 else ""
            raise ValueError(
                f"the runs disagree on {key}{more}: {_shown(first.get(key, 'absent'))} on {here} but "
                f"{_shown(shape.get(key, 'absent'))} on {there}; a profile holds one: "
                "leave out the runs that differ, or make a profile for each kind"
            )


def _flat(data: Data, prefix: str = "") -> dict[str, object]:
    """Dotted keys to values; measured values only say that they were measured."""
    flat: dict[str, object] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(_flat(value, f"{path}."))
        elif path in ("name", "description") or path in FROM_EVERY_RUN:
            continue
        else:
            flat[path] = "measured" if MEASURED.match(path) else value
    return flat


def _shown(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _model(facts: Facts) -> str:
    """The one model the golden machine's GPUs name. GPUs an output leaves out (an elided listing)
    name none; GPUs that name two models are no machine a profile of one model can pass."""
    models = Counter(_known(g.name for g in facts.gpus))
    if not models:
        raise ValueError(
            "the golden machine's outputs do not name its GPU model, which a profile must state: add its "
            "nvidia-smi nvlink -s or an nccl-tests log (topo -m and topo -p2p do not name it)"
        )
    if len(models) > 1:
        named = ", ".join(f"{count}x {model}" for model, count in models.most_common())
        raise ValueError(f"the golden machine's GPUs name {len(models)} models ({named}): a profile states one; "
                         "make it from a machine whose GPUs are all of one model")
    return next(iter(models))


def literal_pattern(name: str) -> str:
    """A GPU model as a pattern that matches that name alone: gpus.model takes shell-style wildcards,
    and a product name holding `*`, `?` or `[` would otherwise match other GPUs (`NVIDIA*` any NVIDIA)."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def _known(values: Iterable[T | Unavailable]) -> list[T]:
    return [v for v in values if not isinstance(v, Unavailable)]


def _pcie(runs: list[Facts], data: Data, note: Note, seen: str) -> None:
    gpus = [g for run in runs for g in run.gpus]
    generations = _known(g.pcie.generation_max for g in gpus)
    widths = _known(g.pcie.width_current for g in gpus)
    currents = _known(g.pcie.generation_current for g in gpus)
    pcie: Data = {}
    if generations:
        pcie["generation"] = min(generations)
        note("pcie.generation", f"lowest link generation (maximum of link and slot) {seen}")
    if widths:
        pcie["width"] = min(widths)
        note("pcie.width", f"narrowest current link width {seen}")
    if generations and currents and min(currents) < min(generations):
        pcie["idle_downshift"] = True
        note("pcie.idle_downshift", f"current generation {min(currents)} below the link's {min(generations)} at idle {seen}")
    if pcie:
        data["pcie"] = pcie


def _nvlink(facts: Facts, data: Data, note: Note, seen: str) -> None:
    """Active links per GPU as found. Links listed but down (a bridged H100 PCIe uses 12 of its 18)
    become inactive_by_design; a GPU with fewer links up whose links are not listed (NVML: all
    links inactive) gets its own count: the golden machine must pass its own profile."""
    listed = {g.index: g.nvlinks for g in facts.gpus if not isinstance(g.nvlinks, Unavailable)}
    if not listed:
        if facts.gpus and all(isinstance(g.nvlinks, Unavailable) and g.nvlinks.unavailable == "not_supported" for g in facts.gpus):
            data["nvlink"] = {"active_links": 0}
            note("nvlink.active_links", f"NVML: NVLink not supported {seen}")
    else:
        counts = {index: sum(1 for link in links if link.active) for index, links in listed.items()}
        common = Counter(counts.values()).most_common(1)[0][0]
        nvlink: Data = {"active_links": common}
        note("nvlink.active_links", f"active NVLinks per GPU {seen}")
        down = {gpu_key(i): [link.link for link in links if not link.active] for i, links in listed.items()}
        by_design = {gpu: links for gpu, links in down.items() if links}
        others = {gpu_key(i): n for i, n in counts.items() if n != common}
        if others:
            nvlink["active_links_per_gpu"] = others
            note("nvlink.active_links_per_gpu", f"GPUs with another count of links up {seen}")
        if by_design:
            nvlink["inactive_by_design"] = by_design
            note("nvlink.inactive_by_design", f"links listed but down {seen}: the golden machine's own layout")
        active = [link for links in listed.values() for link in links if link.active]
        versions = {link.version for link in active if not isinstance(link.version, Unavailable)}
        if len(versions) == 1 and len(versions) and all(not isinstance(link.version, Unavailable) for link in active):
            nvlink["version"] = NVLINK_VERSION_NAMES.get(versions.pop(), "")
            note("nvlink.version", f"NVLink version of every active link {seen}")
        data["nvlink"] = nvlink
    first = facts.gpus[0]
    fabric = first.fabric
    if isinstance(fabric, Unavailable) and fabric.unavailable == "not_supported":
        data["fabric"] = {"state": "not_supported"}
    elif not isinstance(fabric, Unavailable) and FABRIC_STATE_NAMES.get(fabric.state) in ("completed", "not_supported"):
        data["fabric"] = {"state": FABRIC_STATE_NAMES[fabric.state]}
    if "fabric" in data:
        note("fabric.state", f"NVSwitch fabric state {seen}")


def _links_and_p2p(facts: Facts, data: Data, note: Note, seen: str) -> None:
    types = {pair_key(*link.gpus): link.link_type for link in facts.links if isinstance(link.link_type, str)}
    if types:
        common, _ = Counter(types.values()).most_common(1)[0]
        data["links"] = {"all": common}
        exceptions = {key: value for key, value in types.items() if value != common}
        if exceptions:
            data["links"]["pairs"] = exceptions
        how = "as nvidia-smi topo -m printed them" if facts.imported_from else "as rebuilt from NVML"
        note("links", f"nvidia-smi topo -m link types {how} {seen}")
    caps: dict[str, dict[str, bool]] = {}
    for pair in facts.p2p:
        stated = {
            ("prop" if name == "pci" and facts.imported_from else name): pair.nvml[name] == "OK"
            for name in ("read", "write", "nvlink", "atomics", "pci")
            if isinstance(pair.nvml.get(name), str) and (name != "pci" or facts.imported_from)
        }
        if stated:
            caps[pair_key(*pair.gpus)] = stated
    if caps:
        usual = Counter(tuple(sorted(c.items())) for c in caps.values()).most_common(1)[0][0]
        data["p2p"] = {"all": dict(usual)}
        unusual = {key: value for key, value in caps.items() if tuple(sorted(value.items())) != usual}
        if unusual:
            data["p2p"]["pairs"] = unusual
        note("p2p", f"NVML P2P status per ordered pair (OK: true) {seen}")


def _affinity(facts: Facts, data: Data, note: Note, seen: str) -> None:
    """Where each GPU sits, as topo -m showed it: the closest NIC, the CPU and NUMA lists."""
    affinity: Data = {}
    nics: dict[str, dict[str, str]] = {}
    for gpu in facts.gpus:
        if isinstance(gpu.nics, Unavailable) or not gpu.nics:
            continue
        best = min(PCIE_LEVELS.index(n.link) for n in gpu.nics)
        closest = [n.nic for n in gpu.nics if PCIE_LEVELS.index(n.link) == best]
        nics[gpu_key(gpu.index)] = {"link": PCIE_LEVELS[best], **({"nic": closest[0]} if len(closest) == 1 else {})}
    if nics:
        affinity["nic"] = nics
        note("affinity.nic", f"the closest NIC of each GPU, from the NIC columns of nvidia-smi topo -m {seen}")
    for key, field in (("cpu", "cpu_affinity"), ("numa", "numa_affinity")):
        found = {gpu_key(g.index): getattr(g, field) for g in facts.gpus if isinstance(getattr(g, field), str)}
        if found:
            affinity[key] = found
            note(f"affinity.{key}", f"{key.upper()} Affinity of nvidia-smi topo -m {seen}")
    if affinity:
        data["affinity"] = affinity


@dataclass(frozen=True)
class Spread:
    """One measured quantity over several runs, per machine."""

    by_machine: tuple[tuple[str, tuple[float, ...]], ...]  # (machine label, its runs' values)

    @property
    def values(self) -> tuple[float, ...]:
        return tuple(value for _, values in self.by_machine for value in values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    @property
    def relative(self) -> float:
        return (self.high - self.low) / self.high if self.high else 0.0

    def floor(self, margin: float) -> float:
        """Below the lowest run by the margin and once more by the spread of all runs, machines included."""
        value = self.low * max(margin - self.relative, 0.0)
        return round(value, 4 if value < 10 else 1)

    def ceiling(self, margin: float) -> float:
        """Above the highest run by 1 - margin and once more by the range of all runs, machines included."""
        return round(min(1.0, self.high + (1 - margin) + (self.high - self.low)), 3)

    def ranges(self, digits: int) -> str:
        """'vm 5 runs 55.38-55.55', or with several machines '10 runs on 2 machines (a 5 runs ..., b 5 runs ...)'."""
        each = []
        for label, values in self.by_machine:
            low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
            each.append(f"{label} {_runs(len(values))} {low if low == high else f'{low}-{high}'}")
        if len(each) == 1:
            return each[0]
        return f"{_runs(len(self.values))} on {len(each)} machines ({', '.join(each)})"

    def floor_text(self, margin: float, unit: str = "", digits: int = 2) -> str:
        unit = f" {unit}" if unit else ""
        return (
            f"{self.ranges(digits)}: lowest {self.low:.{digits}f} x ({margin:g} - spread {self.relative:.1%})"
            f" = {self.floor(margin)}{unit}"
        )

    def ceiling_text(self, margin: float, digits: int = 3) -> str:
        return (
            f"{self.ranges(digits)}: highest {self.high:.{digits}f} + {1 - margin:.2f}"
            f" + range {self.high - self.low:.{digits}f} = {self.ceiling(margin)}"
        )


def _spread(machines: list[Machine], pick: Callable[[Facts], float | None]) -> Spread | None:
    """The value in every run of every machine, or None where a run lacks it."""
    by_machine = []
    for machine in machines:
        values = [pick(run) for run in machine.runs]
        known = [value for value in values if value is not None]
        if len(known) < len(values):
            return None
        by_machine.append((machine.label, tuple(known)))
    return Spread(tuple(by_machine))


# what a copy floor's comment names as the value it came from; every other copy kind is per GPU
SLOWEST = {"p2p": "slowest ordered pair", "p2p_bidirectional": "slowest pair both ways"}


# nccl-tests logs sweep from a few bytes; below this their busbw is latency, too noisy for a floor
SMALLEST_LOGGED_FLOOR = parse_size("64MiB")
MEASURED_DTYPES: tuple[str, ...] = get_args(MeasureDtype)  # what a profile's live measurement can run


def _measured(machines: list[Machine], data: Data, note: Note, margin: float, warn: Callable[[str], None]) -> None:
    facts = machines[0].runs[0]
    measured = facts.measurements
    if measured.collectives and measured.collectives.results:
        results = measured.collectives.results
        nodes = 1
        if facts.imported_from is not None:
            results = _logged_results(facts, warn)
            nodes = _nodes_of_the_logs(facts, warn) if results else 1
        section = "nccl" if nodes == 1 else "cluster"  # a job over several machines sets the cluster's floors
        nccl: Data = {"busbw": {}}
        if results:
            first = results[0]
            nccl = {"dtype": first.dtype}
            if isinstance(first.warmup, int) and isinstance(first.iterations, int):
                nccl.update(warmup=max(0, min(first.warmup, 1000)), iterations=max(1, min(first.iterations, 10000)))
            else:
                warn("nccl: the logs do not say their warm-up and iteration counts: the profile's defaults are kept")
            nccl["busbw"] = {}
        for r in results:
            spread = _spread(machines, functools.partial(_busbw, collective=r.collective, size=r.nominal_size))
            if spread is None or r.collective not in COLLECTIVES:
                continue
            floor = spread.floor(margin)
            if floor <= 0:
                warn(f"{section}.busbw.{r.collective}.{r.nominal_size}: the floor would be {floor} GB/s (measured {spread.low}): "
                     "not written")
                continue
            nccl["busbw"].setdefault(r.collective, {})[r.nominal_size] = floor
            note(f"{section}.busbw.{r.collective}.{r.nominal_size}", spread.floor_text(margin, "GB/s"))
        if nccl["busbw"] and nodes == 1:
            data["nccl"] = nccl
        elif nccl["busbw"]:
            data["cluster"] = {"nodes": nodes, **nccl}
            note("cluster.nodes", f"the logs ran {nodes * facts.gpu_count} ranks, {facts.gpu_count} on each machine")
    if measured.pairwise and measured.pairwise.results:
        sweep = measured.pairwise
        spread = _spread(machines, _slowest_pair)
        data["pairwise"] = {
            "size": format_size(sweep.results[0].size_bytes),
            "iterations": sweep.results[0].iterations,
            "concurrent": sweep.concurrent,
        }
        if spread is not None:
            data["pairwise"]["min_busbw"] = spread.floor(margin)
            note("pairwise.min_busbw", f"slowest pair: {spread.floor_text(margin, 'GB/s')}")
    if measured.copies and measured.copies.results:
        # the copies as measured: host copies may have had a size of their own (copies.host_size)
        between = [result for result in measured.copies.results if result.what not in HOST_COPIES]
        host = [result for result in measured.copies.results if result.what in HOST_COPIES]
        first_copy = (between or host)[0]
        copies: Data = {"size": format_size(first_copy.size_bytes), "iterations": first_copy.iterations}
        if host and between and host[0].size_bytes != first_copy.size_bytes:
            copies["host_size"] = format_size(host[0].size_bytes)
        if any(result.round is not None for result in measured.copies.results):
            copies["concurrent"] = True  # measured that way: its floors hold for copies in rounds
        for what in COPY_KINDS:
            spread = _spread(machines, functools.partial(_lowest_copy, what=what))
            if spread is not None:
                copies[floor_key(what)] = spread.floor(margin)
                note(f"copies.{floor_key(what)}", f"{SLOWEST.get(what, 'slowest GPU')}: {spread.floor_text(margin, 'GB/s')}")
        data["copies"] = copies
    if measured.ddp and measured.ddp.results:
        _ddp(machines, data, note, margin, warn)


def _logged_results(facts: Facts, warn: Callable[[str], None]) -> list[CollectiveResult]:
    """The rows of imported nccl-tests logs a profile can hold: large sizes, dtypes it can measure."""
    sweep = facts.measurements.collectives
    if sweep is None:
        return []
    kept = [r for r in sweep.results if r.size_bytes >= SMALLEST_LOGGED_FLOOR and r.dtype in MEASURED_DTYPES]
    if len(kept) < len(sweep.results):
        warn(f"nccl: floors are written for logged sizes from {format_size(SMALLEST_LOGGED_FLOOR)} up in "
             f"{', '.join(MEASURED_DTYPES)}; {len(sweep.results) - len(kept)} smaller or other rows left out")
    return kept


def _nodes_of_the_logs(facts: Facts, warn: Callable[[str], None]) -> int:
    """How many machines of this one's GPU count the logs ran on: 1 for a log of this machine; more
    for a job over several, whose floors are the cluster's (gpus.count stays per machine). A log of
    some of the machine's GPUs is refused: no run of the profile measures on fewer than all of them."""
    ranks, gpus = facts.measurements.collectives.ranks if facts.measurements.collectives else 0, facts.gpu_count
    if ranks == gpus:
        return 1
    if ranks < gpus or ranks % gpus:
        raise ValueError(f"the logs ran on {ranks} ranks and the machine has {gpus} GPUs: their floors fit no run of a "
                         f"profile of it (a run measures on all {gpus} GPUs of each machine); import logs of all its GPUs, or of "
                         "whole machines")
    warn(f"nccl: the logs ran on {ranks // gpus} machines of {gpus} GPUs: their floors are written as cluster.busbw, which "
         "gpu-accept cluster judges, and gpus.count is per machine")
    return ranks // gpus


def _busbw(facts: Facts, collective: str, size: str) -> float | None:
    sweep = facts.measurements.collectives
    found = sweep.result(collective, size) if sweep else None
    return found.busbw_GBps if found else None


def _slowest_pair(facts: Facts) -> float | None:
    sweep = facts.measurements.pairwise
    return min(r.busbw_GBps for r in sweep.results) if sweep and sweep.results else None


def _lowest_copy(facts: Facts, what: str) -> float | None:
    sweep = facts.measurements.copies
    found = [r.GBps for r in sweep.results if r.what == what] if sweep else []
    return min(found) if found else None


def _ddp(machines: list[Machine], data: Data, note: Note, margin: float, warn: Callable[[str], None]) -> None:
    sweep = machines[0].runs[0].measurements.ddp
    if sweep is None:
        return
    results = sweep.results
    if not any(r.world == 1 for r in results):
        warn("ddp: the DDP sweep holds no run on 1 GPU, the baseline every efficiency is measured against: no ddp section written")
        return
    ddp: Data = {
        "model": dict(sweep.model),
        "dtype": sweep.dtype,
        "world_sizes": sorted({r.world for r in results}),
        "batches": sorted({r.batch for r in results}),
        "accumulation": sorted({r.accumulation for r in results}),
        "warmup_steps": sweep.warmup_steps,
        "steps": sweep.steps,
        "min_efficiency": {},
        "max_exposed_comm": {},
        "nvlink_ab": {},
    }
    for r in results:
        if r.world < 2:
            continue
        case = ddp_case(r.world, r.batch, r.accumulation)
        key = (r.world, r.batch, r.accumulation)

        spread = _spread(machines, functools.partial(_efficiency, key=key))
        if spread is not None:
            floor = spread.floor(margin)
            text = spread.floor_text(margin, digits=3)
            if floor > 1:
                # a superlinear run (caches, a slow single-GPU baseline) cannot set a floor the schema rejects
                warn(f"ddp.min_efficiency.{case}: {floor} is above 1, the most an efficiency can be: written as 1")
                floor, text = 1.0, f"{text}, capped at 1"
            ddp["min_efficiency"][case] = floor
            note(f"ddp.min_efficiency.{case}", text)

        spread = _spread(machines, functools.partial(_exposed, key=key))
        if spread is not None:
            ddp["max_exposed_comm"][case] = spread.ceiling(margin)
            note(f"ddp.max_exposed_comm.{case}", spread.ceiling_text(margin))

        spread = _spread(machines, functools.partial(_speedup, key=key))
        if spread is not None:
            ddp["nvlink_ab"][case] = spread.floor(margin)
            note(f"ddp.nvlink_ab.{case}", f"P2P over NCCL_P2P_DISABLE=1: {spread.floor_text(margin, 'x', digits=3)}")
    data["ddp"] = {key: value for key, value in ddp.items() if value not in ({}, [])}


def _efficiency(facts: Facts, key: DdpKey) -> float | None:
    return facts.measurements.ddp_efficiency(*key)


def _exposed(facts: Facts, key: DdpKey) -> float | None:
    found = facts.measurements.ddp.result(*key) if facts.measurements.ddp else None
    return found.exposed_share if found else None


def _speedup(facts: Facts, key: DdpKey) -> float | None:
    return facts.measurements.ddp_speedup(*key)
