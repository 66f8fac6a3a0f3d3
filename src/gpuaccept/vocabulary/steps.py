"""What a measured value's step is called: its key and its label.

A key is the identity of one measured value's step, the same in a worker's plan, a result and a
confirmation round: "collective/all_reduce/1GiB", "pair/gpu0-gpu1", "copy/p2p/gpu0-gpu1",
"ddp/4gpu-bs8", "ddp_without_p2p/4gpu-bs8". A label is what people read in progress lines and in
a failure ("all_reduce 1 GiB did not finish within 37 s"), and what GPUACCEPT_INJECT_HANG names.
A DDP setting is named like its test id: 4gpu-bs8, 4gpu-bs2-acc4.
"""

from __future__ import annotations

from typing import Literal

from gpuaccept.vocabulary.links import gpu_key, pair_key
from gpuaccept.vocabulary.sizes import human_size

Stage = Literal["nccl", "copies", "ddp"]  # measured once per session each, in worker processes

DDP_CASE_PATTERN = r"^[1-9][0-9]*gpu-bs[1-9][0-9]*(-acc[1-9][0-9]*)?$"


def collective_key(collective: str, nominal_size: str) -> str:
    return f"collective/{collective}/{nominal_size}"


def pair_step_key(a: int, b: int) -> str:
    return f"pair/{pair_key(min(a, b), max(a, b))}"


def copy_key(what: str, gpus: tuple[int, ...] | list[int]) -> str:
    return f"copy/{what}/" + "-".join(gpu_key(g) for g in gpus)


def ddp_key(case: str, without_p2p: bool = False) -> str:
    return f"{'ddp_without_p2p' if without_p2p else 'ddp'}/{case}"


def stage_of_key(key: str) -> Stage:
    kind = key.split("/", 1)[0]
    if kind in ("collective", "pair"):
        return "nccl"
    return "copies" if kind == "copy" else "ddp"


def ddp_case(world: int, batch: int, accumulation: int = 1) -> str:
    """The test id of a DDP setting: 4gpu-bs8, 4gpu-bs2-acc4."""
    return f"{world}gpu-bs{batch}" + (f"-acc{accumulation}" if accumulation != 1 else "")


def parse_ddp_case(case: str) -> tuple[int, int, int]:
    """'4gpu-bs2-acc4' -> (4, 2, 4): world, batch, accumulation."""
    world, _, rest = case.partition("gpu-bs")
    batch, _, accumulation = rest.partition("-acc")
    return int(world), int(batch), int(accumulation or 1)


def collective_label(collective: str, size_bytes: int) -> str:
    return f"{collective} {human_size(size_bytes)}"


def pairwise_label(size_bytes: int) -> str:
    return f"pairwise send/receive {human_size(size_bytes)}"


def copies_label(size_bytes: int) -> str:
    return f"copy bandwidth {human_size(size_bytes)}"


def ddp_label(world: int) -> str:
    return f"DDP on {world} GPU{'s' if world > 1 else ''}"
