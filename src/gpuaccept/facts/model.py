"""Facts: what was found on a machine, frozen, with an exact JSON round trip.

Everything above this seam touches hardware; everything below reads only these records. A value
the hardware would not give is recorded as `Unavailable` with its reason, never as None or 0, so
a check can tell "not supported" from "zero" and say which it saw.
"""

from __future__ import annotations

import datetime
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from gpuaccept.errors import excerpt
from gpuaccept.facts.migration import FailureKey, WholeStep, earlier_failures
from gpuaccept.facts.relations import check_relations
from gpuaccept.vocabulary.copies import CopyKind
from gpuaccept.vocabulary.sizes import parse_size
from gpuaccept.vocabulary.steps import AnyStepKey, CollectiveKey, CopyKey, DdpKey, LoadKey, PairKey, StageName, StepKey, ddp_case

FACTS_VERSION: Literal[1] = 1


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


# What a measurement gives: a finite number (NaN or infinity in a facts file is damage, not a value);
# a time or a training rate is also above 0 (0 samples/s is no measurement, and would be divided by).
Finite = Annotated[float, Field(ge=0, allow_inf_nan=False)]
AboveZero = Annotated[float, Field(gt=0, allow_inf_nan=False)]
# Counts and sizes: no hardware gives a negative one. What a measurement is taken over (iterations,
# timed steps) and what a model is made of (layers, heads...) is at least 1: with 0 there is no measurement.
Count = Annotated[int, Field(ge=0)]
AtLeastOne = Annotated[int, Field(ge=1)]


class Unavailable(Record):
    """A fact the machine did not give: `reason` is a short code, `detail` says which call and why."""

    unavailable: Literal[
        "not_supported", "no_permission", "gpu_is_lost", "not_found", "timeout", "error", "not_installed", "not_probed"
    ]
    detail: str = ""

    def __str__(self) -> str:
        text = self.unavailable.replace("_", " ")
        return f"{text} ({self.detail})" if self.detail else text


def is_known(value: object) -> bool:
    return not isinstance(value, Unavailable)


def not_negative(cls: type[BaseModel], value: object) -> object:
    """A field validator for counts, sizes and indices (an `Unavailable` passes as it is)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        raise ValueError(f"must not be negative (got {excerpt(value)})")
    return value


# A reading: the value, or why there is none. Union order matters: pydantic tries the value first.
IntReading = int | Unavailable
StrReading = str | Unavailable
BoolReading = bool | Unavailable
FloatReading = float | Unavailable


def not_probed(detail: str = "") -> Unavailable:
    return Unavailable(unavailable="not_probed", detail=detail)


# What facts made from a command's text cannot tell, and facts recorded before a field existed
NOT_READ = "not read by this probe"
_NOT_READ_DUMPED = {"unavailable": "not_probed", "detail": NOT_READ}


class OmitsLaterDefaults(Record):
    """A record whose fields added after files were first recorded are left out of its JSON while
    they hold their defaults: a facts file recorded before them reads and writes back unchanged."""

    later_fields: ClassVar[dict[str, Any]] = {}

    @model_serializer(mode="wrap")
    def _omit_later_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name, default in self.later_fields.items():
            if name in data and data[name] == default:
                del data[name]
        return data


class PcieFacts(Record):
    generation_current: IntReading
    generation_max: IntReading  # what the GPU and its slot together allow
    generation_gpu_max: IntReading  # what the GPU alone supports
    width_current: IntReading
    width_max: IntReading

    _not_negative = field_validator(
        "generation_current", "generation_max", "generation_gpu_max", "width_current", "width_max"
    )(not_negative)


class NvLinkFacts(OmitsLaterDefaults):
    link: int
    active: bool
    version: IntReading  # NVML's code: 4 = NVLink 3.0, 6 = NVLink 4.0, 7 = NVLink 5.0
    remote_type: IntReading  # 0 GPU, 1 IBM NPU, 2 NVSwitch, 255 unknown
    remote_bus_id: StrReading  # normalized; FFFFFFFF:FF:FF.0 inside VMs for switch links
    # the link's speed as the GPU reports it (`nvidia-smi nvlink -s`): GB/s per direction
    speed_GBps: FloatReading = Field(default_factory=lambda: not_probed(NOT_READ))

    later_fields: ClassVar[dict[str, Any]] = {"speed_GBps": _NOT_READ_DUMPED}


class FabricFacts(Record):
    state: int  # 0 not supported, 1 not started, 2 in progress, 3 completed
    status: int  # an NVML return code: 0 success
    clique_id: int
    cluster_uuid: str


class NicLink(Record):
    """A network adapter as `nvidia-smi topo -m` shows it from one GPU: its name and the PCIe path."""

    nic: str  # the adapter's name: mlx5_0 where the legend names it, NIC0 otherwise
    link: str  # PIX, PXB, PHB, NODE, SYS


class GpuFacts(OmitsLaterDefaults):
    index: int  # the CUDA ordinal, as the process under test sees it: the `gpuN` of test ids
    nvml_index: int
    name: StrReading  # not_probed where the facts come from text that does not name the model
    uuid: str
    pci_bus_id: str
    serial: StrReading
    vbios: StrReading
    memory_total_bytes: IntReading
    ecc_enabled: BoolReading
    persistence_mode: BoolReading
    numa_node: IntReading
    clock_event_reasons: IntReading
    pcie: PcieFacts
    nvlinks: list[NvLinkFacts] | Unavailable
    fabric: FabricFacts | Unavailable
    # affinity as `nvidia-smi topo -m` prints it: CPU and NUMA lists ("0-47,96-143"), every NIC
    cpu_affinity: StrReading = Field(default_factory=lambda: not_probed(NOT_READ))
    numa_affinity: StrReading = Field(default_factory=lambda: not_probed(NOT_READ))
    nics: list[NicLink] | Unavailable = Field(default_factory=lambda: not_probed(NOT_READ))

    later_fields: ClassVar[dict[str, Any]] = {name: _NOT_READ_DUMPED for name in ("cpu_affinity", "numa_affinity", "nics")}

    _not_negative = field_validator("index", "nvml_index", "memory_total_bytes")(not_negative)


class LinkFacts(OmitsLaterDefaults):
    """How two GPUs are connected, as `nvidia-smi topo -m` shows it, with the evidence."""

    gpus: tuple[Count, Count]
    link_type: StrReading  # NV18, PIX, SYS ...
    direct_nvlinks: int  # links from the first GPU whose far end is the second
    topology_level: IntReading  # nvmlDeviceGetTopologyCommonAncestor
    via_switch: bool  # both GPUs reach each other through NVSwitch links
    evidence: str = ""  # where the link type was read, when not from NVML ("nvidia-smi topo -m text")

    later_fields: ClassVar[dict[str, Any]] = {"evidence": ""}


class P2PFacts(Record):
    """Peer-to-peer capability of an ordered pair: NVML status per capability, and CUDA's answer."""

    gpus: tuple[Count, Count]
    nvml: dict[str, StrReading]  # read/write/nvlink/atomics/pci (topo -p2p's "prop") -> OK, NOT_SUPPORTED, ...
    cuda_can_access_peer: BoolReading


