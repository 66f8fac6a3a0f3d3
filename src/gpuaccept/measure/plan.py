"""What a measurement worker is asked to do: a list of steps, run in order by every rank.

Each step knows the keys of the values it measures (`keys`): a collective step and a DDP step
derive them from what they run, a pairwise step and a copy step list them (`pairs`, `copies`), so
a plan read by a worker under torchrun names the same values the suite's launcher expects. In
JSON a key is its string: "pair/gpu0-gpu1", "copy/p2p/gpu0-gpu1".
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpuaccept.measure.drills import NO_DRILLS, Drills
from gpuaccept.vocabulary.collectives import Collective
from gpuaccept.vocabulary.gpt import GptDims
from gpuaccept.vocabulary.steps import (
    CollectiveKey,
    CopyKey,
    DdpKey,
    LoadKey,
    PairKey,
    StepKey,
    collective_label,
    copies_label,
    ddp_label,
    load_label,
    pairwise_label,
)


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_s: float = 60.0  # the step is killed, and named, past this
    # modules the step imports at its first use that a set of workers started ahead for it imports
    # before its go, with torch, while the stage before it measures
    imports_ahead: ClassVar[tuple[str, ...]] = ()

    @property
    def keys(self) -> list[StepKey]:
        """The values this step measures: what its results and its failure are attached to."""
        raise NotImplementedError

    @property
    def label(self) -> str:
        """The step as messages name it ("all_reduce 1 GiB"): for people, never looked up."""
        raise NotImplementedError

    def is_named(self, name: str) -> bool:
        """Whether `name` (a test hook's value) names this step: its label or one of its keys."""
        return name == self.label or name in {str(key) for key in self.keys}


class CollectiveStep(Step):
    kind: Literal["collective"] = "collective"
    collective: Collective
    size_bytes: int
    dtype: str = "bfloat16"
    warmup: int = 5
    iterations: int = 20

    @property
    def keys(self) -> list[StepKey]:
        return [CollectiveKey(self.collective, self.size_bytes)]

    @property
    def label(self) -> str:
        return collective_label(self.collective, self.size_bytes)


class PairwiseStep(Step):
    """Send/receive both ways between the GPUs of each pair; disjoint pairs at once when `concurrent`."""

    kind: Literal["pairwise"] = "pairwise"
    size_bytes: int
    dtype: str = "bfloat16"
    warmup: int = 3
    iterations: int = 10
    concurrent: bool = True
    pairs: list[PairKey] = Field(min_length=1)  # every pair of the job, or those measured again after a miss

    @field_validator("pairs")
    @classmethod
    def _pairs_once(cls, pairs: list[PairKey]) -> list[PairKey]:
        return _each_once(pairs)

    @property
    def keys(self) -> list[StepKey]:
        return list(self.pairs)

    @property
    def label(self) -> str:
        return pairwise_label(self.size_bytes)


class CopyStep(Step):
    """Copy-engine bandwidth in one process that sees every GPU: peer, local, host to and from device."""

    kind: Literal["copies"] = "copies"
    size_bytes: int
    host_size_bytes: int | None = None  # each copy to and from pinned host memory, where not size_bytes
    warmup: int = 2
    iterations: int = 10
    concurrent: bool = False  # copies between disjoint GPU pairs at once, in rounds (switch systems)
    copies: list[CopyKey] = Field(min_length=1)  # each copy measured, in the worker's own order

    @field_validator("copies")
    @classmethod
    def _copies_once(cls, copies: list[CopyKey]) -> list[CopyKey]:
        return _each_once(copies)

    @property
    def keys(self) -> list[StepKey]:
        return list(self.copies)

    @property
    def host_bytes(self) -> int:
        return self.host_size_bytes or self.size_bytes

    @property
    def label(self) -> str:
        return copies_label(self.size_bytes)


class DdpStep(Step):
    """Data-parallel training of the GPT workload on the first `world` ranks, per batch setting."""

    kind: Literal["ddp"] = "ddp"
    world: int
    model: GptDims
    dtype: Literal["bfloat16", "float32"] = "bfloat16"
    batches: list[int]
    accumulation: list[int] = [1]
    warmup_steps: int = 3
    steps: int = 10
    no_sync: bool = True  # also time the same steps without gradient synchronization
    # the NVLink A/B's other arm, whose workers run with NCCL_P2P_DISABLE=1: it names the values
    # (ddp_without_p2p/4gpu-bs8), and changes nothing in how they are measured
    without_p2p: bool = False
    # DDP's wrapper and torch's optimizers import torch._dynamo (sympy, functorch) at their first
    # use: 0.7 s a process on a lent H200 machine from bytecode, 4-5 s where Python compiles it from
    # source; otherwise part of the set-up the DDP stage waits for once the loads have ended
    imports_ahead: ClassVar[tuple[str, ...]] = ("gpuaccept.measure.ddp_step", "torch.nn.parallel", "torch._dynamo")

    def key(self, batch: int, accumulation: int) -> DdpKey:
        return DdpKey(self.world, batch, accumulation, self.without_p2p)

    @property
    def keys(self) -> list[StepKey]:
        return [self.key(batch, accumulation) for batch in self.batches for accumulation in self.accumulation]

    @property
    def label(self) -> str:
        return ddp_label(self.world)


class GemmStep(Step):
    """Sustained matrix products on one GPU (the worker's own device), timed, then checked: every
    repeat against the first result bit for bit, the first against a float32 product on a block."""

    kind: Literal["gemm"] = "gemm"
    gpu: int = Field(ge=0)  # the GPU the values are named by; the worker measures its own device
    size: int = Field(ge=16)  # n of an n x n x n product
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    warmup: int = 5
    repeats: int = 500
    verify_repeats: int = 3  # untimed products compared with the first, bit for bit

    @property
    def keys(self) -> list[StepKey]:
        return [LoadKey("gemm", self.gpu)]

    @property
    def label(self) -> str:
        return load_label("gemm", self.gpu)


class HbmStep(Step):
    """Memory bandwidth of one GPU: a device-to-device copy and a STREAM triad (a = b + s*c)."""

    kind: Literal["hbm"] = "hbm"
    gpu: int = Field(ge=0)
    size_bytes: int = Field(gt=0)  # of each array
    warmup: int = 3
    iterations: int = 20

    @property
    def keys(self) -> list[StepKey]:
        return [LoadKey("hbm_copy", self.gpu), LoadKey("hbm_triad", self.gpu)]

    @property
    def label(self) -> str:
        return f"HBM bandwidth on gpu{self.gpu}"


class MemtestStep(Step):
    """Patterns written over most of one GPU's free memory and read back, in chunks, within a time cap."""

    kind: Literal["memtest"] = "memtest"
    gpu: int = Field(ge=0)
    fraction: float = Field(gt=0, le=0.98)  # of the memory free when the test begins
    max_bytes: int | None = Field(None, gt=0)  # at most this much (the CPU device always has a cap)
    chunk_bytes: int = Field(256 << 20, gt=0)
    time_cap_s: float = Field(30.0, gt=0)  # passes not begun by then are not run; the record says how far it got
    seed: int = 0

    @property
    def keys(self) -> list[StepKey]:
        return [LoadKey("memtest", self.gpu)]

    @property
    def label(self) -> str:
        return load_label("memtest", self.gpu)


class SustainedRoundStep(Step):
    """One round of a burn-in's sustained load on one GPU: matrix products back to back until
    `ends_at`, every product compared with the first; then the HBM copy and triad where `hbm` is
    set, and the memory test where `memtest` is. A worker runs its GPU's rounds one after another
    and keeps its matrices and first product between them, so the GPU is not let go between rounds."""

    kind: Literal["sustained"] = "sustained"
    gpu: int = Field(ge=0)
    round: int = Field(ge=1)
    ends_at: float  # epoch seconds: the products of this round stop then (every GPU's round ends together)
    size: int = Field(ge=16)
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    chunk: int = Field(8, ge=1, le=64)  # products timed together, then each compared with the first
    hbm: HbmStep | None = None
    memtest: MemtestStep | None = None
    # the driver's flags: `stop` ends the round at once; while `fabric` exists, a memory test waits
    # (products go on) so that it cannot take the memory a fabric stage beside the load needs
    control_dir: str
    memtest_wait_s: float = Field(600.0, ge=0)

    @property
    def keys(self) -> list[StepKey]:
        keys: list[StepKey] = [LoadKey("gemm", self.gpu)]
        if self.hbm is not None:
            keys += self.hbm.keys
        if self.memtest is not None:
            keys += self.memtest.keys
        return keys

    @property
    def label(self) -> str:
        return f"sustained load on gpu{self.gpu}, round {self.round}"


def _each_once(keys: list) -> list:
    repeated = sorted({str(key) for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"each value is measured once: {', '.join(repeated)} given more than once")
    return keys


AnyStep = Annotated[
    CollectiveStep | PairwiseStep | CopyStep | DdpStep | GemmStep | HbmStep | MemtestStep | SustainedRoundStep,
    Field(discriminator="kind"),
]
LOAD_STEPS = (GemmStep, HbmStep, MemtestStep)  # one GPU each, no process group
ONE_GPU_STEPS = (CopyStep, *LOAD_STEPS, SustainedRoundStep)  # steps of a worker that needs no process group


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    steps: list[AnyStep]
    backend: Literal["auto", "nccl", "gloo"] = "auto"  # auto: NCCL where CUDA is, gloo elsewhere
    startup_timeout_s: float = 60.0  # process start, torch import, process group and NCCL set-up (about 5 s on H200)
    stalled_s: float = 20.0  # a worker that shows no sign of life this long is stopped, frozen or gone
    drills: Drills = NO_DRILLS  # the fault drills the run was asked for (measure/drills.py): none by default
    # set in each rank's environment before anything of CUDA or NCCL starts (the GPU a per-GPU
    # worker sees, NCCL's settings of a stage): a plan's own, so that workers started ahead, with
    # torch imported and no GPU touched, serve whichever plan comes
    environment: dict[str, str] = Field(default_factory=dict)

    @property
    def imports_ahead(self) -> tuple[str, ...]:
        """What the plan's steps import at their first use, each once, in the steps' order."""
        return tuple(dict.fromkeys(module for step in self.steps for module in step.imports_ahead))

