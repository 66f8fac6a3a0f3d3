"""Test ids from the profile: a suite asks for `gpu`, `gpu_pair` or `gpu_ordered_pair` and gets
one test per GPU or pair the profile expects, named like the hardware: `test_link_type[gpu0-gpu1]`.

Ids come from the profile, not from what was found, so a missing GPU fails its own tests instead
of making them disappear, and ids stay the same from machine to machine (baselines, fleets).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from gpuaccept.checks.burnin import burnin_cases
from gpuaccept.checks.ddp import ddp_cases
from gpuaccept.checks.fabric import busbw_cases, case_id
from gpuaccept.checks.health import gpu_links, link_id
from gpuaccept.profile import Profile
from gpuaccept.vocabulary.links import gpu_key, pair_key


def parametrize_from_profile(metafunc: pytest.Metafunc, profile: Profile) -> None:
    families: dict[str, tuple[Sequence[Any], Callable[[Any], str], str]] = {
        "gpu": (list(range(profile.gpu_count)), gpu_key, "no GPUs"),
        "gpu_pair": (profile.gpu_pairs(), lambda p: pair_key(*p), "no GPU pairs"),
        "gpu_ordered_pair": (profile.ordered_gpu_pairs(), lambda p: pair_key(*p), "no GPU pairs"),
        "busbw_case": (busbw_cases(profile), lambda c: case_id(*c), "no collective bandwidth floors"),
        "ddp_case": (ddp_cases(profile), str, "no DDP settings"),
        "burnin_case": (burnin_cases(profile), lambda c: c.id, "no values a burn-in measures"),
        "gpu_link": (gpu_links(profile), link_id, "no NVLinks"),
    }
    for name, (values, make_id, nothing) in families.items():
        if name not in metafunc.fixturenames:
            continue
        if values:
            metafunc.parametrize(name, values, ids=[make_id(v) for v in values])
        else:
            reason = f"profile {profile.name} has {nothing} to test ({profile.gpu_count} GPU(s))"
            metafunc.parametrize(name, [pytest.param(None, marks=pytest.mark.skip(reason=reason))], ids=["none"])
