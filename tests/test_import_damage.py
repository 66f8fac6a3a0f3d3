"""Damaged outputs, made from the real ones the way tickets damage them: each is named as damaged
in one line that says what does not fit, and what can still be read safely is used."""

from pathlib import Path

import pytest

from gpuaccept.errors import ImportedTextError
from gpuaccept.facts.machine import NicLink
from gpuaccept.facts.record import Unavailable
from gpuaccept.importers import import_files
from tests.helpers import DATA

IMPORTS = DATA / "imports"


def variant(tmp_path, source, change, name=None, binary=False):
    """A copy of a real capture with `change` applied to its text: how damage is made here."""
    text = (IMPORTS / source).read_text(encoding="utf-8")
    path = tmp_path / (name or source)
    if binary:
        path.write_bytes(change(text))
    else:
        path.write_text(change(text), encoding="utf-8", newline="")
    return path


def lines_of(path):
    return import_files([path]).lines()


def test_crlf_and_colour_codes_are_cleaned_before_reading(tmp_path):
    crlf = variant(tmp_path, "h100-8-nvswitch-topo-m.txt", lambda t: t.replace("\n", "\r\n"))
    coloured = variant(tmp_path, "v100-8-dgx1-cube-mesh-topo-m.txt", lambda t: t.replace("NV2", "\x1b[1;32mNV2\x1b[0m"), "coloured.txt")
    assert import_files([crlf]).facts.link(0, 7).link_type == "NV18"
    assert lines_of(crlf) == [f"{crlf}: nvidia-smi topo -m (8 GPUs) [CRLF line ends removed]"]
    facts = import_files([coloured]).facts
    assert facts.link(0, 3).link_type == "NV2" and facts.link(0, 1).link_type == "NV1"
    assert lines_of(coloured)[0].endswith("[terminal escape codes removed]")


def test_a_row_with_fewer_cells_than_the_header(tmp_path):
    cut = variant(tmp_path, "h100-8-nvswitch-topo-m.txt", lambda t: t.replace(
        "GPU3    NV18    NV18    NV18     X      NV18    NV18    NV18    NV18    0-51,104-155    0", "GPU3    NV18    NV18    NV18     X"))
    lines = lines_of(cut)
    assert lines[1] == (f"{cut}:6: damaged: row GPU3 has 4 of 8 cells: the output is cut here; "
                        "what the row lacks is read from the other rows where they say it")
    facts = import_files([cut]).facts
    assert facts.link(3, 7).link_type == "NV18"  # from GPU7's row
    assert isinstance(facts.gpu(3).cpu_affinity, Unavailable) and facts.gpu(2).cpu_affinity == "0-51,104-155"


def test_nic_rows_without_nic_columns(tmp_path):
    def drop_nic_columns(text):
        out = []
        for line in text.splitlines():
            cells = line.split("\t")
            if line.startswith(("\tGPU0", "GPU")):
                cells = cells[:9] + cells[13:]  # the four mlx5 columns go; their rows stay
            out.append("\t".join(cells))
        return "\n".join(out) + "\n"

    damaged = variant(tmp_path, "v100-8-dgx1-cube-mesh-topo-m.txt", drop_nic_columns)
    lines = lines_of(damaged)
    assert f"{damaged}:10: damaged: row mlx5_0 names a device the header has no column for: its GPU cells are read as " \
        "how each GPU reaches it" in lines
    facts = import_files([damaged]).facts
    whole = import_files([IMPORTS / "v100-8-dgx1-cube-mesh-topo-m.txt"]).facts
    assert facts.link(0, 3).link_type == "NV2" and facts.gpu(0).cpu_affinity == "0-19,40-59"
    # every GPU still has its NICs, from the NIC rows, as the whole table gives them
    for gpu in range(8):
        assert sorted(facts.gpu(gpu).nics, key=str) == sorted(whole.gpu(gpu).nics, key=str) != []


def test_a_clipped_field_does_not_shift_the_affinity(tmp_path):
    clipped = variant(
        tmp_path, "h20-8-nvswitch-topo-m.txt", lambda t: t.replace("PHB     PHB     96-191,288-383", "PHB     PH96-191,288-383")
    )
    lines = lines_of(clipped)
    assert lines[1] == (f"{clipped}:9: damaged: row GPU6, column NIC1 reads 'PH96-191,288-383': not a link type "
                        "(a clipped field); that cell is not used, nor the row's affinity fields after it")
    facts = import_files([clipped]).facts
    assert isinstance(facts.gpu(6).cpu_affinity, Unavailable) and facts.gpu(5).cpu_affinity == "96-191,288-383"
    # the clipped cell is read from the NIC1 row, which says the same the other way round
    assert facts.gpu(6).nics == [NicLink(nic="NIC0", link="PHB"), NicLink(nic="NIC1", link="PHB")]


