"""Health: NVML error counters, XIDs, throttling and the software state a burn-in needs, per GPU.

`health_state` tests judge the snapshot taken at the start, before any load: no measurement stage
runs for them. `health_run` tests judge the change from the start to the snapshot after the last
measurement stage, and the XID events heard in between: they run every stage the profile asks for
first, and so run at the levels that load the GPUs (the quick level loads nothing); the XIDs heard
are judged at every level. A counter NVML does not give ("not supported") skips its test with the
reason; facts that hold no health readings could not judge them.
"""

import pytest

from gpuaccept.checks import health

pytestmark = pytest.mark.levels("quick", "standard", "burn-in")


state = pytest.mark.health_state
heard = pytest.mark.health_run


def run(test):
    """A check of the change over the level's loads: not run at the quick level, which loads nothing."""
    return pytest.mark.levels("standard", "burn-in")(pytest.mark.health_run(test))


@state
def test_row_remapping(gpu, profile, facts, verdict):
    verdict(health.row_remapping(profile, facts, gpu))


@state
def test_retired_pages(gpu, profile, facts, verdict):
    verdict(health.retired_pages(profile, facts, gpu))


@state
def test_ecc_corrected(gpu, profile, facts, verdict):
    verdict(health.ecc_corrected(profile, facts, gpu))


@state
def test_sram_ecc(gpu, profile, facts, verdict):
    verdict(health.sram_ecc(profile, facts, gpu))


@state
def test_recovery_action(gpu, profile, facts, verdict):
    verdict(health.recovery_action(profile, facts, gpu))


@state
def test_persistence_mode(gpu, profile, facts, verdict):
    verdict(health.persistence_mode(profile, facts, gpu))


@state
def test_inforom(gpu, profile, facts, verdict):
    verdict(health.inforom(profile, facts, gpu))


@state
def test_no_other_compute_process(gpu, profile, facts, verdict):
    verdict(health.other_processes(profile, facts, gpu))


@state
def test_vbios_consistent(gpu, profile, facts, verdict):
    verdict(health.vbios_consistent(profile, facts, gpu))


@state
def test_mig_mode(gpu, profile, facts, verdict):
    verdict(health.mig_mode(profile, facts, gpu))


@state
def test_xid_since_boot(gpu, profile, facts, verdict):
    verdict(health.xid_since_boot(profile, facts, gpu))


@heard
def test_xid_during_run(gpu, profile, facts, verdict):
    verdict(health.xid_during_run(profile, facts, gpu))


@run
def test_recovery_action_after_run(gpu, profile, facts, verdict):
    verdict(health.recovery_action_after_run(profile, facts, gpu))


@run
def test_ecc_errors_during_run(gpu, profile, facts, verdict):
    verdict(health.ecc_errors_during_run(profile, facts, gpu))


@run
def test_ecc_corrected_during_run(gpu, profile, facts, verdict):
    verdict(health.ecc_corrected_during_run(profile, facts, gpu))


@run
def test_remapping_during_run(gpu, profile, facts, verdict):
    verdict(health.remapping_during_run(profile, facts, gpu))


@run
def test_pcie_replay_rate(gpu, profile, facts, verdict):
    verdict(health.pcie_replay_rate(profile, facts, gpu))


@run
def test_pcie_correctable_rate(gpu, profile, facts, verdict):
    verdict(health.pcie_correctable_rate(profile, facts, gpu))


@run
def test_nvlink_errors_during_run(gpu_link, profile, facts, verdict):
    verdict(health.nvlink_errors_during_run(profile, facts, gpu_link))


@run
def test_clock_slowdown_during_run(gpu, profile, facts, verdict):
    verdict(health.clock_slowdown_during_run(profile, facts, gpu))


@run
def test_gpu_temperature(gpu, profile, facts, verdict):
    verdict(health.gpu_temperature(profile, facts, gpu))


@run
def test_memory_temperature(gpu, profile, facts, verdict):
    verdict(health.memory_temperature(profile, facts, gpu))
