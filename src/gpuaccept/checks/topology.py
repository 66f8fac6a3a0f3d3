"""Topology checks: PCIe link state per GPU, NVLink per GPU, NVSwitch fabric, link type per pair."""

from __future__ import annotations

from gpuaccept.checks.declare import GPU, GPU_PAIR, check
from gpuaccept.checks.inventory import present_gpu
from gpuaccept.checks.verdict import AtLeast, Better, Equals, Judge, Verdict
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.links import gpu_key, pair_key
from gpuaccept.vocabulary.measures import Measure
from gpuaccept.vocabulary.nvml_codes import FABRIC_STATE_NAMES, NVLINK_VERSION_NAMES


@check(subjects=GPU, metric=True, better=Better.HIGHER)
def pcie_generation(judge: Judge, profile: Profile, facts: Facts, index: int) -> Verdict:
    """The GPU's PCIe link reaches the profile's generation."""
    pcie = profile.spec.pcie
    if pcie is None or pcie.generation is None:
        return judge.not_applicable(gpu_key(index), "the profile sets no PCIe generation")
    criterion = AtLeast(pcie.generation)
    gpu = present_gpu(judge, facts, index, "PCIe generation", criterion)
    if isinstance(gpu, Verdict):
        return gpu
    link = gpu.pcie
    if pcie.idle_downshift:
        # this GPU lowers its link speed when idle: judge what the link can do, not its idle state
        return judge(gpu_key(index), "PCIe max generation", link.generation_max, criterion, note=f"current gen {link.generation_current}")
    return judge(
        gpu_key(index),
        "PCIe generation",
        link.generation_current,
        criterion,
        note=f"link max gen {link.generation_max}, GPU max gen {link.generation_gpu_max}",
    )


@check(subjects=GPU, metric=True, better=Better.HIGHER)
def pcie_width(judge: Judge, profile: Profile, facts: Facts, index: int) -> Verdict:
    """The GPU's PCIe link runs at the profile's width (lanes) or wider."""
    pcie = profile.spec.pcie
    if pcie is None or pcie.width is None:
        return judge.not_applicable(gpu_key(index), "the profile sets no PCIe width")
    criterion = AtLeast(pcie.width, "lanes")
    gpu = present_gpu(judge, facts, index, "PCIe width", criterion)
    if isinstance(gpu, Verdict):
        return gpu
    return judge(gpu_key(index), "PCIe width", gpu.pcie.width_current, criterion, note=f"link max x{gpu.pcie.width_max}")


@check(subjects=GPU)
def nvlink_links(judge: Judge, profile: Profile, facts: Facts, index: int) -> Verdict:
    """The GPU has as many active NVLinks as the profile expects."""
    nvlink = profile.spec.nvlink
    if nvlink is None:
        return judge.not_applicable(gpu_key(index), "the profile states no NVLink expectation")
    wanted = profile.expected_active_links(index)
    criterion = Equals(wanted, "links")
    gpu = present_gpu(judge, facts, index, "active NVLinks", criterion)
    if isinstance(gpu, Verdict):
        return gpu
    links = gpu.nvlinks
    if isinstance(links, Unavailable):
        if wanted == 0 and links.unavailable == "not_supported":
            return judge.passed(gpu_key(index), "no NVLink (NVML: not supported)", 0, criterion)
        return judge.unavailable(gpu_key(index), "NVLink state", links, criterion)
    allowed_down = profile.inactive_links_by_design(index)
    active = [link.link for link in links if link.active]
    down = [link.link for link in links if not link.active and link.link not in allowed_down]
    measured = len(active)
    if measured == wanted and not down:
        return judge.passed(gpu_key(index), f"{measured} NVLinks active", measured, criterion)
    detail = f"{measured} NVLinks active, expected {wanted}"
    if down:
        detail += f" (down, not by design: link {', '.join(str(d) for d in down)})"
    return judge.failed(gpu_key(index), detail, measured, criterion)