def test_cells_that_disagree_leave_the_pair_unknown(tmp_path):
    text = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-15\nGPU1\tPHB\t X \t0-15\n"
    path = tmp_path / "asymmetric.txt"
    path.write_text(text)
    assert lines_of(path)[1] == f"{path}:3: damaged: GPU1 to GPU0 reads PHB but GPU0 to GPU1 reads NV4: the pair gpu0-gpu1 is not used"
    assert import_files([path]).facts.link(0, 1).link_type.unavailable == "not_probed"


def test_a_log_cut_short_leaves_the_rest_unknown_and_a_crash_fails_it(tmp_path):
    cut = variant(tmp_path, "h100-2x8-ib-nccl-tests-all_reduce_perf.txt", lambda t: t[: t.index("  2147483648")])
    sweep = import_files([cut]).facts.measurements.collectives
    assert max(r.size_bytes for r in sweep.results) == 1 << 30
    missing = {f.step: f for f in sweep.failures}
    assert set(missing) == {"all_reduce 2 GiB", "all_reduce 4 GiB", "all_reduce 8 GiB", "all_reduce 16 GiB"}
    assert missing["all_reduce 4 GiB"].reason == "not_in_log"
    assert missing["all_reduce 4 GiB"].message == f"the log ends after 1 GiB ({cut} is cut short)"
    assert f"{cut}:20: damaged: the log ends after 1073741824 bytes without nccl-tests' closing lines (# Avg bus bandwidth): " \
        "the sizes it did not reach are unknown" in import_files([cut]).lines()
    crash = "bm-h100-02: Test NCCL failure common.cu:303 'remote process exited or there was a network error / '"
    crashed = variant(tmp_path, "h100-2x8-ib-nccl-tests-all_reduce_perf.txt",
                      lambda t: t.replace("  2147483648", f"{crash}\n  2147483648", 1), "crashed.txt")
    failures = {f.step: f for f in import_files([crashed]).facts.measurements.collectives.failures}
    # rows after the crash line are still rows the log holds: only sizes it never reached fail
    assert failures == {}


def test_a_row_broken_by_other_output_is_not_used(tmp_path):
    row = "  1073741824     268435456     float     sum      -1"
    broken = variant(tmp_path, "h100-2x8-ib-nccl-tests-all_reduce_perf.txt",
                     lambda t: t.replace(f"{row}   4484.9", f"{row} bm-h100-01:29262:29300 [0] NCCL INFO"))
    imported = import_files([broken])
    assert any("damaged: the row for 1073741824 bytes is cut or broken by other output" in line for line in imported.lines())
    assert 1 << 30 not in {r.size_bytes for r in imported.facts.measurements.collectives.results}


def test_tagged_launcher_output_reads_like_plain_output(tmp_path):
    tagged = variant(tmp_path, "a100-2node-roce-nccl-tests-all_reduce.txt",
                     lambda t: "".join(f"[1,{i % 16}]<stdout>:{line}\n" for i, line in enumerate(t.splitlines())))
    srun = variant(tmp_path, "a100-2node-roce-nccl-tests-all_reduce.txt",
                   lambda t: "".join(f"{i % 16}: {line}\n" for i, line in enumerate(t.splitlines())), "srun.txt")
    for path in (tagged, srun):
        sweep = import_files([path]).facts.measurements.collectives
        assert sweep.ranks == 16 and [r.busbw_GBps for r in sweep.results] == [184.57, 187.28, 188.5]


def test_an_nvlink_listing_with_a_link_down(tmp_path):
    down = variant(tmp_path, "rtx3090-2-nvlink-rig-report.txt", lambda t: t.replace(
        "         Link 3: 14.062 GB/s\n```", "         Link 3: <inactive>\n```"))
    gpu = import_files([down]).facts.gpu(1)
    assert [(n.link, n.active) for n in gpu.nvlinks] == [(0, True), (1, True), (2, True), (3, False)]


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "the file is empty"),
        (b"\x7fELF\x02\x01\x01\x00\x00", "a binary file (it holds NUL bytes), not the text of a command's output"),
        (b"Thu Jun 12 16:51:17 2025\n| NVIDIA-SMI 560.35.03 |\n", "not an output this tool reads: no nvidia-smi topo -m table, "
         "topo -p2p grid, nvlink -s listing or nccl-tests log in it"),
        (b" \tGPU0\tGPU1\t\n GPU0\tX\tOK\t\n GPU1\tOK\tX\t\n", "a nvidia-smi topo -p2p grid whose capability the file does not say "
         "(keep the command line above it, nvidia-smi topo -p2p r, or name the file ...-p2p-r.txt)"),
        (b"# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1\n"
         b"#  Rank  0 Group  0 Pid 1 on h device  0 [0x21] NVIDIA GeForce RTX 5090\n",
         "an nccl-tests log that does not say which collective ran (no `Collective test starting` line or *_perf command in it): "
         "name the file after it, e.g. all_reduce_perf.log"),
        (b"# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1\n"
         b"#  Rank  0 Group  0 Pid 1 on h device  " + b"9" * 5000 + b" [0x21] NVIDIA H100\n",
         "a number of more than 100 digits: not the output of a command this tool reads"),
    ],
    ids=["empty", "binary", "nvidia-smi-table", "p2p-grid-of-unknown-capability", "nccl-log-of-unknown-collective",
         "number-python-will-not-read"],
)
def test_files_that_cannot_be_read_are_refused_in_one_line(tmp_path, content, message):
    path = tmp_path / "output.txt"
    path.write_bytes(content)
    with pytest.raises(ImportedTextError) as refused:
        import_files([path])
    [line] = refused.value.lines()
    assert line.startswith(f"{path}") and line.endswith(message)


