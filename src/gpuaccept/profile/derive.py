"""A profile derived from the catalogue for a machine no profile describes: its expectations from
what the machine is (GPU model, how its GPUs are joined, how many it must have), each value with
the comment that says where it came from and how far that is from a measurement.

A value comes from the nearest record the catalogue holds, in this order: measured on this kind
of machine; measured on a machine like it (the same link at another GPU count, or another GPU
model on the same link), carried by the allowance each difference costs; a public figure; the
GPU's datasheet times the share of its peak the measured GPUs reached. A value the catalogue
cannot reach is left out, and its test says so.

`gpu-accept profile derive` writes the result as YAML to review and keep; `--profile auto`
derives it for a machine no profile matches, and the report's header line says so.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpuaccept.errors import ProfileError
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.profile.catalogue import Catalogue, Entry, FabricKind, Gpu, Record, RunRange, is_ceiling
from gpuaccept.profile.load import load_profile_text
from gpuaccept.profile.machine import Fabric, Installed, UnknownMachine, fabric_of, installed_gpus, most_common_link
from gpuaccept.profile.model import Profile
from gpuaccept.profile.render import render_yaml
from gpuaccept.profile.source import ENDS
from gpuaccept.profile.spec import SCHEMA_VERSION
from gpuaccept.vocabulary.collectives import COLLECTIVES
from gpuaccept.vocabulary.links import gpu_key, pair_key
from gpuaccept.vocabulary.steps import ddp_case

SIZES = ("256MiB", "1GiB", "4GiB")  # the sizes the shipped profiles judge, as measured here
HOST_COPY_SIZE = "256MiB"  # a host copy: a PCIe link reaches its rate far below the GiB a copy over NVLink needs
Origin = Literal["measured", "carried", "public", "datasheet"]
ORIGIN_WORDS: dict[Origin, str] = {
    "measured": "measured on this kind of machine",
    "carried": "carried from a machine like it",
    "public": "public figures",
    "datasheet": "from datasheets",
}


@dataclass(frozen=True)
class Value:
    """One expectation and where it came from."""

    value: float
    origin: Origin
    note: str  # the comment beside it: its source and formula
    distance: str = ""  # how the machine measured differs from this one ("" where it is this kind)
    records: tuple[str, ...] = ()  # the catalogue's records it came from


@dataclass(frozen=True)
class Target:
    """The machine a profile is derived for, in the catalogue's terms."""

    key: str  # the catalogue's name of its GPU model
    gpu: Gpu
    installed: Installed
    fabric: Fabric
    nvls: bool  # NCCL may use NVLink SHARP here
    driver: str | None  # the driver's major version
    nccl: str | None = None  # NCCL's major.minor where the facts hold a measurement that names it

    @property
    def count(self) -> int:
        return self.installed.count


@dataclass
class Derivation:
    """A derived profile: its YAML, the profile it loads as, and the one line that says how it was made."""

    name: str
    text: str
    summary: str
    values: dict[str, Value] = field(default_factory=dict)  # dotted key -> value, for the bench and the tests
    profile: Profile | None = None


def derive_profile(
    facts: Facts,
    catalogue: Catalogue,
    stated_count: int | None = None,
    stated_model: str | None = None,
    name: str | None = None,
    path: Path | None = None,
) -> Derivation:
    """The profile of the machine these facts describe, from the catalogue. Raises UnknownMachine
    where the catalogue does not know its GPU model. `path` is where the profile will be kept (its
    file name in messages); it is loaded here from its text, so what is written is what loads."""
    model = stated_model or facts.installed()[0]
    known = catalogue.gpu_named(model)
    if known is None:
        raise UnknownMachine(
            f"the catalogue knows no GPU named {model!r}: known are {', '.join(catalogue.known_names())}; "
            "write a profile (gpu-accept profile init) or name one with --profile"
        )
    key, gpu = known
    installed = installed_gpus(facts, catalogue, stated_count, stated_model)
    fabric = fabric_of(facts, catalogue, gpu, installed.count)
    environment = facts.environment
    multicast = facts.cuda.multicast if not isinstance(facts.cuda, Unavailable) else None
    no_multicast = isinstance(multicast, list) and any(value is False for value in multicast)
    nvls = (
        fabric.kind == "nvswitch"
        and gpu.board is not None
        and gpu.board.fabric_info
        and environment.get("NCCL_NVLS_ENABLE", "1") != "0"
        and not no_multicast
    )
    driver = facts.system.driver_version
    sweep = facts.measurements.collectives
    nccl = ".".join(sweep.nccl_version.split(".")[:2]) if sweep is not None and sweep.nccl_version else None
    target = Target(key, gpu, installed, fabric, nvls, driver.split(".")[0] if isinstance(driver, str) else None, nccl)
    name = name or f"derived-{installed.count}x-{key}" + (f"-{fabric.kind}" if fabric.kind != "none" else "")
    builder = _Builder(catalogue, target, _listed_links(facts))
    data = builder.profile_data(name)
    summary = builder.summary()
    header = [
        f"{name}: derived by gpu-accept from its catalogue for {installed.describe()} (review before use)",
        *textwrap.wrap(f"how many GPUs: {'; '.join(installed.evidence)}", 100, break_on_hyphens=False),
        *textwrap.wrap(summary, 100, break_on_hyphens=False),
    ]
    text = render_yaml(data, {key: value for key, value in builder.notes.items()}, header="\n".join(header))
    derivation = Derivation(name, text, summary, builder.values)
    where = path or Path(f"{name}.yaml")
    try:
        derivation.profile = load_profile_text(text, where)
    except ProfileError as error:  # a derivation that does not load is this program's fault: say where
        raise ProfileError([*error.problems]) from None
    return derivation


