"""The probe, driven by NVML answers recorded on real machines (and faults made by editing them)."""

import pytest

from gpuaccept.errors import NoDriverError, ProbeError
from gpuaccept.facts.machine import NvLinkFacts
from gpuaccept.facts.record import Unavailable
from gpuaccept.probe.collect import collect_facts, normalize_bus_id
from gpuaccept.probe.linktype import classify_pair
from gpuaccept.probe.nvml import ReplayNvml
from gpuaccept.vocabulary.nvml_codes import P2PCapability
from tests.cuda_driver import driver_environment, fake_cuda_driver
from tests.helpers import cuda_seeing, nvml_replay, probe_replay, write


def test_h200x4_recording_rebuilds_the_nv18_matrix_nvidia_smi_shows():
    facts = probe_replay(nvml_replay("h200x4"))
    assert facts.gpu_count == 4
    assert {link.link_type for link in facts.links} == {"NV18"}
    assert all(link.via_switch for link in facts.links)
    # the PCIe view says host bridge; the NVLink view overrides it, as nvidia-smi does
    assert {link.topology_level for link in facts.links} == {30}


def test_h200x4_p2p_statuses_use_the_capability_indices_not_the_binding_tuple():
    facts = probe_replay(nvml_replay("h200x4"))
    pair = facts.p2p_of(0, 1)
    assert pair.nvml == {"read": "OK", "write": "OK", "nvlink": "OK", "atomics": "OK", "pci": "NOT_SUPPORTED"}
    assert len(facts.p2p) == 12


def test_single_gpu_vm_records_nvlink_not_supported_as_a_fact():
    facts = probe_replay(nvml_replay("h200x1"))
    gpu = facts.gpus[0]
    assert isinstance(gpu.nvlinks, Unavailable) and gpu.nvlinks.unavailable == "not_supported"
    assert "nvlink_state(0, 0)" in gpu.nvlinks.detail
    assert isinstance(gpu.numa_node, Unavailable)
    assert gpu.fabric.state == 0
    assert facts.links == [] and facts.p2p == []


def test_h100_recording():
    facts = probe_replay(nvml_replay("h100x1"))
    assert facts.gpus[0].name == "NVIDIA H100 80GB HBM3"
    assert facts.gpus[0].memory_total_bytes == 85520809984


def test_cuda_visible_devices_subset_is_matched_by_uuid_and_renumbered():
    replay = nvml_replay("h200x4")
    facts = probe_replay(replay, [3, 1], visible="3,1")
    assert [g.nvml_index for g in facts.gpus] == [3, 1]
    assert [g.index for g in facts.gpus] == [0, 1]
    assert facts.environment["CUDA_VISIBLE_DEVICES"] == "3,1"
    assert facts.system.nvml_gpu_count == 4
    assert [tuple(link.gpus) for link in facts.links] == [(0, 1)]


def test_a_cuda_device_nvml_does_not_know_stops_the_probe():
    replay = nvml_replay("h200x4")
    cuda = cuda_seeing(replay, [0]).model_copy(update={"uuids": ["00000000-dead-beef-0000-000000000000"]})
    with pytest.raises(ProbeError, match=r"CUDA device 0 .* is not among the GPUs NVML sees"):
        collect_facts(replay, cuda, {})


def test_cuda_visible_devices_without_cuda_is_an_error_not_a_guess():
    replay = nvml_replay("h200x4")
    no_torch = Unavailable(unavailable="not_installed", detail="torch is not installed")
    with pytest.raises(ProbeError, match="CUDA_VISIBLE_DEVICES is set"):
        collect_facts(replay, no_torch, {"CUDA_VISIBLE_DEVICES": "0"})
    facts = collect_facts(replay, no_torch, {})
    assert facts.gpu_count == 4 and facts.p2p_of(0, 1).cuda_can_access_peer == no_torch



def test_without_the_cuda_driver_cuda_is_not_installed_and_torch_is_not_asked(monkeypatch):
    import ctypes
    import sys

    from gpuaccept.probe import cuda

    def no_library(name):
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(ctypes, "CDLL", no_library)
    monkeypatch.setitem(sys.modules, "torch", None)  # importing it now would raise ImportError
    reading = cuda.probe_cuda()
    assert reading == Unavailable(
        unavailable="not_installed", detail="no CUDA driver: libcuda.so.1: cannot open shared object file: No such file or directory"
    )


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    """The fake CUDA driver's library (tests/cuda_driver.py), its path."""
    return str(fake_cuda_driver(tmp_path_factory.mktemp("cuda")) / "libcuda.so.1")


