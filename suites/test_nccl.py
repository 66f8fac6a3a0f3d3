"""NCCL: bus bandwidth and correctness of each collective at each size, and every GPU pair's
send/receive bandwidth, so that one weak link or GPU is named rather than averaged away."""

from gpuaccept.checks import fabric


def test_busbw(busbw_case, profile, facts_with_nccl, verdict):
    verdict(fabric.busbw(profile, facts_with_nccl, busbw_case))


def test_collective_correct(busbw_case, profile, facts_with_nccl, verdict):
    verdict(fabric.collective_correct(profile, facts_with_nccl, busbw_case))


def test_pair_busbw(gpu_pair, profile, facts_with_nccl, verdict):
    verdict(fabric.pair_busbw(profile, facts_with_nccl, gpu_pair))


def test_nvls(profile, facts_with_nccl, verdict):
    verdict(fabric.nvls(profile, facts_with_nccl))
