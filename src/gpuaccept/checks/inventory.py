"""Inventory checks: the GPUs the profile names, their memory and ECC, the driver and CUDA."""

from __future__ import annotations

from gpuaccept.checks.declare import GPU, check
from gpuaccept.checks.verdict import AtLeast, AtLeastVersion, Better, Criterion, Equals, Judge, MatchesAny, Verdict
from gpuaccept.facts.machine import GpuFacts
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.links import gpu_key
from gpuaccept.vocabulary.sizes import GIB


def present_gpu(judge: Judge, facts: Facts, index: int, what: str, criterion: Criterion) -> GpuFacts | Verdict:
    """The GPU's facts, or the failure verdict that says it is not there."""
    gpu = facts.gpu(index)
    if gpu is None:
        return judge.failed(
            gpu_key(index),
            f"{what}: GPU not present ({_found(facts)})",
            None,
            criterion,
        )
    return gpu


def _found(facts: Facts) -> str:
    text = f"{facts.gpu_count} GPU(s) under test"
    visible = facts.environment.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        text += f", CUDA_VISIBLE_DEVICES={visible}"
    if facts.system.nvml_gpu_count != facts.gpu_count:
        text += f", {facts.system.nvml_gpu_count} in the machine"
    hidden = facts.hidden_gpus
    if hidden:
        why = "hidden by CUDA_VISIBLE_DEVICES" if visible is not None else "not visible to CUDA"
        text += f"; {why}: " + ", ".join(f"NVML GPU {g.nvml_index} ({g.name}, bus {g.pci_bus_id}, {g.uuid})" for g in hidden)
    unseen = facts.system.unseen_pci_gpus
    if unseen:
        text += f"; on the PCI bus but not seen by the driver (NVML): bus {', '.join(unseen)}"
    return text


@check(root="absent_gpus")
def gpu_count(judge: Judge, profile: Profile, facts: Facts) -> Verdict:
    """The number of GPUs under test is the profile's `gpus.count`. Where GPUs are missing, it names
    them: the root cause of every check of theirs, and of the collectives and DDP settings they are in."""
    criterion = Equals(profile.gpu_count)
    measured = facts.gpu_count
    if criterion.holds(measured):
        return judge(facts.system.hostname, "GPU count", measured, criterion)
    verdict = judge.failed(
        facts.system.hostname, f"found {measured} GPU(s), expected {profile.gpu_count} ({_found(facts)})", measured, criterion
    )
    return verdict.model_copy(update={"gpus": [gpu for gpu in range(profile.gpu_count) if facts.gpu(gpu) is None]})


@check(subjects=GPU)
def gpu_model(judge: Judge, profile: Profile, facts: Facts, index: int) -> Verdict:
    """The GPU's model name matches one of the profile's `gpus.model` patterns."""
    criterion = MatchesAny(tuple(profile.spec.gpus.model))
    gpu = present_gpu(judge, facts, index, "model", criterion)
    if isinstance(gpu, Verdict):
        return gpu
    return judge(gpu_key(index), "model", gpu.name, criterion, note=f"bus {gpu.pci_bus_id}" if gpu.pci_bus_id else "")


@check(subjects=GPU, metric=True, better=Better.HIGHER)
def gpu_memory(judge: Judge, profile: Profile, facts: Facts, index: int) -> Verdict:
    """The GPU's total memory is at least the profile's `gpus.memory_min_gib`."""
    minimum = profile.spec.gpus.memory_min_gib
    if minimum is None:
        return judge.not_applicable(gpu_key(index), "the profile sets no memory minimum")
    criterion = AtLeast(minimum, "GiB")
    gpu = present_gpu(judge, facts, index, "memory", criterion)
    if isinstance(gpu, Verdict):
        return gpu
    total = gpu.memory_total_bytes
    return judge(gpu_key(index), "memory", total if isinstance(total, Unavailable) else total / GIB, criterion)


@check(subjects=GPU)
def ecc_mode(judge: Judge, profile: Profile, facts: Facts, index: int) -> Verdict:
    """ECC is in the state the profile's `gpus.ecc` asks for."""
    wanted = profile.spec.gpus.ecc
    if wanted is None:
        return judge.not_applicable(gpu_key(index), "the profile states no ECC mode")
    criterion = Equals(wanted)
    gpu = present_gpu(judge, facts, index, "ECC", criterion)
    if isinstance(gpu, Verdict):
        return gpu
    reading = gpu.ecc_enabled
    measured = reading if not isinstance(reading, bool) else ("enabled" if reading else "disabled")
    if wanted == "disabled" and not isinstance(reading, bool) and reading.unavailable == "not_supported":
        measured = "disabled"  # a GPU without ECC has it off; NVML says "not supported"
    return judge(gpu_key(index), "ECC", measured, criterion)


@check()
def driver_version(judge: Judge, profile: Profile, facts: Facts) -> Verdict:
    """The NVIDIA driver is at least the profile's `software.driver_min`."""
    software = profile.spec.software
    if software is None or software.driver_min is None:
        return judge.not_applicable(facts.system.hostname, "the profile sets no minimum driver")
    return judge(facts.system.hostname, "driver", facts.system.driver_version, AtLeastVersion(software.driver_min))


@check()
def cuda_version(judge: Judge, profile: Profile, facts: Facts) -> Verdict:
    """The CUDA version the driver supports is at least the profile's `software.cuda_min`."""
    software = profile.spec.software
    if software is None or software.cuda_min is None:
        return judge.not_applicable(facts.system.hostname, "the profile sets no minimum CUDA version")
    return judge(facts.system.hostname, "CUDA (driver)", facts.system.cuda_driver_version, AtLeastVersion(software.cuda_min))