class CudaFacts(OmitsLaterDefaults):
    torch_version: str
    cuda_runtime: StrReading
    device_count: Count
    visible_devices: str | None  # CUDA_VISIBLE_DEVICES as set, None when unset
    uuids: list[str]  # in CUDA ordinal order
    peer_access: list[list[bool | None]]  # [i][j], None on the diagonal
    # CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED per CUDA ordinal (NVLink SHARP's switch multicast); None: not probed
    multicast: list[BoolReading] | Unavailable | None = None

    later_fields: ClassVar[dict[str, Any]] = {"multicast": None}


class InstalledGpu(Record):
    """A GPU as NVML sees it, under test or not: CUDA_VISIBLE_DEVICES hides GPUs from CUDA only."""

    nvml_index: int
    name: str
    uuid: str
    pci_bus_id: str


class SystemFacts(OmitsLaterDefaults):
    hostname: str
    driver_version: StrReading
    cuda_driver_version: StrReading  # the CUDA version the driver supports, e.g. "13.0"
    nvml_version: StrReading
    nvml_gpu_count: int  # every GPU NVML sees, under test or not
    installed_gpus: list[InstalledGpu] = Field(default_factory=list)  # each of them, in NVML order
    # NVIDIA functions on the PCI bus as the kernel lists them (/sys/bus/pci/devices), NVML or not:
    # a GPU that fell off the driver is still there, or an NVSwitch says which board this is
    pci_gpus: list[str] | Unavailable = Field(default_factory=lambda: not_probed(NOT_READ))  # bus ids, display/3D class
    pci_nvswitches: list[str] | Unavailable = Field(default_factory=lambda: not_probed(NOT_READ))  # bus ids, bridge class

    later_fields: ClassVar[dict[str, Any]] = {"pci_gpus": _NOT_READ_DUMPED, "pci_nvswitches": _NOT_READ_DUMPED}

    @property
    def unseen_pci_gpus(self) -> list[str]:
        """GPUs on the PCI bus that NVML does not see (fallen off the bus, failed to initialize), by bus id."""
        if isinstance(self.pci_gpus, Unavailable):
            return []
        seen = {gpu.pci_bus_id for gpu in self.installed_gpus}
        return [bus for bus in self.pci_gpus if bus not in seen]

    @property
    def installed_model(self) -> str | None:
        """The GPU model of the machine as installed: the most common NVML product name."""
        names = [gpu.name for gpu in self.installed_gpus]
        return max(names, key=names.count) if names else None

    _not_negative = field_validator("nvml_gpu_count")(not_negative)


