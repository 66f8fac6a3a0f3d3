"""The values each measurement stage yields, and the checks that judge them.

One table for the two places that go over a stage's values: a standard run measuring a missed
value again before it fails (stages/store.py, confirm-before-failing) and a burn-in judging each
value over its rounds (checks/burnin.py). A stage's new check is added here once. Each entry names
its subjects (the GPUs, pairs or cases a profile asks for; none where the profile sets no floor)
and how a subject is written in a test id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuaccept.checks import compute, ddp, fabric
from gpuaccept.checks.verdict import Verdict
from gpuaccept.facts.model import Facts
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.copies import CopyKind
from gpuaccept.vocabulary.links import gpu_key, pair_key
from gpuaccept.vocabulary.steps import LoadKey, LoadKind, StepKey

Check = Callable[[Profile, Facts, Any], Verdict]
Subjects = Callable[[Profile], list[Any]]


def _gpus(profile: Profile) -> list[Any]:
    return list(range(profile.gpu_count))


def _copies(kind: CopyKind, subjects: Subjects) -> Subjects:
    def asked(profile: Profile) -> list[Any]:
        copies = profile.spec.copies
        return subjects(profile) if copies is not None and copies.floor(kind) is not None else []

    return asked


def _gpus_if_compute(profile: Profile) -> list[Any]:
    return _gpus(profile) if profile.spec.compute is not None else []


def _pairs_if_pairwise(profile: Profile) -> list[Any]:
    return list(profile.gpu_pairs()) if profile.spec.pairwise is not None else []


def _busbw_cases(profile: Profile) -> list[Any]:
    return list(fabric.busbw_cases(profile))


def _case_id(case: Any) -> str:
    return fabric.case_id(*case)


def _pair_id(pair: Any) -> str:
    return pair_key(*pair)


def _load(what: LoadKind) -> Callable[[Any], LoadKey]:
    def key(gpu: Any) -> LoadKey:
        return LoadKey(what, gpu)

    return key


@dataclass(frozen=True)
class StageValue:
    check: Check
    subjects: Subjects
    name_of: Callable[[Any], str]
    measured_again: bool = True  # a miss is measured again before it fails
    in_burnin: bool = True  # judged over a burn-in's rounds
    # a bandwidth shared with the sustained load is no sample of the unloaded one: in a burn-in round
    # beside the load only its wrong data and hangs count
    judged_beside_load: bool = True
    # the value's key where some rounds of its stage do not measure it (the memory test runs at an
    # interval): a burn-in judges it over the rounds that did
    key_of: Callable[[Any], StepKey] | None = None


STAGE_VALUES: dict[str, list[StageValue]] = {
    "compute": [
        StageValue(compute.gemm_throughput, _gpus_if_compute, gpu_key, key_of=_load("gemm")),
        # its limit moves with the other GPUs, which measuring one GPU again does not measure
        StageValue(compute.gemm_within_best, _gpus_if_compute, gpu_key, measured_again=False, key_of=_load("gemm")),
        # wrong data is final
        StageValue(compute.gemm_correct, _gpus_if_compute, gpu_key, measured_again=False, key_of=_load("gemm")),
        StageValue(compute.hbm_copy, _gpus_if_compute, gpu_key, key_of=_load("hbm_copy")),
        StageValue(compute.hbm_triad, _gpus_if_compute, gpu_key, key_of=_load("hbm_triad")),
        # a mismatch is final
        StageValue(compute.memtest, _gpus_if_compute, gpu_key, measured_again=False, key_of=_load("memtest")),
    ],
    "nccl": [
        StageValue(fabric.busbw, _busbw_cases, _case_id, judged_beside_load=False),
        StageValue(fabric.collective_correct, _busbw_cases, _case_id, measured_again=False),  # wrong data is final
        StageValue(fabric.pair_busbw, _pairs_if_pairwise, _pair_id, judged_beside_load=False),
    ],
    "copies": [
        StageValue(fabric.local_copy, _copies("local", _gpus), gpu_key, judged_beside_load=False),
        StageValue(fabric.host_to_device, _copies("host_to_device", _gpus), gpu_key, judged_beside_load=False),
        StageValue(fabric.device_to_host, _copies("device_to_host", _gpus), gpu_key, judged_beside_load=False),
        StageValue(fabric.p2p_copy, _copies("p2p", lambda p: list(p.ordered_gpu_pairs())), _pair_id, judged_beside_load=False),
        StageValue(
            fabric.p2p_copy_bidirectional, _copies("p2p_bidirectional", lambda p: list(p.gpu_pairs())), _pair_id,
            judged_beside_load=False,
        ),
    ],
    # the burn-in loops the per-GPU loads and the fabric; DDP training is the standard run's
    "ddp": [
        StageValue(check, ddp.ddp_cases, str, in_burnin=False)
        for check in (ddp.scaling, ddp.exposed_communication, ddp.nvlink_speedup)
    ],
}
