"""Rules that involve several keys of a profile at once (types and ranges are the schema's job)."""

from __future__ import annotations

from collections.abc import Iterator

from gpuaccept.profile.source import KeyPath
from gpuaccept.profile.spec import ProfileSpec
from gpuaccept.topology import parse_link_matrix, parse_pair_key


def semantic_problems(spec: ProfileSpec) -> Iterator[tuple[KeyPath, str]]:
    count = spec.gpus.count
    if spec.match and spec.match.gpu_count != count:
        yield ("match", "gpu_count"), f"{spec.match.gpu_count} contradicts gpus.count {count}"

    links = spec.links
    if links is not None:
        if links.matrix is not None:
            if links.all is not None or links.pairs:
                yield ("links", "matrix"), "give either a pasted matrix or all/pairs rules, not both"
            size = len(parse_link_matrix(links.matrix))
            if size != count:
                yield ("links", "matrix"), f"the matrix has {size} GPUs but gpus.count is {count}"
        yield from _pair_problems(("links", "pairs"), links.pairs, count, ordered=False)

    if spec.p2p is not None:
        yield from _pair_problems(("p2p", "pairs"), spec.p2p.pairs, count, ordered=True)

    nvlink = spec.nvlink
    if nvlink is not None:
        for key, link_ids in nvlink.inactive_by_design.items():
            where = ("nvlink", "inactive_by_design", key)
            gpu = int(key[3:])
            if gpu >= count:
                yield where, f"{key} is out of range: the profile has {count} GPU(s), gpu0 to gpu{count - 1}"
            if len(set(link_ids)) != len(link_ids):
                yield where, "a link is listed twice"


def _pair_problems(where: KeyPath, pairs: dict, count: int, ordered: bool) -> Iterator[tuple[KeyPath, str]]:
    seen: dict[tuple[int, int], str] = {}
    for key, value in pairs.items():
        a, b = parse_pair_key(key)
        if a == b:
            yield where + (key,), "a GPU is not paired with itself"
            continue
        out_of_range = [g for g in (a, b) if g >= count]
        if out_of_range:
            yield where + (key,), f"gpu{out_of_range[0]} is out of range: the profile has {count} GPU(s), gpu0 to gpu{count - 1}"
        same = (a, b) if ordered else (min(a, b), max(a, b))
        if same in seen and seen[same] != key:
            yield where + (key,), f"the same pair as {seen[same]}"
        if same in seen and seen[same] == key:
            continue
        seen[same] = key
