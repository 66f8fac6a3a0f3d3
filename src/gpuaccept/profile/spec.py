"""The profile schema: what a machine must be, as typed, strict, frozen data.

Pydantic does the type checking (unknown keys, wrong types, ranges) and publishes the JSON Schema
editors use; rules that need several keys at once live in `semantic_problems`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, field_validator, model_validator

from gpuaccept.vocabulary.affinity import CPU_LIST_PATTERN
from gpuaccept.vocabulary.collectives import Collective
from gpuaccept.vocabulary.copies import CopyKind, floor_key
from gpuaccept.vocabulary.gpt import GptDims, GptPreset
from gpuaccept.vocabulary.links import (
    GPU_KEY_PATTERN,
    LINK_TYPE_PATTERN,
    PAIR_KEY_PATTERN,
    MatrixParseError,
    PcieLevel,
    parse_link_matrix,
    parse_p2p_matrix,
)
from gpuaccept.vocabulary.nvml_codes import MAX_NVLINKS
from gpuaccept.vocabulary.sizes import SIZE_PATTERN, parse_size
from gpuaccept.vocabulary.steps import DDP_CASE_PATTERN
from gpuaccept.vocabulary.telemetry import DURATION_PATTERN, parse_duration

SCHEMA_VERSION = 1


class Strict(BaseModel):
    # inf and nan are floats to YAML (.inf, .nan) but never a criterion: no value meets an infinite
    # floor, and every comparison with nan is false
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def _version_text(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ValueError(f"quote version numbers ('{value}'): YAML reads an unquoted version as a number and drops trailing zeros")
    return value


def _one_or_many(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


def _nvlink_version(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{float(value):.1f}"
    return value


# a profile's name is also its file's name: no folders, nothing a shell or a file system trips on
PROFILE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
PROFILE_NAME_MAX = 100
VersionText = Annotated[str, BeforeValidator(_version_text), StringConstraints(pattern=r"^\d+(\.\d+)*$")]
ModelPatterns = Annotated[
    list[Annotated[str, StringConstraints(min_length=1)]], BeforeValidator(_one_or_many), Field(min_length=1)
]
LinkType = Annotated[str, StringConstraints(pattern=LINK_TYPE_PATTERN)]
PairKey = Annotated[str, StringConstraints(pattern=PAIR_KEY_PATTERN)]
GpuKey = Annotated[str, StringConstraints(pattern=GPU_KEY_PATTERN)]
NvLinkVersion = Annotated[str, BeforeValidator(_nvlink_version), StringConstraints(pattern=r"^[1-9]\.\d$")]
GpuCount = Annotated[int, Field(ge=1, le=1024)]


class MatchRule(Strict):
    """When `--profile auto` picks this profile: every stated rule must hold."""

    gpu_model: ModelPatterns = Field(description="GPU product name as NVML reports it; shell-style wildcards allowed")
    gpu_count: GpuCount


class GpuSpec(Strict):
    count: GpuCount = Field(description="GPUs under test (those CUDA sees)")
    model: ModelPatterns = Field(description="product name as NVML reports it, e.g. 'NVIDIA H200'; wildcards allowed")
    memory_min_gib: Annotated[float, Field(gt=0)] | None = Field(None, description="total memory per GPU, GiB")
    ecc: Literal["enabled", "disabled"] | None = None


class SoftwareSpec(Strict):
    driver_min: VersionText | None = Field(None, description="minimum driver version, e.g. '580.65.06'")
    cuda_min: VersionText | None = Field(None, description="minimum CUDA version the driver supports, e.g. '12.8'")


class PcieSpec(Strict):
    generation: Annotated[int, Field(ge=1, le=7)] | None = Field(None, description="minimum PCIe generation per GPU")
    width: Literal[1, 2, 4, 8, 16, 32] | None = Field(None, description="minimum PCIe link width per GPU")
    idle_downshift: bool = Field(
        False,
        description="the GPU lowers its PCIe generation when idle (GeForce cards do): judge the generation by the "
        "link's maximum instead of its current state",
    )


class NvLinkSpec(Strict):
    active_links: Annotated[int, Field(ge=0, le=MAX_NVLINKS)] = Field(description="NVLinks up per GPU (0: none expected)")
    active_links_per_gpu: dict[GpuKey, Annotated[int, Field(ge=0, le=MAX_NVLINKS)]] = Field(
        default_factory=dict,
        description="NVLinks up on the GPUs named, where they differ from active_links: {gpu2: 0} for a GPU without a bridge",
    )
    version: NvLinkVersion | None = Field(None, description="NVLink version, e.g. '4.0' (Hopper), '3.0' (Ampere)")
    inactive_by_design: dict[GpuKey, list[Annotated[int, Field(ge=0, le=MAX_NVLINKS - 1)]]] = Field(
        default_factory=dict, description="links allowed to be down, per GPU: {gpu3: [16, 17]}"
    )


class FabricSpec(Strict):
    state: Literal["completed", "not_supported"] = Field(
        description="NVSwitch fabric registration: 'completed' on NVSwitch systems"
    )


class LinkSpec(Strict):
    """The link-type matrix, as a rule for all pairs, per pair, or pasted from `nvidia-smi topo -m`."""

    all: LinkType | None = Field(None, description="link type of every GPU pair, e.g. NV18")
    pairs: dict[PairKey, LinkType] = Field(default_factory=dict, description="per pair, overriding `all`")
    matrix: str | None = Field(None, description="the GPU block of `nvidia-smi topo -m`, pasted as printed")

    @field_validator("matrix")
    @classmethod
    def _matrix_parses(cls, text: str | None) -> str | None:
        if text is not None:
            try:
                parse_link_matrix(text)
            except MatrixParseError as exc:
                raise ValueError(str(exc)) from None
        return text


class P2PCaps(Strict):
    """Whether NVML must report each peer-to-peer capability as OK (true) or as not available (false)."""

    read: bool | None = None
    write: bool | None = None
    nvlink: bool | None = None
    atomics: bool | None = None
    prop: bool | None = Field(None, description="NVML's fifth capability (index 4, also named PCI): `nvidia-smi topo -p2p p`")

    def stated(self) -> dict[str, bool]:
        return {name: value for name, value in self.model_dump().items() if value is not None}


P2PCapName = Literal["read", "write", "nvlink", "atomics", "prop"]


class P2PSpec(Strict):
    all: P2PCaps | None = Field(None, description="capabilities of every ordered GPU pair")
    matrix: dict[P2PCapName, str] = Field(
        default_factory=dict,
        description="per capability, the grid `nvidia-smi topo -p2p r|w|n|a|p` prints, pasted: OK means true, any "
        "other status false; overrides `all`",
    )
    pairs: dict[PairKey, P2PCaps] = Field(default_factory=dict, description="per ordered pair, overriding `all` and `matrix`")

    @field_validator("matrix")
    @classmethod
    def _grids_parse(cls, grids: dict[str, str]) -> dict[str, str]:
        for capability, text in grids.items():
            try:
                parse_p2p_matrix(text)
            except MatrixParseError as exc:
                raise ValueError(f"{capability}: {exc}") from None
        return grids


def _number_as_text(value: Any) -> Any:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


CpuList = Annotated[str, BeforeValidator(_number_as_text), StringConstraints(pattern=CPU_LIST_PATTERN)]
NicKey = Annotated[str, StringConstraints(pattern=f"^(all|{GPU_KEY_PATTERN.strip('^$')})$")]


class NicAffinity(Strict):
    """The network adapter closest to a GPU, as the NIC columns of `nvidia-smi topo -m` show it."""

    link: PcieLevel = Field(description="the closest NIC is at most this far: PIX (one PCIe switch), PXB, PHB, NODE, SYS")
    nic: str | None = Field(None, description="and it is this one: mlx5_0, or NIC0 where topo -m has no NIC legend")


class AffinitySpec(Strict):
    """Where each GPU sits: its closest NIC, the CPUs and NUMA nodes `nvidia-smi topo -m` lists for it."""

    nic: dict[NicKey, NicAffinity] = Field(default_factory=dict, description="per GPU, or `all`; a GPU's own entry wins")
    cpu: dict[GpuKey, CpuList] = Field(default_factory=dict, description="CPU Affinity as topo -m prints it: {gpu0: 0-47,96-143}")
    numa: dict[GpuKey, CpuList] = Field(default_factory=dict, description="NUMA Affinity as topo -m prints it: {gpu0: '0'}")


def _size_text(value: Any) -> Any:
    if isinstance(value, str):
        if not re.match(SIZE_PATTERN, value):
            raise ValueError(f"{value!r} is not a size: write it with a binary unit, e.g. 256MiB, 1GiB, 4GiB (not MB or GB)")
        if parse_size(value) == 0:
            raise ValueError(f"{value!r} is no bytes at all: nothing would be measured")
    return value


# the validator runs first and says how sizes are written; the pattern is what the JSON Schema shows
SizeText = Annotated[str, StringConstraints(pattern=SIZE_PATTERN), BeforeValidator(_size_text)]
GBps = Annotated[float, Field(gt=0)]
MeasureDtype = Literal["bfloat16", "float16", "float32"]


class NcclSpec(Strict):
    """Collective bus bandwidth, as nccl-tests defines it: a floor per collective and size."""

    dtype: MeasureDtype = "bfloat16"
    warmup: Annotated[int, Field(ge=0, le=1000)] = 5
    iterations: Annotated[int, Field(ge=1, le=10000)] = 20
    timeout_s: Annotated[float, Field(gt=0)] | None = Field(
        None, description="time limit of one collective at one size; by default derived from its size and floor (at least 20 s)"
    )
    busbw: dict[Collective, dict[SizeText, GBps]] = Field(
        description="minimum bus bandwidth in GB/s, per collective and size: {all_reduce: {1GiB: 330}}"
    )
    nvls: bool | None = Field(
        None,
        description="whether NCCL must use NVLink SHARP (NVLS) here: true fails a board where it did not (fabric manager "
        "down, multicast not supported, NCCL_NVLS_ENABLE=0); left out, NVLS use is recorded, not judged",
    )


class PairwiseSpec(Strict):
    """Send/receive bandwidth between every GPU pair, to name a single weak link or GPU."""

    size: SizeText = "256MiB"
    dtype: MeasureDtype = "bfloat16"
    warmup: Annotated[int, Field(ge=0)] = 3
    iterations: Annotated[int, Field(ge=1)] = 10
    timeout_s: Annotated[float, Field(gt=0)] | None = Field(
        None, description="time limit of the exchange over every pair; by default derived from the size and floor (at least 20 s)"
    )
    concurrent: bool = Field(
        description="run disjoint pairs at the same time (switch systems, where pairs share nothing); "
        "false on PCIe trees, where pairs share uplinks"
    )
    min_busbw: GBps = Field(description="minimum GB/s each way, per pair")


class CopySpec(Strict):
    """Copy-engine bandwidth: GPU to GPU, within a GPU, and between pinned host memory and each GPU."""

    size: SizeText = "1GiB"
    host_size: SizeText | None = Field(
        None,
        description="the size of each copy to and from pinned host memory, where not `size`: a PCIe link reaches its "
        "rate with far less than the GiB a copy over NVLink needs, and each GPU's host copies run one after another",
    )
    warmup: Annotated[int, Field(ge=0)] = 2
    iterations: Annotated[int, Field(ge=1)] = 10
    timeout_s: Annotated[float, Field(gt=0)] | None = Field(
        None, description="time limit of every copy together; by default derived from the sizes and floors (at least 60 s)"
    )
    concurrent: bool = Field(
        False,
        description="copy between disjoint GPU pairs at the same time, in the rounds of a round-robin schedule "
        "(switch systems, where pairs share nothing; each copy still timed and judged on its own); "
        "false: one copy at a time",
    )
    p2p_min: GBps | None = Field(None, description="GB/s per ordered pair, one direction")
    p2p_bidirectional_min: GBps | None = Field(None, description="GB/s per pair, both directions together")
    local_min: GBps | None = Field(None, description="GB/s of a copy within one GPU, bytes counted once")
    host_to_device_min: GBps | None = Field(None, description="GB/s from pinned host memory, per GPU")
    device_to_host_min: GBps | None = Field(None, description="GB/s to pinned host memory, per GPU")

    @model_validator(mode="after")
    def _host_size_within_size(self) -> CopySpec:
        if self.host_size is not None and parse_size(self.host_size) > parse_size(self.size):
            raise ValueError(
                f"host_size {self.host_size} is larger than size {self.size}: a host copy uses the first part of a GPU's buffers"
            )
        return self

    def floor(self, kind: CopyKind) -> float | None:
        """The floor of a copy kind: one field above per kind, named by `floor_key`."""
        value: float | None = getattr(self, floor_key(kind))
        return value


DdpCase = Annotated[str, StringConstraints(pattern=DDP_CASE_PATTERN)]
Fraction = Annotated[float, Field(ge=0, le=1)]


class DdpSpec(Strict):
    """Data-parallel training scaling: E(N) = throughput(N) / (N x throughput(1)) per setting.

    Settings are named like their test ids: `4gpu-bs8` (4 GPUs, batch 8 per GPU), `4gpu-bs2-acc4`
    (batch 2, four micro-steps per optimizer step)."""

    model: GptPreset | GptDims = Field(
        description="a GPT-2-style model: a preset name or its dimensions"
    )
    seq_len: Annotated[int, Field(ge=2, le=65536)] | None = Field(None, description="override the preset's sequence length")
    dtype: Literal["bfloat16", "float32"] = "bfloat16"
    world_sizes: list[Annotated[int, Field(ge=1, le=1024)]] = Field(
        min_length=1, description="GPU counts to train on; 1 is the baseline"
    )
    batches: list[Annotated[int, Field(ge=1)]] = Field(min_length=1, description="samples per GPU per micro-step")
    accumulation: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [1], description="micro-steps per optimizer step")
    warmup_steps: Annotated[int, Field(ge=0)] = 3
    steps: Annotated[int, Field(ge=1)] = 10
    timeout_s: Annotated[float, Field(gt=0)] = Field(90.0, description="time limit of training on one world size")
    min_efficiency: dict[DdpCase, Annotated[float, Field(gt=0, le=1)]] = Field(
        default_factory=dict, description="minimum scaling efficiency per setting, at most 1: {4gpu-bs8: 0.85}"
    )
    max_exposed_comm: dict[DdpCase, Fraction] = Field(
        default_factory=dict, description="largest share of a step spent in communication compute did not hide"
    )
    nvlink_ab: dict[DdpCase, GBps] = Field(
        default_factory=dict, description="minimum throughput ratio with P2P over without (NCCL_P2P_DISABLE=1)"
    )


class ClusterNicSpec(Strict):
    """The RDMA ports each node must show in /sys/class/infiniband."""

    count: Annotated[int, Field(ge=1, le=64)] = Field(description="ports ACTIVE and LinkUp per node")
    rate_gbps: GBps = Field(description="each port's rate in Gb/s as the kernel reports it: 400 for NDR, 200 for HDR")
    link_layer: Literal["InfiniBand", "Ethernet"] | None = Field(None, description="InfiniBand, or Ethernet for RoCE")


class ClusterLocalizeSpec(Strict):
    """How a collective that missed its floor is narrowed down to a node."""

    size: SizeText | None = Field(None, description="message size of the localizing runs; by default the size that missed")
    solo_ratio: Annotated[float, Field(gt=0, le=1)] = Field(
        0.8, description="with no good pair to compare against, a node alone below this fraction of the best node is named"
    )
    halves_from: Annotated[int, Field(ge=2)] = Field(8, description="from this many nodes on, halves are measured before pairs")


class ClusterSpec(Strict):
    """Many nodes, one job (torchrun or srun): the network between them and what it carries."""

    nodes: Annotated[int, Field(ge=2, le=4096)] = Field(description="nodes in the job; gpus.count is per node")
    nics: ClusterNicSpec | None = None
    gpudirect_rdma: bool = Field(False, description="require GPUDirect RDMA: nvidia_peermem loaded, or GDRDMA in NCCL's channels")
    transport: list[Annotated[str, StringConstraints(min_length=1)]] | None = Field(
        None, description="NCCL network transports accepted between nodes, as its INFO lines name them: [IB], [Socket]"
    )
    dtype: MeasureDtype = "bfloat16"
    warmup: Annotated[int, Field(ge=0, le=1000)] = 5
    iterations: Annotated[int, Field(ge=1, le=10000)] = 20
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = Field(
        300.0, description="time limit of any one collective between the nodes"
    )
    rendezvous_s: Annotated[float, Field(gt=0, le=3600)] = Field(
        600.0, description="how long the ranks wait for every other rank to join the process group before giving up"
    )
    busbw: dict[Collective, dict[SizeText, GBps]] = Field(
        description="minimum bus bandwidth in GB/s over every GPU of every node, per collective and size"
    )
    localize: ClusterLocalizeSpec = Field(default_factory=ClusterLocalizeSpec)
    ddp_min_efficiency: Annotated[float, Field(gt=0, le=1)] | None = Field(
        None,
        description="DDP samples/s per GPU on every node over on one node, at each of ddp.batches; "
        "trained with the profile's ddp: model and settings",
    )


class GemmSpec(Strict):
    """Sustained matrix products on each GPU alone: throughput, its spread over the GPUs, and correctness."""

    size: Annotated[int, Field(ge=16, le=65536)] = Field(8192, description="n of the n x n x n product")
    dtype: MeasureDtype = "bfloat16"
    warmup: Annotated[int, Field(ge=0, le=10000)] = 5
    repeats: Annotated[int, Field(ge=1, le=100000)] = Field(
        500,
        description="products timed back to back (500 at 8192: about 0.7 s on an H100 or H200, long enough for the power "
        "limit rather than the first milliseconds of boost to set the rate)",
    )
    verify_repeats: Annotated[int, Field(ge=0, le=1000)] = Field(
        3, description="untimed products compared with the first, bit for bit (the last timed one always is)"
    )
    min_tflops: Annotated[float, Field(gt=0)] | None = Field(None, description="minimum TFLOP/s per GPU (2 n^3 per product)")
    within_best: Annotated[float, Field(gt=0, lt=1)] | None = Field(
        None, description="every GPU at most this fraction below the best GPU of the machine (0.1: within 10%, gpu-fryer's rule)"
    )
    timeout_s: Annotated[float, Field(gt=0)] | None = Field(
        None, description="time limit of one GPU's GEMM step; by default derived from the floor (at least 20 s)"
    )


class HbmSpec(Strict):
    """Memory bandwidth of each GPU alone: a device copy and a STREAM triad, bytes read and written counted."""

    size: SizeText = Field("1GiB", description="each array (float32)")
    warmup: Annotated[int, Field(ge=0, le=10000)] = 3
    iterations: Annotated[int, Field(ge=1, le=100000)] = 20
    copy_min: GBps | None = Field(None, description="minimum GB/s of a copy within the GPU, read and write counted")
    triad_min: GBps | None = Field(None, description="minimum GB/s of a = b + s*c, two reads and a write counted")
    timeout_s: Annotated[float, Field(gt=0)] | None = Field(
        None, description="time limit of one GPU's HBM step; by default derived from the floors (at least 20 s)"
    )


class MemtestSpec(Strict):
    """Patterns written over most of each GPU's free memory and read back: every mismatch fails."""

    fraction: Annotated[float, Field(gt=0, le=0.98)] = Field(0.9, description="share of the memory free when the test begins")
    max_size: SizeText | None = Field(None, description="test at most this much per GPU (the CPU device's tests use a few MiB)")
    chunk: SizeText = Field("256MiB", description="memory is written and read in chunks of this size")
    time_cap_s: Annotated[float, Field(gt=0, le=86400)] = Field(
        30.0, description="passes not begun by then are not run; the report says how many ran"
    )
    seed: Annotated[int, Field(ge=0)] = 0


