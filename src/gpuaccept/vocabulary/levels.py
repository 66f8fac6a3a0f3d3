"""The levels a run is picked at by name (--level), and the suites each runs, by module name
(plugin/levels.py selects the tests; the command line and README say what each level holds)."""

from __future__ import annotations

LEVELS = ("quick", "standard", "burn-in")
DEFAULT_LEVEL = "standard"

_QUICK = frozenset({"test_inventory", "test_topology", "test_p2p", "test_health"})
LEVEL_SUITES: dict[str, frozenset[str]] = {
    "quick": _QUICK,
    "standard": _QUICK | {"test_nccl", "test_bandwidth", "test_ddp", "test_compute", "test_telemetry", "test_baseline"},
    "burn-in": _QUICK | {"test_burnin", "test_telemetry"},
}
KNOWN_SUITES = frozenset().union(*LEVEL_SUITES.values())
# what `--help` and the README say of each level
LEVEL_HELP = (
    "quick: health readings, inventory, topology, P2P, no load (seconds); "
    "standard: quick + every measurement the profile asks for, with telemetry (default; about a minute); "
    "burn-in: quick + the load stages in rounds for the duration, every round judged, with telemetry"
)
