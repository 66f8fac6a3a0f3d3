"""Inventory: the GPUs the profile names are all there, with their memory, ECC, driver and CUDA."""

import pytest

from gpuaccept.checks import inventory

pytestmark = pytest.mark.levels("quick", "standard", "burn-in")


def test_gpu_count(profile, facts, verdict):
    verdict(inventory.gpu_count(profile, facts))


def test_gpu_model(gpu, profile, facts, verdict):
    verdict(inventory.gpu_model(profile, facts, gpu))


def test_gpu_memory(gpu, profile, facts, verdict):
    verdict(inventory.gpu_memory(profile, facts, gpu))


def test_ecc_mode(gpu, profile, facts, verdict):
    verdict(inventory.ecc_mode(profile, facts, gpu))


def test_driver_version(profile, facts, verdict):
    verdict(inventory.driver_version(profile, facts))


def test_cuda_version(profile, facts, verdict):
    verdict(inventory.cuda_version(profile, facts))
