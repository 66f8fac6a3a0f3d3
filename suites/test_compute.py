"""The per-GPU loads: sustained GEMM (throughput, against the machine's best GPU, correctness), HBM
copy and triad bandwidth, and a memory pattern test over most of each GPU's free memory.

Each test judges its own GPU only (`needs(..., per_gpu=True)`); the first test that asks loads every
GPU of the machine at once, each GPU's values its own; the comparison with the best GPU reads every
GPU's GEMM."""

import pytest

from gpuaccept.checks import compute

pytestmark = [pytest.mark.levels("standard"), pytest.mark.needs("compute", per_gpu=True)]


def test_gemm_throughput(gpu, profile, facts, verdict):
    verdict(compute.gemm_throughput(profile, facts, gpu))


@pytest.mark.needs("compute")  # every GPU's GEMM: the best of them is the limit
def test_gemm_within_best(gpu, profile, facts, verdict):
    verdict(compute.gemm_within_best(profile, facts, gpu))


def test_gemm_correct(gpu, profile, facts, verdict):
    verdict(compute.gemm_correct(profile, facts, gpu))


def test_hbm_copy(gpu, profile, facts, verdict):
    verdict(compute.hbm_copy(profile, facts, gpu))


def test_hbm_triad(gpu, profile, facts, verdict):
    verdict(compute.hbm_triad(profile, facts, gpu))


def test_memtest(gpu, profile, facts, verdict):
    verdict(compute.memtest(profile, facts, gpu))
