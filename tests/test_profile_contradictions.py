"""Profiles that contradict themselves are refused at load, one line naming the file, the key and
the contradiction: each case is a shipped profile extended with the contradiction."""

import os

import pytest

from gpuaccept.cli import main
from tests.helpers import write

LONG_NUMBER = "1" + "0" * 400  # YAML reads it; as seconds it is infinity


@pytest.mark.parametrize(
    "profile, expected",
    [
        (
            "nvlink:\n  active_links: 18\n  inactive_by_design: {gpu0: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]}\n",
            "{file}:4: nvlink.inactive_by_design.gpu0: 18 links up and 18 down by design make 36 links on gpu0; an NVLink 4.0 GPU "
            "has at most 18",
        ),
        (  # without a version: no GPU of any generation has 36 links (NVML's array of 36 is no GPU's count)
            "nvlink:\n  version: null\n  active_links: 18\n  inactive_by_design: {gpu1: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, "
            "15, 16, 17]}\n",
            "{file}:5: nvlink.inactive_by_design.gpu1: 18 links up and 18 down by design make 36 links on gpu1; a GPU of any NVLink "
            "generation has at most 18",
        ),
        ("nvlink:\n  active_links: 0\nlinks: {all: NV18}\np2p: null\n", "{file}:4: links.all: NV18 needs NVLinks up on gpu0, "
         "but nvlink expects gpu0 to have 0 active links"),
        (
            "nvlink:\n  active_links: 0\nlinks: null\n",
            "profiles/bases/hgx-h200.yaml:26: p2p.all.nvlink: P2P over NVLink needs NVLinks up on gpu0, but nvlink expects gpu0 "
            "to have 0 active links",
        ),
        ("ddp:\n  world_sizes: [1, 2, 2, 4]\n", "{file}:3: ddp.world_sizes: 2 listed twice: each setting is measured once"),
        ("ddp:\n  batches: [8, 8]\n", "{file}:3: ddp.batches: 8 listed twice: each setting is measured once"),
        (f'burnin:\n  fabric_interval: "{LONG_NUMBER}s"\n', "{file}:3: burnin.fabric_interval: '1000000000000000000000000000000000000000': "
         "longer than any run this tool makes (at most 31 days)"),
        (f'burnin:\n  duration: "{LONG_NUMBER}"\n', "{file}:3: burnin.duration: '1000000000000000000000000000000000000000': "
         "longer than any run this tool makes (at most 31 days)"),
    ],
    ids=["all-links-down-by-design", "all-links-down-by-design-of-no-version", "nv18-without-links", "p2p-nvlink-without-links",
         "world-twice", "batch-twice",
         "endless-interval", "endless-burnin"],
)
def test_a_profile_that_contradicts_itself_is_refused_in_one_line(tmp_path, capsys, profile, expected):
    path = write(tmp_path / "sick.yaml", "extends: h200-4-nvswitch\n" + profile)
    assert main(["profile", "validate", str(path)]) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].endswith(expected.format(file=path)), err
    assert "Traceback" not in err


def test_an_extends_chain_of_1500_profiles_is_one_line_not_a_recursion_error(tmp_path, capsys):
    for i in range(1500):
        write(tmp_path / f"p{i}.yaml", f"extends: p{i + 1}.yaml\n" if i < 1499 else "extends: h200-4-nvswitch\n")
    assert main(["profile", "validate", str(tmp_path / "p0.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"{tmp_path}/p32.yaml:1: extends: more than 32 profiles extend one another: the chain starts at "
                                f"{tmp_path}/p0.yaml"]


def test_a_profile_given_through_a_pipe_is_read(tmp_path, capsys):
    fifo = tmp_path / "profile.yaml"
    os.mkfifo(fifo)
    writer = os.fork()
    if writer == 0:  # the other end of the pipe: the profile's text, as a shell's process substitution gives it
        try:
            with open(fifo, "w") as pipe:
                pipe.write("extends: h200-4-nvswitch\ndescription: read from a pipe\n")
        finally:
            os._exit(0)
    try:
        assert main(["profile", "validate", str(fifo)]) == 0, capsys.readouterr().err
    finally:
        os.waitpid(writer, 0)
    assert capsys.readouterr().out == f"ok: {fifo} (profile)\n"
