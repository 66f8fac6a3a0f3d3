"""Real outputs of many machines, read into facts: every file read or refused in one line, and the
facts say what the file says, cell by cell and row by row (tests/data/imports/README.md names
where each file came from)."""


import pytest

from gpuaccept.errors import ImportedTextError
from gpuaccept.facts.record import Unavailable
from gpuaccept.importers import import_files
from tests.helpers import DATA

IMPORTS = DATA / "imports"
CAPTURES = sorted(IMPORTS.glob("*.txt"))
# outputs that do not tell what facts need: rows without a header; listings shortened where GPUs may be
REFUSED = {"h100-multinode-ib-nccl-tests-tagged-fragment.txt", "v100-nvlink-s-uuid-trimmed-links-down.txt",
           "a100-nvlink-s-dot-elided.txt", "gb200-nvlink-s-elided.txt", "v100-2-hosts-nccl-tests-without-mpi.txt"}


def facts_of(*names):
    return import_files([IMPORTS / name for name in names]).facts


def link(facts, a, b):
    return facts.link(a, b).link_type


def nics(facts, gpu):
    return [(n.nic, n.link) for n in facts.gpu(gpu).nics]


def nvlinks(facts, gpu):
    return [(n.link, n.active, n.speed_GBps) for n in facts.gpu(gpu).nvlinks]


def rows(facts, collective):
    return {r.size_bytes: r for r in facts.measurements.collectives.results if r.collective == collective}


@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_every_capture_is_read_or_refused_in_one_line(path):
    if path.name in REFUSED:
        with pytest.raises(ImportedTextError) as refused:
            import_files([path])
        assert len(refused.value.lines()) == 1 and refused.value.lines()[0].startswith(f"{path}:")
        return
    imported = import_files([path])
    assert imported.facts.imported_from.files == [str(path)]
    assert imported.lines()[0].startswith(f"{path}: ")  # what the file held, then one line per finding
    for line in imported.lines():
        assert "\n" not in line


def test_dgx1_v100_hybrid_cube_mesh():
    facts = facts_of("v100-8-dgx1-cube-mesh-topo-m.txt")
    assert facts.gpu_count == 8
    assert [link(facts, 0, b) for b in range(1, 8)] == ["NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"]
    assert link(facts, 1, 5) == "NV2" and link(facts, 3, 7) == "NV1" and link(facts, 2, 5) == "SYS"
    assert nics(facts, 0) == [("mlx5_0", "PIX"), ("mlx5_2", "SYS"), ("mlx5_1", "PHB"), ("mlx5_3", "SYS")]
    assert nics(facts, 6) == [("mlx5_0", "SYS"), ("mlx5_2", "PHB"), ("mlx5_1", "SYS"), ("mlx5_3", "PIX")]
    assert facts.gpu(4).cpu_affinity == "20-39,60-79"
    assert facts.gpu(4).numa_affinity.unavailable == "not_probed"  # this driver printed no NUMA column


def test_hgx_a100_padded_with_spaces_and_h100_and_h20():
    a100 = facts_of("a100-8-nvswitch-topo-m.txt")
    assert {link(a100, a, b) for a in range(8) for b in range(a + 1, 8)} == {"NV12"}
    assert a100.gpu(3).cpu_affinity == "0-23" and a100.gpu(4).numa_affinity == "1"
    h100 = facts_of("h100-8-nvswitch-topo-m.txt")
    assert {link(h100, a, b) for a in range(8) for b in range(a + 1, 8)} == {"NV18"}
    assert h100.gpu(7).cpu_affinity == "52-103,156-207"
    h20 = facts_of("h20-8-nvswitch-topo-m.txt")
    assert link(h20, 6, 7) == "NV18"
    assert nics(h20, 6) == [("NIC0", "PHB"), ("NIC1", "PHB")] and nics(h20, 0) == [("NIC0", "SYS"), ("NIC1", "SYS")]
    assert h20.gpu(5).cpu_affinity == "96-191,288-383"


def test_nv8_board_whose_last_row_is_cut():
    imported = import_files([IMPORTS / "nv8-8gpu-topo-m-cut.txt"])
    facts = imported.facts
    assert [str(f) for f in imported.lines()[1:]] == [
        f"{IMPORTS / 'nv8-8gpu-topo-m-cut.txt'}:11: damaged: row GPU7 has 4 of 17 cells: the output is cut here; "
        "what the row lacks is read from the other rows where they say it"
    ]
    assert [link(facts, a, 7) for a in range(7)] == ["NV8"] * 7  # GPU7's links, from the other rows' GPU7 column
    assert nics(facts, 0)[2] == ("NIC2", "PIX") and nics(facts, 4)[1] == ("NIC1", "PIX")
    assert isinstance(facts.gpu(7).nics, Unavailable) and isinstance(facts.gpu(7).cpu_affinity, Unavailable)
    assert facts.gpu(6).cpu_affinity == "48-95,144-191"


