"""The values each measurement stage yields, and the checks that judge them: a view of the checks'
own declarations (checks/declare.py), for the two places that go over a stage's values: a standard
run measuring a missed value again before it fails (stages/store.py, confirm-before-failing) and a burn-in judging
each value over its rounds (checks/burnin.py). A stage's new check declares its stage where it is
written (`@check(stage="copies", ...)`), in whichever module of checks it belongs to, and appears here:
the view is read from every declared check when it is asked for, not from the modules that happened
to be imported before it. Each entry names its subjects (the GPUs, pairs or cases a profile asks the
stage for; none where the profile sets no floor) and how a subject is written in a test id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuaccept.checks.declare import Declaration, DeclaredCheck, declared_checks
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.steps import StageName, StepKey

Check = DeclaredCheck[Any]

# the order the burn-in's values are listed in: the load's first, then the fabric's
STAGE_ORDER: tuple[StageName, ...] = ("compute", "nccl", "copies", "ddp")


@dataclass(frozen=True)
class StageValue:
    """A check of a stage's value, read from its declaration: the subjects the profile asks the
    stage for, how one is written in a test id, and how a miss, a burn-in and the sustained load
    treat the value (Declaration says what each means)."""

    check: Check

    @property
    def declaration(self) -> Declaration:
        return self.check.declaration

    def subjects(self, profile: Profile) -> list[Any]:
        """The subjects of this value the profile asks for: none where it sets no floor."""
        asked = self.declaration.asked is None or self.declaration.asked(profile)
        return list(self.declaration.subjects.of(profile)) if asked else []

    def name_of(self, subject: Any) -> str:
        return self.declaration.subjects.id_of(subject)

    @property
    def measured_again(self) -> bool:
        return self.declaration.measured_again

    @property
    def in_burnin(self) -> bool:
        return self.declaration.in_burnin

    @property
    def judged_beside_load(self) -> bool:
        return self.declaration.judged_beside_load

    @property
    def key_of(self) -> Callable[[Any], StepKey] | None:
        return self.declaration.key_of


def stage_values() -> dict[StageName, list[StageValue]]:
    """Each stage's values, in STAGE_ORDER: every declared check of the stage, in the order of the
    declarations (checks/declare.py's declared_checks)."""
    declared = declared_checks(runner=None)
    return {stage: [StageValue(found) for found in declared if found.declaration.stage == stage] for stage in STAGE_ORDER}


def stages_asked(profile: Profile) -> list[StageName]:
    """The stages `profile` asks for a value of: what a standard run loads the GPUs with. Facts that
    hold no load could not judge what a load shows (health after it, telemetry under it) where this
    is not empty."""
    return [stage for stage, values in stage_values().items() if any(value.subjects(profile) for value in values)]