# not_in_log: an imported log that ends before this step (cut short): nothing is known of it
FailureReason = Literal["timeout", "crashed", "not_run", "unsupported", "error", "not_in_log", "not_a_number"]


class StepFailure(Record):
    """A measurement that did not produce a number, and why: `keys` are the values it leaves
    without one (a pairwise step's failure covers its pairs, a DDP world's its settings). A check
    finds the failure of its value by key; the label is for people."""

    step: str  # the step's label, as messages name it: "all_reduce 1 GiB"
    reason: FailureReason
    message: str
    keys: list[FailureKey] = Field(min_length=1)  # files written before keys existed: see facts.migration

    def covers(self, key: StepKey) -> bool:
        return any(key == mine or (isinstance(mine, WholeStep) and mine.covers(key)) for mine in self.keys)


def failure_of(failures: list[StepFailure], key: StepKey) -> StepFailure | None:
    """The failure that left `key` without a number, if one did."""
    return next((failure for failure in failures if failure.covers(key)), None)


# Where a stage's time went, in seconds by phase, as its workers timed it (measure/launch.py's
# Outcome.phases): start-up, waiting for the machine, each step and the parts a step times itself
Phases = dict[str, Finite]


class Sweep(OmitsLaterDefaults):
    """What every sweep shares: the stage that measures it, and failures recorded before they named
    their keys are given them as the file is read (facts.migration). Its `phases`, added later, are
    left out of its JSON while empty."""

    stage: ClassVar[StageName]
    later_fields: ClassVar[dict[str, Any]] = {"phases": {}}

    @field_validator("failures", mode="before", check_fields=False)
    @classmethod
    def _earlier_failures(cls, failures: Any, info: ValidationInfo) -> Any:
        return earlier_failures(failures, without_p2p=info.data.get("p2p_disabled") is True)


class CollectiveResult(Record):
    collective: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]  # as a test id holds it: all_reduce
    size_bytes: Count  # S as nccl-tests prints it
    nominal_size: str  # the size the profile asked for: the test id ("1GiB")
    dtype: str
    ranks: Count
    # not_probed where a log lacks the header that says them (an nccl-tests log without `# nThread ...`)
    warmup: Count | Unavailable
    iterations: AtLeastOne | Unavailable
    time_us: Finite  # one operation, the slowest rank's mean over the timed iterations
    algbw_GBps: Finite
    busbw_GBps: Finite
    wrong: IntReading  # elements differing from the expected result in the validation run

    _not_negative = field_validator("wrong")(not_negative)

    @field_validator("nominal_size")
    @classmethod
    def _a_size(cls, value: str) -> str:
        # refused here, naming the key, rather than where a check reads the size and fails mid-run
        try:
            size = parse_size(value)
        except ValueError:
            raise ValueError(f"{excerpt(value)} is not a size: write bytes with a binary unit, e.g. 256MiB, 1GiB") from None
        if size <= 0:
            raise ValueError(f"{excerpt(value)} is no bytes at all")
        return value

    @property
    def key(self) -> CollectiveKey:
        return CollectiveKey(self.collective, parse_size(self.nominal_size))


class NcclNvls(Record):
    """Whether NCCL set up NVLink SHARP (NVLS), as its INFO lines at communicator set-up say."""

    available_on: list[int]  # "NVLS multicast support is available on dev N"
    not_available_on: list[int]  # "NVLS multicast support is not available on dev N"
    nvls_comms: Count  # "NVLS comm 0x... headRank ..." lines: ranks that set NVLS up
    nvls_channels: int | None  # "... N nvls channels ..." (the largest seen); None where no such line was read
    enable_setting: str | None  # "NCCL_NVLS_ENABLE set by environment to X": X
    lines_read: Count

    @property
    def used(self) -> bool:
        return self.nvls_comms > 0 or bool(self.nvls_channels)


