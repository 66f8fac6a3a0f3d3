"""What a suite's test needs, said by markers on the suite and read by the one `facts` fixture.

    pytestmark = [pytest.mark.levels("standard"), pytest.mark.needs("nccl")]

- `levels(*levels)`: the levels that run the test (plugin/levels.py); a test without it runs at every level;
- `needs(*what, per_gpu=False)`: what its facts hold besides the machine's own readings. Each of
  `what` is a stage's name (registry.py: copies, compute, ddp, nccl, measured on first ask),
  `every_stage`, `burnin` (the burn-in's rounds), `level_loads` (what the run's level loads: every
  stage at the standard level, the burn-in's rounds at the burn-in level, nothing at the quick
  level) or `telemetry` (sampled while the level's loads ran; it asks for them first).
  `per_gpu=True`: a per-GPU stage's loads of this test's GPU (`gpu` parameter); the first ask loads
  every GPU at once (under pytest-xdist, every GPU no other worker holds);
- `health_run` (plugin/health.py) also asks for the level's loads, with the health readings taken
  after each stage and the XID events heard meanwhile; `health_state` asks for nothing more.

The marker closest to the test wins: a test's own `needs` replaces its module's.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gpuaccept.stages.registry import STAGES

LEVELS_MARK = "levels"
NEEDS_MARK = "needs"
HEALTH_RUN_MARK = "health_run"
EVERY_STAGE = "every_stage"
BURNIN = "burnin"
LEVEL_LOADS = "level_loads"
TELEMETRY = "telemetry"
MORE = (EVERY_STAGE, BURNIN, LEVEL_LOADS, TELEMETRY)


@dataclass(frozen=True)
class Needs:
    stages: tuple[str, ...] = ()
    per_gpu: bool = False
    burnin: bool = False
    level_loads: bool = False
    telemetry: bool = False
    health: bool = False

    @property
    def reads_burnin(self) -> bool:
        """Whether the test judges a burn-in's rounds, or the telemetry of the time they ran."""
        return self.burnin or self.telemetry


def register_markers(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{LEVELS_MARK}(*levels): the gpu-accept levels that run this test (--level)")
    config.addinivalue_line(
        "markers",
        f"{NEEDS_MARK}(*what, per_gpu=False): what the test's facts hold: stages ({', '.join(STAGES)}) or {', '.join(MORE)}",
    )


def needs_of(item: pytest.Item) -> Needs:
    """What `item`'s markers ask its facts to hold; a usage error for a word that is not a need."""
    marker = item.get_closest_marker(NEEDS_MARK)
    what: tuple[str, ...] = tuple(marker.args) if marker else ()
    unknown = [word for word in what if word not in STAGES and word not in MORE]
    if unknown:
        raise pytest.UsageError(
            f"gpu-accept: {item.nodeid}: needs({', '.join(map(repr, unknown))}): not a need "
            f"(a stage: {', '.join(STAGES)}; or {', '.join(MORE)})"
        )
    health = item.get_closest_marker(HEALTH_RUN_MARK) is not None
    stages = tuple(STAGES) if EVERY_STAGE in what else tuple(stage for stage in STAGES if stage in what)
    return Needs(
        stages=stages,
        per_gpu=bool(marker and marker.kwargs.get("per_gpu", False)),
        burnin=BURNIN in what,
        level_loads=LEVEL_LOADS in what or TELEMETRY in what or health,
        telemetry=TELEMETRY in what,
        health=health,
    )


def stages_asked(needs: Needs, level: str) -> list[str]:
    """The stages a test with `needs` has measured at `level`, in the order it asks for them: with
    the level's loads, every stage at the standard level, none at the quick level (it loads
    nothing) nor in a burn-in (its rounds measure)."""
    stages = set(STAGES) if needs.level_loads and level not in ("quick", "burn-in") else set(needs.stages)
    return [name for name in STAGES if name in stages]
