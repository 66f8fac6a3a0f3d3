"""Copy-engine bandwidth: GPU to GPU per ordered pair and both ways per pair, within each GPU, and
pinned host memory to and from each GPU (the PCIe link under load)."""

import pytest

from gpuaccept.checks import fabric

pytestmark = [pytest.mark.levels("standard"), pytest.mark.needs("copies")]


def test_p2p_copy(gpu_ordered_pair, profile, facts, verdict):
    verdict(fabric.p2p_copy(profile, facts, gpu_ordered_pair))


def test_p2p_copy_bidirectional(gpu_pair, profile, facts, verdict):
    verdict(fabric.p2p_copy_bidirectional(profile, facts, gpu_pair))


def test_local_copy(gpu, profile, facts, verdict):
    verdict(fabric.local_copy(profile, facts, gpu))


def test_host_to_device(gpu, profile, facts, verdict):
    verdict(fabric.host_to_device(profile, facts, gpu))


def test_device_to_host(gpu, profile, facts, verdict):
    verdict(fabric.device_to_host(profile, facts, gpu))
