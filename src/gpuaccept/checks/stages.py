"""The values each measurement stage yields, and the checks that judge them: a view of the checks'
own declarations (checks/declare.py), for the two places that go over a stage's values: a standard
run measuring a missed value again before it fails (stages/store.py, confirm-before-failing) and a burn-in judging
each value over its rounds (checks/burnin.py). A stage's new check declares its stage where it is
written (`@check(stage="copies", ...)`) and appears here. Each entry names its subjects (the GPUs,
pairs or cases a profile asks the stage for; none where the profile sets no floor) and how a subject
is written in a test id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuaccept.checks import compute, ddp, fabric  # noqa: F401 (their declarations fill the registry)
from gpuaccept.checks.declare import REGISTRY, Declaration, DeclaredCheck
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.steps import StageName, StepKey

Check = DeclaredCheck[Any]
Subjects = Callable[[Profile], list[Any]]

# the order the burn-in's values are listed in: the load's first, then the fabric's
STAGE_ORDER: tuple[StageName, ...] = ("compute", "nccl", "copies", "ddp")


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


def _asked_subjects(declaration: Declaration) -> Subjects:
    def subjects(profile: Profile) -> list[Any]:
        asked = declaration.asked is None or declaration.asked(profile)
        return list(declaration.subjects.of(profile)) if asked else []

    return subjects


def _value(declared: Check) -> StageValue:
    declaration = declared.declaration
    return StageValue(
        declared, _asked_subjects(declaration), declaration.subjects.id_of, declaration.measured_again, declaration.in_burnin,
        declaration.judged_beside_load, declaration.key_of,
    )


STAGE_VALUES: dict[str, list[StageValue]] = {
    stage: [_value(declared) for declared in REGISTRY.values() if declared.declaration.stage == stage] for stage in STAGE_ORDER
}
