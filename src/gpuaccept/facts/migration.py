"""Facts files written before failures named the values they cover.

A `StepFailure` names the keys of the values it leaves without a number. Before it did, it named
its step by label only ("all_reduce 1 GiB", "pairwise send/receive 256 MiB", "copy bandwidth
1 GiB", "DDP on 4 GPUs"), and the checks found it by rebuilding that label. Such a failure is
given its keys here, once, as the file is read (the sweeps' validators call `earlier_failures`):

- a collective's label names its one value: collective/all_reduce/1GiB;
- a pairwise or copy label names its whole step, which measured every pair, every copy, and
  the file does not say which those were: the failure covers every pair (`pair/*`), every copy
  (`copy/*`), as it did then;
- a DDP label names a world size, not its settings: the failure covers every setting of that
  world size in its sweep's arm (`ddp/4gpu-*`, `ddp_without_p2p/4gpu-*`).

Those whole-step keys (`WholeStep`) come only from such files; a failure measured now lists its
keys one by one. The labels are read as they were written then, not through today's label
functions, so that rewording a label never changes how an old file reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import PlainSerializer, PlainValidator

from gpuaccept.vocabulary.collectives import COLLECTIVES
from gpuaccept.vocabulary.sizes import parse_size
from gpuaccept.vocabulary.steps import CollectiveKey, CopyKey, DdpKey, PairKey, StepKey, read_step_key

WholeKind = Literal["pair", "copy", "ddp", "ddp_without_p2p"]


@dataclass(frozen=True)
class WholeStep:
    """Every value of a step whose failure was recorded by label only: every pair, every copy, or
    every setting of one DDP world size in one arm."""

    kind: WholeKind
    world: int | None = None  # a DDP step's world size

    def covers(self, key: StepKey) -> bool:
        if self.kind == "pair":
            return isinstance(key, PairKey)
        if self.kind == "copy":
            return isinstance(key, CopyKey)
        return isinstance(key, DdpKey) and key.arm == self.kind and key.world == self.world

    def __str__(self) -> str:
        return f"{self.kind}/{self.world}gpu-*" if self.world is not None else f"{self.kind}/*"


_WHOLE_STEP = re.compile(r"^(pair|copy)/\*$|^(ddp|ddp_without_p2p)/([1-9][0-9]*)gpu-\*$")


def read_failure_key(value: object) -> StepKey | WholeStep:
    """A failure's key from its JSON string (or as it is, when already one)."""
    if isinstance(value, WholeStep):
        return value
    match = _WHOLE_STEP.match(value) if isinstance(value, str) else None
    if match is None:
        return read_step_key(value)
    if match.group(1):
        return WholeStep("pair" if match.group(1) == "pair" else "copy")
    return WholeStep("ddp" if match.group(2) == "ddp" else "ddp_without_p2p", int(match.group(3)))


# A key in a failure's `keys`: a value's key, or (read from an earlier file) a whole step's.
FailureKey = Annotated[StepKey | WholeStep, PlainValidator(read_failure_key), PlainSerializer(str, return_type=str)]

# Labels as the measurement steps wrote them when failures carried no keys.
_COLLECTIVE_LABEL = re.compile(r"^(" + "|".join(COLLECTIVES) + r") ([0-9]+) (B|KiB|MiB|GiB|TiB)$")
_PAIRWISE_LABEL = re.compile(r"^pairwise send/receive [0-9]+ (B|KiB|MiB|GiB|TiB)$")
_COPIES_LABEL = re.compile(r"^copy bandwidth [0-9]+ (B|KiB|MiB|GiB|TiB)$")
_DDP_LABEL = re.compile(r"^DDP on ([1-9][0-9]*) GPUs?$")


def keys_from_label(label: str, without_p2p: bool) -> list[StepKey | WholeStep]:
    """The keys a failure recorded with only its step's label covers; `without_p2p`: it is in the
    DDP sweep without P2P."""
    collective = _COLLECTIVE_LABEL.match(label)
    if collective:
        return [CollectiveKey(collective.group(1), parse_size(collective.group(2) + collective.group(3)))]
    if _PAIRWISE_LABEL.match(label):
        return [WholeStep("pair")]
    if _COPIES_LABEL.match(label):
        return [WholeStep("copy")]
    ddp = _DDP_LABEL.match(label)
    if ddp:
        return [WholeStep("ddp_without_p2p" if without_p2p else "ddp", int(ddp.group(1)))]
    raise ValueError(
        f"a failure of step {label!r} names no keys, and that is not the label of a step whose values can be told "
        "(all_reduce 1 GiB, pairwise send/receive 256 MiB, copy bandwidth 1 GiB, DDP on 4 GPUs)"
    )


def earlier_failures(failures: Any, without_p2p: bool = False) -> Any:
    """A sweep's failures as read, with keys given to those that have none (see the module's doc)."""
    if not isinstance(failures, list):
        return failures
    return [
        {**failure, "keys": keys_from_label(failure["step"], without_p2p)}
        if isinstance(failure, dict) and "keys" not in failure and isinstance(failure.get("step"), str)
        else failure
        for failure in failures
    ]
