"""Peer-to-peer: what NVML reports for each ordered pair against the profile, and CUDA against NVML."""

import pytest

from gpuaccept.checks import p2p

pytestmark = pytest.mark.levels("quick", "standard", "burn-in")


def test_p2p_capability(gpu_ordered_pair, profile, facts, verdict):
    verdict(p2p.p2p_capability(profile, facts, gpu_ordered_pair))


def test_p2p_cuda_agrees(gpu_ordered_pair, profile, facts, verdict):
    verdict(p2p.p2p_cuda_agrees(profile, facts, gpu_ordered_pair))