def test_gb200_tray_with_numa_lists_and_a_cut_row():
    facts = facts_of("gb200-4-topo-m-cut.txt")
    assert {link(facts, a, b) for a in range(4) for b in range(a + 1, 4)} == {"NV18"}
    assert facts.gpu(0).numa_affinity == "0,3-9,11-17" and facts.gpu(2).numa_affinity == "1,19-25,27-33"
    assert facts.gpu(2).cpu_affinity == "72-143"
    assert nics(facts, 1) == [(f"NIC{i}", "SYS") for i in range(6)]
    assert isinstance(facts.gpu(3).nics, Unavailable)


def test_geforce_boxes_pcie_only():
    box = facts_of("rtx4090-8-pcie-topo-m.txt")
    assert {link(box, a, b) for a in range(8) for b in range(a + 1, 8)} == {"SYS"}
    assert nics(box, 6) == [("NIC0", "PHB"), ("NIC1", "PHB")] and nics(box, 0) == [("NIC0", "SYS"), ("NIC1", "SYS")]
    five = facts_of("geforce-5-pcie-topo-m-and-p2p-p.txt")
    assert link(five, 3, 4) == "PHB" and link(five, 0, 4) == "NODE"
    assert five.p2p_of(4, 3).nvml == {"pci": "OK"}  # `topo -p2p p`, the capability named on the prompt line above it
    pair = facts_of("rtx3090-2-pcie-sys-topo-m.txt")
    assert link(pair, 0, 1) == "SYS"
    assert pair.gpu(0).cpu_affinity == "0-7,16-23" and pair.gpu(1).cpu_affinity == "8-15,24-31"
    assert pair.gpu(0).numa_affinity.unavailable == "not_found"  # N/A after an empty field
    assert pair.gpu(1).numa_affinity == "1"


def test_pcie_switch_tree_after_a_padded_prompt():
    facts = facts_of("pcie-6-switch-tree-topo-m.txt")
    assert link(facts, 0, 1) == "PIX" and link(facts, 0, 2) == "NODE" and link(facts, 2, 3) == "SYS"
    assert link(facts, 3, 4) == "PIX" and link(facts, 4, 5) == "NODE"
    assert facts.gpu(5).cpu_affinity == "18-35,54-71"


def test_p2p_grids_per_capability():
    h100 = facts_of("h100-8-nvswitch-topo-p2p-r.txt")
    assert len(h100.p2p) == 56 and {p.nvml["read"] for p in h100.p2p} == {"OK"}
    l4 = facts_of("l4-2-pcie-topo-p2p-r.txt")
    assert l4.p2p_of(0, 1).nvml == {"read": "CHIPSET_NOT_SUPPORTED"}
    assert l4.p2p_of(0, 1).cuda_can_access_peer.unavailable == "not_probed"
    rtx5090 = facts_of("rtx5090-2-pcie-topo-m-and-p2p-rw.txt")
    assert rtx5090.p2p_of(1, 0).nvml == {"read": "GPU_NOT_SUPPORTED", "write": "GPU_NOT_SUPPORTED"}  # `-p2p rw`
    assert link(rtx5090, 0, 1) == "PHB"


def test_bridged_pairs_and_nvlink_status():
    pair = facts_of("bridged-pair-nv2-topo-m.txt")
    assert link(pair, 0, 1) == "NV2" and pair.gpu(0).numa_affinity.unavailable == "not_found"
    a6000 = import_files([IMPORTS / "rtxa6000-3-bridged-pair-topo-m-nvlink-s.txt"])
    facts = a6000.facts
    assert "terminal escape codes removed" in a6000.lines()[0]
    assert link(facts, 0, 1) == "NV4" and link(facts, 0, 2) == "NODE" and link(facts, 1, 2) == "NODE"
    assert nvlinks(facts, 1) == [(0, True, 14.062), (1, True, 14.062), (2, True, 14.062), (3, True, 14.062)]
    assert facts.gpu(2).nvlinks == []  # "all links are inActive": none up
    assert facts.gpu(0).name == "NVIDIA RTX A6000" and facts.gpu(2).uuid == "GPU-02c05ee3-bdb5-aac7-f9e8-a4c8f3f725b3"
    rig = import_files([IMPORTS / "rtx3090-2-nvlink-rig-report.txt"])
    assert rig.lines()[0].endswith("nvidia-smi topo -m (2 GPUs); nvidia-smi nvlink -s (2 GPUs)")
    assert "note: a nvidia-smi topo -p2p grid whose capability the file does not say: not used" in rig.lines()[1]
    assert nvlinks(rig.facts, 0)[3] == (3, True, 14.062) and link(rig.facts, 0, 1) == "NV4"
    assert rig.facts.gpu(1).cpu_affinity == "4,6,9,15,17"


def test_elided_nvlink_listing_is_unknown_not_two_links():
    imported = import_files([IMPORTS / "h100-nvlink-s-elided.txt"])
    gpu = imported.facts.gpu(0)
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.nvlinks.unavailable == "not_probed" and "elided" in gpu.nvlinks.detail
    assert "damaged: GPU 0's links are elided (links 0, 17 shown)" in imported.lines()[1]