class ComputeSpec(Strict):
    """The per-GPU loads: each GPU loaded by a worker process of its own, all GPUs at once."""

    gemm: GemmSpec | None = None
    hbm: HbmSpec | None = None
    memtest: MemtestSpec | None = None


class TimeoutsSpec(Strict):
    """How long measurement workers may take to start, and to show no sign of life, before they
    are stopped and their steps fail by name."""

    startup_s: Annotated[float, Field(gt=0, le=3600)] = Field(
        60.0, description="process start, torch import and NCCL set-up (about 5 s on the lent H200 machines)"
    )
    stalled_s: Annotated[float, Field(gt=0, le=3600)] = Field(
        20.0, description="a worker whose heartbeat stops this long (stopped, frozen) fails the step it was in"
    )


class JudgingSpec(Strict):
    """How measured values are judged, beyond their floors."""

    marginal_band: Annotated[float, Field(ge=0, le=0.5)] = Field(
        0.03, description="a measured value that passes within this fraction of its limit is reported as marginal (0.03: 3%)"
    )
    confirm_within: Annotated[float, Field(gt=0, le=1)] = Field(
        0.5,
        description="a value that misses its limit by at most this fraction is measured again before it fails "
        "(--confirm); a miss larger than that is a fault, not a dip, and fails at once",
    )


