"""DDP: a GPT-style model trained data-parallel at each world size and batch the profile lists,
against one GPU; the share of communication left exposed; and the NVLink (P2P) A/B."""

from gpuaccept.checks import ddp


def test_ddp_scaling(ddp_case, profile, facts_with_ddp, verdict):
    verdict(ddp.scaling(profile, facts_with_ddp, ddp_case))


def test_ddp_exposed_comm(ddp_case, profile, facts_with_ddp, verdict):
    verdict(ddp.exposed_communication(profile, facts_with_ddp, ddp_case))


def test_ddp_nvlink_speedup(ddp_case, profile, facts_with_ddp, verdict):
    verdict(ddp.nvlink_speedup(profile, facts_with_ddp, ddp_case))
