"""The catalogue: expected values keyed by what a machine is, each with where it came from.

Three files of data (profiles/catalogue/): gpus.yaml, what one GPU of each model is and does;
fabric.yaml, link rates, the rules that make a floor of measured runs and the allowance each
difference between machines costs; measured.yaml, what was measured on each kind of machine lent
here and the public figures of machines that were not. Read as strictly as a profile: unknown keys,
wrong types, a value without its source, a record naming a GPU model the catalogue does not know,
all reported at once, `file:line: $.path: what is wrong`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from gpuaccept.errors import KeyPath, Problem, ProfileError, format_path
from gpuaccept.profile.load import problem_from_pydantic
from gpuaccept.profile.source import Document, read_document
from gpuaccept.profile.spec import NvLinkVersion
from gpuaccept.resources import shipped_dir
from gpuaccept.vocabulary.gpt import GptPreset

CATALOGUE_FOLDER = "catalogue"
FILES = ("gpus.yaml", "fabric.yaml", "measured.yaml")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


_ADDRESS = re.compile(r"https?://\S+|\b[\w.-]+/[\w.-]+ \S+ @[0-9a-f]{7,40}\b")
_MACHINE = re.compile(r"\blent\b|\bvm/[0-9a-f]{8}\b")  # which machine: a lent one, named by its first GPU's UUID


class Sourced(Strict):
    """Where a value (or a group of values) came from: exactly one of the three."""

    measured: str | None = Field(None, description="a measurement here: which lent machine, how many runs, the range")
    public: str | None = Field(None, description="a public figure, with its address: a page, or owner/repo path @commit")
    derived: str | None = Field(None, description="the formula the value comes from")

    @model_validator(mode="after")
    def _one_source(self) -> Sourced:
        given = [name for name in ("measured", "public", "derived") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one source (measured, public or derived), not {' and '.join(given) or 'none'}")
        if self.public is not None and not _ADDRESS.search(self.public):
            raise ValueError("a public figure names its address: https://... or owner/repo path @commit")
        if self.measured is not None and not _MACHINE.search(self.measured):
            raise ValueError("a measurement names the lent machine it was taken on (vm/<first GPU UUID>, or 'lent ...')")
        if self.derived is not None and not any(sign in self.derived for sign in ("=", " x ", "/", ":")):
            raise ValueError("a derivation gives its formula (with = or x)")
        return self

    @property
    def kind(self) -> Literal["measured", "public", "derived"]:
        return "measured" if self.measured is not None else "public" if self.public is not None else "derived"

    @property
    def source(self) -> str:
        return self.measured or self.public or self.derived or ""


Positive = Annotated[float, Field(gt=0)]


class Number(Sourced):
    value: Annotated[float, BeforeValidator(lambda v: float(v) if isinstance(v, int) and not isinstance(v, bool) else v), Field(gt=0)]


class Flag(Sourced):
    value: bool


class EccMode(Sourced):
    value: Literal["enabled", "disabled", "any"]  # any: the owner's choice, not judged


class PcieOfGpu(Sourced):
    generation: Annotated[int, Field(ge=1, le=6)]
    width: Literal[1, 2, 4, 8, 16, 32]
    idle_downshift: bool = False


class NvLinkOfGpu(Sourced):
    version: NvLinkVersion
    links: Annotated[int, Field(ge=1, le=18)] = Field(description="NVLinks a GPU of this model has in use on its board or bridge")
    link_GBps: Positive = Field(description="one link, one direction")


class Board(Sourced):
    """An NVSwitch baseboard: how many GPUs, how many switches, the partitions its fabric manager makes."""

    gpus: Annotated[int, Field(ge=2, le=72)]
    nvswitches: Annotated[int, Field(ge=1, le=18)]
    partitions: list[Annotated[int, Field(ge=1, le=72)]] = Field(min_length=1)
    fabric_info: bool = Field(description="NVML reports the GPU's fabric registration (Hopper and later)")


class Bridge(Sourced):
    """NVLink bridges between cards: how many cards one bridge set joins, the links between two of them."""

    gpus: Annotated[int, Field(ge=2, le=8)]
    links: Annotated[int, Field(ge=1, le=18)]


class BurninOfGpu(Sourced):
    min_sm_clock_mhz: Annotated[int, Field(gt=0)]
    min_power_share: Annotated[float, Field(gt=0, le=1.2)]


class Gpu(Strict):
    names: list[Annotated[str, StringConstraints(min_length=1)]] = Field(min_length=1, description="NVML product names")
    description: str
    form: Literal["sxm", "pcie", "superchip"]
    memory_min_gib: Number
    ecc: EccMode | None = None
    pcie: PcieOfGpu | None = None  # left out where the GPU's host link is not PCIe (a superchip's NVLink-C2C)
    nvlink: NvLinkOfGpu | None = None
    board: Board | None = None
    bridge: Bridge | None = None
    p2p_over_pcie: Flag | None = None
    persistence_mode: Flag | None = None
    memtest_fraction: Number | None = None
    bf16_tflops: Number
    matmul_tflops: Number | None = None  # a public measurement of matrix products, where one is known
    memory_GBps: Number
    power_w: Number
    burnin: BurninOfGpu | None = None

    @model_validator(mode="after")
    def _links_for_their_fabric(self) -> Gpu:
        if (self.board is not None or self.bridge is not None) and self.nvlink is None:
            raise ValueError("a board or bridge joins GPUs by NVLink: give nvlink")
        if self.bridge is not None and self.nvlink is not None and self.bridge.links > self.nvlink.links:
            raise ValueError(f"bridge.links {self.bridge.links} is more than nvlink.links {self.nvlink.links}")
        return self


class CatalogueFile(Strict):
    """One file of the catalogue: its format version, and its entries by name."""

    schema_version: Literal[1] = Field(alias="schema")

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False, populate_by_name=False)


EntryName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]*$")]


class GpuFile(CatalogueFile):
    gpus: dict[EntryName, Gpu] = Field(min_length=1)


class Rule(Sourced):
    margin: Annotated[float, Field(gt=0, le=1)]
    less_spread: bool


class Allowance(Sourced):
    value: Annotated[float, Field(gt=0, le=1)]


class DdpChoice(Sourced):
    min_memory_gib: Annotated[float, Field(ge=0)]
    model: GptPreset
    batches: list[Annotated[int, Field(ge=1)]] = Field(min_length=1)


RuleName = Literal["floor", "load_floor", "ceiling", "public_floor", "record_floor", "record_ceiling"]


def is_ceiling(rule: str) -> bool:
    """A rule that makes a ceiling of its runs (the highest counts), not a floor: the
    exposed-communication values' only."""
    return rule.endswith("ceiling")