def _duration_text(value: Any) -> Any:
    if isinstance(value, str):
        parse_duration(value)  # a ValueError here is the profile's one-line problem
    return value


DurationText = Annotated[str, BeforeValidator(_duration_text), StringConstraints(pattern=DURATION_PATTERN)]


class BurninSpec(Strict):
    """A burn-in (gpu-accept burn-in, run --level burn-in) and the telemetry sampled in every live run."""

    duration: DurationText = Field("30m", description="how long a burn-in loads the GPUs when --duration is not given (90s, 30m, 2h)")
    fabric_interval: DurationText = Field(
        "5m",
        description="a burn-in runs the fabric stages (NCCL) in its first round and then at most this often; the per-GPU loads every round",
    )
    telemetry_period_s: Annotated[float, Field(ge=0.1, le=60)] = Field(1.0, description="seconds between telemetry samples of every GPU")
    max_slowdown_share: Annotated[float, Field(ge=0, le=1)] = Field(
        0.01,
        description="largest share of a GPU's samples under load with a hardware slowdown, hardware thermal or power brake clock "
        "event reason (0.01: 1%)",
    )
    min_sm_clock_mhz: Annotated[int, Field(gt=0)] | None = Field(
        None, description="lowest median SM clock of a GPU under load, MHz; left out, clocks are recorded and not judged"
    )
    round_s: Annotated[float, Field(ge=1, le=3600)] = Field(
        30.0,
        description="the sustained load is judged in rounds of this many seconds: each round gives every GPU's GEMM TFLOP/s "
        "and wrong elements, and its HBM copy and triad",
    )
    memtest_interval: DurationText = Field(
        "5m", description="the memory test runs in the first round of the sustained load and then at most this often"
    )
    steady_window_s: Annotated[float, Field(ge=10, le=3600)] = Field(
        60.0, description="thermal steady state: the temperature's fitted slope over this many seconds of samples"
    )
    steady_slope_c_per_min: Annotated[float, Field(gt=0, le=60)] = Field(
        1.0, description="thermal steady state: a GPU whose temperature rises slower than this (°C a minute) is at steady state"
    )
    hot_throughput_min: Annotated[float, Field(gt=0, le=1)] | None = Field(
        0.9,
        description="GEMM TFLOP/s of each GPU at thermal steady state, as a share of its first round of the sustained load "
        "(0.9: at most 10% lost to heat)",
    )
    min_power_share: Annotated[float, Field(gt=0, le=1.2)] | None = Field(
        None,
        description="median power of each GPU under the sustained load after its first minute, while its products ran alone "
        "(its memory tests and the fabric beside the load left out), as a share of NVML's power limit; left out, power is "
        "judged against the GPU's siblings only",
    )
    power_within_best: Annotated[float, Field(gt=0, lt=1)] | None = Field(
        0.1,
        description="each GPU's median power share under the sustained load at most this fraction below the best GPU's "
        "(0.1: within 10%)",
    )


