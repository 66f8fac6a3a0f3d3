"""Rules that involve several keys of a profile at once (types and ranges are the schema's job)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from gpuaccept.errors import KeyPath
from gpuaccept.profile.spec import DdpSpec, ProfileSpec
from gpuaccept.vocabulary.copies import floor_key
from gpuaccept.vocabulary.links import gpu_key, parse_gpu_key, parse_link_matrix, parse_p2p_matrix, parse_pair_key
from gpuaccept.vocabulary.sizes import format_size, parse_size
from gpuaccept.vocabulary.steps import parse_ddp_case


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
        for capability, text in spec.p2p.matrix.items():
            size = len(parse_p2p_matrix(text))
            if size != count:
                yield ("p2p", "matrix", capability), f"the grid has {size} GPUs but gpus.count is {count}"

    if spec.affinity is not None:
        for table in ("nic", "cpu", "numa"):
            yield from _gpu_key_problems(("affinity", table), getattr(spec.affinity, table), count)

    yield from _measurement_problems(spec)

    nvlink = spec.nvlink
    if nvlink is not None:
        yield from _gpu_key_problems(("nvlink", "active_links_per_gpu"), nvlink.active_links_per_gpu, count)
        for key, link_ids in nvlink.inactive_by_design.items():
            where = ("nvlink", "inactive_by_design", key)
            gpu = parse_gpu_key(key)
            if gpu >= count:
                yield where, f"{key} is out of range: the profile has {count} GPU(s), {gpu_key(0)} to {gpu_key(count - 1)}"
            if len(set(link_ids)) != len(link_ids):
                yield where, "a link is listed twice"


def _gpu_key_problems(where: KeyPath, table: Mapping[str, object], count: int) -> Iterator[tuple[KeyPath, str]]:
    for key in table:
        if key != "all" and parse_gpu_key(key) >= count:
            yield where + (key,), f"{key} is out of range: the profile has {count} GPU(s), {gpu_key(0)} to {gpu_key(count - 1)}"


def _measurement_problems(spec: ProfileSpec) -> Iterator[tuple[KeyPath, str]]:
    count = spec.gpus.count
    for section in ("nccl", "pairwise"):
        if getattr(spec, section) is not None and count < 2:
            yield (section,), f"needs at least 2 GPUs; the profile has {count}"
    copies = spec.copies
    if copies is not None and count < 2:
        for kind in ("p2p", "p2p_bidirectional"):
            if copies.floor(kind) is not None:
                yield ("copies", floor_key(kind)), f"peer copies need at least 2 GPUs; the profile has {count}"
    if spec.ddp is not None:
        yield from _ddp_problems(spec, spec.ddp)
    if spec.nccl is not None:
        for collective, sizes in spec.nccl.busbw.items():
            seen: dict[int, str] = {}
            for text in sizes:
                size = parse_size(text)
                if size in seen:
                    yield ("nccl", "busbw", collective, text), f"the same size as {seen[size]} ({format_size(size)})"
                seen[size] = text


def _ddp_problems(spec: ProfileSpec, ddp: DdpSpec) -> Iterator[tuple[KeyPath, str]]:
    worlds = ddp.world_sizes
    if 1 not in worlds:
        yield ("ddp", "world_sizes"), "must include 1: efficiency is measured against one GPU"
    if max(worlds) > spec.gpus.count:
        yield ("ddp", "world_sizes"), f"{max(worlds)} GPUs asked for; the profile has {spec.gpus.count}"
    for table in ("min_efficiency", "max_exposed_comm", "nvlink_ab"):
        for case in getattr(ddp, table):
            world, batch, accumulation = parse_ddp_case(case)
            where = ("ddp", table, case)
            if world not in worlds:
                yield where, f"{world} GPUs is not among world_sizes {worlds}"
            elif world < 2:
                yield where, "needs at least 2 GPUs: one GPU has nothing to synchronize"
            if batch not in ddp.batches:
                yield where, f"batch {batch} is not among batches {ddp.batches}"
            if accumulation not in ddp.accumulation:
                yield where, f"accumulation {accumulation} is not among accumulation {ddp.accumulation}"


def _pair_problems(where: KeyPath, pairs: Mapping[str, object], count: int, ordered: bool) -> Iterator[tuple[KeyPath, str]]:
    seen: dict[tuple[int, int], str] = {}
    for key in pairs:
        parsed = parse_pair_key(key)
        if parsed is None:
            continue  # not a pair key: the schema has said so already
        a, b = parsed
        if a == b:
            yield where + (key,), "a GPU is not paired with itself"
            continue
        out_of_range = [g for g in (a, b) if g >= count]
        if out_of_range:
            yield (
                where + (key,),
                f"{gpu_key(out_of_range[0])} is out of range: the profile has {count} GPU(s), {gpu_key(0)} to {gpu_key(count - 1)}",
            )
        same = (a, b) if ordered else (min(a, b), max(a, b))
        if same in seen and seen[same] != key:
            yield where + (key,), f"the same pair as {seen[same]}"
        if same in seen and seen[same] == key:
            continue
        seen[same] = key
