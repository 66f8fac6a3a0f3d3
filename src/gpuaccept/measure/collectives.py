"""What nccl-tests means by size, algbw and busbw, per collective (its doc/PERFORMANCE.md).

algbw = S / t, with S the bytes nccl-tests prints as "size" and t the time of one operation;
busbw = algbw x factor, the factor making busbw comparable with the link's speed whatever the
rank count: 2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and alltoall, 1 for
broadcast and send/receive. S is the per-rank buffer for all_reduce, broadcast and send/receive,
the whole gathered output for all_gather, the whole input for reduce_scatter, and the whole
per-rank buffer for alltoall.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuaccept.vocabulary.collectives import bus_factor

__all__ = ["Buffers", "bandwidths", "buffers", "bus_factor"]

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8, "int32": 4, "int8": 1}


@dataclass(frozen=True)
class Buffers:
    """Elements per rank of one measurement, sized the way nccl-tests sizes it."""

    size_bytes: int  # S, as nccl-tests prints it (may round below the size asked for)
    input_elements: int
    output_elements: int


def buffers(collective: str, size_bytes: int, ranks: int, dtype: str) -> Buffers:
    element = DTYPE_BYTES[dtype]
    count = size_bytes // element
    if collective in ("all_reduce", "broadcast", "sendrecv"):
        return Buffers(count * element, count, count)
    # per-rank chunk rounded down to 16 bytes, as nccl-tests does
    chunk = (count // ranks) // (16 // element) * (16 // element) if element < 16 else count // ranks
    total = chunk * ranks
    if collective == "all_gather":
        return Buffers(total * element, chunk, total)
    if collective == "reduce_scatter":
        return Buffers(total * element, total, chunk)
    if collective == "alltoall":
        return Buffers(total * element, total, total)
    raise ValueError(f"unknown collective {collective!r}")


def bandwidths(collective: str, size_bytes: int, seconds: float, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes, as nccl-tests prints)."""
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * bus_factor(collective, ranks)
