"""The kinds of copy-engine copy measured, and the profile key that holds each one's floor.

- p2p: one GPU's buffer into another's, per ordered pair;
- p2p_bidirectional: both directions of a pair at once, bytes of both counted;
- local: within one GPU, bytes counted once;
- host_to_device / device_to_host: pinned host memory to and from each GPU.
"""

from __future__ import annotations

from typing import Literal, get_args

CopyKind = Literal["p2p", "p2p_bidirectional", "local", "host_to_device", "device_to_host"]
COPY_KINDS: tuple[CopyKind, ...] = get_args(CopyKind)
HOST_COPIES: tuple[CopyKind, ...] = ("host_to_device", "device_to_host")  # between pinned host memory and a GPU


def floor_key(kind: str) -> str:
    """The key of a copy kind's floor under the profile's `copies`: p2p -> p2p_min."""
    return f"{kind}_min"