AllowanceName = Literal[
    "other_count_up", "other_count_down", "other_link_rate", "other_link_kind", "across_sockets", "other_gpu", "unmeasured_gpu",
    "unmeasured_gpu_compute",
]


class FabricFile(CatalogueFile):
    pcie_lane_GBps: dict[Annotated[str, StringConstraints(pattern=r"^[1-6]$")], Number]
    rules: dict[RuleName, Rule]
    allowances: dict[AllowanceName, Allowance]
    ddp: list[DdpChoice] = Field(min_length=1)

    @model_validator(mode="after")
    def _complete(self) -> FabricFile:
        missing = [name for name in RuleName.__args__ if name not in self.rules]  # type: ignore[attr-defined]
        missing += [name for name in AllowanceName.__args__ if name not in self.allowances]  # type: ignore[attr-defined]
        if missing:
            raise ValueError(f"missing: {', '.join(missing)}")
        if not any(choice.min_memory_gib == 0 for choice in self.ddp):
            raise ValueError("ddp: one choice must have min_memory_gib 0, so that every GPU has a model")
        return self


def _run_range(value: Any) -> Any:
    """[machine, runs, lowest, highest] as YAML writes it."""
    if isinstance(value, list) and len(value) == 4:
        machine, runs, low, high = value
        return {"machine": machine, "runs": runs, "low": _float(low), "high": _float(high)}
    raise ValueError("a run range is [machine, runs, lowest, highest]")


