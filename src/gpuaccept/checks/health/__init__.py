"""Health checks: NVML error counters, XIDs, throttling and software state, per GPU (per link for
NVLink), from the health snapshots in the facts.

Two families. State checks judge the first snapshot ("start", before any load): what a quick
gate between jobs needs. Run checks judge the change from the first snapshot to the last (a delta
the run caused is the strongest evidence) and the readings taken after load; with one snapshot
only, no load ran: they could not judge where the profile asks for loads (facts recorded without
them), and judge nothing where it asks for none. Facts with no health readings at all could not
judge any of them. A reading NVML did not give ("not supported", not in a
recording) makes the check not applicable, with the reason: never a pass, never a 0.

One module of checks for the suites (suites/test_health.py, the `health` area), in rooms by what
they read: snapshots.py how every check reads a GPU's snapshots; memory.py what the memory recorded
by the start; state.py the software and firmware state; xids.py the XIDs before and during the run;
counters.py the error counters' growth over the run (ECC, row remaps, PCIe, NVLink); thermal.py
clocks held down and temperatures. They are imported here in the suites' order, which is the order
of their checks in every list read from the declarations.
"""

from __future__ import annotations

from gpuaccept.checks.declare import GPU, REGISTRY, DeclaredCheck, in_suite_order
from gpuaccept.checks.health.counters import (
    GPU_LINK,
    ecc_corrected_during_run,
    ecc_errors_during_run,
    gpu_links,
    link_id,
    nvlink_errors_during_run,
    pcie_correctable_rate,
    pcie_replay_rate,
    remapping_during_run,
)
from gpuaccept.checks.health.memory import ecc_corrected, retired_pages, row_remapping, sram_ecc
from gpuaccept.checks.health.state import (
    inforom,
    mig_mode,
    other_processes,
    persistence_mode,
    recovery_action,
    recovery_action_after_run,
    vbios_consistent,
)
from gpuaccept.checks.health.thermal import clock_slowdown_during_run, gpu_temperature, memory_temperature
from gpuaccept.checks.health.xids import xid_during_run, xid_since_boot
from gpuaccept.facts.model import Facts

__all__ = [
    "GPU_LINK", "RUN_CHECKS", "STATE_CHECKS", "clock_slowdown_during_run", "ecc_corrected", "ecc_corrected_during_run",
    "ecc_errors_during_run", "gpu_links", "gpu_temperature", "inforom", "link_id", "memory_temperature", "mig_mode",
    "nvlink_errors_during_run", "other_processes", "pcie_correctable_rate", "pcie_replay_rate", "persistence_mode",
    "recovery_action", "recovery_action_after_run", "remapping_during_run", "retired_pages", "row_remapping", "sram_ecc",
    "vbios_consistent", "xid_during_run", "xid_since_boot",
]


def _family(name: str) -> tuple[DeclaredCheck[[Facts, int]], ...]:
    """The per-GPU checks of a family, as declared, in the suites' order: state checks need the start
    snapshot only."""
    found = (found for found in REGISTRY.values() if found.declaration.family == name and found.declaration.subjects is GPU)
    return tuple(in_suite_order(found))


STATE_CHECKS = _family("health_state")
RUN_CHECKS = _family("health_run")
