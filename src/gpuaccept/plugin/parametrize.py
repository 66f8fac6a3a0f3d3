"""Test ids from the profile: a suite asks for a kind of subject by its fixture (`gpu`, `gpu_pair`,
`busbw_case`...) and gets one test per subject the profile expects, named like the hardware:
`test_link_type[gpu0-gpu1]`. The kinds of subject, with their ids, are the checks' declarations
(checks/declare.py).

Ids come from the profile, not from what was found, so a missing GPU fails its own tests instead
of making them disappear, and ids stay the same from machine to machine (baselines, fleets).
"""

from __future__ import annotations

import pytest

from gpuaccept.checks.declare import subject_kinds
from gpuaccept.profile import Profile


def parametrize_from_profile(metafunc: pytest.Metafunc, profile: Profile) -> None:
    for name, kind in subject_kinds().items():
        if name not in metafunc.fixturenames:
            continue
        values = kind.of(profile)
        if values:
            metafunc.parametrize(name, values, ids=[kind.id_of(v) for v in values])
        else:
            reason = f"profile {profile.name} has {kind.nothing} to test ({profile.gpu_count} GPU(s))"
            metafunc.parametrize(name, [pytest.param(None, marks=pytest.mark.skip(reason=reason))], ids=["none"])
