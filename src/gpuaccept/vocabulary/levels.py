"""The levels a run is picked at by name (--level). Which tests each runs, each suite says with a
`levels` marker (plugin/levels.py selects by it; the command line and README say what each level holds)."""

from __future__ import annotations

LEVELS = ("quick", "standard", "burn-in")
DEFAULT_LEVEL = "standard"
# what `--help` and the README say of each level
LEVEL_HELP = (
    "quick: health readings, inventory, topology, P2P, no load (seconds); "
    "standard: quick + every measurement the profile asks for, with telemetry (default; about a minute); "
    "burn-in: quick + the load stages in rounds for the duration, every round judged, with telemetry"
)