class CollectiveSweep(Sweep):
    stage: ClassVar[StageName] = "nccl"

    backend: str
    nccl_version: str | None
    torch_version: str
    ranks: Count  # 0 where the stage could not run
    environment: dict[str, str]  # NCCL_* and friends, as the workers saw them
    wall_s: Finite
    results: list[CollectiveResult]
    failures: list[StepFailure] = Field(default_factory=list)
    nvls: NcclNvls | Unavailable | None = None  # None: recorded before NVLS was read
    phases: Phases = Field(default_factory=dict)

    later_fields: ClassVar[dict[str, Any]] = {"nvls": None, "phases": {}}

    def result(self, collective: str, nominal_size: str) -> CollectiveResult | None:
        return next((r for r in self.results if r.collective == collective and r.nominal_size == nominal_size), None)

    def failure(self, key: CollectiveKey) -> StepFailure | None:
        return failure_of(self.failures, key)


class PairResult(Record):
    gpus: tuple[Count, Count]
    size_bytes: Count
    iterations: AtLeastOne
    time_us: Finite  # one exchange in both directions, the slower of the two ranks
    busbw_GBps: Finite  # bytes one way per second: what each direction carried
    wrong: Count
    round: Count  # pairs of one round ran at the same time

    @property
    def key(self) -> PairKey:
        return PairKey.between(*self.gpus)


class PairSweep(Sweep):
    stage: ClassVar[StageName] = "nccl"

    backend: str
    concurrent: bool
    wall_s: Finite
    results: list[PairResult]
    failures: list[StepFailure] = Field(default_factory=list)
    phases: Phases = Field(default_factory=dict)

    def result(self, a: int, b: int) -> PairResult | None:
        key = (min(a, b), max(a, b))
        return next((r for r in self.results if tuple(r.gpus) == key), None)

    def failure(self, key: PairKey) -> StepFailure | None:
        return failure_of(self.failures, key)


