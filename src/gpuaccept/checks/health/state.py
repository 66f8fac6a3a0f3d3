"""The GPU's software and firmware state: the recovery action NVML asks for (at the start, and
after the run's loads), persistence mode, the InfoROM, someone else's compute processes, the VBIOS
beside its siblings', and MIG mode.
"""

from __future__ import annotations

from collections import Counter

from gpuaccept.checks.declare import GPU, check
from gpuaccept.checks.health.snapshots import at_start, first_and_last, span_of, unreadable
from gpuaccept.checks.verdict import AtMost, Described, Equals, Judge, Verdict
from gpuaccept.facts.health import HealthSnapshot
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.links import gpu_key

RECOVERY_ACTIONS = {0: "none", 1: "GPU reset", 2: "node reboot", 3: "drain P2P", 4: "drain and reset"}


def _recovery(judge: Judge, snapshot: HealthSnapshot, scope: str = "") -> Verdict:
    criterion = Equals("none")
    subject = gpu_key(snapshot.gpu)
    action = snapshot.recovery_action
    if isinstance(action, Unavailable):
        return unreadable(judge, subject, "recovery action (field 230)", action, criterion)
    name = RECOVERY_ACTIONS.get(action, f"action {action}")
    return judge(subject, f"recovery action (field 230) at {snapshot.label}", name, criterion, note=f"code {action}", scope=scope)


@check(subjects=GPU, family="health_state")
def recovery_action(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """NVML's recovery action field (230) at the start: anything but none fails."""
    start = at_start(judge, facts, gpu)
    return start if isinstance(start, Verdict) else _recovery(judge, start)


@check(subjects=GPU, family="health_run")
def recovery_action_after_run(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """The recovery action field at the last snapshot: what the driver says the GPU needs after the load."""
    pair = first_and_last(judge, profile, facts, gpu)
    return pair if isinstance(pair, Verdict) else _recovery(judge, pair[1], scope=span_of(*pair))


@check(subjects=GPU, family="health_state")
def persistence_mode(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """Persistence mode is on, where the profile requires it."""
    if not profile.spec.health.persistence_mode:
        return judge.not_applicable(gpu_key(gpu), "the profile does not require persistence mode (health.persistence_mode: false)")
    start = at_start(judge, facts, gpu)
    if isinstance(start, Verdict):
        return start
    reading = start.persistence_mode
    criterion = Equals("on")
    if isinstance(reading, Unavailable):
        return unreadable(judge, gpu_key(gpu), "persistence mode", reading, criterion)
    return judge(gpu_key(gpu), "persistence mode", "on" if reading else "off", criterion)


@check(subjects=GPU, family="health_state")
def inforom(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """The InfoROM checksum is valid."""
    start = at_start(judge, facts, gpu)
    if isinstance(start, Verdict):
        return start
    reading = start.inforom_valid
    criterion = Equals("valid")
    if isinstance(reading, Unavailable):
        return unreadable(judge, gpu_key(gpu), "InfoROM", reading, criterion)
    return judge(gpu_key(gpu), "InfoROM checksum", "valid" if reading else "corrupted", criterion)


@check(subjects=GPU, family="health_state", test="test_no_other_compute_process", root="foreign_load")
def other_processes(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """No compute process of anyone else on the GPU at the start: a burn-in or a measurement beside
    another job measures that job too (the root cause of the measurements that use the GPU)."""
    criterion = AtMost(0, "processes")
    start = at_start(judge, facts, gpu)
    if isinstance(start, Verdict):
        return start
    found = start.compute_processes
    if isinstance(found, Unavailable):
        return unreadable(judge, gpu_key(gpu), "compute processes", found, criterion)
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
        return unreadable(judge, gpu_key(gpu), "VBIOS version", me.vbios, Described("the VBIOS of the other GPUs of its model"))
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
    start = at_start(judge, facts, gpu)
    if isinstance(start, Verdict):
        return start
    if isinstance(start.mig_mode, Unavailable):
        if wanted == "disabled" and start.mig_mode.unavailable == "not_supported":
            return judge(gpu_key(gpu), "MIG mode", "disabled", criterion, note="the GPU has no MIG")
        return unreadable(judge, gpu_key(gpu), "MIG mode", start.mig_mode, criterion)
    return judge(gpu_key(gpu), "MIG mode", "enabled" if start.mig_mode else "disabled", criterion)
