"""The error counters' growth over the run (run checks), first snapshot to last: uncorrected and
corrected ECC errors, row remaps, PCIe replays and correctable errors as rates against the link's
expected rate, and each NVLink's replay, recovery and CRC errors.
"""

from __future__ import annotations

from typing import Any

from gpuaccept.checks.declare import GPU, Subjects, check
from gpuaccept.checks.health.snapshots import NO_TIME, all_of, counter_delta, first_and_last, seconds_between, span_of, unreadable
from gpuaccept.checks.verdict import AtMost, Criterion, Described, Judge, Verdict
from gpuaccept.facts.health import LINK_COUNTERS_NOT_AT_QUICK
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.links import gpu_key

# PCIe transfer rate per lane by generation, GT/s: DCGM's expected replay rate is lanes x this x 1e-12 x 60 per minute
PCIE_GTPS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0, 7: 128.0}


# one NVLink of a GPU: `test_nvlink_errors_during_run[gpu0-link3]`
GPU_LINK = Subjects(
    "gpu_link", lambda profile: gpu_links(profile), lambda gpu_link: link_id(gpu_link), "no NVLinks", "each NVLink the profile expects up",
    "gpu0-link0", lambda profile, gpu_link: [gpu_link[0]],
)


@check(subjects=GPU, family="health_run")
def ecc_errors_during_run(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """Any new uncorrected ECC error (all memory, DRAM, SRAM; volatile counters) fails (DCGM)."""
    criterion = AtMost(0, "errors")
    pair = first_and_last(judge, profile, facts, gpu)
    if isinstance(pair, Verdict):
        return pair
    first, last = pair
    subject = gpu_key(gpu)
    total = counter_delta(first.ecc.uncorrected_volatile, last.ecc.uncorrected_volatile)
    if isinstance(total, Unavailable):
        return unreadable(judge, subject, "uncorrected ECC errors (volatile)", total, criterion)
    by_place = {
        place: counter_delta(getattr(first, place).uncorrected_volatile, getattr(last, place).uncorrected_volatile)
        for place in ("dram", "sram")
    }
    worst = max([total] + [v for v in by_place.values() if isinstance(v, int)])
    places = ", ".join(f"{place.upper()} {value}" for place, value in by_place.items())
    return judge(subject, "new uncorrected ECC errors", worst, criterion, note=f"{places}", scope=span_of(first, last))


@check(subjects=GPU, family="health_run")
def ecc_corrected_during_run(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """New corrected ECC errors (volatile) during the run within the profile's limit, where it sets one."""
    limit = profile.spec.health.ecc_corrected_during_run_max
    if limit is None:
        return judge.not_applicable(
            gpu_key(gpu), "the profile sets no limit on new corrected ECC errors (health.ecc_corrected_during_run_max)"
        )
    pair = first_and_last(judge, profile, facts, gpu)
    if isinstance(pair, Verdict):
        return pair
    first, last = pair
    delta = counter_delta(first.ecc.corrected_volatile, last.ecc.corrected_volatile)
    criterion = AtMost(limit, "errors")
    if isinstance(delta, Unavailable):
        return unreadable(judge, gpu_key(gpu), "corrected ECC errors (volatile)", delta, criterion)
    return judge(gpu_key(gpu), "new corrected ECC errors", delta, criterion, scope=span_of(first, last))


@check(subjects=GPU, family="health_run")
def remapping_during_run(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """New uncorrectable row remaps, or a remap pending or failed at the end of the run."""
    criterion = AtMost(0, "rows")
    pair = first_and_last(judge, profile, facts, gpu)
    if isinstance(pair, Verdict):
        return pair
    first, last = pair
    subject = gpu_key(gpu)
    delta = counter_delta(first.remapped_uncorrected, last.remapped_uncorrected)
    for what, value in (("uncorrectable remaps", delta), ("remap pending", last.remap_pending), ("remap failure", last.remap_failure)):
        if isinstance(value, Unavailable):
            return unreadable(judge, subject, what, value, criterion)
    rule = Described("no new uncorrectable remap, none pending or failed")
    for flag, what in ((last.remap_failure, "row remap failure"), (last.remap_pending, "row remap pending")):
        if flag:
            return judge.failed(subject, f"{what} at {last.label}, expected {rule}", True, rule, scope=span_of(first, last))
    return judge(subject, "new uncorrectable row remaps", delta, criterion, scope=span_of(first, last))


@check(subjects=GPU, family="health_run")
def pcie_replay_rate(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """PCIe replays per minute over the run against DCGM's expected rate for the link:
    lanes x GT/s x 1e-12 x 60 (Gen5 x16: 30.7 a minute), times the profile's factor."""
    factor = profile.spec.health.pcie_replay_rate_factor
    return _pcie_rate(judge, profile, facts, gpu, "PCIe replay", "replays", factor, "pcie_replay", rollovers_of="pcie_replay_rollover")


@check(subjects=GPU, family="health_run")
def pcie_correctable_rate(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """PCIe correctable errors per minute over the run against the same expected rate: each is at
    least one bit error on the link, and the link is specified at a bit error rate of 1e-12."""
    factor = profile.spec.health.pcie_correctable_rate_factor
    return _pcie_rate(judge, profile, facts, gpu, "PCIe correctable error", "errors", factor, "pcie_correctable")


def _pcie_rate(
    judge: Judge, profile: Profile, facts: Facts, gpu: int, what: str, unit: str, factor: float, counter: str,
    rollovers_of: str | None = None,
) -> Verdict:
    """`counter` (a snapshot's field) per minute from the first snapshot to the last, against the
    link's expected rate times `factor`; where the counter has one, a rollover fails at once."""
    pair = first_and_last(judge, profile, facts, gpu)
    if isinstance(pair, Verdict):
        return pair
    first, last = pair
    subject = gpu_key(gpu)
    me = facts.gpu(gpu)
    assert me is not None  # _first_and_last checked
    # the rate the link runs at under load: a GPU that idles at a lower generation (GeForce parts
    # save power so) read at the start would be held to a limit a sixteenth as high
    known = [g for g in (me.pcie.generation_current, me.pcie.generation_max) if not isinstance(g, Unavailable)]
    generation = max(known) if known else me.pcie.generation_current
    width = me.pcie.width_current
    placeholder = Described(f"{unit} per minute within the link's expected rate")
    for name, value in (("PCIe generation", generation), ("PCIe width", width)):
        if isinstance(value, Unavailable):
            return unreadable(judge, subject, name, value, placeholder)
    rate = PCIE_GTPS.get(int(generation), 0.0)  # type: ignore[arg-type]
    allowed = int(width) * rate * 1e9 * 1e-12 * 60 * factor  # type: ignore[arg-type]
    criterion = AtMost(round(allowed, 2), f"{unit}/min")
    minutes = seconds_between(first, last) / 60
    on_link = f"in {minutes * 60:.0f} s on Gen{generation} x{width}"
    rollovers = counter_delta(getattr(first, rollovers_of), getattr(last, rollovers_of)) if rollovers_of else 0
    if isinstance(rollovers, int) and rollovers > 0:
        return judge.failed(
            subject,
            f"the PCIe replay counter rolled over {rollovers} time(s) {on_link}, expected {criterion}",
            rollovers,
            criterion,
            scope=span_of(first, last),
        )
    count = counter_delta(getattr(first, counter), getattr(last, counter))
    if isinstance(count, Unavailable):
        return unreadable(judge, subject, f"{what} counter", count, criterion)
    if minutes == 0:
        return judge.error(subject, NO_TIME.format(at=first.taken_at), criterion, scope=span_of(first, last))
    note = f"{count} {unit} {on_link}"
    return judge(subject, f"{what} rate", round(count / minutes, 2), criterion, note=note, scope=span_of(first, last))


@check(subjects=GPU_LINK, family="health_run")
def nvlink_errors_during_run(judge: Judge, profile: Profile, facts: Facts, gpu_link: tuple[int, int]) -> Verdict:
    """One NVLink: replay or recovery errors during the run fail (DCGM: delta >= 1); CRC errors
    are judged as a rate (DCGM: 100 a second)."""
    gpu, link = gpu_link
    subject = f"{gpu_key(gpu)}-link{link}"
    pair = first_and_last(judge, profile, facts, gpu)
    if isinstance(pair, Verdict):  # the GPU's verdict, said of this link
        return pair.model_copy(update={"subject": subject, "message": f"{subject}: {pair.message.split(': ', 1)[-1]}"})
    first, last = pair
    before = next((c for c in first.nvlink_errors if c.link == link), None)
    after = next((c for c in last.nvlink_errors if c.link == link), None)
    if before is not None and after is None:
        # read before the load and gone after it: the link went down under load, or its counters stopped answering
        return judge.error(
            subject, f"error counters read at {first.label!r} but not at {last.label!r}: the run's NVLink errors cannot be judged"
        )
    if before is None or after is None:
        return judge.not_applicable(
            subject, "no error counters read for this link (not active when read): test_nvlink_links judges the link"
        )
    if LINK_COUNTERS_NOT_AT_QUICK in (before.replay, after.replay):
        # facts probed for the quick level judged as a run that loaded: never "not applicable"
        return judge.error(subject, f"error counters not read at {first.label!r}: {LINK_COUNTERS_NOT_AT_QUICK.detail}")
    seconds = seconds_between(first, last)
    crc = [counter_delta(before.crc_flit, after.crc_flit), counter_delta(before.crc_data, after.crc_data)]
    if seconds == 0:  # replays and recoveries are judged as counts; CRC errors, a rate, are not
        crc = [Unavailable(unavailable="error", detail=NO_TIME.format(at=first.taken_at))] * 2
    crc_known = [value for value in crc if isinstance(value, int)]
    checks: list[tuple[str, Any, Criterion]] = [
        ("new NVLink replay errors", counter_delta(before.replay, after.replay), AtMost(0, "errors")),
        ("new NVLink recovery errors", counter_delta(before.recovery, after.recovery), AtMost(0, "errors")),
    ]
    if crc_known:
        rate = round(sum(crc_known) / seconds, 3)
        checks.append(("NVLink CRC error rate", rate, AtMost(profile.spec.health.nvlink_crc_max_per_s, "errors/s")))
    elif isinstance(crc[0], Unavailable):
        checks.append(("NVLink CRC errors", crc[0], AtMost(profile.spec.health.nvlink_crc_max_per_s, "errors/s")))
    return all_of(judge, subject, checks, scope=span_of(first, last))


def gpu_links(profile: Profile) -> list[tuple[int, int]]:
    """(gpu, link) of every NVLink the profile expects up: the subjects of the per-link tests."""
    found: list[tuple[int, int]] = []
    for gpu in range(profile.gpu_count):
        expected = profile.expected_active_links(gpu) or 0
        down = profile.inactive_links_by_design(gpu)
        found.extend((gpu, link) for link in range(expected + len(down)) if link not in down)
    return found


def link_id(gpu_link: tuple[int, int]) -> str:
    return f"{gpu_key(gpu_link[0])}-link{gpu_link[1]}"
