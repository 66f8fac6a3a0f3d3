"""Relations between facts that no single field shows: facts that cannot all be true.

The model refuses a value that is impossible on its own (a negative count, NaN); these are pairs
of values that contradict each other (two GPUs with one UUID, a link from a GPU to itself, a
bandwidth measured over no time). Judging such a file would give a verdict on a machine that does
not exist, so it is refused at load, naming the key and the contradiction.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from gpuaccept.errors import KeyPath, excerpt
from gpuaccept.facts.machine import CudaFacts
from gpuaccept.vocabulary.collectives import bus_factor
from gpuaccept.vocabulary.links import normalize_uuid

if TYPE_CHECKING:
    from gpuaccept.facts.measurements import CollectiveSweep, Measurements
    from gpuaccept.facts.model import Facts


class Contradiction(ValueError):
    """Facts that cannot both be true; `path` is the key of the second, under the record that found it."""

    def __init__(self, path: KeyPath, message: str):
        super().__init__(message)
        self.path = path


# No link of any machine carries this much per direction (NVLink 5 gives a GPU 900 GB/s, PCIe 6
# x16 128 GB/s): a collective's or a pair's bandwidth beyond it is damage, not a measurement.
MAX_LINK_GBPS = 10_000.0
# No memory moves this much (HBM3e gives a B200 8 TB/s): a copy's bandwidth beyond it is damage.
MAX_COPY_GBPS = 100_000.0
# busbw may pass the links' own speed where the switch reduces (NVLink SHARP): not twice over
PEAK_MARGIN = 2.0
# nccl-tests prints time and bandwidths rounded (algbw to 0.01 GB/s): how far they may disagree
RELATIVE_SLACK = 0.05
ABSOLUTE_SLACK_GBPS = 0.015


def check_relations(facts: Facts) -> None:
    """Raise a Contradiction for the first relation between facts that cannot hold."""
    for problem in _contradictions(facts):
        raise problem


def _contradictions(facts: Facts) -> Iterator[Contradiction]:
    count = facts.gpu_count
    yield from _counts_and_ids(facts)
    for i, gpu in enumerate(facts.gpus):
        if isinstance(gpu.nvlinks, list):
            yield from _each_once(
                ((("gpus", i, "nvlinks", n, "link"), link.link) for n, link in enumerate(gpu.nvlinks)),
                lambda link, first: f"link {link} of gpu{first[1]} is also nvlinks[{first[3]}]: a GPU's links are numbered once each",
            )
    for i, event in enumerate(facts.health.events):
        yield from _pair_of_present_gpus(("health", "events", i, "gpu"), (event.gpu,), count)
    yield from _time_spans(facts)
    for field in ("uuid", "pci_bus_id", "nvml_index"):
        yield from _each_once(
            ((("gpus", i, field), getattr(gpu, field)) for i, gpu in enumerate(facts.gpus) if getattr(gpu, field) != ""),
            lambda value, first: f"{excerpt(value)} is also the {first[-1]} of gpus[{first[1]}]: two GPUs cannot share one",
        )
    for i, link in enumerate(facts.links):
        yield from _pair_of_present_gpus(("links", i, "gpus"), link.gpus, count)
    yield from _each_once(
        ((("links", i, "gpus"), tuple(sorted(link.gpus))) for i, link in enumerate(facts.links)),
        lambda pair, first: f"the link between gpu{pair[0]} and gpu{pair[1]} is also links[{first[1]}]: a pair is listed once",
    )
    for i, entry in enumerate(facts.p2p):
        yield from _pair_of_present_gpus(("p2p", i, "gpus"), entry.gpus, count)
    yield from _each_once(
        ((("p2p", i, "gpus"), tuple(entry.gpus)) for i, entry in enumerate(facts.p2p)),
        lambda pair, first: f"P2P from gpu{pair[0]} to gpu{pair[1]} is also p2p[{first[1]}]: an ordered pair is listed once",
    )
    yield from _snapshots_in_time(facts)
    peak = _link_peak(facts)
    yield from _measurements(("measurements",), facts.measurements, count, peak)
    for r, again in enumerate(facts.measurements.rounds):
        yield from _measurements(("measurements", "rounds", r, "measurements"), again.measurements, count, peak)
    if facts.burnin is not None:
        for r, burnin_round in enumerate(facts.burnin.rounds):
            yield from _measurements(("burnin", "rounds", r, "measurements"), burnin_round.measurements, count, peak)


def _each_once(
    keyed: Iterable[tuple[KeyPath, Hashable]], says: Callable[[Any, KeyPath], str]
) -> Iterator[Contradiction]:
    """A contradiction for each value given a second time, naming where it was first given."""
    first_seen: dict[Hashable, KeyPath] = {}
    for path, value in keyed:
        if value in first_seen:
            yield Contradiction(path, says(value, first_seen[value]))
        else:
            first_seen[value] = path


def _pair_of_present_gpus(path: KeyPath, gpus: tuple[int, ...], count: int) -> Iterator[Contradiction]:
    """The GPUs a record names are in the facts, and a pair is two of them."""
    for gpu in gpus:
        if gpu >= count:
            yield Contradiction(path, f"names gpu{gpu}, which is not in these facts ({count} GPU(s): gpus[0] to gpus[{count - 1}])")
            return
    if len(set(gpus)) < len(gpus):
        yield Contradiction(path, f"links gpu{gpus[0]} to itself: a pair is two GPUs")


def _counts_and_ids(facts: Facts) -> Iterator[Contradiction]:
    """The GPUs NVML counts, lists and CUDA sees are one set of GPUs: CUDA sees no more than NVML
    counts, NVML lists as many as it counts, CUDA names as many as it counts, each a GPU NVML has,
    and its peer-access matrix is one row and one column per device."""
    count, system = facts.gpu_count, facts.system
    if count > system.nvml_gpu_count:
        yield Contradiction(("system", "nvml_gpu_count"), f"NVML counts {system.nvml_gpu_count} GPU(s) and {count} are under "
                            "test: no process sees more GPUs than NVML counts")
    installed = system.installed_gpus
    if installed and len(installed) != system.nvml_gpu_count:
        yield Contradiction(("system", "installed_gpus"), f"lists {len(installed)} GPU(s) and system.nvml_gpu_count is "
                            f"{system.nvml_gpu_count}: NVML lists every GPU it counts")
    for field in ("nvml_index", "uuid", "pci_bus_id"):
        yield from _each_once(
            ((("system", "installed_gpus", i, field), getattr(gpu, field)) for i, gpu in enumerate(installed) if getattr(gpu, field) != ""),
            lambda value, first: f"{excerpt(value)} is also the {first[-1]} of installed_gpus[{first[2]}]: two GPUs cannot share one",
        )
    cuda = facts.cuda
    if not isinstance(cuda, CudaFacts):
        return
    if cuda.device_count != count:
        yield Contradiction(("cuda", "device_count"), f"CUDA counts {cuda.device_count} device(s) and {count} GPU(s) are under "
                            "test: the GPUs under test are the devices CUDA sees")
    if cuda.uuids and len(cuda.uuids) != cuda.device_count:
        yield Contradiction(("cuda", "uuids"), f"names {len(cuda.uuids)} device(s) and cuda.device_count is {cuda.device_count}: "
                            "CUDA names every device it counts")
    known = {normalize_uuid(uuid) for uuid in [*(gpu.uuid for gpu in facts.gpus), *(gpu.uuid for gpu in installed)] if uuid}
    for i, uuid in enumerate(cuda.uuids):
        if known and normalize_uuid(uuid) not in known:
            yield Contradiction(("cuda", "uuids", i), f"{excerpt(uuid)} is no GPU's UUID in these facts: CUDA device {i} is no GPU "
                                "NVML has")
    rows = cuda.peer_access
    for i, row in enumerate(rows):
        if len(row) != len(rows) or (cuda.device_count and len(rows) != cuda.device_count):
            yield Contradiction(("cuda", "peer_access", i), f"row {i} has {len(row)} entries in a matrix of {len(rows)} rows for "
                                f"{cuda.device_count} device(s): peer access is one row and one column per device")
            return


def _time_spans(facts: Facts) -> Iterator[Contradiction]:
    """What the telemetry and a burn-in say ran from one time to another ended no sooner than it
    began, and a round that measured something took time."""
    if facts.telemetry is not None:
        for i, window in enumerate(facts.telemetry.loads):
            if window.ended_s < window.started_s:
                yield Contradiction(("telemetry", "loads", i, "ended_s"), f"{window.stage!r} ended at {window.ended_s:g} s, before it "
                                    f"began at {window.started_s:g} s")
        for i, sample in enumerate(facts.telemetry.samples):
            yield from _pair_of_present_gpus(("telemetry", "samples", i, "gpu"), (sample.gpu,), facts.gpu_count)
    burnin = facts.burnin
    if burnin is None:
        return
    if burnin.load_started_s is not None and burnin.load_ended_s is not None and burnin.load_ended_s < burnin.load_started_s:
        yield Contradiction(("burnin", "load_ended_s"), f"the sustained load ended at {burnin.load_ended_s:g} s, before it began "
                            f"at {burnin.load_started_s:g} s")
    if burnin.elapsed_s < 0:
        yield Contradiction(("burnin", "elapsed_s"), f"{burnin.elapsed_s:g} s: a burn-in takes no negative time")
    for r, burnin_round in enumerate(burnin.rounds):
        if burnin_round.wall_s <= 0 and _measured_anything(burnin_round.measurements):
            yield Contradiction(("burnin", "rounds", r, "wall_s"), f"round {burnin_round.index} measured its stages in "
                                f"{burnin_round.wall_s:g} s: no measurement takes no time")


def _measured_anything(measured: Measurements) -> bool:
    sweeps = (measured.collectives, measured.pairwise, measured.copies, measured.ddp, measured.ddp_without_p2p, measured.compute)
    return any(sweep is not None and sweep.results for sweep in sweeps)


def _snapshots_in_time(facts: Facts) -> Iterator[Contradiction]:
    """Each snapshot taken at a readable time, of a GPU in the facts, after the GPU's earlier ones."""
    latest: dict[int, tuple[datetime.datetime, int]] = {}
    for i, snapshot in enumerate(facts.health.snapshots):
        path: KeyPath = ("health", "snapshots", i)
        if snapshot.gpu >= facts.gpu_count:
            yield Contradiction(path + ("gpu",), f"names gpu{snapshot.gpu}, which is not in these facts ({facts.gpu_count} GPU(s))")
            continue
        taken = readable_time(snapshot.taken_at)
        if taken is None:
            yield Contradiction(path + ("taken_at",), f"{excerpt(snapshot.taken_at)} is not a time (ISO 8601 with its UTC offset)")
            continue
        before = latest.get(snapshot.gpu)
        if before is not None and taken < before[0]:
            yield Contradiction(
                path + ("taken_at",),
                f"{snapshot.label!r} of gpu{snapshot.gpu} was taken at {snapshot.taken_at}, before health.snapshots[{before[1]}] "
                "of the same GPU: snapshots are in the order taken",
            )
        latest[snapshot.gpu] = (taken, i)


