"""Copy-engine bandwidth: GPU to GPU per ordered pair and both ways per pair, within each GPU, and
pinned host memory to and from each GPU (the PCIe link under load)."""

from gpuaccept.checks import fabric


def test_p2p_copy(gpu_ordered_pair, profile, facts_with_copies, verdict):
    verdict(fabric.p2p_copy(profile, facts_with_copies, gpu_ordered_pair))


def test_p2p_copy_bidirectional(gpu_pair, profile, facts_with_copies, verdict):
    verdict(fabric.p2p_copy_bidirectional(profile, facts_with_copies, gpu_pair))


def test_local_copy(gpu, profile, facts_with_copies, verdict):
    verdict(fabric.local_copy(profile, facts_with_copies, gpu))


def test_host_to_device(gpu, profile, facts_with_copies, verdict):
    verdict(fabric.host_to_device(profile, facts_with_copies, gpu))


def test_device_to_host(gpu, profile, facts_with_copies, verdict):
    verdict(fabric.device_to_host(profile, facts_with_copies, gpu))
