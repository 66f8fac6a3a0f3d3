"""What a measurement worker is asked to do: a list of steps, run in order by every rank."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuaccept.vocabulary.collectives import Collective
from gpuaccept.vocabulary.copies import CopyKind
from gpuaccept.vocabulary.gpt import GptDims
from gpuaccept.vocabulary.steps import collective_label, copies_label, ddp_label, pairwise_label


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_s: float = 60.0  # the step is killed, and named, past this


class CollectiveStep(Step):
    kind: Literal["collective"] = "collective"
    collective: Collective
    size_bytes: int
    dtype: str = "bfloat16"
    warmup: int = 5
    iterations: int = 20

    @property
    def label(self) -> str:
        return collective_label(self.collective, self.size_bytes)


class PairwiseStep(Step):
    """Send/receive both ways between every GPU pair; disjoint pairs at once when `concurrent`."""

    kind: Literal["pairwise"] = "pairwise"
    size_bytes: int
    dtype: str = "bfloat16"
    warmup: int = 3
    iterations: int = 10
    concurrent: bool = True
    pairs: list[tuple[int, int]] | None = None  # only these pairs (measuring misses again); None: every pair

    @property
    def label(self) -> str:
        return pairwise_label(self.size_bytes)


class CopyStep(Step):
    """Copy-engine bandwidth in one process that sees every GPU: peer, local, host to and from device."""

    kind: Literal["copies"] = "copies"
    size_bytes: int
    warmup: int = 2
    iterations: int = 10
    what: list[CopyKind]
    only: list[str] | None = None  # only the copies with these keys ("copy/p2p/gpu0-gpu1"); None: every one

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

    @property
    def label(self) -> str:
        return ddp_label(self.world)


AnyStep = Annotated[CollectiveStep | PairwiseStep | CopyStep | DdpStep, Field(discriminator="kind")]


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    steps: list[AnyStep]
    backend: Literal["auto", "nccl", "gloo"] = "auto"  # auto: NCCL where CUDA is, gloo elsewhere
    startup_timeout_s: float = 60.0  # process start, torch import, process group and NCCL set-up (about 5 s on H200)
    stalled_s: float = 20.0  # a worker that shows no sign of life this long is stopped, frozen or gone

