"""NCCL: bus bandwidth and correctness of each collective at each size, and every GPU pair's
send/receive bandwidth, so that one weak link or GPU is named rather than averaged away."""

import pytest

from gpuaccept.checks import fabric

pytestmark = [pytest.mark.levels("standard"), pytest.mark.needs("nccl")]


def test_busbw(busbw_case, profile, facts, verdict):
    verdict(fabric.busbw(profile, facts, busbw_case))


def test_collective_correct(busbw_case, profile, facts, verdict):
    verdict(fabric.collective_correct(profile, facts, busbw_case))


def test_pair_busbw(gpu_pair, profile, facts, verdict):
    verdict(fabric.pair_busbw(profile, facts, gpu_pair))


def test_nvls(profile, facts, verdict):
    verdict(fabric.nvls(profile, facts))
