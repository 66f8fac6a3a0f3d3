"""DDP: a GPT-style model trained data-parallel at each world size and batch the profile lists,
against one GPU; the share of communication left exposed; and the NVLink (P2P) A/B."""

import pytest

from gpuaccept.checks import ddp

pytestmark = [pytest.mark.levels("standard"), pytest.mark.needs("ddp")]


def test_ddp_scaling(ddp_case, profile, facts, verdict):
    verdict(ddp.scaling(profile, facts, ddp_case))


def test_ddp_exposed_comm(ddp_case, profile, facts, verdict):
    verdict(ddp.exposed_communication(profile, facts, ddp_case))


def test_ddp_nvlink_speedup(ddp_case, profile, facts, verdict):
    verdict(ddp.nvlink_speedup(profile, facts, ddp_case))
