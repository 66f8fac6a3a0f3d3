"""What the measurement stages measured: each stage's sweep of results, the steps that gave no number
and why, and the confirmation rounds that measured a miss again."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import Field, ValidationInfo, field_validator

from gpuaccept.errors import excerpt
from gpuaccept.facts.migration import FailureKey, WholeStep, earlier_failures
from gpuaccept.facts.record import AboveZero, AtLeastOne, Count, Finite, IntReading, OmitsLaterDefaults, Record, Unavailable, not_negative
from gpuaccept.vocabulary.copies import CopyKind
from gpuaccept.vocabulary.sizes import parse_size
from gpuaccept.vocabulary.steps import AnyStepKey, CollectiveKey, CopyKey, DdpKey, LoadKey, PairKey, StageName, StepKey, ddp_case

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


class CopyResult(OmitsLaterDefaults):
    what: CopyKind
    gpus: tuple[Count, ...]  # (src, dst) for p2p; (gpu,) otherwise
    size_bytes: Count
    iterations: AtLeastOne
    GBps: Finite  # bytes moved per second; bidirectional counts both directions, local counts bytes once
    wrong: Count
    round: Count | None = None  # copies between GPUs of one round ran at the same time; None: alone

    later_fields: ClassVar[dict[str, Any]] = {"round": None}

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