def test_several_bad_files_are_all_named_at_once(tmp_path):
    empty, missing = tmp_path / "empty.txt", tmp_path / "missing.txt"
    empty.write_text("")
    with pytest.raises(ImportedTextError) as refused:
        import_files([empty, missing, IMPORTS / "l4-2-pcie-topo-p2p-r.txt"])
    assert refused.value.lines() == [f"{empty}: the file is empty", f"{missing}: cannot read it: No such file or directory"]


def test_an_endless_stream_is_refused_after_64_mib_not_read_to_its_end():
    with pytest.raises(ImportedTextError) as refused:
        import_files([Path("/dev/zero")])  # read whole, it would fill the memory
    assert refused.value.lines() == ["/dev/zero: larger than any command output this tool reads (64 MiB)"]


def test_a_single_gpu_without_nics(tmp_path):
    # the reference 4xH200 capture cut down to its first GPU, as a 1-GPU VM prints it
    one = tmp_path / "one.txt"
    one.write_text("\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-63\t0\t\tN/A\n")
    facts = import_files([one]).facts
    assert facts.gpu_count == 1 and facts.links == [] and facts.gpu(0).cpu_affinity == "0-63" and facts.gpu(0).nics == []


H100_LOG = "h100-2x8-ib-nccl-tests-all_reduce_perf.txt"


@pytest.mark.parametrize("cell", ["-1", "nan"])
def test_a_row_with_a_negative_or_nan_bandwidth_is_not_used(tmp_path, cell):
    row = "  8589934592    2147483648     float     sum      -1    34381  "
    damaged = variant(tmp_path, H100_LOG, lambda t: t.replace(f"{row}249.84", f"{row}{cell}"))
    imported = import_files([damaged])
    assert f"{damaged}:76: damaged: the row for 8589934592 bytes reads '34381 {cell} 468.46' as its time, algbw and busbw: " \
        "a negative or not-a-number figure is no measurement: not used" in imported.lines()
    sizes = {r.size_bytes for r in imported.facts.measurements.collectives.results}
    assert 8 << 30 not in sizes and {4 << 30, 16 << 30} <= sizes  # the rows either side are still used


def test_a_bus_id_that_is_not_hex_is_not_used(tmp_path):
    domain = variant(tmp_path, H100_LOG, lambda t: t.replace("[0000:19:00]", "[00g0:19:00]", 1))
    facts = import_files([domain]).facts
    assert f"{domain}:25: damaged: rank 0's bus id [00g0:19:00] is not a PCI bus id: it is not used" in lines_of(domain)
    assert facts.gpu(0).pci_bus_id == "" and facts.gpu(1).pci_bus_id == "00000000:3B:00.0"
    older = variant(tmp_path, "rtx5090-2-nccl-tests-all_reduce_perf-crashed.txt", lambda t: t.replace("[0x21]", "[0xg]"))
    facts = import_files([older]).facts
    assert f"{older}:5: damaged: rank 0's bus id [0xg] is not a PCI bus id: it is not used" in lines_of(older)
    assert facts.gpu(0).pci_bus_id == "" and facts.gpu(1).pci_bus_id == "00000000:61:00.0"


# 1024 is the first index past the bound: a fix that lets it through builds 1025 GPUs and fails here
# quickly, where 999999999 (as found) would hang the test
def test_a_gpu_index_beyond_any_machine_is_not_believed(tmp_path):
    listing = variant(tmp_path, "rtxa6000-3-bridged-pair-topo-m-nvlink-s.txt",
                      lambda t: t.replace("GPU 1: NVIDIA RTX A6000", "GPU 1024: NVIDIA RTX A6000"))
    assert f"{listing}:26: damaged: GPU 1024 is beyond any machine (GPU indices stop at 1023 here): a damaged line; " \
        "its links are not used" in lines_of(listing)
    facts = import_files([listing]).facts
    assert facts.gpu_count == 3 and isinstance(facts.gpu(1).nvlinks, Unavailable) and len(facts.gpu(0).nvlinks) == 4
    log = variant(tmp_path, H100_LOG, lambda t: t.replace("on bm-h100-01 device  3 [", "on bm-h100-01 device  1024 ["))
    assert f"{log}:28: damaged: rank 3 is on device 1024, beyond any machine (GPU indices stop at 1023 here): a damaged " \
        "line; this rank line is not used" in lines_of(log)
    assert import_files([log]).facts.gpu_count == 8