def readable_time(text: str) -> datetime.datetime | None:
    """An ISO 8601 time with its offset, or None: a time without one cannot be set against another."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _link_peak(facts: Facts) -> float:
    """The most GB/s one GPU's links carry per direction, from the speeds the GPUs report; the
    ceiling of any machine where they report none."""
    peaks = []
    for gpu in facts.gpus:
        if isinstance(gpu.nvlinks, list):
            speeds = [link.speed_GBps for link in gpu.nvlinks if link.active and isinstance(link.speed_GBps, (int, float))]
            if speeds and len(speeds) == sum(link.active for link in gpu.nvlinks):
                peaks.append(sum(speeds))
    return min(MAX_LINK_GBPS, PEAK_MARGIN * max(peaks)) if peaks else MAX_LINK_GBPS


def _measurements(path: KeyPath, measured: Measurements, count: int, peak: float) -> Iterator[Contradiction]:
    if measured.collectives is not None:
        yield from _collectives(path + ("collectives",), measured.collectives, peak)
    if measured.pairwise is not None:
        results = measured.pairwise.results
        where = path + ("pairwise", "results")
        for i, pair in enumerate(results):
            yield from _pair_of_present_gpus(where + (i, "gpus"), pair.gpus, count)
            yield from _bandwidth(where + (i,), pair.size_bytes, pair.time_us, pair.busbw_GBps, "busbw_GBps", peak)
        yield from _measured_once(where, (pair.key for pair in results))
    if measured.copies is not None:
        where = path + ("copies", "results")
        for i, copy in enumerate(measured.copies.results):
            yield from _pair_of_present_gpus(where + (i, "gpus"), copy.gpus, count)
            if copy.GBps > MAX_COPY_GBPS:
                yield Contradiction(where + (i, "GBps"), f"{copy.GBps:g} GB/s is more than any memory moves ({MAX_COPY_GBPS:g} GB/s)")
        yield from _measured_once(where, (copy.key for copy in measured.copies.results))
    for name in ("ddp", "ddp_without_p2p"):
        sweep = getattr(measured, name)
        if sweep is not None:
            yield from _measured_once(path + (name, "results"), (sweep.key_of(result) for result in sweep.results))
    if measured.compute is not None:
        where = path + ("compute", "results")
        for i, load in enumerate(measured.compute.results):
            yield from _pair_of_present_gpus(where + (i, "gpu"), (load.gpu,), count)
        yield from _measured_once(where, (result.key for result in measured.compute.results))


def _measured_once(path: KeyPath, keys: Iterable[Hashable]) -> Iterator[Contradiction]:
    # two numbers for one measurement: judging either would hide the other
    yield from _each_once(
        ((path + (i,), key) for i, key in enumerate(keys)),
        lambda key, first: f"{key} is measured again here (first at {_index(first)}): one measurement, one result",
    )


def _index(path: KeyPath) -> str:
    return f"[{path[-1]}]"


def _collectives(path: KeyPath, sweep: CollectiveSweep, peak: float) -> Iterator[Contradiction]:
    where = path + ("results",)
    for i, result in enumerate(sweep.results):
        yield from _bandwidth(where + (i,), result.size_bytes, result.time_us, result.algbw_GBps, "algbw_GBps", MAX_COPY_GBPS)
        if result.busbw_GBps > peak:
            yield Contradiction(
                where + (i, "busbw_GBps"),
                f"{result.busbw_GBps:g} GB/s is more than {peak:g} GB/s, {PEAK_MARGIN:g}x the most a GPU's links carry here",
            )
        if result.ranks >= 1 and result.collective in ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "sendrecv"):
            factor = bus_factor(result.collective, result.ranks)
            expected = result.algbw_GBps * factor
            if abs(result.busbw_GBps - expected) > RELATIVE_SLACK / 2 * expected + ABSOLUTE_SLACK_GBPS:
                yield Contradiction(
                    where + (i, "busbw_GBps"),
                    f"{result.busbw_GBps:g} GB/s is not algbw {result.algbw_GBps:g} GB/s x {factor:.3g}, nccl-tests' factor "
                    f"for {result.collective} on {result.ranks} ranks ({expected:.4g} GB/s)",
                )
    yield from _measured_once(where, (result.key for result in sweep.results))


def _bandwidth(path: KeyPath, size_bytes: int, time_us: float, gbps: float, field: str, ceiling: float) -> Iterator[Contradiction]:
    """A bandwidth is the bytes over the time: none over no time, and not another figure."""
    if size_bytes > 0 and time_us == 0:
        yield Contradiction(path + ("time_us",), f"{size_bytes} bytes moved in 0 us: no measurement takes no time")
        return
    if gbps > ceiling:
        yield Contradiction(path + (field,), f"{gbps:g} GB/s is more than any link carries ({ceiling:g} GB/s)")
        return
    if time_us > 0:
        expected = size_bytes / time_us / 1e3
        if abs(gbps - expected) > RELATIVE_SLACK * expected + ABSOLUTE_SLACK_GBPS:
            yield Contradiction(
                path + (field,), f"{gbps:g} GB/s is not {size_bytes} bytes in {time_us:g} us ({expected:.4g} GB/s)"
            )