# ---- floors of runs ----------------------------------------------------------------------------------


# how many machines' runs a derived value's note names one by one
MACHINES_NAMED = 6


@dataclass(frozen=True)
class Runs:
    """One value's runs over machines, as a record lists them."""

    ranges: tuple[tuple[str, RunRange], ...]  # (record, range)

    @property
    def low(self) -> float:
        return min(r.low for _, r in self.ranges)

    @property
    def high(self) -> float:
        return max(r.high for _, r in self.ranges)

    @property
    def spread(self) -> float:
        return (self.high - self.low) / self.high if self.high else 0.0

    @property
    def count(self) -> int:
        return sum(r.runs for _, r in self.ranges)

    def text(self) -> str:
        machines = {r.machine for _, r in self.ranges}
        if len(self.ranges) > MACHINES_NAMED:
            # a record of many machines (every healthy run kept): its extremes, where the rest are
            lowest = min((r for _, r in self.ranges), key=lambda r: r.low)
            highest = max((r for _, r in self.ranges), key=lambda r: r.high)
            return (
                f"{self.count} runs on {len(machines)} machines ({self.low:g}-{self.high:g}: lowest on {lowest.machine}, "
                f"highest on {highest.machine}; each machine's runs in profiles/catalogue/measured.yaml)"
            )
        each = ", ".join(
            f"{r.machine} {r.runs} run{'s' if r.runs > 1 else ''} {r.low:g}" + (f"-{r.high:g}" if r.high != r.low else "")
            for _, r in self.ranges
        )
        return f"{self.count} run{'s' if self.count > 1 else ''} on {len(machines)} machine{'s' if len(machines) > 1 else ''} ({each})"


# ---- the values ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Candidate:
    record_key: str
    record: Record
    entry: Entry
    score: tuple[int, ...]
    factors: tuple[tuple[float, str], ...]  # (factor, why) applied to this record's floor


