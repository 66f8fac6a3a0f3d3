"""Reading `nvidia-smi topo -m` as users paste it, against the real capture and hand-made tables."""

import pytest

from gpuaccept.vocabulary.links import MatrixParseError, parse_gpu_matrix, parse_link_matrix
from tests.helpers import REFERENCE


def test_real_topo_capture_with_its_escape_codes():
    text = (REFERENCE / "nvidia-smi-topo-m.txt").read_text()
    assert "\x1b[4m" in text  # the capture keeps the terminal underline
    assert parse_link_matrix(text) == [
        ["X", "NV18", "NV18", "NV18"],
        ["NV18", "X", "NV18", "NV18"],
        ["NV18", "NV18", "X", "NV18"],
        ["NV18", "NV18", "NV18", "X"],
    ]


def test_real_p2p_capture_reads_as_the_same_grid():
    grid = parse_gpu_matrix((REFERENCE / "nvidia-smi-topo-p2p-r.txt").read_text())
    assert [row[1] for row in grid] == ["OK", "X", "OK", "OK"]


def test_nic_rows_and_columns_and_affinity_are_ignored():
    text = """
            GPU0    GPU1    NIC0    CPU Affinity    NUMA Affinity
    GPU0     X      NV4     PXB     0-15            0
    GPU1    NV4      X      SYS     0-15            0
    NIC0    PXB     SYS      X

    Legend:
      X    = Self
    """
    assert parse_link_matrix(text) == [["X", "NV4"], ["NV4", "X"]]


def test_single_gpu_block():
    text = "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-15\t0\t\tN/A\n"
    assert parse_link_matrix(text) == [["X"]]


@pytest.mark.parametrize(
    "text, message",
    [
        ("GPU0 GPU1\nGPU0 X NV4\nGPU1 PHB X\n", "GPU1 to GPU0 reads PHB but GPU0 to GPU1 reads NV4"),
        ("GPU0 GPU1\nGPU0 X NV4\n", "no row for GPU1"),
        ("GPU0 GPU1\nGPU0 X PCI\nGPU1 PCI X\n", "not a link type"),
        ("GPU0 GPU1\nGPU0 NV4 NV4\nGPU1 NV4 X\n", "expected X"),
        ("GPU0 GPU2\nGPU0 X NV4\nGPU2 NV4 X\n", "in order"),
        ("GPU0 GPU1\nGPU0 X\nGPU1 NV4 X\n", "has 1 entries for 2 GPU columns"),
        ("no table here\n", "no header row"),
    ],
)
def test_malformed_tables_say_what_is_wrong(text, message):
    with pytest.raises(MatrixParseError, match=message):
        parse_link_matrix(text)