class CopyResult(Record):
    what: CopyKind
    gpus: tuple[Count, ...]  # (src, dst) for p2p; (gpu,) otherwise
    size_bytes: Count
    iterations: AtLeastOne
    GBps: Finite  # bytes moved per second; bidirectional counts both directions, local counts bytes once
    wrong: Count

    @field_validator("gpus")
    @classmethod
    def _one_gpu_or_two(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not 1 <= len(value) <= 2:
            raise ValueError(f"a copy is on one GPU or between two, not {len(value)}")
        return value

    @property
    def key(self) -> CopyKey:
        return CopyKey(self.what, self.gpus)


class CopySweep(Sweep):
    stage: ClassVar[StageName] = "copies"

    wall_s: Finite
    results: list[CopyResult]
    failures: list[StepFailure] = Field(default_factory=list)
    phases: Phases = Field(default_factory=dict)

    def result(self, what: str, gpus: tuple[int, ...]) -> CopyResult | None:
        return next((r for r in self.results if r.what == what and tuple(r.gpus) == tuple(gpus)), None)

    def failure(self, key: CopyKey) -> StepFailure | None:
        return failure_of(self.failures, key)


class DdpResult(Record):
    world: AtLeastOne
    batch: AtLeastOne  # per GPU, per micro-step
    accumulation: AtLeastOne  # micro-steps per optimizer step; DDP synchronizes on the last
    step_s: AboveZero  # one optimizer step: the slowest rank's median over the timed steps
    no_sync_step_s: AboveZero | None  # the same step without gradient synchronization
    samples_per_s_per_gpu: AboveZero
    tokens_per_s_per_gpu: AboveZero
    parameters: Count

    @property
    def case(self) -> str:
        return ddp_case(self.world, self.batch, self.accumulation)

    @property
    def exposed_share(self) -> float | None:
        """The share of a step spent in communication that compute did not hide."""
        if not self.no_sync_step_s:
            return None
        return max(0.0, (self.step_s - self.no_sync_step_s) / self.step_s)


class DdpSweep(Sweep):
    stage: ClassVar[StageName] = "ddp"

    backend: str
    nccl_version: str | None
    torch_version: str
    model: dict[str, AtLeastOne]  # layers, d_model, heads, vocab, seq_len
    parameters: Count
    dtype: str
    warmup_steps: Count
    steps: AtLeastOne
    p2p_disabled: bool  # the NVLink A/B's other arm: NCCL_P2P_DISABLE=1
    environment: dict[str, str]
    wall_s: Finite
    results: list[DdpResult]
    failures: list[StepFailure] = Field(default_factory=list)
    phases: Phases = Field(default_factory=dict)

    def result(self, world: int, batch: int, accumulation: int = 1) -> DdpResult | None:
        return next((r for r in self.results if (r.world, r.batch, r.accumulation) == (world, batch, accumulation)), None)

    def key_of(self, result: DdpResult) -> DdpKey:
        return DdpKey(result.world, result.batch, result.accumulation, self.p2p_disabled)

    def failure(self, key: DdpKey) -> StepFailure | None:
        return failure_of(self.failures, key)


class GemmResult(Record):
    """Sustained matrix products on one GPU, and how their results compared with the reference."""

    load: Literal["gemm"] = "gemm"
    gpu: Count
    size: int  # n of the n x n x n product
    dtype: str
    repeats: int
    verify_repeats: int
    time_us: Finite  # one product, the mean over the timed repeats
    tflops: Finite  # 2 n^3 per product
    mismatches: int  # elements of later products that differ from the first, bit for bit
    nonfinite: int  # NaN or Inf elements in the first product
    reference_wrong: int  # elements of the checked block outside the tolerance of a float32 product
    reference_elements: int
    # the largest error in the block, relative to |ref| + rms(ref); None where the block held NaN or
    # Inf, which has no error to give (and which `reference_wrong` counts)
    reference_max_error: Finite | None

    @property
    def key(self) -> LoadKey:
        return LoadKey("gemm", self.gpu)


class HbmResult(Record):
    load: Literal["hbm_copy", "hbm_triad"]
    gpu: Count
    size_bytes: int  # of each array
    iterations: int
    time_us: Finite
    GBps: Finite  # bytes read and written per second: 2 arrays for the copy, 3 for the triad
    wrong: int  # elements of the result that differ from what was copied or computed

    @property
    def key(self) -> LoadKey:
        return LoadKey(self.load, self.gpu)


class MemtestResult(Record):
    load: Literal["memtest"] = "memtest"
    gpu: Count
    bytes_tested: int
    free_bytes: int  # free when the test began
    total_bytes: int
    chunk_bytes: int
    passes_planned: int
    passes_done: int  # passes finished before the time cap
    mismatches: int  # words read back different from what was written, over every pass
    capped: bool  # the time cap ended the test before its last pass
    seconds: Finite

    @property
    def key(self) -> LoadKey:
        return LoadKey("memtest", self.gpu)


LoadResult = Annotated[GemmResult | HbmResult | MemtestResult, Field(discriminator="load")]


class ComputeSweep(Sweep):
    """The per-GPU loads: each GPU measured by a worker process of its own, every GPU at once (or the
    GPUs one pytest-xdist worker was asked for, the sweeps of several workers put together)."""

    stage: ClassVar[StageName] = "compute"

    backend: str  # "cuda", or "cpu" where the loads ran on the CPU device
    torch_version: str
    gpus: list[Count]  # the GPUs these loads were measured on
    wall_s: Finite
    results: list[LoadResult]
    failures: list[StepFailure] = Field(default_factory=list)
    phases: Phases = Field(default_factory=dict)

    def result(self, key: LoadKey) -> GemmResult | HbmResult | MemtestResult | None:
        return next((r for r in self.results if r.key == key), None)

    def failure(self, key: LoadKey) -> StepFailure | None:
        return failure_of(self.failures, key)

    def joined(self, other: ComputeSweep) -> ComputeSweep:
        """Both sweeps' GPUs in one: what several workers measured apart, or a GPU measured again."""
        theirs = set(other.gpus)
        return ComputeSweep(
            backend=other.backend or self.backend,
            torch_version=other.torch_version or self.torch_version,
            gpus=sorted(set(self.gpus) | theirs),
            wall_s=max(self.wall_s, other.wall_s),
            results=[r for r in self.results if r.gpu not in theirs] + list(other.results),
            failures=[f for f in self.failures if not any(getattr(k, "gpu", None) in theirs for k in f.keys)] + list(other.failures),
            phases={**self.phases, **other.phases},
        )


class ConfirmationRound(Record):
    """Values that missed their criterion, measured again: the steps' keys and what they gave."""

    stage: StageName
    keys: list[AnyStepKey]
    measurements: Measurements
    wall_s: Finite


class Measurements(OmitsLaterDefaults):
    collectives: CollectiveSweep | None = None
    pairwise: PairSweep | None = None
    copies: CopySweep | None = None
    ddp: DdpSweep | None = None
    ddp_without_p2p: DdpSweep | None = None
    compute: ComputeSweep | None = None  # the per-GPU loads
    # confirmation rounds, in the order they ran; each holds only the steps it measured again
    rounds: list[ConfirmationRound] = Field(default_factory=list)
    # keys of values that missed and were not measured again: the stage's time for it ran out
    unconfirmed: list[AnyStepKey] = Field(default_factory=list)

    later_fields: ClassVar[dict[str, Any]] = {"compute": None}

    @classmethod
    def sweep_names(cls) -> tuple[str, ...]:
        """The fields that hold a stage's sweep (every field but the confirmation rounds' two)."""
        return tuple(name for name in cls.model_fields if name not in ("rounds", "unconfirmed"))

    @classmethod
    def sweeps_of(cls, stage: str) -> tuple[str, ...]:
        """The fields that hold what `stage` measures, as each sweep's type says."""
        return tuple(name for name in cls.sweep_names() if _sweep_type(cls.model_fields[name].annotation).stage == stage)

    def attempt(self, index: int) -> Measurements:
        """The measurements as confirmation round `index` saw them: its results in place of the
        first ones for the steps it measured again, everything else as first measured."""
        again = self.rounds[index]
        keys = set(again.keys)
        update = {}
        for name in self.sweeps_of(again.stage):
            first, second = getattr(self, name), getattr(again.measurements, name)
            if second is None:
                continue
            if first is None:
                update[name] = second
                continue
            key_of = first.key_of if isinstance(first, DdpSweep) else (lambda result: result.key)
            kept = [result for result in first.results if key_of(result) not in keys]
            update[name] = second.model_copy(
                update={"results": kept + list(second.results), "failures": list(second.failures) + list(first.failures)}
            )
        return self.model_copy(update=update)

    def ddp_efficiency(self, world: int, batch: int, accumulation: int = 1) -> float | None:
        """E(N) = throughput(N) / (N x throughput(1)), per GPU: samples/s per GPU on N over on one."""
        many = self.ddp.result(world, batch, accumulation) if self.ddp else None
        one = self.ddp.result(1, batch, accumulation) if self.ddp else None
        return many.samples_per_s_per_gpu / one.samples_per_s_per_gpu if many and one else None

    def ddp_speedup(self, world: int, batch: int, accumulation: int = 1) -> float | None:
        """Throughput with P2P over the same setting with NCCL_P2P_DISABLE=1."""
        with_p2p = self.ddp.result(world, batch, accumulation) if self.ddp else None
        without = self.ddp_without_p2p.result(world, batch, accumulation) if self.ddp_without_p2p else None
        return with_p2p.samples_per_s_per_gpu / without.samples_per_s_per_gpu if with_p2p and without else None


ConfirmationRound.model_rebuild()


def _sweep_type(annotation: Any) -> type[Sweep]:
    """CollectiveSweep from `CollectiveSweep | None`."""
    return next(kind for kind in get_args(annotation) if isinstance(kind, type) and issubclass(kind, Sweep))


class TextSource(Record):
    """Facts read from command outputs instead of probed: which files, and what reading them found."""

    files: list[str]  # as given, in order
    kinds: dict[str, list[str]]  # file -> what it held: "nvidia-smi topo -m", "nccl-tests all_reduce_perf", ...
    notes: list[str] = Field(default_factory=list)  # damage found and what was still used, one line each


class TelemetrySample(Record):
    """One GPU's readings at one moment of a run. `t_s` is seconds since sampling began."""

    t_s: float
    gpu: Count  # the CUDA ordinal: gpuN
    sm_clock_mhz: IntReading
    memory_clock_mhz: IntReading
    temperature_c: IntReading
    memory_temperature_c: IntReading  # HBM, NVML field 82, where the GPU answers it
    power_w: FloatReading
    clock_event_reasons: IntReading  # nvmlClocksEventReasons bits (vocabulary/telemetry.py)
    utilization_pct: IntReading


class TelemetryLimits(Record):
    """What NVML says a GPU's readings may reach, read once when sampling starts."""

    gpu: Count
    slowdown_temperature_c: IntReading
    max_sm_clock_mhz: IntReading
    power_limit_w: FloatReading


class LoadWindow(Record):
    """A measurement stage that loaded the GPUs, in seconds since sampling began."""

    stage: str
    started_s: float
    ended_s: float


class Telemetry(Record):
    """Every GPU sampled at a fixed period while the run went on, and when loads ran."""

    started_at: str  # ISO 8601, UTC: the moment `t_s` counts from
    period_s: float
    not_sampled: str = ""  # why sampling could not start (NVML would not open for it); no samples then
    limits: list[TelemetryLimits] = Field(default_factory=list)
    samples: list[TelemetrySample] = Field(default_factory=list)
    loads: list[LoadWindow] = Field(default_factory=list)

    def of_gpu(self, gpu: int) -> list[TelemetrySample]:
        return [sample for sample in self.samples if sample.gpu == gpu]

    def limits_of(self, gpu: int) -> TelemetryLimits | None:
        return next((limit for limit in self.limits if limit.gpu == gpu), None)

    def under_load(self, sample: TelemetrySample) -> bool:
        return any(window.started_s <= sample.t_s <= window.ended_s for window in self.loads)


class BurnInRound(OmitsLaterDefaults):
    """One round of a burn-in: the stages it ran, what they measured, when (seconds since the start)."""

    index: int  # 1, 2, ...
    started_s: float
    wall_s: Finite
    stages: list[str]
    measurements: Measurements
    # the stages ran while the sustained load held every GPU (the fabric at its interval): their
    # results are checked for wrong data and hangs, their bandwidth is not held to an unloaded floor
    beside_load: bool = False

    later_fields: ClassVar[dict[str, Any]] = {"beside_load": False}


class BurnIn(OmitsLaterDefaults):
    """A burn-in: a sustained load on every GPU for the duration (or until it was ended), judged in
    rounds, with the fabric stages run before it and beside it."""

    duration_s: float  # asked for
    elapsed_s: float  # what ran
    ended: Literal["deadline", "interrupted"]
    rounds: list[BurnInRound] = Field(default_factory=list)
    # when the burn-in began (ISO 8601, UTC), and when its sustained load began and ended in
    # seconds from then: what places the rounds on the telemetry's time line
    started_at: str = ""
    load_started_s: float | None = None
    load_ended_s: float | None = None

    later_fields: ClassVar[dict[str, Any]] = {"started_at": "", "load_started_s": None, "load_ended_s": None}

    def rounds_with(self, stage: str) -> list[BurnInRound]:
        return [r for r in self.rounds if stage in r.stages]

    def offset_on(self, telemetry: Telemetry) -> float:
        """Where this burn-in began on the telemetry's time line (seconds since sampling began); 0
        where the burn-in was recorded without its start."""
        if not self.started_at:
            return 0.0
        moment = datetime.datetime.fromisoformat
        return moment(self.started_at).timestamp() - moment(telemetry.started_at).timestamp()


class EccCounts(Record):
    """ECC error counts of one kind of memory (all of it, DRAM or SRAM), as NVML keeps them:
    volatile since the last driver load, aggregate over the GPU's life."""

    corrected_volatile: IntReading
    uncorrected_volatile: IntReading
    corrected_aggregate: IntReading
    uncorrected_aggregate: IntReading


class NvLinkErrors(Record):
    """The error counters of one NVLink (nvmlDeviceGetNvLinkErrorCounter): on the lent H200s
    these answer per link while the all-links total fields do not."""

    link: int
    replay: IntReading
    recovery: IntReading
    crc_flit: IntReading
    crc_data: IntReading


class ClockEventTimes(Record):
    """Cumulative time, in ns, the clocks were held down for each reason (NVML fields 74, 76, 269-271)."""

    sw_power_cap: IntReading
    sync_boost: IntReading
    sw_thermal: IntReading
    hw_thermal: IntReading
    hw_power_brake: IntReading


class ComputeProcess(Record):
    pid: int
    used_memory_bytes: IntReading
    name: str = ""  # the command line where this host could read it


class HealthSnapshot(Record):
    """What NVML says about one GPU's health at one moment: `label` says when ("start",
    "after nccl"); every counter a reading, so "not supported" is never read as 0."""

    gpu: Count  # the CUDA ordinal, as in GpuFacts
    label: str
    taken_at: str  # ISO 8601, UTC
    ecc: EccCounts
    dram: EccCounts
    sram: EccCounts
    sram_threshold_exceeded: BoolReading
    retired_pages_sbe: IntReading
    retired_pages_dbe: IntReading
    retired_pending: BoolReading
    remapped_corrected: IntReading
    remapped_uncorrected: IntReading
    remap_pending: BoolReading
    remap_failure: BoolReading
    recovery_action: IntReading  # field 230: 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset
    pcie_replay: IntReading
    pcie_replay_rollover: IntReading
    pcie_correctable: IntReading  # field 173
    pcie_l0_to_recovery: IntReading  # field 169: link retraining, counts up at idle too
    nvlink_errors: list[NvLinkErrors]  # active links only
    clock_event_reasons: IntReading
    clock_event_ns: ClockEventTimes
    temperature_C: IntReading
    memory_temperature_C: IntReading  # HBM, field 82
    slowdown_C: IntReading  # NVML's own thresholds
    shutdown_C: IntReading
    gpu_max_C: IntReading
    memory_max_C: IntReading
    power_W: FloatReading
    power_limit_W: FloatReading
    sm_clock_MHz: IntReading
    sm_clock_max_MHz: IntReading
    persistence_mode: BoolReading
    inforom_valid: BoolReading
    compute_processes: list[ComputeProcess] | Unavailable
    mig_mode: IntReading  # current mode: 0 disabled, 1 enabled
    virtualization_mode: IntReading  # 0 bare metal, 1 passthrough, ...: why some fields are not supported


XidSource = Literal["nvml_event", "kernel_log"]


class XidEvent(Record):
    """An XID (or ECC / recovery-action event) seen for one GPU. `during_run`: seen while this
    run went on, not found already in the kernel log when it began."""

    gpu: Count  # the CUDA ordinal
    xid: int  # the XID number; for NVML's double-bit-ECC and recovery-action events, their data
    kind: Literal["xid", "double_bit_ecc", "recovery_action"] = "xid"
    time: str  # ISO 8601 for NVML events; "boot+SECONDS" for kernel log lines
    source: XidSource
    during_run: bool
    text: str = ""  # the kernel log line


class KernelLog(Record):
    """Whether the kernel log could be read for NVRM Xid lines, and where from or why not."""

    readable: bool
    note: str


class HealthFacts(Record):
    snapshots: list[HealthSnapshot] = Field(default_factory=list)  # in the order taken
    events: list[XidEvent] = Field(default_factory=list)
    listener: str = ""  # how XID events were listened for during the run, or why they were not
    kernel_log: KernelLog | None = None  # the latest reading

    def of(self, gpu: int) -> list[HealthSnapshot]:
        return [snapshot for snapshot in self.snapshots if snapshot.gpu == gpu]


class Facts(OmitsLaterDefaults):
    facts_version: Literal[1] = FACTS_VERSION
    recorded_at: str  # ISO 8601, UTC
    tool_version: str
    system: SystemFacts
    cuda: CudaFacts | Unavailable
    gpus: list[GpuFacts]
    links: list[LinkFacts] = Field(default_factory=list)
    p2p: list[P2PFacts] = Field(default_factory=list)
    environment: dict[str, str] = Field(default_factory=dict)  # CUDA_*, NCCL_* ... as the probe saw them
    measurements: Measurements = Field(default_factory=Measurements)
    imported_from: TextSource | None = None  # set where the facts were read from command outputs
    telemetry: Telemetry | None = None  # sampled while the run went on (live runs)
    burnin: BurnIn | None = None  # the rounds of a burn-in
    health: HealthFacts = Field(default_factory=HealthFacts)  # snapshots and XID events, where probed

    later_fields: ClassVar[dict[str, Any]] = {
        "imported_from": None, "telemetry": None, "burnin": None, "health": HealthFacts().model_dump(),
    }

    @field_validator("gpus")
    @classmethod
    def _indexed_in_order(cls, gpus: list[GpuFacts]) -> list[GpuFacts]:
        # `gpu(i)` and every check read gpus[i] as gpuN: a list out of order would judge the wrong GPU
        rule = f"GPUs are listed by index, 0 to {len(gpus) - 1}, each once, in order"
        for position, gpu in enumerate(gpus):
            earlier = next((i for i, g in enumerate(gpus[:position]) if g.index == gpu.index), None)
            if earlier is not None:
                raise ValueError(f"index {excerpt(gpu.index)} is given twice (gpus[{earlier}] and gpus[{position}]): {rule}")
            if gpu.index != position:
                raise ValueError(f"gpus[{position}] has index {excerpt(gpu.index)}: {rule}")
        return gpus

    @model_validator(mode="after")
    def _consistent(self) -> Facts:
        # facts that contradict each other describe no machine: judged, they would give it a verdict
        check_relations(self)
        return self

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    def gpu(self, index: int) -> GpuFacts | None:
        return self.gpus[index] if 0 <= index < len(self.gpus) else None

    def link(self, a: int, b: int) -> LinkFacts | None:
        key = (min(a, b), max(a, b))
        return next((link for link in self.links if tuple(link.gpus) == key), None)

    def p2p_of(self, src: int, dst: int) -> P2PFacts | None:
        return next((p for p in self.p2p if tuple(p.gpus) == (src, dst)), None)

    def at_attempt(self, index: int) -> Facts:
        """These facts with confirmation round `index`'s measurements in place of the first ones."""
        return self.model_copy(update={"measurements": self.measurements.attempt(index)})

    def installed(self) -> tuple[str, int]:
        """(GPU model, GPU count) of the machine as installed: NVML's view, which
        CUDA_VISIBLE_DEVICES does not change; the GPUs under test where older facts lack it."""
        model = self.system.installed_model
        if model is not None:
            return model, self.system.nvml_gpu_count
        name = self.gpus[0].name if self.gpus else "no GPU"
        return (name if isinstance(name, str) else f"a GPU whose model is not known ({name})"), self.gpu_count

    @property
    def hidden_gpus(self) -> list[InstalledGpu]:
        """GPUs NVML sees that are not under test (hidden by CUDA_VISIBLE_DEVICES, or unusable by CUDA)."""
        tested = {gpu.uuid for gpu in self.gpus}
        return [gpu for gpu in self.system.installed_gpus if gpu.uuid not in tested]
