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
        yield from _nvlink_count_problems(spec)
        yield from _nvlink_required_without_links(spec)


# The most NVLinks a GPU of each generation has: P100 4, V100 6, A100 12, H100 and B200 18
LINKS_OF_VERSION = {"1.0": 4, "2.0": 6, "2.2": 6, "3.0": 12, "3.1": 12, "4.0": 18, "5.0": 18}


def _nvlink_count_problems(spec: ProfileSpec) -> Iterator[tuple[KeyPath, str]]:
    """Links expected up and links down by design are links of one GPU: together no more than it has."""
    nvlink = spec.nvlink
    assert nvlink is not None
    # no version stated: no GPU of any NVLink generation has more links than the largest of them (18);
    # NVML's array of 36 is room in a structure, not links of a GPU
    most = LINKS_OF_VERSION.get(nvlink.version or "", max(LINKS_OF_VERSION.values()))
    which = f"an NVLink {nvlink.version} GPU" if nvlink.version in LINKS_OF_VERSION else "a GPU of any NVLink generation"
    for gpu in range(spec.gpus.count):
        key = gpu_key(gpu)
        active = nvlink.active_links_per_gpu.get(key, nvlink.active_links)
        down = len(set(nvlink.inactive_by_design.get(key, [])))
        if down and active + down > most:
            where = ("nvlink", "inactive_by_design", key)
            yield where, f"{active} links up and {down} down by design make {active + down} links on {key}; {which} has at most {most}"


def _nvlink_required_without_links(spec: ProfileSpec) -> Iterator[tuple[KeyPath, str]]:
    """A pair required to be joined by NVLink, or to do P2P over it, needs links up on both GPUs."""
    nvlink = spec.nvlink
    assert nvlink is not None
    count = spec.gpus.count

    def without_links(*gpus: int) -> int | None:
        return next((g for g in gpus if g < count and nvlink.active_links_per_gpu.get(gpu_key(g), nvlink.active_links) == 0), None)

    def contradiction(gpu: int) -> str:
        return f"needs NVLinks up on {gpu_key(gpu)}, but nvlink expects {gpu_key(gpu)} to have 0 active links"

    links = spec.links
    if links is not None:
        if links.all is not None and links.all.startswith("NV") and (gpu := without_links(*range(count))) is not None:
            yield ("links", "all"), f"{links.all} {contradiction(gpu)}"
        for pair, link_type in links.pairs.items():
            parsed = parse_pair_key(pair)
            if parsed and link_type.startswith("NV") and (gpu := without_links(*parsed)) is not None:
                yield ("links", "pairs", pair), f"{link_type} {contradiction(gpu)}"
    p2p = spec.p2p
    if p2p is not None:
        if p2p.all is not None and p2p.all.nvlink and (gpu := without_links(*range(count))) is not None:
            yield ("p2p", "all", "nvlink"), f"P2P over NVLink {contradiction(gpu)}"
        for pair, caps in p2p.pairs.items():
            parsed = parse_pair_key(pair)
            if parsed and caps.nvlink and (gpu := without_links(*parsed)) is not None:
                yield ("p2p", "pairs", pair, "nvlink"), f"P2P over NVLink {contradiction(gpu)}"


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
    for name in ("world_sizes", "batches", "accumulation"):
        listed: list[int] = getattr(ddp, name)
        twice = sorted({value for value in listed if listed.count(value) > 1})
        if twice:
            # each is a setting measured once: a second would measure and judge the same thing again
            yield ("ddp", name), f"{', '.join(map(str, twice))} listed twice: each setting is measured once"
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