# XIDs that fail a GPU: the union of DCGM's "devastating" XIDs (48, 74, 79, 119, 120, 140) and
# those Azure's azurehpc-health-checks fail on (48 56 57 58 62 63 64 65 68 69 73 74 79 80 81 92 119
# 120), with 94 and 95 (contained / uncontained ECC error) as the issue lists them
CRITICAL_XIDS = (48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 94, 95, 119, 120, 140)
Count = Annotated[int, Field(ge=0)]


class HealthSpec(Strict):
    """Limits of the health checks. Every key is optional: the defaults are the anchors' (DCGM,
    Azure's health checks), named beside each."""

    retired_pages_max: Count = Field(62, description="retired pages per GPU, SBE and DBE together (DCGM: 63 or more fails)")
    remapped_uncorrectable_max: Count = Field(511, description="rows remapped for uncorrectable errors (DCGM: 512 or more fails)")
    ecc_corrected_max: Count | None = Field(None, description="aggregate corrected ECC errors per GPU at the start; no limit by default")
    ecc_corrected_during_run_max: Count | None = Field(
        None, description="new corrected ECC errors per GPU during the run; no limit by default (reported)"
    )
    sram_uncorrected_max: Count = Field(0, description="aggregate uncorrected SRAM ECC errors (Azure, H100: more than 0 fails)")
    sram_corrected_max: Count = Field(10000, description="aggregate corrected SRAM ECC errors (Azure, H100: more than 10,000 fails)")
    critical_xids: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: list(CRITICAL_XIDS),
        description="XIDs that fail the GPU they hit (default: DCGM's and Azure's lists, and 94, 95); others are reported",
    )
    kernel_xids_since_boot: Literal["fail", "report"] = Field(
        "fail", description="a critical XID in the kernel log from before the run: fail the GPU, or only report it"
    )
    pcie_replay_rate_factor: Annotated[float, Field(gt=0)] = Field(
        1.0, description="PCIe replays per minute allowed, as a multiple of DCGM's lanes x GT/s x 1e-12 x 60 (Gen5 x16: 30.7/min)"
    )
    pcie_correctable_rate_factor: Annotated[float, Field(gt=0)] = Field(
        1.0, description="PCIe correctable errors per minute allowed, as a multiple of the same lanes x GT/s x 1e-12 x 60"
    )
    nvlink_crc_max_per_s: Annotated[float, Field(ge=0)] = Field(100.0, description="NVLink CRC errors per second per link (DCGM: 100)")
    hw_slowdown_max_percent: Annotated[float, Field(ge=0, le=100)] = Field(
        1.0, description="time clocks were held down by HW thermal or HW power brake, as a share of the load time, %"
    )
    persistence_mode: bool = Field(True, description="persistence mode must be on (a burn-in needs the driver to stay loaded)")
    mig: Literal["disabled", "enabled"] = Field("disabled", description="the MIG mode every GPU must be in")


