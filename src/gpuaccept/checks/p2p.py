"""Peer-to-peer capability per ordered GPU pair: NVML against the profile, and CUDA against NVML."""

from __future__ import annotations

from gpuaccept.checks.declare import GPU_ORDERED_PAIR, check
from gpuaccept.checks.verdict import Criterion, Described, Equals, Judge, Verdict
from gpuaccept.facts.machine import P2PFacts
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.links import gpu_key, pair_key

AGREES = Described("CUDA agrees with NVML")
# the profile's name of a capability -> the facts' (NVML's index 4 is PROP in nvidia-smi, PCI in the bindings)
FACTS_KEY = {"prop": "pci"}


def _state(wanted: bool) -> str:
    return "OK" if wanted else "not OK"


def _pair_facts(judge: Judge, facts: Facts, pair: tuple[int, int], criterion: Criterion) -> P2PFacts | Verdict:
    src, dst = pair
    subject = pair_key(src, dst)
    missing = [g for g in pair if facts.gpu(g) is None]
    if missing:
        return judge.failed(subject, f"P2P: {gpu_key(missing[0])} not present ({facts.gpu_count} GPU(s) under test)", None, criterion)
    found = facts.p2p_of(src, dst)
    if found is None:
        return judge.error(subject, "P2P: the facts hold no entry for this pair", criterion)
    return found


@check(subjects=GPU_ORDERED_PAIR)
def p2p_capability(judge: Judge, profile: Profile, facts: Facts, pair: tuple[int, int]) -> Verdict:
    """NVML's peer-to-peer capabilities of an ordered pair are what the profile expects."""
    subject = pair_key(*pair)
    caps = profile.expected_p2p(*pair)
    stated = caps.stated() if caps else {}
    if not stated:
        return judge.not_applicable(subject, "the profile states no P2P capability for this pair")
    expected_text = " ".join(f"{name}={_state(wanted)}" for name, wanted in stated.items())
    criterion = Equals(expected_text)
    found = _pair_facts(judge, facts, pair, criterion)
    if isinstance(found, Verdict):
        return found
    measured = " ".join(f"{name}={found.nvml.get(FACTS_KEY.get(name, name))}" for name in stated)
    wrong, unreadable = [], []
    for name, wanted in stated.items():
        status = found.nvml.get(FACTS_KEY.get(name, name))
        if isinstance(status, Unavailable) or status is None or status == "UNKNOWN":
            unreadable.append(f"{name} {status if status is not None else 'not probed'}")
        elif (status == "OK") != wanted:
            wrong.append(f"{name} {status}, expected {_state(wanted)}")
    if wrong:
        return judge.failed(subject, "P2P " + "; ".join(wrong + unreadable), measured, criterion)
    if unreadable:
        return judge.error(subject, "P2P status unreadable: " + "; ".join(unreadable), criterion)
    return judge.passed(subject, "P2P " + measured, measured, criterion)


@check(subjects=GPU_ORDERED_PAIR)
def p2p_cuda_agrees(judge: Judge, profile: Profile, facts: Facts, pair: tuple[int, int]) -> Verdict:
    """CUDA's cudaDeviceCanAccessPeer must agree with NVML's read and write status.

    A disagreement means the driver and the runtime see the machine differently: a P2P-disabling
    driver setting, an IOMMU or ACS configuration, or a broken probe. Either way it is a finding.
    """
    subject = pair_key(*pair)
    found = _pair_facts(judge, facts, pair, AGREES)
    if isinstance(found, Verdict):
        return found
    read, write = found.nvml.get("read"), found.nvml.get("write")
    cuda = found.cuda_can_access_peer
    if isinstance(cuda, Unavailable):
        return judge.error(subject, f"CUDA peer access could not be read: {cuda}", AGREES)
    if not isinstance(read, str) or not isinstance(write, str):
        return judge.error(subject, f"NVML P2P status unreadable: read {read}, write {write}", AGREES)
    nvml_says = read == "OK" and write == "OK"
    criterion = Equals("yes" if nvml_says else "no")
    measured = "yes" if cuda else "no"
    return judge(subject, "CUDA peer access", measured, criterion, note=f"NVML read {read}, write {write}")
