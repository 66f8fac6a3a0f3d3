"""What a measured value's step is called: its key and its label.

A key is the identity of one measured value, typed per kind of step: `CollectiveKey`,
`PairKey`, `CopyKey`, `DdpKey`. It is the same in a worker's plan, its progress events and
results, a failure, a confirmation round and a check, and its string is its form on the wire
and in JSON: "collective/all_reduce/1GiB", "pair/gpu0-gpu1", "copy/p2p/gpu0-gpu1",
"ddp/4gpu-bs8", "ddp_without_p2p/4gpu-bs8", and for the per-GPU loads "load/gemm/gpu0",
"load/hbm_copy/gpu0", "load/hbm_triad/gpu0", "load/memtest/gpu0" (`parse_step_key` reads it back). A label is what
people read in progress lines and in a failure ("all_reduce 1 GiB did not finish within 37 s"):
it names a step for messages only, and nothing is ever looked up by it.
A DDP setting is named like its test id: 4gpu-bs8, 4gpu-bs2-acc4.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import GetCoreSchemaHandler, PlainSerializer, PlainValidator
from pydantic_core import CoreSchema, core_schema

from gpuaccept.vocabulary.collectives import COLLECTIVES
from gpuaccept.vocabulary.copies import COPY_KINDS, CopyKind
from gpuaccept.vocabulary.links import gpu_key, pair_key
from gpuaccept.vocabulary.sizes import format_size, human_size, parse_size

# the names of the measurement stages (gpuaccept/stages/registry.py holds the stages themselves)
StageName = Literal["copies", "compute", "ddp", "nccl"]
LoadKind = Literal["gemm", "hbm_copy", "hbm_triad", "memtest"]  # what the compute stage measures on each GPU
LOAD_KINDS: tuple[LoadKind, ...] = ("gemm", "hbm_copy", "hbm_triad", "memtest")

DDP_CASE_PATTERN = r"^[1-9][0-9]*gpu-bs[1-9][0-9]*(-acc[1-9][0-9]*)?$"
_DDP_CASE = re.compile(DDP_CASE_PATTERN)
_COLLECTIVE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_GPUS = re.compile(r"^gpu(0|[1-9][0-9]*)((-gpu(0|[1-9][0-9]*))*)$")


def ddp_case(world: int, batch: int, accumulation: int = 1) -> str:
    """The test id of a DDP setting: 4gpu-bs8, 4gpu-bs2-acc4."""
    return f"{world}gpu-bs{batch}" + (f"-acc{accumulation}" if accumulation != 1 else "")


def parse_ddp_case(case: str) -> tuple[int, int, int]:
    """'4gpu-bs2-acc4' -> (4, 2, 4): world, batch, accumulation."""
    world, _, rest = case.partition("gpu-bs")
    batch, _, accumulation = rest.partition("-acc")
    return int(world), int(batch), int(accumulation or 1)


class _StepKey:
    """What every key shares: its string is its wire form, keys sort by it, and pydantic reads a
    key from that string and writes it back as one."""

    kind: ClassVar[str]
    stage: ClassVar[StageName]

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, _StepKey):
            return NotImplemented
        return str(self) < str(other)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        def validate(value: object) -> _StepKey:
            key = value if isinstance(value, _StepKey) else parse_step_key(value)
            if not isinstance(key, cls):
                raise ValueError(f"{str(key)!r} is a {key.kind} key, not a {cls.kind} key")
            return key

        return core_schema.no_info_plain_validator_function(validate, serialization=_AS_TEXT)


_AS_TEXT = core_schema.plain_serializer_function_ser_schema(str, return_schema=core_schema.str_schema())


@dataclass(frozen=True)
class CollectiveKey(_StepKey):
    """One collective at one size: collective/all_reduce/1GiB."""

    # one this project measures (`Collective`), or another test of nccl-tests in an imported log
    collective: str
    size_bytes: int  # the size asked for (the profile's); nccl-tests' S may be rounded to the ranks

    kind: ClassVar[str] = "collective"
    stage: ClassVar[StageName] = "nccl"

    def __post_init__(self) -> None:
        if not _COLLECTIVE_NAME.match(self.collective):
            raise ValueError(f"{self.collective!r} is not the name of a collective (such as {', '.join(COLLECTIVES)})")
        if self.size_bytes <= 0:
            raise ValueError(f"a collective's size must be above 0 bytes (got {self.size_bytes})")

    @property
    def nominal_size(self) -> str:
        """The size as test ids write it: 1GiB."""
        return format_size(self.size_bytes)

    def __str__(self) -> str:
        return f"collective/{self.collective}/{self.nominal_size}"


@dataclass(frozen=True)
class PairKey(_StepKey):
    """The send/receive exchange of one GPU pair, lower GPU first: pair/gpu0-gpu1."""

    a: int
    b: int

    kind: ClassVar[str] = "pair"
    stage: ClassVar[StageName] = "nccl"

    def __post_init__(self) -> None:
        if not 0 <= self.a < self.b:
            raise ValueError(f"a pair is two GPUs, lower index first (got gpu{self.a} and gpu{self.b})")

    @classmethod
    def between(cls, a: int, b: int) -> PairKey:
        return cls(min(a, b), max(a, b))

    @property
    def gpus(self) -> tuple[int, int]:
        return self.a, self.b

    def __str__(self) -> str:
        return f"pair/{pair_key(self.a, self.b)}"


@dataclass(frozen=True)
class CopyKey(_StepKey):
    """One copy-engine copy: copy/p2p/gpu0-gpu1 (source, destination), copy/local/gpu2."""

    what: CopyKind
    gpus: tuple[int, ...]

    kind: ClassVar[str] = "copy"
    stage: ClassVar[StageName] = "copies"

    def __post_init__(self) -> None:
        if self.what not in COPY_KINDS:
            raise ValueError(f"{self.what!r} is not a kind of copy ({', '.join(COPY_KINDS)})")
        between = self.what in ("p2p", "p2p_bidirectional")
        if len(self.gpus) != (2 if between else 1) or any(gpu < 0 for gpu in self.gpus):
            raise ValueError(f"a {self.what} copy names {'two GPUs' if between else 'one GPU'} (got {list(self.gpus)})")
        if between and self.gpus[0] == self.gpus[1]:
            raise ValueError(f"a {self.what} copy is between two GPUs (got gpu{self.gpus[0]} twice)")
        if self.what == "p2p_bidirectional" and self.gpus[0] > self.gpus[1]:
            raise ValueError(f"a p2p_bidirectional copy names its lower GPU first (got {list(self.gpus)})")

    def __str__(self) -> str:
        return f"copy/{self.what}/" + "-".join(gpu_key(g) for g in self.gpus)


@dataclass(frozen=True)
class DdpKey(_StepKey):
    """One DDP setting, in the scaling run or in the run without P2P: ddp/4gpu-bs8,
    ddp_without_p2p/4gpu-bs2-acc4."""

    world: int
    batch: int
    accumulation: int = 1
    without_p2p: bool = False  # the NVLink A/B's other arm: NCCL_P2P_DISABLE=1

    kind: ClassVar[str] = "ddp"
    stage: ClassVar[StageName] = "ddp"

    def __post_init__(self) -> None:
        if min(self.world, self.batch, self.accumulation) < 1:
            raise ValueError(f"a DDP setting's world size, batch and accumulation are at least 1 (got {self.case})")

    @classmethod
    def of_case(cls, case: str, without_p2p: bool = False) -> DdpKey:
        """The key of a setting named like its test id: 4gpu-bs8."""
        return cls(*parse_ddp_case(case), without_p2p=without_p2p)

    @property
    def case(self) -> str:
        return ddp_case(self.world, self.batch, self.accumulation)

    @property
    def arm(self) -> str:
        return "ddp_without_p2p" if self.without_p2p else "ddp"

    def __str__(self) -> str:
        return f"{self.arm}/{self.case}"


@dataclass(frozen=True)
class LoadKey(_StepKey):
    """One load measured on one GPU alone: load/gemm/gpu0, load/hbm_triad/gpu3, load/memtest/gpu1."""

    what: LoadKind
    gpu: int

    kind: ClassVar[str] = "load"
    stage: ClassVar[StageName] = "compute"

    def __post_init__(self) -> None:
        if self.what not in LOAD_KINDS:
            raise ValueError(f"{self.what!r} is not a per-GPU load ({', '.join(LOAD_KINDS)})")
        if self.gpu < 0:
            raise ValueError(f"a GPU index is at least 0 (got {self.gpu})")

    def __str__(self) -> str:
        return f"load/{self.what}/{gpu_key(self.gpu)}"


StepKey = CollectiveKey | PairKey | CopyKey | DdpKey | LoadKey
STEP_KEY_FORMS = (
    "collective/all_reduce/1GiB, pair/gpu0-gpu1, copy/p2p/gpu0-gpu1, ddp/4gpu-bs8, ddp_without_p2p/4gpu-bs8 or load/gemm/gpu0"
)


def parse_step_key(text: object) -> StepKey:
    """A key from its string: 'pair/gpu0-gpu1' -> PairKey(0, 1). ValueError for anything else."""
    if not isinstance(text, str):
        raise ValueError(f"a step key is a string such as {STEP_KEY_FORMS} (got {text!r})")
    kind, _, rest = text.partition("/")
    try:
        if kind == "collective":
            collective, _, size = rest.partition("/")
            if collective and size:
                return CollectiveKey(collective, parse_size(size))
        elif kind == "pair":
            gpus = _gpus(rest)
            if len(gpus) == 2:
                return PairKey(*gpus)
        elif kind == "copy":
            what, _, named = rest.partition("/")
            gpus = _gpus(named)
            if what in COPY_KINDS and gpus:
                return CopyKey(what, gpus)
        elif kind in ("ddp", "ddp_without_p2p") and _DDP_CASE.match(rest):
            return DdpKey(*parse_ddp_case(rest), without_p2p=kind == "ddp_without_p2p")
        elif kind == "load":
            what, _, named = rest.partition("/")
            gpus = _gpus(named)
            if what in LOAD_KINDS and len(gpus) == 1:
                return LoadKey(what, gpus[0])
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a step key: {exc}") from None
    raise ValueError(f"{text!r} is not a step key: keys read like {STEP_KEY_FORMS}")


def read_step_key(value: object) -> StepKey:
    """A key from its string, or as it is when already one (what pydantic models read keys with)."""
    return value if isinstance(value, (CollectiveKey, PairKey, CopyKey, DdpKey, LoadKey)) else parse_step_key(value)


# A key as a field of a pydantic model, of any kind: read from its string, written as it.
AnyStepKey = Annotated[StepKey, PlainValidator(read_step_key), PlainSerializer(str, return_type=str)]


def _gpus(text: str) -> tuple[int, ...]:
    if not _GPUS.match(text):
        return ()
    return tuple(int(part.removeprefix("gpu")) for part in text.split("-"))


def collective_label(collective: str, size_bytes: int) -> str:
    return f"{collective} {human_size(size_bytes)}"


def pairwise_label(size_bytes: int) -> str:
    return f"pairwise send/receive {human_size(size_bytes)}"


def copies_label(size_bytes: int) -> str:
    return f"copy bandwidth {human_size(size_bytes)}"


def ddp_label(world: int) -> str:
    return f"DDP on {world} GPU{'s' if world > 1 else ''}"


def load_label(what: LoadKind, gpu: int) -> str:
    return {"gemm": "GEMM", "hbm_copy": "HBM copy", "hbm_triad": "HBM triad", "memtest": "memory test"}[what] + f" on {gpu_key(gpu)}"