@check(subjects=GPU)
def nvlink_version(judge: Judge, profile: Profile, facts: Facts, index: int) -> Verdict:
    """The GPU's NVLink version is the profile's."""
    nvlink = profile.spec.nvlink
    if nvlink is None or nvlink.version is None:
        return judge.not_applicable(gpu_key(index), "the profile states no NVLink version")
    criterion = Equals(nvlink.version)
    gpu = present_gpu(judge, facts, index, "NVLink version", criterion)
    if isinstance(gpu, Verdict):
        return gpu
    links = gpu.nvlinks
    if isinstance(links, Unavailable):
        return judge.unavailable(gpu_key(index), "NVLink version", links, criterion)
    unread = [link.version for link in links if link.active and isinstance(link.version, Unavailable)]
    if unread and len(unread) == sum(1 for link in links if link.active):
        return judge.unavailable(gpu_key(index), "NVLink version", unread[0], criterion)
    versions = sorted({_version_name(link.version) for link in links if link.active})
    if not versions:
        return judge.failed(gpu_key(index), "NVLink version: no active link to read it from", None, criterion)
    measured = versions[0] if len(versions) == 1 else "/".join(versions)
    return judge(gpu_key(index), "NVLink version", measured, criterion)


def _version_name(code: int | Unavailable) -> str:
    if isinstance(code, Unavailable):
        return f"unreadable ({code.unavailable})"
    return NVLINK_VERSION_NAMES.get(code, f"code {code}")


@check(subjects=GPU)
def fabric_state(judge: Judge, profile: Profile, facts: Facts, index: int) -> Verdict:
    """The GPU's NVSwitch fabric registration is in the state the profile expects."""
    fabric = profile.spec.fabric
    if fabric is None:
        return judge.not_applicable(gpu_key(index), "the profile states no NVSwitch fabric expectation")
    criterion = Equals(fabric.state)
    gpu = present_gpu(judge, facts, index, "fabric state", criterion)
    if isinstance(gpu, Verdict):
        return gpu
    info = gpu.fabric
    if isinstance(info, Unavailable):
        if fabric.state == "not_supported" and info.unavailable == "not_supported":
            return judge.passed(gpu_key(index), "fabric state not supported", "not_supported", criterion)
        return judge.unavailable(gpu_key(index), "fabric state", info, criterion)
    state = FABRIC_STATE_NAMES.get(info.state, f"state {info.state}")
    if state == "completed" and info.status != 0:
        return judge.failed(
            gpu_key(index), f"fabric registration completed with NVML error status {info.status}, expected success", state, criterion
        )
    return judge(gpu_key(index), "fabric state", state, criterion, note=f"clique {info.clique_id}" if state == "completed" else "")


@check(subjects=GPU_PAIR, measure=Measure.LINK_TYPE)
def link_type(judge: Judge, profile: Profile, facts: Facts, pair: tuple[int, int]) -> Verdict:
    """The link between two GPUs (NVLink or the PCIe path) is the type the profile expects."""
    a, b = pair
    subject = pair_key(a, b)
    expected = profile.expected_link(a, b)
    if expected is None:
        return judge.not_applicable(subject, "the profile states no link type for this pair")
    criterion = Equals(expected)
    missing = [g for g in pair if facts.gpu(g) is None]
    if missing:
        return judge.failed(
            subject, f"link type: {gpu_key(missing[0])} not present ({facts.gpu_count} GPU(s) under test)", None, criterion
        )
    link = facts.link(a, b)
    if link is None:
        return judge.error(subject, "link type: the facts hold no entry for this pair", criterion)
    rebuilt = "via NVSwitch" if link.via_switch else (f"{link.direct_nvlinks} direct NVLinks" if link.direct_nvlinks else "PCIe")
    evidence = link.evidence or rebuilt  # where the link type was read; NVML's evidence otherwise
    return judge(subject, "link type", link.link_type, criterion, note=evidence)
