"""Health checks: NVML error counters, XIDs, throttling and software state, per GPU (per link for
NVLink), from the health snapshots in the facts.

Two families. State checks judge the first snapshot ("start", before any load): what a quick
gate between jobs needs. Run checks judge the change from the first snapshot to the last (a delta
the run caused is the strongest evidence) and the readings taken after load; with one snapshot
only, no load ran: they could not judge where the profile asks for loads (facts recorded without
them), and judge nothing where it asks for none. Facts with no health readings at all could not
judge any of them. A reading NVML did not give ("not supported", not in a
recording) makes the check not applicable, with the reason: never a pass, never a 0.
"""

from __future__ import annotations

import datetime
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

from gpuaccept.checks.declare import GPU, REGISTRY, DeclaredCheck, Subjects, check
from gpuaccept.checks.missing import HEALTH_READINGS, KERNEL_LOG, LOAD_FOR_HEALTH, XID_LISTENER
from gpuaccept.checks.stages import stages_asked
from gpuaccept.checks.verdict import AtMost, Criterion, Described, Equals, Judge, Verdict
from gpuaccept.facts.health import HealthSnapshot, XidEvent
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.links import gpu_key

RECOVERY_ACTIONS = {0: "none", 1: "GPU reset", 2: "node reboot", 3: "drain P2P", 4: "drain and reset"}
# PCIe transfer rate per lane by generation, GT/s: DCGM's expected replay rate is lanes x this x 1e-12 x 60 per minute
PCIE_GTPS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0, 7: 128.0}
LISTENED_ON = "NVML events listened for on "  # how probe/health.py's XidListener notes where it listened
NO_SNAPSHOT_AFTER_LOAD = "no health snapshot after the load could be taken (only the start snapshot is in the facts)"


# one NVLink of a GPU: `test_nvlink_errors_during_run[gpu0-link3]`
GPU_LINK = Subjects(
    "gpu_link", lambda profile: gpu_links(profile), lambda gpu_link: link_id(gpu_link), "no NVLinks", "each NVLink the profile expects up",
    "gpu0-link0", lambda profile, gpu_link: [gpu_link[0]],
)


def _snapshots(facts: Facts, gpu: int) -> list[HealthSnapshot]:
    return facts.health.of(gpu)


def _none_taken(judge: Judge, facts: Facts, gpu: int) -> Verdict | None:
    if facts.gpu(gpu) is None:
        return judge.absent_gpu(gpu_key(gpu), gpu, facts.gpu_count)
    if not _snapshots(facts, gpu):
        others = sorted({snapshot.gpu for snapshot in facts.health.snapshots})
        if others:
            # the others were read: this GPU's health was asked for and is not there (one that stopped answering)
            seen = ", ".join(gpu_key(other) for other in others)
            return judge.error(gpu_key(gpu), f"no health snapshot of this GPU, though the facts hold those of {seen}")
        return judge.missing(gpu_key(gpu), HEALTH_READINGS)
    return None


def _start(judge: Judge, facts: Facts, gpu: int) -> HealthSnapshot | Verdict:
    missing = _none_taken(judge, facts, gpu)
    return missing if missing is not None else _snapshots(facts, gpu)[0]


