"""Topology: each GPU's PCIe link and NVLinks, the NVSwitch fabric, the link type of every pair, and where each
GPU sits: its closest NIC, its CPU and NUMA affinity."""

import pytest

from gpuaccept.checks import affinity, topology

pytestmark = pytest.mark.levels("quick", "standard", "burn-in")


def test_pcie_generation(gpu, profile, facts, verdict):
    verdict(topology.pcie_generation(profile, facts, gpu))


def test_pcie_width(gpu, profile, facts, verdict):
    verdict(topology.pcie_width(profile, facts, gpu))


def test_nvlink_links(gpu, profile, facts, verdict):
    verdict(topology.nvlink_links(profile, facts, gpu))


def test_nvlink_version(gpu, profile, facts, verdict):
    verdict(topology.nvlink_version(profile, facts, gpu))


def test_fabric_state(gpu, profile, facts, verdict):
    verdict(topology.fabric_state(profile, facts, gpu))


def test_link_type(gpu_pair, profile, facts, verdict):
    verdict(topology.link_type(profile, facts, gpu_pair))


def test_nic_affinity(gpu, profile, facts, verdict):
    verdict(affinity.nic_affinity(profile, facts, gpu))


def test_cpu_affinity(gpu, profile, facts, verdict):
    verdict(affinity.cpu_affinity(profile, facts, gpu))


def test_numa_affinity(gpu, profile, facts, verdict):
    verdict(affinity.numa_affinity(profile, facts, gpu))