class ProfileSpec(Strict):
    schema_version: int = Field(alias="schema", description="profile format version; this release reads 1")
    name: Annotated[str, StringConstraints(pattern=PROFILE_NAME_PATTERN, max_length=PROFILE_NAME_MAX)] | None = None
    description: str | None = None
    extends: str | None = Field(None, description="a base profile: a path relative to this file, or a shipped name")
    match: MatchRule | None = None
    gpus: GpuSpec
    software: SoftwareSpec | None = None
    pcie: PcieSpec | None = None
    nvlink: NvLinkSpec | None = None
    fabric: FabricSpec | None = None
    links: LinkSpec | None = None
    p2p: P2PSpec | None = None
    affinity: AffinitySpec | None = None
    nccl: NcclSpec | None = None
    pairwise: PairwiseSpec | None = None
    copies: CopySpec | None = None
    ddp: DdpSpec | None = None
    cluster: ClusterSpec | None = None
    compute: ComputeSpec | None = None
    judging: JudgingSpec = Field(default_factory=JudgingSpec)
    timeouts: TimeoutsSpec = Field(default_factory=TimeoutsSpec)
    burnin: BurninSpec = Field(default_factory=BurninSpec)
    health: HealthSpec = Field(default_factory=HealthSpec)

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False, populate_by_name=False)

    @field_validator("schema_version")
    @classmethod
    def _known_schema(cls, value: int) -> int:
        if value != SCHEMA_VERSION:
            raise ValueError(f"schema {value} is not known to this release: it reads schema {SCHEMA_VERSION}")
        return value