def _first_and_last(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> tuple[HealthSnapshot, HealthSnapshot] | Verdict:
    missing = _none_taken(judge, facts, gpu)
    if missing is not None:
        return missing
    taken = _snapshots(facts, gpu)
    if len(taken) < 2:
        return _only_the_start(judge, profile, facts, gpu)
    return taken[0], taken[-1]


def _only_the_start(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """One snapshot: no load ran (could not judge where the profile asks for loads; nothing to judge
    where it asks for none), or every snapshot after a load failed (a GPU that stopped answering
    NVML, say after an XID 79): that is never a pass."""
    if _a_load_ran(facts):
        return judge.error(gpu_key(gpu), NO_SNAPSHOT_AFTER_LOAD)
    return judge.missing(gpu_key(gpu), LOAD_FOR_HEALTH, asked=bool(stages_asked(profile)))


def _a_load_ran(facts: Facts) -> bool:
    """Whether any measurement stage left a sweep in the facts (the confirmation bookkeeping aside)."""
    measured = facts.measurements
    return any(getattr(measured, name) is not None for name in type(measured).model_fields if name not in ("rounds", "unconfirmed"))


def _unreadable(judge: Judge, subject: str, what: str, reading: Unavailable, criterion: Criterion) -> Verdict:
    """Not supported or not read: not applicable, with the reason. Anything else (no permission, an
    error): the fact could not be established, which is never a pass."""
    if reading.unavailable in ("not_supported", "not_probed", "not_found"):
        return judge.not_applicable(subject, f"{what}: {reading}")
    return judge.unavailable(subject, what, reading, criterion)


def _first_unknown(values: dict[str, Any]) -> tuple[str, Unavailable] | None:
    return next(((what, value) for what, value in values.items() if isinstance(value, Unavailable)), None)


def _seconds(first: HealthSnapshot, last: HealthSnapshot) -> float:
    begin = datetime.datetime.fromisoformat(first.taken_at)
    end = datetime.datetime.fromisoformat(last.taken_at)
    return max((end - begin).total_seconds(), 0.0)


# snapshots of one GPU taken at one instant (the clock did not move, or the facts were made up):
# a rate over no time is no rate, and dividing by an invented second would judge one
NO_TIME = "the first and the last snapshot of this GPU were taken at the same instant ({at}): a rate over no time cannot be judged"


def _span(first: HealthSnapshot, last: HealthSnapshot) -> str:
    return f"{first.label} -> {last.label}, {_seconds(first, last):.0f} s"


# --- state: the start snapshot -------------------------------------------------------------------


@check(subjects=GPU, family="health_state")
def row_remapping(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """No row remap pending or failed at the start, and uncorrectable remaps within the profile's limit."""
    limit = profile.spec.health.remapped_uncorrectable_max
    criterion = AtMost(limit, "rows")
    start = _start(judge, facts, gpu)
    if isinstance(start, Verdict):
        return start
    subject = gpu_key(gpu)
    values = {
        "uncorrectable remaps": start.remapped_uncorrected,
        "remap pending": start.remap_pending,
        "remap failure": start.remap_failure,
    }
    context = {"remapped_corrected": start.remapped_corrected, **{k.replace(" ", "_"): v for k, v in values.items()}}
    rule = Described(f"no remap pending or failed, uncorrectable remaps <= {limit}")
    # a reading NVML does not give hides none of the others: any one that is read and breaks the rule fails
    if isinstance(start.remapped_uncorrected, int) and not criterion.holds(start.remapped_uncorrected):
        return judge(subject, "uncorrectable row remaps", start.remapped_uncorrected, criterion, context=context)
    if start.remap_failure is True:
        return judge.failed(
            subject, f"row remap failure at {start.label} (a bank ran out of spare rows), expected {rule}", True, rule, context=context
        )
    if start.remap_pending is True:
        return judge.failed(
            subject,
            f"row remap pending at {start.label} (takes effect at the next GPU reset), expected {rule}",
            True,
            rule,
            context=context,
        )
    unknown = _first_unknown(values)
    if unknown:
        return _unreadable(judge, subject, unknown[0], unknown[1], criterion)
    return judge(
        subject,
        "uncorrectable row remaps",
        start.remapped_uncorrected,
        criterion,
        note=f"corrected {start.remapped_corrected}",
        context=context,
    )


@check(subjects=GPU, family="health_state")
def retired_pages(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """No page pending retirement at the start, and retired pages (SBE + DBE) within the profile's limit."""
    limit = profile.spec.health.retired_pages_max
    criterion = AtMost(limit, "pages")
    start = _start(judge, facts, gpu)
    if isinstance(start, Verdict):
        return start
    subject = gpu_key(gpu)
    values = {
        "retired pages (SBE)": start.retired_pages_sbe,
        "retired pages (DBE)": start.retired_pages_dbe,
        "pending retirement": start.retired_pending,
    }
    note = f"SBE {start.retired_pages_sbe}, DBE {start.retired_pages_dbe}"
    if start.retired_pending is True:
        rule = Described(f"no page pending retirement, retired pages <= {limit}")
        return judge.failed(subject, f"a page is pending retirement at {start.label}, expected {rule}", True, rule)
    # a reading NVML does not give hides none of the others: the pages that are read, over the limit, fail
    read = [pages for pages in (start.retired_pages_sbe, start.retired_pages_dbe) if isinstance(pages, int)]
    if not criterion.holds(sum(read)):
        what = "retired pages" if len(read) == 2 else "retired pages (at least: one count is not read)"
        return judge(subject, what, sum(read), criterion, note=note)
    unknown = _first_unknown(values)
    if unknown:
        return _unreadable(judge, subject, unknown[0], unknown[1], criterion)
    return judge(subject, "retired pages", sum(read), criterion, note=note)


@check(subjects=GPU, family="health_state")
def ecc_corrected(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """Corrected ECC errors (aggregate) at the start within the profile's limit, where it sets one."""
    limit = profile.spec.health.ecc_corrected_max
    if limit is None:
        return judge.not_applicable(gpu_key(gpu), "the profile sets no limit on corrected ECC errors (health.ecc_corrected_max)")
    start = _start(judge, facts, gpu)
    if isinstance(start, Verdict):
        return start
    return judge(gpu_key(gpu), "corrected ECC errors (aggregate)", start.ecc.corrected_aggregate, AtMost(limit, "errors"))


@check(subjects=GPU, family="health_state")
def sram_ecc(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """SRAM ECC errors (aggregate) within the profile's limits, and the SRAM error threshold not exceeded."""
    health = profile.spec.health
    start = _start(judge, facts, gpu)
    if isinstance(start, Verdict):
        return start
    subject = gpu_key(gpu)
    checks: list[tuple[str, Any, Criterion]] = [
        ("SRAM uncorrected ECC errors (aggregate)", start.sram.uncorrected_aggregate, AtMost(health.sram_uncorrected_max, "errors")),
        ("SRAM corrected ECC errors (aggregate)", start.sram.corrected_aggregate, AtMost(health.sram_corrected_max, "errors")),
        ("SRAM error threshold exceeded", start.sram_threshold_exceeded, Equals(False)),
    ]
    return _all_of(judge, subject, checks)


def _all_of(judge: Judge, subject: str, checks: list[tuple[str, Any, Criterion]], scope: str = "") -> Verdict:
    """Several readings under one test: the first readable one that breaks its rule decides; else a
    reading that is not there makes the whole not applicable (or an error), never a partial pass."""
    for what, value, criterion in checks:
        if not isinstance(value, Unavailable) and not criterion.holds(value):
            return judge(subject, what, value, criterion, scope=scope)
    for what, value, criterion in checks:
        if isinstance(value, Unavailable):
            return _unreadable(judge, subject, what, value, criterion)
    what, value, criterion = checks[0]
    others = "; ".join(f"{w} {v}" for w, v, _ in checks[1:])
    return judge(subject, what, value, criterion, note=others, scope=scope)


def _recovery(judge: Judge, snapshot: HealthSnapshot, scope: str = "") -> Verdict:
    criterion = Equals("none")
    subject = gpu_key(snapshot.gpu)
    action = snapshot.recovery_action
    if isinstance(action, Unavailable):
        return _unreadable(judge, subject, "recovery action (field 230)", action, criterion)
    name = RECOVERY_ACTIONS.get(action, f"action {action}")
    return judge(subject, f"recovery action (field 230) at {snapshot.label}", name, criterion, note=f"code {action}", scope=scope)


@check(subjects=GPU, family="health_state")
def recovery_action(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """NVML's recovery action field (230) at the start: anything but none fails."""
    start = _start(judge, facts, gpu)
    return start if isinstance(start, Verdict) else _recovery(judge, start)


@check(subjects=GPU, family="health_run")
def recovery_action_after_run(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """The recovery action field at the last snapshot: what the driver says the GPU needs after the load."""
    pair = _first_and_last(judge, profile, facts, gpu)
    return pair if isinstance(pair, Verdict) else _recovery(judge, pair[1], scope=_span(*pair))


@check(subjects=GPU, family="health_state")
def persistence_mode(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """Persistence mode is on, where the profile requires it."""
    if not profile.spec.health.persistence_mode:
        return judge.not_applicable(gpu_key(gpu), "the profile does not require persistence mode (health.persistence_mode: false)")
    start = _start(judge, facts, gpu)
    if isinstance(start, Verdict):
        return start
    reading = start.persistence_mode
    criterion = Equals("on")
    if isinstance(reading, Unavailable):
        return _unreadable(judge, gpu_key(gpu), "persistence mode", reading, criterion)
    return judge(gpu_key(gpu), "persistence mode", "on" if reading else "off", criterion)


@check(subjects=GPU, family="health_state")
def inforom(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """The InfoROM checksum is valid."""
    start = _start(judge, facts, gpu)
    if isinstance(start, Verdict):
        return start
    reading = start.inforom_valid
    criterion = Equals("valid")
    if isinstance(reading, Unavailable):
        return _unreadable(judge, gpu_key(gpu), "InfoROM", reading, criterion)
    return judge(gpu_key(gpu), "InfoROM checksum", "valid" if reading else "corrupted", criterion)


@check(subjects=GPU, family="health_state", test="test_no_other_compute_process", root="foreign_load")
def other_processes(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """No compute process of anyone else on the GPU at the start: a burn-in or a measurement beside
    another job measures that job too (the root cause of the measurements that use the GPU)."""
    criterion = AtMost(0, "processes")
    start = _start(judge, facts, gpu)
    if isinstance(start, Verdict):
        return start
    found = start.compute_processes
    if isinstance(found, Unavailable):
        return _unreadable(judge, gpu_key(gpu), "compute processes", found, criterion)
    named = ", ".join(f"pid {p.pid}" + (f" ({p.name[:60]})" if p.name else "") for p in found)
    context = {"pids": [p.pid for p in found]}
    return judge(gpu_key(gpu), f"other compute processes at {start.label}", len(found), criterion, note=named, context=context)


@check(subjects=GPU, family="health_state")
def vbios_consistent(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """The VBIOS of this GPU is the one most GPUs of its model in the machine run: a GPU flashed
    apart from its siblings behaves apart."""
    me = facts.gpu(gpu)
    if me is None:
        return judge.absent_gpu(gpu_key(gpu), gpu, facts.gpu_count)
    if isinstance(me.vbios, Unavailable):
        return _unreadable(judge, gpu_key(gpu), "VBIOS version", me.vbios, Described("the VBIOS of the other GPUs of its model"))
    siblings = [g.vbios for g in facts.gpus if g.name == me.name and isinstance(g.vbios, str)]
    common, count = Counter(siblings).most_common(1)[0]
    if len(siblings) < 2:
        return judge.not_applicable(gpu_key(gpu), f"no other {me.name} under test to compare VBIOS {me.vbios} with")
    criterion = Equals(common)
    return judge(gpu_key(gpu), "VBIOS", me.vbios, criterion, note=f"{count} of {len(siblings)} {me.name} GPUs run {common}")


@check(subjects=GPU, family="health_state")
def mig_mode(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """MIG mode is what the profile's `health.mig` says."""
    wanted = profile.spec.health.mig
    criterion = Equals(wanted)
    start = _start(judge, facts, gpu)
    if isinstance(start, Verdict):
        return start
    if isinstance(start.mig_mode, Unavailable):
        if wanted == "disabled" and start.mig_mode.unavailable == "not_supported":
            return judge(gpu_key(gpu), "MIG mode", "disabled", criterion, note="the GPU has no MIG")
        return _unreadable(judge, gpu_key(gpu), "MIG mode", start.mig_mode, criterion)
    return judge(gpu_key(gpu), "MIG mode", "enabled" if start.mig_mode else "disabled", criterion)


def _critical(profile: Profile) -> set[int]:
    return set(profile.spec.health.critical_xids)


def _describe(events: list[XidEvent]) -> str:
    return ", ".join(
        f"XID {e.xid} ({e.source.replace('_', ' ')}, {e.time})" if e.kind == "xid" else f"{e.kind.replace('_', ' ')} ({e.time})"
        for e in events
    )


@check(subjects=GPU, family="health_state")
def xid_since_boot(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """Critical XIDs in the kernel log from before the run (profile: fail or only report)."""
    log = facts.health.kernel_log
    if facts.gpu(gpu) is None:
        return judge.absent_gpu(gpu_key(gpu), gpu, facts.gpu_count)
    if log is None:
        return judge.missing(gpu_key(gpu), KERNEL_LOG)
    if not log.readable:
        return judge.not_applicable(gpu_key(gpu), log.note)
    before = [e for e in facts.health.events if e.gpu == gpu and e.source == "kernel_log" and not e.during_run]
    critical = [e for e in before if e.xid in _critical(profile)]
    criterion = AtMost(0, "critical XIDs")
    others = [e for e in before if e not in critical]
    note = f"read from {log.note}" + (f"; others reported: {_describe(others)}" if others else "")
    if critical and profile.spec.health.kernel_xids_since_boot == "report":
        return judge.passed(
            gpu_key(gpu),
            f"critical XIDs since boot reported, not judged (health.kernel_xids_since_boot: report): {_describe(critical)}",
            len(critical),
            criterion,
        )
    if critical:
        return judge(
            gpu_key(gpu), "critical XIDs in the kernel log since boot", len(critical), criterion, note=f"{_describe(critical)}; {note}"
        )
    return judge(gpu_key(gpu), "critical XIDs in the kernel log since boot", 0, criterion, note=note)


# --- the run: first snapshot to last, and what was heard in between -------------------------------


@check(subjects=GPU, family="health_run")
def xid_during_run(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """NVML events (critical XID, double-bit ECC, recovery action) and new kernel log Xid lines
    seen while the run went on. A critical XID or a double-bit ECC event fails; others are reported."""
    criterion = AtMost(0, "critical events")
    subject = gpu_key(gpu)
    if facts.gpu(gpu) is None:
        return judge.absent_gpu(subject, gpu, facts.gpu_count)
    health = facts.health
    seen = [e for e in health.events if e.gpu == gpu and e.during_run]
    critical = [e for e in seen if (e.kind == "xid" and e.xid in _critical(profile)) or e.kind == "double_bit_ecc"]
    others = [e for e in seen if e not in critical]
    how = health.listener or "no NVML event listener"
    if health.kernel_log is not None:
        how += f"; kernel log: {health.kernel_log.note}"
    note = (f"{_describe(critical)}; " if critical else "") + (f"others reported: {_describe(others)}; " if others else "") + how

    def verdict() -> Verdict:
        xids = {"xids": [e.xid for e in seen]}
        return judge(subject, "critical XID / ECC events during the run", len(critical), criterion, note=note, context=xids)

    if critical:
        return verdict()  # heard is heard: whatever else could not be read, a critical event fails
    missing = _none_taken(judge, facts, gpu)
    if missing is not None:
        return missing
    if len(_snapshots(facts, gpu)) < 2 and _a_load_ran(facts):
        return judge.error(subject, NO_SNAPSHOT_AFTER_LOAD)
    # what was heard over the run, loads or none (a quick gate's seconds count as much as a load's)
    kernel_log_read = health.kernel_log is not None and health.kernel_log.readable
    if not _nvml_listened(health.listener, gpu) and not kernel_log_read:
        said = f"nothing listened for XIDs on this GPU during the run: {how}"
        if f"{subject}: NOT_SUPPORTED" in health.listener:
            return judge.not_applicable(subject, said)  # NVML has no events for this GPU
        if not health.listener:
            return judge.missing(subject, XID_LISTENER, criterion, note=said)  # facts recorded without listening
        return judge.error(subject, said, criterion)  # asked for and refused (no permission, an error): never a pass
    return verdict()


def _nvml_listened(note: str, gpu: int) -> bool:
    """Whether the NVML event listener was registered on this GPU, as its note says
    ("NVML events listened for on gpu0, gpu1 (XID and ECC events only: ...) from ...")."""
    heard = note.split(" from ", 1)[0]
    if not heard.startswith(LISTENED_ON):
        return False
    registered = {part.strip().split(" ", 1)[0] for part in heard[len(LISTENED_ON) :].split(",")}
    return gpu_key(gpu) in registered


@check(subjects=GPU, family="health_run")
def ecc_errors_during_run(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """Any new uncorrected ECC error (all memory, DRAM, SRAM; volatile counters) fails (DCGM)."""
    criterion = AtMost(0, "errors")
    pair = _first_and_last(judge, profile, facts, gpu)
    if isinstance(pair, Verdict):
        return pair
    first, last = pair
    subject = gpu_key(gpu)
    total = _delta(first.ecc.uncorrected_volatile, last.ecc.uncorrected_volatile)
    if isinstance(total, Unavailable):
        return _unreadable(judge, subject, "uncorrected ECC errors (volatile)", total, criterion)
    by_place = {
        place: _delta(getattr(first, place).uncorrected_volatile, getattr(last, place).uncorrected_volatile) for place in ("dram", "sram")
    }
    worst = max([total] + [v for v in by_place.values() if isinstance(v, int)])
    places = ", ".join(f"{place.upper()} {value}" for place, value in by_place.items())
    return judge(subject, "new uncorrected ECC errors", worst, criterion, note=f"{places}", scope=_span(first, last))


@check(subjects=GPU, family="health_run")
def ecc_corrected_during_run(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """New corrected ECC errors (volatile) during the run within the profile's limit, where it sets one."""
    limit = profile.spec.health.ecc_corrected_during_run_max
    if limit is None:
        return judge.not_applicable(
            gpu_key(gpu), "the profile sets no limit on new corrected ECC errors (health.ecc_corrected_during_run_max)"
        )
    pair = _first_and_last(judge, profile, facts, gpu)
    if isinstance(pair, Verdict):
        return pair
    first, last = pair
    delta = _delta(first.ecc.corrected_volatile, last.ecc.corrected_volatile)
    criterion = AtMost(limit, "errors")
    if isinstance(delta, Unavailable):
        return _unreadable(judge, gpu_key(gpu), "corrected ECC errors (volatile)", delta, criterion)
    return judge(gpu_key(gpu), "new corrected ECC errors", delta, criterion, scope=_span(first, last))


@check(subjects=GPU, family="health_run")
def remapping_during_run(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """New uncorrectable row remaps, or a remap pending or failed at the end of the run."""
    criterion = AtMost(0, "rows")
    pair = _first_and_last(judge, profile, facts, gpu)
    if isinstance(pair, Verdict):
        return pair
    first, last = pair
    subject = gpu_key(gpu)
    delta = _delta(first.remapped_uncorrected, last.remapped_uncorrected)
    for what, value in (("uncorrectable remaps", delta), ("remap pending", last.remap_pending), ("remap failure", last.remap_failure)):
        if isinstance(value, Unavailable):
            return _unreadable(judge, subject, what, value, criterion)
    rule = Described("no new uncorrectable remap, none pending or failed")
    for flag, what in ((last.remap_failure, "row remap failure"), (last.remap_pending, "row remap pending")):
        if flag:
            return judge.failed(subject, f"{what} at {last.label}, expected {rule}", True, rule, scope=_span(first, last))
    return judge(subject, "new uncorrectable row remaps", delta, criterion, scope=_span(first, last))


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
    pair = _first_and_last(judge, profile, facts, gpu)
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
            return _unreadable(judge, subject, name, value, placeholder)
    rate = PCIE_GTPS.get(int(generation), 0.0)  # type: ignore[arg-type]
    allowed = int(width) * rate * 1e9 * 1e-12 * 60 * factor  # type: ignore[arg-type]
    criterion = AtMost(round(allowed, 2), f"{unit}/min")
    minutes = _seconds(first, last) / 60
    on_link = f"in {minutes * 60:.0f} s on Gen{generation} x{width}"
    rollovers = _delta(getattr(first, rollovers_of), getattr(last, rollovers_of)) if rollovers_of else 0
    if isinstance(rollovers, int) and rollovers > 0:
        return judge.failed(
            subject,
            f"the PCIe replay counter rolled over {rollovers} time(s) {on_link}, expected {criterion}",
            rollovers,
            criterion,
            scope=_span(first, last),
        )
    count = _delta(getattr(first, counter), getattr(last, counter))
    if isinstance(count, Unavailable):
        return _unreadable(judge, subject, f"{what} counter", count, criterion)
    if minutes == 0:
        return judge.error(subject, NO_TIME.format(at=first.taken_at), criterion, scope=_span(first, last))
    note = f"{count} {unit} {on_link}"
    return judge(subject, f"{what} rate", round(count / minutes, 2), criterion, note=note, scope=_span(first, last))


@check(subjects=GPU_LINK, family="health_run")
def nvlink_errors_during_run(judge: Judge, profile: Profile, facts: Facts, gpu_link: tuple[int, int]) -> Verdict:
    """One NVLink: replay or recovery errors during the run fail (DCGM: delta >= 1); CRC errors
    are judged as a rate (DCGM: 100 a second)."""
    gpu, link = gpu_link
    subject = f"{gpu_key(gpu)}-link{link}"
    pair = _first_and_last(judge, profile, facts, gpu)
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
    seconds = _seconds(first, last)
    crc = [_delta(before.crc_flit, after.crc_flit), _delta(before.crc_data, after.crc_data)]
    if seconds == 0:  # replays and recoveries are judged as counts; CRC errors, a rate, are not
        crc = [Unavailable(unavailable="error", detail=NO_TIME.format(at=first.taken_at))] * 2
    crc_known = [value for value in crc if isinstance(value, int)]
    checks: list[tuple[str, Any, Criterion]] = [
        ("new NVLink replay errors", _delta(before.replay, after.replay), AtMost(0, "errors")),
        ("new NVLink recovery errors", _delta(before.recovery, after.recovery), AtMost(0, "errors")),
    ]
    if crc_known:
        rate = round(sum(crc_known) / seconds, 3)
        checks.append(("NVLink CRC error rate", rate, AtMost(profile.spec.health.nvlink_crc_max_per_s, "errors/s")))
    elif isinstance(crc[0], Unavailable):
        checks.append(("NVLink CRC errors", crc[0], AtMost(profile.spec.health.nvlink_crc_max_per_s, "errors/s")))
    return _all_of(judge, subject, checks, scope=_span(first, last))


def _load_seconds(facts: Facts) -> float | None:
    """How long the stages loaded the GPUs, where the telemetry's load windows tell (their union)."""
    telemetry = facts.telemetry
    if telemetry is None or not telemetry.loads:
        return None
    total, reached = 0.0, -math.inf
    for started, ended in sorted((window.started_s, window.ended_s) for window in telemetry.loads):
        total += max(0.0, ended - max(started, reached))
        reached = max(reached, ended)
    return total


@check(subjects=GPU, family="health_run")
def clock_slowdown_during_run(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """Time the clocks were held down by the hardware (HW thermal slowdown, HW power brake) as a
    share of the time the stages loaded the GPUs (of the whole run where no telemetry tells when
    they did): a minute of idle between stages does not thin out a slowdown under load. Software
    power capping and idle are how a GPU normally runs, and are only reported."""
    criterion = AtMost(profile.spec.health.hw_slowdown_max_percent, "%")
    pair = _first_and_last(judge, profile, facts, gpu)
    if isinstance(pair, Verdict):
        return pair
    first, last = pair
    subject = gpu_key(gpu)
    deltas = {
        name: _delta(getattr(first.clock_event_ns, name), getattr(last.clock_event_ns, name))
        for name in ("hw_thermal", "hw_power_brake", "sw_thermal", "sw_power_cap")
    }
    for name in ("hw_thermal", "hw_power_brake"):
        value = deltas[name]
        if isinstance(value, Unavailable):
            return _unreadable(judge, subject, f"{name.replace('_', ' ')} time", value, criterion)
    span_s = _seconds(first, last)
    if span_s == 0:
        return judge.error(subject, NO_TIME.format(at=first.taken_at), criterion, scope=_span(first, last))
    loaded_s = _load_seconds(facts)
    under_load = loaded_s is not None and 1.0 <= loaded_s < span_s
    base_s = loaded_s if under_load and loaded_s is not None else span_s
    held_ns = sum(value for name, value in deltas.items() if name.startswith("hw_") and isinstance(value, int))
    share = round(100 * held_ns / (base_s * 1e9), 3)
    shown = ", ".join(
        f"{name.replace('_', ' ')} {v / 1e9:.2f} s" if isinstance(v, int) else f"{name.replace('_', ' ')} {v}" for name, v in deltas.items()
    )
    of = f"of {base_s:.0f} s under load" if under_load else "of the run"
    return judge(subject, f"HW slowdown time (thermal + power brake) {of}", share, criterion, note=shown, scope=_span(first, last))


def _temperature(
    judge: Judge,
    profile: Profile,
    facts: Facts,
    gpu: int,
    what: str,
    reading: Callable[[HealthSnapshot], Any],
    limit: Callable[[HealthSnapshot], Any],
    limit_name: str,
) -> Verdict:
    subject = gpu_key(gpu)
    pair = _first_and_last(judge, profile, facts, gpu)
    if isinstance(pair, Verdict):
        return pair
    taken = _snapshots(facts, gpu)
    threshold = limit(taken[0])
    placeholder = Described(f"below NVML's {limit_name}")
    if isinstance(threshold, Unavailable):
        return _unreadable(judge, subject, f"NVML's {limit_name}", threshold, placeholder)
    values = [(reading(s), s.label) for s in taken]
    unknown = next((v for v, _ in values if isinstance(v, Unavailable)), None)
    if unknown is not None:
        return _unreadable(judge, subject, what, unknown, placeholder)
    hottest, label = max(values, key=lambda pair: pair[0])
    criterion = AtMost(threshold - 1, "°C")
    return judge(subject, f"hottest {what} ({label})", hottest, criterion, note=f"NVML {limit_name} {threshold} °C")


@check(subjects=GPU, family="health_run")
def gpu_temperature(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """The hottest GPU temperature of the snapshots stays below NVML's slowdown threshold."""
    return _temperature(
        judge, profile, facts, gpu, "GPU temperature", lambda s: s.temperature_C, lambda s: s.slowdown_C, "slowdown threshold"
    )


@check(subjects=GPU, family="health_run")
def memory_temperature(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """The hottest HBM temperature of the snapshots stays below NVML's memory max temperature."""
    return _temperature(
        judge,
        profile,
        facts,
        gpu,
        "HBM temperature",
        lambda s: s.memory_temperature_C,
        lambda s: s.memory_max_C,
        "memory max temperature",
    )


def _delta(before: int | Unavailable, after: int | Unavailable) -> int | Unavailable:
    """How much a counter grew. One that went down (the driver reset it, or it wrapped without a
    rollover count to say so) tells nothing of the run: could not be established, never a pass."""
    if isinstance(before, Unavailable):
        return before
    if isinstance(after, Unavailable):
        return after
    if after < before:
        return Unavailable(unavailable="error", detail=f"the counter went down from {before} to {after} (reset or rolled over)")
    return after - before


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


def _family(name: str) -> tuple[DeclaredCheck[[Facts, int]], ...]:
    """The per-GPU checks of a family, as declared: state checks need the start snapshot only."""
    return tuple(found for found in REGISTRY.values() if found.declaration.family == name and found.declaration.subjects is GPU)


STATE_CHECKS = _family("health_state")
RUN_CHECKS = _family("health_run")