H200X4_UUIDS = [nvml_replay("h200x4").query("uuid", i).removeprefix("GPU-") for i in range(4)]


def test_the_driver_api_gives_uuids_peer_access_and_multicast_without_torch(driver, monkeypatch):
    import sys

    from gpuaccept.probe.cuda import probe_cuda

    for name, value in driver_environment(H200X4_UUIDS, no_peer=[(0, 3), (3, 0)], multicast=1).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setitem(sys.modules, "torch", None)  # importing it now would raise ImportError
    reading = probe_cuda(driver)
    assert reading.device_count == 4 and reading.uuids == H200X4_UUIDS  # as torch wrote them: no GPU- prefix
    assert reading.peer_access == [[None, True, True, False], [True, None, True, True], [True, True, None, True], [False, True, True, None]]
    assert reading.multicast == [True] * 4
    # the probed CUDA facts carry each pair's peer access, matched to NVML's GPUs by UUID
    facts = collect_facts(nvml_replay("h200x4"), reading, {})
    assert facts.p2p_of(0, 3).cuda_can_access_peer is False and facts.p2p_of(1, 3).cuda_can_access_peer is True


def test_the_driver_applies_cuda_visible_devices_and_the_probe_matches_by_uuid(driver, monkeypatch):
    from gpuaccept.probe.cuda import probe_cuda

    for name, value in driver_environment(H200X4_UUIDS).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    reading = probe_cuda(driver)
    assert reading.visible_devices == "3,1" and reading.uuids == [H200X4_UUIDS[3], H200X4_UUIDS[1]]
    facts = collect_facts(nvml_replay("h200x4"), reading, {"CUDA_VISIBLE_DEVICES": "3,1"})
    assert [gpu.nvml_index for gpu in facts.gpus] == [3, 1]


@pytest.mark.parametrize(
    "init, visible, said",
    [
        (999, None, "cuInit returned CUDA_ERROR_UNKNOWN (999)"),
        (0, "", "cuInit returned CUDA_ERROR_NO_DEVICE (100)"),  # every GPU hidden
        (4242, None, "cuInit returned CUDA error 4242"),  # a status the driver has no name for
    ],
    ids=["init-fails", "none-visible", "unnamed-status"],
)
def test_a_driver_that_refuses_is_an_error_with_its_own_words(driver, monkeypatch, init, visible, said):
    from gpuaccept.probe.cuda import probe_cuda

    for name, value in driver_environment(H200X4_UUIDS, init_status=init).items():
        monkeypatch.setenv(name, value)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert probe_cuda(driver) == Unavailable(unavailable="error", detail=said)


def test_a_library_without_a_call_the_probe_needs_is_not_supported_never_a_guess(tmp_path, monkeypatch):
    from gpuaccept.probe.cuda import probe_cuda

    library = str(fake_cuda_driver(tmp_path, with_peer_call=False) / "libcuda.so.1")
    for name, value in driver_environment(H200X4_UUIDS).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    reading = probe_cuda(library)
    assert reading == Unavailable(unavailable="not_supported", detail=f"{library} has no cuDeviceCanAccessPeer")
    facts = collect_facts(nvml_replay("h200x4"), reading, {})
    assert facts.p2p_of(0, 1).cuda_can_access_peer == reading  # each pair says why, no pair says no


def test_the_torch_of_the_workers_is_read_from_its_files_without_importing_it(tmp_path, monkeypatch):
    import importlib.util

    from gpuaccept.probe import cuda

    package = tmp_path / "torch"
    write(package / "__init__.py", "raise ImportError('never imported by the probe')\n")  # an import fails the test
    write(package / "version.py", """
        from typing import Optional

        __all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']
        __version__ = '2.11.0+cu130'
        debug = False
        cuda: Optional[str] = '13.0'
        git_version = 'abc'
        hip: Optional[str] = None
    """)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: importlib.util.spec_from_file_location(name, package / "__init__.py"))
    assert cuda.torch_build() == ("2.11.0+cu130", "13.0")
    write(package / "version.py", "__version__ = '2.13.0+cpu'\ncuda = None\n")
    assert cuda.torch_build() == ("2.13.0+cpu", Unavailable(unavailable="not_installed", detail="torch built without CUDA"))
    write(package / "version.py", "__version__ = '2.13.0'\n")
    assert cuda.torch_build()[1] == Unavailable(unavailable="error", detail=f"{package / 'version.py'}: no cuda = ... line")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    missing = Unavailable(unavailable="not_installed", detail="torch is not installed (pip install 'gpu-accept[torch]')")
    assert cuda.torch_build() == ("", missing)


