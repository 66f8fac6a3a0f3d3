"""XIDs: the critical ones in the kernel log from before the run (a state check), and the NVML
events and new kernel log Xid lines heard while the run went on (a run check).
"""

from __future__ import annotations

from gpuaccept.checks.declare import GPU, check
from gpuaccept.checks.health.snapshots import NO_SNAPSHOT_AFTER_LOAD, a_load_ran, none_taken, snapshots_of
from gpuaccept.checks.missing import KERNEL_LOG, XID_LISTENER
from gpuaccept.checks.verdict import AtMost, Judge, Verdict
from gpuaccept.facts.health import XidEvent
from gpuaccept.facts.model import Facts
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.links import gpu_key

LISTENED_ON = "NVML events listened for on "  # how probe/health.py's XidListener notes where it listened


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
    missing = none_taken(judge, facts, gpu)
    if missing is not None:
        return missing
    if len(snapshots_of(facts, gpu)) < 2 and a_load_ran(facts):
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