class _Builder:
    def __init__(self, catalogue: Catalogue, target: Target, listed_links: dict[int, list[tuple[int, bool]]]):
        self.catalogue = catalogue
        self.target = target
        self.listed_links = listed_links  # per GPU seen: (link, up) of each NVLink NVML lists
        self.notes: dict[str, str] = {}
        self.values: dict[str, Value] = {}

    # -- lookups --------------------------------------------------------------------------------

    def _rate_of(self, record: Record, kind: FabricKind) -> float:
        gpu = self.catalogue.gpu_models[record.gpu]
        if kind == "nvswitch" and gpu.nvlink is not None:
            return gpu.nvlink.links * gpu.nvlink.link_GBps
        if kind == "nvlink" and gpu.nvlink is not None and gpu.bridge is not None:
            return gpu.bridge.links * gpu.nvlink.link_GBps
        return self.catalogue.pcie_rate(gpu)[0]

    def _allowance(self, name: str) -> tuple[float, str]:
        allowance = self.catalogue.fabric.allowances[name]  # type: ignore[index]
        words = {
            "other_count_up": "measured at fewer GPUs",
            "other_count_down": "measured at more GPUs",
            "other_link_rate": "another link rate",
            "other_link_kind": "another link kind",
            "across_sockets": "across the sockets",
            "other_gpu": "another GPU model",
            "unmeasured_gpu": "a GPU not measured here",
            "unmeasured_gpu_compute": "a GPU not measured here",
        }[name]
        return allowance.value, words

    def fabric_value(self, key: str, kind: FabricKind, rate: float, world: int | None = None, exact_only: bool = False) -> Value | None:
        """A collective, pair or DDP value: from records of the same link kind (an NVLink bridge
        may borrow NVSwitch's), scaled by link rate, at the nearest GPU count."""
        t = self.target
        count = world or t.count
        if rate <= 0:
            return None  # GPUs joined by nothing this catalogue rates (a superchip's GPUs over NVLink-C2C)
        allowed = {"nvswitch": ("nvswitch",), "nvlink": ("nvlink", "nvswitch"), "pcie": ("pcie", "host"), "host": ("host",)}
        family = key.split(".")[0]
        candidates: list[_Candidate] = []
        for record_key, record in self.catalogue.records.items():
            if record.fabric not in allowed.get(kind, ()):
                continue
            if record.conditions.nvls and not t.nvls:
                continue
            if family == "ddp" and record.ddp_model != self._ddp_choice().model:
                continue
            for entry_key, entry, at in self._entries(record, key, world):
                kind_step = int(record.fabric != kind)
                record_rate = self._rate_of(record, record.fabric)
                rate_step = int(record_rate <= 0 or abs(record_rate - rate) / rate > 0.01)
                count_step = int(at != count)
                other_gpu = int(record.gpu != t.key)
                if exact_only and (kind_step or rate_step or count_step):
                    continue
                factors: list[tuple[float, str]] = []
                if kind_step:
                    factors.append(self._allowance("other_link_kind"))
                if rate_step:
                    if family != "ddp":  # a bandwidth scales with its link; a share of a training step does not
                        factors.append((rate / record_rate, f"link rate {rate:g} over {record_rate:g} GB/s"))
                    factors.append(self._allowance("other_link_rate"))
                if count_step:
                    factors.append(self._allowance("other_count_up" if at < count else "other_count_down"))
                if kind in ("host", "pcie") and t.fabric.across_sockets:
                    factors.append(self._allowance("across_sockets"))
                if family == "ddp" and other_gpu and self.catalogue.gpu_models[record.gpu].bf16_tflops.value != t.gpu.bf16_tflops.value:
                    factors.append(self._allowance("other_gpu"))
                nearest = abs(math.log2(count / at)) if at else 99.0
                # nearest first: the link, then the GPU count, then a machine of this size, then this GPU model
                # where NCCL uses NVLink SHARP here, a figure taken with it comes before one taken without
                without_nvls = int(t.nvls and not record.conditions.nvls)
                score = (kind_step, rate_step, count_step, round(nearest * 10), int(at > count), int(record.gpus != t.count),
                         other_gpu, without_nvls, int(record.public is not None))
                candidates.append(_Candidate(record_key, record, entry, score, tuple(factors)))
                del entry_key
        return self._best(key, candidates)

    def _entries(self, record: Record, key: str, world: int | None) -> list[tuple[str, Entry, int]]:
        """The record's entries for `key`: (its key, entry, the GPU count it was measured at). A
        DDP value is found at any world size of the same batch; others at the record's count."""
        if world is None:
            entry = record.values.get(key)
            return [(key, entry, record.gpus)] if entry is not None else []
        found = []
        prefix, case = key.rsplit(".", 1)
        suffix = case.split("gpu-", 1)[1]
        for entry_key, entry in record.values.items():
            match = re.fullmatch(re.escape(prefix) + r"\.(\d+)gpu-" + re.escape(suffix), entry_key)
            if match:
                found.append((entry_key, entry, int(match.group(1))))
        return found

    def _best(self, key: str, candidates: list[_Candidate]) -> Value | None:
        if not candidates:
            return None
        best = min(c.score for c in candidates)
        chosen = [c for c in candidates if c.score == best]
        public = [c for c in chosen if c.entry.figure is not None]
        rule_name = self._rule_name(key, chosen)
        if public:
            lowest = min(public, key=lambda c: c.entry.figure or 0.0)
            figure = lowest.entry.figure or 0.0
            rule = self.catalogue.fabric.rules["public_floor"]
            base = figure * rule.margin
            formula = f"{figure:g} x {rule.margin:g}"
            source = f"public: {lowest.record.public}"
            factors = lowest.factors
            if lowest.record.gpu != self.target.key:
                factors = (*factors, (1.0, f"{lowest.record.gpu}, another GPU model on the same link"))
            origin: Origin = "public"
            names = lowest.record_key
        else:
            runs = Runs(tuple((c.record_key, r) for c in chosen for r in (c.entry.runs or [])))
            rule = self.catalogue.fabric.rules[rule_name]
            if is_ceiling(rule_name) and rule.less_spread:
                base = runs.high + (1 - rule.margin) + (runs.high - runs.low)
                formula = f"highest {runs.high:g} + {1 - rule.margin:.2f} + range {runs.high - runs.low:.3f}"
            elif is_ceiling(rule_name):
                base = runs.high + (1 - rule.margin)
                formula = f"highest {runs.high:g} + {1 - rule.margin:.2f}"
            elif rule.less_spread:
                base = runs.low * max(rule.margin - runs.spread, 0.0)
                formula = f"lowest {runs.low:g} x ({rule.margin:g} - spread {runs.spread:.1%})"
            else:
                base = runs.low * rule.margin
                formula = f"lowest {runs.low:g} x {rule.margin:g}"
            names = ", ".join(dict.fromkeys(c.record_key for c in chosen))
            source = f"{names}: {runs.text()}"
            factors = chosen[0].factors
            other_gpu = any(c.record.gpu != self.target.key for c in chosen)
            if other_gpu and not any(why == "another GPU model" for _, why in factors):
                same_link = not any("link" in why for _, why in factors)
                factors = (*factors, (1.0, "another GPU model on the same link" if same_link else "another GPU model"))
            origin = "carried" if factors else "measured"
        value = base
        for factor, why in factors:
            value *= factor
            formula += f" x {factor:.4g} ({why})" if factor != 1.0 else f" ({why})"
        digits = 3 if is_ceiling(rule_name) else (4 if value < 10 else 1)
        value = round(min(value, 1.0) if is_ceiling(rule_name) or key.startswith("ddp.min_efficiency") else value, digits)
        distance = ", ".join(why for _, why in factors)
        records = tuple(dict.fromkeys([lowest.record_key] if public else [c.record_key for c in chosen]))
        return Value(value, origin, f"{source}: {formula} = {value:g}", f"{names} ({distance})" if distance else "", records)

    def _rule_name(self, key: str, chosen: list[_Candidate]) -> Any:
        rules = {c.entry.rule for c in chosen}
        if len(rules) == 1 and None not in rules:
            return rules.pop()
        if key.startswith("ddp.max_exposed_comm"):
            return "ceiling"
        return "load_floor" if key.startswith("compute.") else "floor"

    def host_value(self, key: str) -> Value | None:
        """A host-link copy: the same GPU model first (this count, then any), then any GPU on a
        PCIe link of the same rate, then another rate scaled."""
        t = self.target
        rate = self.catalogue.pcie_rate(t.gpu)[0]
        if rate <= 0:
            return None
        candidates = []
        for record_key, record in self.catalogue.records.items():
            entry = record.values.get(key)
            record_rate = self.catalogue.pcie_rate(self.catalogue.gpu_models[record.gpu])[0]
            if entry is None or record_rate <= 0 or entry.runs is None:
                continue
            rate_step = int(abs(record_rate - rate) / rate > 0.01)
            factors: list[tuple[float, str]] = []
            if rate_step:
                factors += [(rate / record_rate, f"host link {rate:g} over {record_rate:g} GB/s"), self._allowance("other_link_rate")]
            score = (rate_step, int(record.gpu != t.key), int(record.gpus != t.count))
            candidates.append(_Candidate(record_key, record, entry, score, tuple(factors)))
        return self._best(key, candidates)

    def gpu_value(self, key: str, peak: Callable[[Gpu], float | None], what: str) -> Value | None:
        """A per-GPU value: measured on this GPU model (this count first), else its datasheet
        figure times the least share of theirs the measured models reached."""
        t = self.target
        candidates = []
        for record_key, record in self.catalogue.records.items():
            entry = record.values.get(key)
            if entry is not None and record.gpu == t.key and entry.runs is not None:
                # a GPU's own loads are the same whatever board it sits on: every machine of the model pooled;
                # its copies come through its board's host link: this size of machine first
                score = () if key.startswith("compute.") else (int(record.gpus != t.count),)
                candidates.append(_Candidate(record_key, record, entry, score, ()))
        if candidates:
            return self._best(key, candidates)
        own = peak(t.gpu)
        if own is None:
            return None
        shares = []
        for record in self.catalogue.records.values():
            entry = record.values.get(key)
            reference = peak(self.catalogue.gpu_models[record.gpu])
            if entry is not None and entry.runs is not None and reference:
                shares.append((min(r.low for r in entry.runs) / reference, record.gpu, min(r.low for r in entry.runs), reference))
        if not shares:
            return None
        share, gpu, low, reference = min(shares)
        rule = self.catalogue.fabric.rules["load_floor"]
        allowance, words = self._allowance("unmeasured_gpu_compute" if key.startswith("compute.gemm") else "unmeasured_gpu")
        value = round(own * share * rule.margin * allowance, 1)
        formula = f"{own:g} x {share:.3f} ({low:g} lowest on {gpu} over its {reference:g}) x {rule.margin:g} x {allowance:g} ({words})"
        figure = t.gpu.memory_GBps if what == "memory" else t.gpu.bf16_tflops
        source = f"{what} {own:g} ({figure.kind}: {figure.source})"
        return Value(value, "datasheet", f"{source}: {formula} = {value:g}", f"{t.key} datasheet")

    # -- the profile --------------------------------------------------------------------------

    def keep(self, key: str, value: Value | None, into: dict[str, Any], field_name: str) -> None:
        if value is None or value.value <= 0:
            return
        into[field_name] = value.value
        self.values[key] = value
        self.notes[key] = value.note

    def note(self, key: str, text: str) -> None:
        self.notes[key] = text

    def _ddp_choice(self) -> Any:
        memory = self.target.gpu.memory_min_gib.value
        choices = sorted(self.catalogue.fabric.ddp, key=lambda c: -c.min_memory_gib)
        return next(c for c in choices if memory >= c.min_memory_gib)

    def profile_data(self, name: str) -> dict[str, Any]:
        t = self.target
        gpu = t.gpu
        data: dict[str, Any] = {"schema": SCHEMA_VERSION, "name": name}
        where = f"{t.fabric.rate_text}" if t.fabric.kind != "none" else "alone"
        data["description"] = f"{t.count}x {gpu.description}, {where}: derived from the gpu-accept catalogue"
        data["match"] = {"gpu_model": t.installed.model, "gpu_count": t.count}
        self.note("match", "the machine this profile was derived for")
        data["gpus"] = {"count": t.count, "model": list(gpu.names) if len(gpu.names) > 1 else gpu.names[0]}
        missing = f"; missing: {'; '.join(t.installed.missing)}" if t.installed.missing else ""
        self.note("gpus.count", "; ".join(t.installed.evidence) + missing)
        self.note("gpus.model", f"NVML's product name of the catalogue's {t.key}")
        data["gpus"]["memory_min_gib"] = gpu.memory_min_gib.value
        self.note("gpus.memory_min_gib", f"{gpu.memory_min_gib.kind}: {gpu.memory_min_gib.source}")
        if gpu.ecc is not None and gpu.ecc.value != "any":
            data["gpus"]["ecc"] = gpu.ecc.value
            self.note("gpus.ecc", f"{gpu.ecc.kind}: {gpu.ecc.source}")
        if gpu.pcie is not None:
            pcie: dict[str, Any] = {"generation": gpu.pcie.generation, "width": gpu.pcie.width}
            if gpu.pcie.idle_downshift:
                pcie["idle_downshift"] = True
            data["pcie"] = pcie
            self.note("pcie", f"{gpu.pcie.kind}: {gpu.pcie.source}")
        self._nvlink(data)
        self._links_and_p2p(data)
        if t.count >= 2:
            self._nccl(data)
            self._pairwise(data)
        self._copies(data)
        self._ddp(data)
        self._compute(data)
        if gpu.burnin is not None:
            data["burnin"] = {"min_sm_clock_mhz": gpu.burnin.min_sm_clock_mhz, "min_power_share": gpu.burnin.min_power_share}
            self.note("burnin", f"{gpu.burnin.kind}: {gpu.burnin.source}")
        if gpu.persistence_mode is not None:
            data["health"] = {"persistence_mode": gpu.persistence_mode.value}
            self.note("health.persistence_mode", f"{gpu.persistence_mode.kind}: {gpu.persistence_mode.source}")
        return data

    def _nvlink(self, data: dict[str, Any]) -> None:
        t = self.target
        gpu = t.gpu
        fabric = t.fabric
        facts_links = self.listed_links
        if fabric.kind == "nvswitch" and gpu.nvlink is not None:
            data["nvlink"] = {"active_links": gpu.nvlink.links, "version": gpu.nvlink.version}
            self.note("nvlink", f"every GPU's links through the switches; {gpu.nvlink.kind}: {gpu.nvlink.source}")
            if gpu.board is not None:
                data["fabric"] = {"state": "completed" if gpu.board.fabric_info else "not_supported"}
                self.note("fabric", f"NVSwitch fabric registration; {gpu.board.kind}: {gpu.board.source}")
            return
        if fabric.bridged and gpu.nvlink is not None and gpu.bridge is not None:
            nvlink: dict[str, Any] = {"active_links": gpu.bridge.links, "version": gpu.nvlink.version}
            unbridged = {gpu_key(g): 0 for g in range(t.installed.visible) if g not in fabric.bridged}
            if unbridged:
                nvlink["active_links_per_gpu"] = unbridged
            down = self._down_by_design(facts_links, lambda g: gpu.bridge.links if g in fabric.bridged else 0)  # type: ignore[union-attr]
            if down:
                nvlink["inactive_by_design"] = down
            data["nvlink"] = nvlink
            self.note(
                "nvlink",
                f"the bridged pairs as found ({', '.join(pair_key(a, b) for a, b in sorted(fabric.bridged.items()) if a < b)}): a bridge "
                f"not fitted cannot be told from one that failed, so state the pairs in a profile of your own where it matters; "
                f"{gpu.bridge.kind}: {gpu.bridge.source}",
            )
            return
        if any(kind.startswith("NV") for kind in fabric.pair_links.values()):
            return  # NVLinks this model joins in no way the catalogue knows (not a board, not a bridge): not judged
        nvlink = {"active_links": 0}
        down = self._down_by_design(facts_links, lambda g: 0)
        if down:
            nvlink["inactive_by_design"] = down
        data["nvlink"] = nvlink
        why = "a GPU alone: no NVLink in use" if t.count < 2 else "no NVLink joins these GPUs"
        self.note("nvlink", why + ("; the links NVML lists are down by design" if down else ""))
        if gpu.board is not None and t.count < 2:
            data["fabric"] = {"state": "not_supported"}
            self.note("fabric", "a GPU alone in its partition: NVML answers not supported (measured on the lent 1xH100 and 1xH200)")

    def _down_by_design(self, listed: dict[int, list[tuple[int, bool]]], expected: Callable[[int], int]) -> dict[str, list[int]]:
        """Links NVML lists as down on a GPU whose active count is what is expected: unused by design
        (an H100 NVL's 6 of 18, a card without a bridge). A GPU short of links gets none: its down links fail."""
        down = {}
        for g, links in sorted(listed.items()):
            active = sum(1 for _, up in links if up)
            off = [link for link, up in links if not up]
            if off and active == expected(g):
                down[gpu_key(g)] = off
        return down

    def _links_and_p2p(self, data: dict[str, Any]) -> None:
        t = self.target
        if t.count < 2:
            return
        gpu = t.gpu
        fabric = t.fabric
        if fabric.kind == "nvswitch" and gpu.nvlink is not None:
            data["links"] = {"all": f"NV{gpu.nvlink.links}"}
            self.note("links", "every pair through the switches, as nvidia-smi topo -m shows it")
            data["p2p"] = {"all": {"read": True, "write": True, "nvlink": True, "atomics": True}}
            self.note("p2p", "P2P over NVLink between every pair of an NVSwitch board (measured on the lent H100 and H200 boards)")
            return
        expected: dict[tuple[int, int], str] = {}
        for pair, seen in fabric.pair_links.items():
            if seen.startswith("NV") and gpu.bridge is not None and pair[0] in fabric.bridged:
                expected[pair] = f"NV{gpu.bridge.links}"
            else:
                expected[pair] = seen
        common = most_common_link(expected)
        if common is not None:
            links: dict[str, Any] = {"all": common}
            exceptions = {pair_key(*pair): kind for pair, kind in sorted(expected.items()) if kind != common}
            if exceptions:
                links["pairs"] = exceptions
            data["links"] = links
            self.note("links", "the PCIe path of each pair as found (nvidia-smi topo -m), NV# the catalogue's bridge links")
        p2p_pcie = gpu.p2p_over_pcie.value if gpu.p2p_over_pcie is not None else None
        caps: dict[str, dict[str, bool]] = {}
        for (a, b), kind in sorted(expected.items()):
            if kind.startswith("NV"):
                stated = {"read": True, "write": True, "nvlink": True}
            elif p2p_pcie is False:
                stated = {"read": False, "write": False}
            else:
                continue  # P2P over PCIe is the platform's (ACS, IOMMU, the chipset): not the GPU's to promise
            caps[pair_key(a, b)] = stated
            caps[pair_key(b, a)] = stated
        if caps:
            common_caps = max(caps.values(), key=lambda c: list(caps.values()).count(c))
            p2p: dict[str, Any] = {"all": common_caps} if p2p_pcie is False or len(caps) == len(expected) * 2 else {}
            exceptions_caps = {k: v for k, v in caps.items() if p2p.get("all") != v}
            if exceptions_caps:
                p2p["pairs"] = exceptions_caps
            data["p2p"] = p2p
            why = "P2P over each NVLink bridge"
            if p2p_pcie is False:
                why += f", none over PCIe ({gpu.p2p_over_pcie.kind}: {gpu.p2p_over_pcie.source})"  # type: ignore[union-attr]
            else:
                why += "; over PCIe the platform decides (ACS, IOMMU, the chipset): not judged"
            self.note("p2p", why)

    def _nccl(self, data: dict[str, Any]) -> None:
        t = self.target
        busbw: dict[str, dict[str, float]] = {}
        nvls_used = False
        for collective in COLLECTIVES:
            for size in SIZES:
                key = f"nccl.busbw.{collective}.{size}"
                value = self.fabric_value(key, t.fabric.kind, t.fabric.rate_GBps)
                if value is None:
                    continue
                busbw.setdefault(collective, {})
                self.keep(key, value, busbw[collective], size)
                nvls_used = nvls_used or any(self.catalogue.records[name].conditions.nvls for name in value.records)
        if not busbw:
            return
        nccl: dict[str, Any] = {"dtype": "bfloat16", "warmup": 5, "iterations": 20, "busbw": busbw}
        self.note("nccl", f"busbw as nccl-tests defines it, over {t.fabric.rate_text}")
        if nvls_used and t.nvls:
            nccl["nvls"] = True
            self.note("nccl.nvls", "NCCL sets NVLink SHARP up on an NVSwitch board by default: the 8-GPU floors are its figures")
        data["nccl"] = nccl

    def _pairwise(self, data: dict[str, Any]) -> None:
        t = self.target
        value = self.fabric_value("pairwise.min_busbw", t.fabric.pair_kind, t.fabric.pair_rate_GBps)
        if value is None:
            return
        pairwise: dict[str, Any] = {"size": "256MiB", "iterations": 10, "concurrent": t.fabric.kind == "nvswitch"}
        self.keep("pairwise.min_busbw", value, pairwise, "min_busbw")
        switched = t.fabric.kind == "nvswitch"
        why = "disjoint pairs share nothing on NVSwitch" if switched else "pairs share PCIe uplinks: one at a time"
        self.note("pairwise.concurrent", why)
        data["pairwise"] = pairwise

    def _copies(self, data: dict[str, Any]) -> None:
        t = self.target
        copies: dict[str, Any] = {"size": "1GiB", "iterations": 10}
        if t.count >= 2 and t.fabric.kind in ("nvswitch", "nvlink"):
            self.keep("copies.p2p_min", self.fabric_value("copies.p2p_min", t.fabric.kind, t.fabric.rate_GBps), copies, "p2p_min")
            bidirectional = self.fabric_value("copies.p2p_bidirectional_min", t.fabric.kind, t.fabric.rate_GBps, exact_only=True)
            self.keep("copies.p2p_bidirectional_min", bidirectional, copies, "p2p_bidirectional_min")
        self.keep("copies.local_min", self.gpu_value("copies.local_min", lambda g: g.memory_GBps.value, "memory"), copies, "local_min")
        for kind in ("host_to_device", "device_to_host"):
            self.keep(f"copies.{kind}_min", self.host_value(f"copies.{kind}_min"), copies, f"{kind}_min")
        if "host_to_device_min" in copies or "device_to_host_min" in copies:
            copies["host_size"] = HOST_COPY_SIZE
        if len(copies) > 2:
            if "p2p_min" in copies and t.fabric.kind == "nvswitch":
                copies["concurrent"] = True
                self.note("copies.concurrent", "disjoint pairs share nothing on NVSwitch: copied at once, in rounds")
            data["copies"] = copies

    def _ddp(self, data: dict[str, Any]) -> None:
        t = self.target
        if t.count < 2:
            return
        choice = self._ddp_choice()
        if t.fabric.kind == "nvswitch":
            # every pair and every subset crosses the switches the whole machine does (the pairwise
            # and NCCL stages measure each pair): a smaller world would train the same links again
            worlds = [1, t.count]
        else:
            worlds = [1] + [2**n for n in range(1, 8) if 2**n <= t.count]
            if t.count not in worlds:
                worlds.append(t.count)
        tables: dict[str, dict[str, float]] = {"min_efficiency": {}, "max_exposed_comm": {}, "nvlink_ab": {}}
        left_out: list[str] = []
        for world in worlds[1:]:
            for batch in choice.batches:
                case = ddp_case(world, batch, 1)
                efficiency = self.fabric_value(f"ddp.min_efficiency.{case}", t.fabric.kind, t.fabric.rate_GBps, world=world)
                self.keep(f"ddp.min_efficiency.{case}", efficiency, tables["min_efficiency"], case)
                exposed = self.fabric_value(f"ddp.max_exposed_comm.{case}", t.fabric.kind, t.fabric.rate_GBps, world=world, exact_only=True)
                self.keep(f"ddp.max_exposed_comm.{case}", exposed, tables["max_exposed_comm"], case)
                if t.fabric.kind == "nvswitch" and world == worlds[-1]:  # the A/B arm trains once more: at the largest world only
                    speedup = self.fabric_value(f"ddp.nvlink_ab.{case}", t.fabric.kind, t.fabric.rate_GBps, world=world)
                    if speedup is not None and speedup.value <= 1.0:
                        # training without P2P is 1.0x as fast as itself: a floor there cannot fail when P2P is off
                        left_out.append(
                            f"# nvlink_ab {case} not derived: carried, it comes to {speedup.value:g}x, which a machine with P2P off reaches"
                        )
                    else:
                        self.keep(f"ddp.nvlink_ab.{case}", speedup, tables["nvlink_ab"], case)
        if not tables["min_efficiency"]:
            return
        ddp: dict[str, Any] = {"model": choice.model, "world_sizes": worlds, "batches": list(choice.batches)}
        self.note("ddp.model", f"{choice.kind}: {choice.source}")
        ddp.update({name: table for name, table in tables.items() if table})
        data["ddp"] = ddp
        if left_out:
            self.note(f"ddp.{ENDS}", "\n".join(left_out))

    def _compute(self, data: dict[str, Any]) -> None:
        gpu = self.target.gpu
        gemm: dict[str, Any] = {"size": 8192}
        measured = self.gpu_value("compute.gemm.min_tflops", lambda g: g.bf16_tflops.value, "bf16 peak")
        if measured is not None and measured.origin == "datasheet" and gpu.matmul_tflops is not None:
            measured = self._gemm_from_public()
        self.keep("compute.gemm.min_tflops", measured, gemm, "min_tflops")
        gemm["within_best"] = 0.1
        self.note("compute.gemm.within_best", "gpu-fryer's rule: a GPU more than 10% below the best GPU of the node fails")
        hbm: dict[str, Any] = {"size": "1GiB"}
        for name in ("copy_min", "triad_min"):
            self.keep(f"compute.hbm.{name}", self.gpu_value(f"compute.hbm.{name}", lambda g: g.memory_GBps.value, "memory"), hbm, name)
        memtest = {"fraction": gpu.memtest_fraction.value if gpu.memtest_fraction is not None else 0.9, "time_cap_s": 15}
        if gpu.memtest_fraction is not None:
            self.note("compute.memtest.fraction", f"{gpu.memtest_fraction.kind}: {gpu.memtest_fraction.source}")
        data["compute"] = {"gemm": gemm, "hbm": hbm, "memtest": memtest}

    def _gemm_from_public(self) -> Value | None:
        """A GPU not measured here whose matrix products a public measurement gives: that figure
        times the share of their own public figure the measured models kept over gpu-accept's
        500-product window (the power limit sets the rate there, not the first milliseconds)."""
        t = self.target
        assert t.gpu.matmul_tflops is not None
        shares = []
        for record in self.catalogue.records.values():
            entry = record.values.get("compute.gemm.min_tflops")
            reference = self.catalogue.gpu_models[record.gpu].matmul_tflops
            if entry is not None and entry.runs is not None and reference is not None:
                low = min(r.low for r in entry.runs)
                shares.append((low / reference.value, record.gpu, low, reference.value))
        if not shares:
            return None
        share, gpu, low, public_low = min(shares)
        rule = self.catalogue.fabric.rules["load_floor"]
        own = t.gpu.matmul_tflops.value
        value = round(own * share * rule.margin, 1)
        formula = f"{own:g} x {share:.3f} ({low:g} lowest on {gpu} over its public {public_low:g}) x {rule.margin:g}"
        note = f"matrix products {own:g} (public: {t.gpu.matmul_tflops.source}): {formula} = {value:g}"
        return Value(value, "public", note, f"{t.key}'s public matrix products")

    def summary(self) -> str:
        counts: dict[Origin, int] = {"measured": 0, "carried": 0, "public": 0, "datasheet": 0}
        distances: dict[str, int] = {}
        for value in self.values.values():
            counts[value.origin] += 1
            if value.origin == "carried" and value.distance:
                distances[value.distance] = distances.get(value.distance, 0) + 1
        total = sum(counts.values())
        parts = [f"{n} {ORIGIN_WORDS[origin]}" for origin, n in counts.items() if n]
        t = self.target
        fabric = f"{t.fabric.kind}, {t.fabric.rate_text}" if t.fabric.kind != "none" else "alone"
        text = f"catalogue entries {t.key} ({fabric}); {total} floors: {', '.join(parts) or 'none'}"
        if distances:
            nearest = sorted(distances.items(), key=lambda item: -item[1])
            text += "; carried: " + "; ".join(f"{n} from {where}" for where, n in nearest[:3])
            if len(nearest) > 3:
                text += f"; {sum(n for _, n in nearest[3:])} more"
        records = sorted({name for v in self.values.values() if v.origin == "measured" for name in v.records})
        if records:
            text += f"; measured on: {', '.join(records)}"
        # the conditions the measurements were taken under, where this machine's differ
        used = [self.catalogue.records[name] for value in self.values.values() if value.origin != "datasheet" for name in value.records]
        for condition, here in (("driver", t.driver), ("nccl", t.nccl)):
            then = {getattr(record.conditions, condition) for record in used} - {None}
            if here and then and here not in then:
                text += f"; measured with {condition} {'/'.join(sorted(then))}, this machine runs {here}"
        return text


def _listed_links(facts: Facts) -> dict[int, list[tuple[int, bool]]]:
    listed: dict[int, list[tuple[int, bool]]] = {}
    for gpu in facts.gpus:
        if not isinstance(gpu.nvlinks, Unavailable):
            listed[gpu.index] = [(link.link, link.active) for link in gpu.nvlinks]
    return listed