def test_single_node_logs_in_the_older_layout():
    imported = import_files([IMPORTS / "a100-8-nvswitch-nccl-tests-all_reduce-old.txt"])
    facts = imported.facts
    sweep = facts.measurements.collectives
    assert sweep.ranks == 8 and facts.gpu_count == 8 and facts.gpu(7).name == "A100-SXM4-40GB"
    row = rows(facts, "all_reduce")[8589934592]
    assert (row.time_us, row.algbw_GBps, row.busbw_GBps, row.dtype) == (63896.0, 134.44, 235.26, "float32")
    assert rows(facts, "all_reduce")[1073741824].busbw_GBps == 230.29
    assert row.wrong.unavailable == "not_probed"  # the `error` column is no count of wrong elements
    assert 0 not in rows(facts, "all_reduce") and len(rows(facts, "all_reduce")) == 32  # the NCCL INFO line is no row
    assert "note: which collective ran (all_reduce) is taken from the file name" in imported.lines()[1]
    alltoall = rows(facts_of("a100-8-nvswitch-nccl-tests-alltoall-old.txt"), "alltoall")
    assert alltoall[4294967296].busbw_GBps == 222.90 and alltoall[32].time_us == 89.00  # no redop in its rows


def test_multi_node_logs_over_infiniband_and_roce():
    ib = facts_of("h100-2x8-ib-nccl-tests-all_reduce_perf.txt")
    sweep = ib.measurements.collectives
    assert (sweep.ranks, sweep.nccl_version, ib.gpu_count, ib.system.hostname) == (16, "2.26.2+cuda12.8", 8, "bm-h100-01")
    assert ib.gpu(3).pci_bus_id == "00000000:5D:00.0" and ib.gpu(0).name == "NVIDIA H100 80GB HBM3"
    top = rows(ib, "all_reduce")[17179869184]
    assert (top.time_us, top.algbw_GBps, top.busbw_GBps, top.wrong) == (68652.0, 250.24, 469.21, 0)
    assert len(sweep.results) == 32 and not sweep.failures
    roce = import_files([IMPORTS / "a100-2node-roce-nccl-tests-all_reduce.txt"])
    assert roce.facts.measurements.collectives.ranks == 16 and roce.facts.gpu_count == 8
    assert rows(roce.facts, "all_reduce")[4294967296].busbw_GBps == 188.50
    assert "rank lines elided (ranks 0, 7, 8, 15 shown of 16)" in roce.lines()[1]


def test_crashed_runs_fail_every_size_they_did_not_reach():
    imported = import_files([IMPORTS / "rtx5090-2-nccl-tests-all_reduce_perf-crashed.txt"])
    assert imported.lines()[1] == (
        f"{IMPORTS / 'rtx5090-2-nccl-tests-all_reduce_perf-crashed.txt'}:11: damaged: the run crashed before its first result row: "
        "GENOA-06: Test NCCL failure common.cu:392 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '; "
        "the sizes it did not reach fail")
    facts = imported.facts
    sweep = facts.measurements.collectives
    assert sweep.results == [] and len(sweep.failures) == 25  # 8 B to 128 MiB by factor 2
    failure = next(f for f in sweep.failures if f.step == "all_reduce 128 MiB")
    assert failure.reason == "crashed"
    assert failure.message.startswith("the run crashed before its first size: GENOA-06: Test NCCL failure common.cu:392")
    old = facts_of("p100-8-pcie-nccl-tests-all_reduce_perf-crashed-nccl1.txt")
    assert old.gpu(0).name == "Tesla P100-PCIE-16GB" and "NCCL failure all_reduce.cu:95" in old.measurements.collectives.failures[0].message


def test_rows_without_their_header_are_refused():
    with pytest.raises(ImportedTextError) as refused:
        import_files([IMPORTS / "h100-multinode-ib-nccl-tests-tagged-fragment.txt"])
    assert str(refused.value) == (
        f"{IMPORTS / 'h100-multinode-ib-nccl-tests-tagged-fragment.txt'}:2: rows of an nccl-tests log without its header "
        "(`# nThread ... nGpus ...`, `# Using devices`): which collective ran, on how many ranks, cannot be told; nothing is used"
    )


def test_outputs_of_one_machine_read_together():
    facts = facts_of("rtxa6000-3-bridged-pair-topo-m-nvlink-s.txt", "rtxa6000-3-bridged-pair-topo-m-nvlink-s.txt")
    assert facts.gpu_count == 3 and len(facts.links) == 3
    with pytest.raises(ImportedTextError, match=r"has 2 GPUs but .*has 3: outputs of one machine only"):
        import_files([IMPORTS / "rtxa6000-3-bridged-pair-topo-m-nvlink-s.txt", IMPORTS / "bridged-pair-nv2-topo-m.txt"])
