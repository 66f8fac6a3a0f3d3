"""Affinity checks: each GPU's closest network adapter, and the CPUs and NUMA nodes it sits by.

These are what the right-hand columns of `nvidia-smi topo -m` say. A GPU whose NIC hangs off
another socket (SYS where PIX was bought) or whose CPU list moved after a BIOS change trains
slower without failing anything else.
"""

from __future__ import annotations

from gpuaccept.checks.declare import GPU, check
from gpuaccept.checks.inventory import present_gpu
from gpuaccept.checks.verdict import Described, Equals, Judge, Verdict
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.affinity import cpu_set
from gpuaccept.vocabulary.links import PCIE_LEVELS, gpu_key


@check(subjects=GPU)
def nic_affinity(judge: Judge, profile: Profile, facts: Facts, index: int) -> Verdict:
    """The GPU's closest NIC is at the PCIe distance the profile states, or closer."""
    wanted = profile.expected_nic(index)
    if wanted is None:
        return judge.not_applicable(gpu_key(index), "the profile states no NIC for this GPU")
    rule = f"a NIC at {wanted.link} or closer" + (f", {wanted.nic}" if wanted.nic else "")
    criterion = Described(rule)
    gpu = present_gpu(judge, facts, index, "closest NIC", criterion)
    if isinstance(gpu, Verdict):
        return gpu
    if isinstance(gpu.nics, Unavailable):
        return judge.unavailable(gpu_key(index), "closest NIC:", gpu.nics, criterion)
    if not gpu.nics:
        return judge.failed(gpu_key(index), f"no NIC found, expected {rule}", "no NIC", criterion)
    best = min(PCIE_LEVELS.index(n.link) for n in gpu.nics)
    closest = [n.nic for n in gpu.nics if PCIE_LEVELS.index(n.link) == best]
    measured = f"{'/'.join(closest)} at {PCIE_LEVELS[best]}"
    if best > PCIE_LEVELS.index(wanted.link):
        return judge.failed(gpu_key(index), f"closest NIC {measured}, expected {rule}", measured, criterion)
    if wanted.nic and wanted.nic not in [n.nic for n in gpu.nics if PCIE_LEVELS.index(n.link) <= PCIE_LEVELS.index(wanted.link)]:
        return judge.failed(gpu_key(index), f"closest NIC {measured}, expected {rule}", measured, criterion)
    return judge.passed(gpu_key(index), f"closest NIC {measured}", measured, criterion)


def _cpu_list_verdict(judge: Judge, what: str, profile: Profile, facts: Facts, index: int) -> Verdict:
    check = judge.check
    affinity = profile.spec.affinity
    table = getattr(affinity, "cpu" if check == "cpu_affinity" else "numa") if affinity else {}
    wanted = table.get(gpu_key(index))
    if wanted is None:
        return judge.not_applicable(gpu_key(index), f"the profile states no {what} for this GPU")
    criterion = Equals(wanted)
    gpu = present_gpu(judge, facts, index, what, criterion)
    if isinstance(gpu, Verdict):
        return gpu
    found = getattr(gpu, check)
    if isinstance(found, Unavailable):
        return judge.unavailable(gpu_key(index), what, found, criterion)
    try:
        same = cpu_set(found) == cpu_set(wanted)
    except ValueError:
        return judge.error(gpu_key(index), f"{what} {found!r} is not a list of numbers", criterion)
    if same:
        return judge.passed(gpu_key(index), f"{what} {found}", found, criterion)
    return judge.failed(gpu_key(index), f"{what} {found}, expected {wanted}", found, criterion)


@check(subjects=GPU)
def cpu_affinity(judge: Judge, profile: Profile, facts: Facts, index: int) -> Verdict:
    """The GPU's CPU affinity is the CPU list the profile states."""
    return _cpu_list_verdict(judge, "CPU affinity", profile, facts, index)


@check(subjects=GPU)
def numa_affinity(judge: Judge, profile: Profile, facts: Facts, index: int) -> Verdict:
    """The GPU's NUMA affinity is the node list the profile states."""
    return _cpu_list_verdict(judge, "NUMA affinity", profile, facts, index)