def test_a_gpu_count_beyond_any_machine_is_refused(tmp_path):
    def one_process_of_1025_gpus(text):
        text = text.replace("nGpus 2 ", "nGpus 1025 ")
        return "\n".join(line for line in text.splitlines() if "Rank " not in line) + "\n"

    damaged = variant(tmp_path, "rtx5090-2-nccl-tests-all_reduce_perf-crashed.txt", one_process_of_1025_gpus)
    with pytest.raises(ImportedTextError) as refused:
        import_files([damaged])
    assert refused.value.lines() == [f"{damaged}:2: all_reduce_perf on one host has 1025 GPUs, beyond any machine (this tool "
                                     "reads at most 1024): a damaged output"]


def test_a_header_of_no_timed_iterations_is_refused(tmp_path):
    damaged = variant(tmp_path, H100_LOG, lambda t: t.replace("warmup iters: 5 iters: 20", "warmup iters: 5 iters: 0"))
    with pytest.raises(ImportedTextError) as refused:
        import_files([damaged])
    assert refused.value.lines() == [f"{damaged}:20: the header says iters: 0: a run that timed nothing; its rows are no measurement"]


def test_damaged_rows_reach_every_command_as_lines_not_tracebacks(tmp_path, capsys):
    from gpuaccept.cli import main as cli

    row = "  8589934592    2147483648     float     sum      -1    34381  "
    damaged = variant(tmp_path, H100_LOG, lambda t: t.replace(f"{row}249.84", f"{row}-1"))
    assert cli(["import", str(damaged), "-o", str(tmp_path / "facts.json")]) == 0
    assert cli(["profile", "init", "--from-text", str(damaged), "--name", "z", "-o", str(tmp_path / "z.yaml")]) == 0
    assert f"{damaged}:76: damaged: the row for 8589934592 bytes" in capsys.readouterr().err
    refused = variant(tmp_path, H100_LOG, lambda t: t.replace("iters: 20", "iters: 0"), "refused.txt")
    assert cli(["profile", "init", "--from-text", str(refused), "--name", "z", "-o", str(tmp_path / "y.yaml")]) == 2
    assert capsys.readouterr().err.splitlines() == [f"gpu-accept: {refused}:20: the header says iters: 0: a run that timed "
                                                    "nothing; its rows are no measurement"]


def _damaged_versions(text: str, seed: int):
    """The ways a capture arrives damaged, each applied once: cut after each line, each line left
    out, each line doubled, and tokens swapped for what pastes and edits put there."""
    import random
    import re

    lines = text.splitlines(keepends=True)
    chosen = random.Random(seed)
    some = sorted(chosen.sample(range(len(lines)), min(len(lines), 15)))  # a sample keeps the test's time bounded
    for i in some:
        yield f"cut after line {i}", "".join(lines[:i])
        yield f"line {i + 1} left out", "".join(lines[:i] + lines[i + 1:])
        yield f"line {i + 1} twice", "".join(lines[: i + 1] + lines[i:])
    tokens = [m.span() for m in re.finditer(r"\S+", text)]
    for _ in range(30):
        start, end = chosen.choice(tokens)
        put = chosen.choice(["", "X", "-1", "nan", "inf", "999999999999", "0", "NV99", "N/A", "......", "[...]", "GPU0", "1e308"])
        yield f"{text[start:end]!r} at {start} as {put!r}", text[:start] + put + text[end:]


@pytest.mark.slow
@pytest.mark.parametrize("capture", sorted(IMPORTS.glob("*.txt")) + sorted((DATA / "reference" / "h200x4").glob("*.txt")),
                         ids=lambda path: path.stem)
def test_no_damage_to_a_real_capture_ends_in_a_traceback(tmp_path, capture):
    path = tmp_path / capture.name  # the capture's own name: a log's collective may be told by it
    for change, text in _damaged_versions(capture.read_text(encoding="utf-8"), seed=len(capture.name)):
        path.write_text(text, encoding="utf-8")
        try:
            imported = import_files([path])
        except ImportedTextError as refused:
            assert refused.lines() and all("\n" not in line for line in refused.lines()), change
            continue
        assert all("\n" not in line for line in imported.lines()), change