def _float(value: Any) -> Any:
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


class RunRange(Strict):
    machine: Annotated[str, StringConstraints(min_length=1)]
    runs: Annotated[int, Field(ge=1)]
    low: Annotated[float, Field(ge=0)]
    high: Annotated[float, Field(ge=0)]

    @model_validator(mode="after")
    def _ordered(self) -> RunRange:
        if self.low > self.high:
            raise ValueError(f"lowest {self.low} is above highest {self.high}")
        return self


def _entry(value: Any) -> Any:
    """A value as written: a list of run ranges, {rule, runs}, or one public figure."""
    if isinstance(value, list):
        return {"runs": value}
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"figure": float(value)}
    return value


class Entry(Strict):
    """One value of a record: its runs (and the rule that makes a floor of them), or a public figure."""

    rule: RuleName | None = None
    runs: list[Annotated[RunRange, BeforeValidator(_run_range)]] | None = Field(None, min_length=1)
    figure: Annotated[float, Field(gt=0)] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Entry:
        if (self.runs is None) == (self.figure is None):
            raise ValueError("give the runs ([[machine, runs, lowest, highest], ...]) or one public figure")
        return self


# the profile keys a record may hold a value of
VALUE_KEY = (
    r"^(nccl\.busbw\.(all_reduce|all_gather|reduce_scatter|alltoall|broadcast)\.\d+[KMG]iB"
    r"|pairwise\.min_busbw|copies\.(p2p|p2p_bidirectional|local|host_to_device|device_to_host)_min"
    r"|ddp\.(min_efficiency|max_exposed_comm|nvlink_ab)\.\d+gpu-bs\d+(-acc\d+)?"
    r"|compute\.gemm\.min_tflops|compute\.hbm\.(copy|triad)_min)$"
)
ValueKey = Annotated[str, StringConstraints(pattern=VALUE_KEY)]
FabricKind = Literal["nvswitch", "nvlink", "pcie", "host", "none"]


class Conditions(Strict):
    nvls: bool | None = Field(None, description="NCCL used NVLink SHARP (true), was kept off (false)")
    p2p: bool | None = Field(None, description="NCCL could use peer-to-peer (false: NCCL_P2P_DISABLE=1 or no P2P)")
    driver: Annotated[str, StringConstraints(pattern=r"^\d+$")] | None = Field(None, description="the driver's major version")
    nccl: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+$")] | None = Field(None, description="NCCL major.minor")


class Record(Sourced):
    gpu: str
    fabric: FabricKind
    gpus: Annotated[int, Field(ge=1, le=72)]
    conditions: Conditions = Field(default_factory=Conditions)
    ddp_model: GptPreset | None = None
    values: dict[ValueKey, Annotated[Entry, BeforeValidator(_entry)]] = Field(min_length=1)

    @model_validator(mode="after")
    def _shape(self) -> Record:
        public = self.public is not None
        for key, value in self.values.items():
            if public != (value.figure is not None):
                kind = "a public record holds one figure per value" if public else "a measured record lists runs per value"
                raise ValueError(f"{key}: {kind}")
            if key.startswith("ddp.") and self.ddp_model is None:
                raise ValueError(f"{key}: a DDP value needs the record's ddp_model")
            if value.rule is not None and is_ceiling(value.rule) != key.startswith("ddp.max_exposed_comm"):
                wanted = "a ceiling rule" if key.startswith("ddp.max_exposed_comm") else "a floor rule"
                raise ValueError(f"{key}: rule {value.rule} is not {wanted}: only the exposed-communication values are ceilings")
        return self