def test_no_gpu_is_no_driver_error():
    replay = ReplayNvml([{"query": "device_count", "args": [], "value": 0}, {"query": "driver_version", "args": [], "value": "580"}])
    with pytest.raises(NoDriverError, match="NVML reports 0 devices"):
        collect_facts(replay, Unavailable(unavailable="error"), {})


def test_a_failing_nvml_answer_is_recorded_with_its_call_never_a_crash():
    replay = nvml_replay("h200x4")
    replay.answer("pcie_width_current", 2, error="GPU_IS_LOST")
    replay.answer("nvlink_state", 1, 0, error="NOT_SUPPORTED")
    replay.answer("p2p_status", 0, 3, int(P2PCapability.READ), error="BINDING")
    facts = probe_replay(replay)
    width = facts.gpus[2].pcie.width_current
    assert width.unavailable == "gpu_is_lost" and "pcie_width_current(2)" in width.detail
    assert facts.gpus[1].nvlinks.unavailable == "not_supported"
    assert facts.p2p_of(0, 3).nvml["read"].unavailable == "error"
    # gpu1 has no readable links, so its pairs fall back to the PCIe level NVML gives
    assert facts.link(0, 1).link_type == "PHB"


def test_one_gpu_with_fewer_active_switch_links_lowers_each_of_its_pairs():
    replay = nvml_replay("h200x4")
    for link in range(12, 18):
        replay.answer("nvlink_state", 3, link, value=0)
    facts = probe_replay(replay)
    assert facts.link(1, 3).link_type == "NV12"
    assert facts.link(0, 1).link_type == "NV18"


def _link(index, remote_type, bus):
    return NvLinkFacts(link=index, active=True, version=4, remote_type=remote_type, remote_bus_id=bus)


def test_direct_nvlink_bridge_counts_links_to_the_other_gpu():
    bus_b = "00000000:02:00.0"
    links_a = [_link(i, 0, bus_b) for i in range(4)]
    assert classify_pair(links_a, [], bus_b, 40) == ("NV4", 4, False)


def test_nvlinks_to_a_third_gpu_do_not_join_this_pair():
    links_a = [_link(i, 0, "00000000:03:00.0") for i in range(4)]
    assert classify_pair(links_a, [], "00000000:02:00.0", 50) == ("SYS", 0, False)


def test_unreadable_far_ends_give_no_guess():
    unknown = Unavailable(unavailable="error", detail="x")
    link_type, _, _ = classify_pair([_link(0, unknown, unknown)], [], "00000000:02:00.0", 30)
    assert isinstance(link_type, Unavailable)


@pytest.mark.parametrize("level, label", [(10, "PIX"), (20, "PXB"), (30, "PHB"), (40, "NODE"), (50, "SYS")])
def test_pcie_levels_map_to_nvidia_smi_labels(level, label):
    assert classify_pair(Unavailable(unavailable="not_supported"), [], "x", level)[0] == label


def test_bus_ids_compare_in_one_form():
    assert normalize_bus_id("0000:00:06.0") == normalize_bus_id("00000000:00:06.0") == "00000000:00:06.0"
    assert normalize_bus_id("ffffffff:ff:ff.0") == "FFFFFFFF:FF:FF.0"


def test_link_speeds_recorded_on_a_2xh200_give_the_reported_peak():
    # recorded on a lent 2xH200 (driver 580.159.04) with `gpu-accept record --nvml-log`: NVML's
    # NVLINK_GET_SPEED field answers 26562 MB/s for every one of the 18 links of each GPU
    from gpuaccept.checks.peaks import nvlink_peak

    facts = probe_replay(nvml_replay("h200x2-link-speed"))
    for gpu in facts.gpus:
        assert [link.speed_GBps for link in gpu.nvlinks] == [26.562] * 18
        peak = nvlink_peak(gpu)
        assert peak.GBps == pytest.approx(18 * 26.562) and peak.what == "NVLink, 18 x 26.562 GB/s as reported"