class MeasuredFile(CatalogueFile):
    records: dict[EntryName, Record] = Field(min_length=1)


class Catalogue(BaseModel):
    """The three files, checked together: every record's GPU is one the catalogue knows."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    folder: Path
    gpu_models: dict[str, Gpu]
    fabric: FabricFile
    records: dict[str, Record]

    def gpu_named(self, nvml_name: str) -> tuple[str, Gpu] | None:
        """The catalogue's entry for a GPU NVML names `nvml_name`."""
        return next(((key, gpu) for key, gpu in self.gpu_models.items() if nvml_name in gpu.names), None)

    def known_names(self) -> list[str]:
        return sorted(name for gpu in self.gpu_models.values() for name in gpu.names)

    def pcie_rate(self, gpu: Gpu) -> tuple[float, str]:
        """A GPU's PCIe link rate each way (GB/s) and its parts in words; 0 where it has no PCIe link
        or the catalogue knows no rate of its generation."""
        lane = self.fabric.pcie_lane_GBps.get(str(gpu.pcie.generation)) if gpu.pcie is not None else None
        if gpu.pcie is None or lane is None:
            return 0.0, "no PCIe link"
        return lane.value * gpu.pcie.width, f"PCIe Gen{gpu.pcie.generation} x{gpu.pcie.width} ({gpu.pcie.width} x {lane.value:g} GB/s)"


def _validated(model: type[BaseModel], doc: Document) -> Any:
    if doc.problems:
        raise ProfileError(doc.problems)
    try:
        return model.model_validate(doc.data)
    except ValidationError as exc:
        raise ProfileError([problem_from_pydantic(error, doc, model) for error in exc.errors()]) from None


def load_catalogue(folder: Path | None = None) -> Catalogue:
    """The catalogue in `folder` (the shipped one by default, read once per process), validated;
    every problem at once."""
    if folder is None:
        return _shipped()
    return _load(folder.resolve())


@functools.lru_cache(maxsize=1)
def _shipped() -> Catalogue:
    return _load((shipped_dir("profiles") / CATALOGUE_FOLDER).resolve())


def _load(folder: Path) -> Catalogue:
    docs = {name: read_document(folder / name) for name in FILES}
    problems: list[Problem] = []
    parsed: dict[str, Any] = {}
    models: tuple[type[BaseModel], ...] = (GpuFile, FabricFile, MeasuredFile)
    for (name, doc), model in zip(docs.items(), models, strict=True):
        try:
            parsed[name] = _validated(model, doc)
        except ProfileError as error:
            problems += error.problems
    if problems:
        raise ProfileError(problems)
    gpus: GpuFile = parsed["gpus.yaml"]
    measured: MeasuredFile = parsed["measured.yaml"]
    problems = list(_cross_problems(gpus, measured, docs["gpus.yaml"], docs["measured.yaml"]))
    if problems:
        raise ProfileError(problems)
    return Catalogue(folder=folder, gpu_models=gpus.gpus, fabric=parsed["fabric.yaml"], records=measured.records)


def _cross_problems(gpus: GpuFile, measured: MeasuredFile, gpu_doc: Document, measured_doc: Document) -> Iterator[Problem]:
    def at(doc: Document, path: KeyPath, message: str) -> Problem:
        where = doc.locate(path)
        return Problem(where.file, where.line, format_path(path), message)

    for key, record in measured.records.items():
        if record.gpu not in gpus.gpus:
            yield at(measured_doc, ("records", key, "gpu"), f"{record.gpu!r} is no GPU of gpus.yaml ({', '.join(gpus.gpus)})")
    seen: dict[str, str] = {}
    for key, gpu in gpus.gpus.items():
        for name in gpu.names:
            if name in seen:
                yield at(gpu_doc, ("gpus", key, "names"), f"{name!r} is also a name of {seen[name]}: NVML's name picks one model")
            seen[name] = key
