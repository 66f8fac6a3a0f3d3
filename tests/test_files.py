"""Writing outputs: whole or not at all, through links, never replacing a device, one line on failure."""

from __future__ import annotations

import errno
import stat
from pathlib import Path

import pytest

from gpuaccept.files import OutputError, write_atomically


def test_a_link_is_written_where_it_points_and_stays_a_link(tmp_path: Path) -> None:
    target = tmp_path / "kept" / "results.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "latest.json"
    link.symlink_to(target)
    write_atomically(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["results.json"]  # no partial left beside it


def test_a_device_is_written_as_given_never_replaced() -> None:
    write_atomically("/dev/null", "anything")
    assert stat.S_ISCHR(Path("/dev/null").stat().st_mode)


def test_a_write_that_fails_is_one_line_and_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(OutputError, match=r"a-file/report.html: cannot write it \(") as raised:
        write_atomically(blocker / "report.html", "x")
    assert "\n" not in str(raised.value)

    def full_disk(self: Path, text: str, encoding: str | None = None) -> int:
        self.open("w").write(text[:10])  # the first bytes land, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OutputError, match=r"results\.json: cannot write it \(No space left on device\)"):
        write_atomically(tmp_path / "results.json", "x" * 100)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_a_loop_of_links_is_one_line_for_the_option_and_for_the_writer(tmp_path):
    from gpuaccept.errors import OptionError
    from gpuaccept.outputs import check_output_file

    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(OptionError, match=r"^-o .*/a: a symbolic link that loops, or cannot be followed$"):
        check_output_file(tmp_path / "a", "-o")
    with pytest.raises(OutputError, match=r"/a: cannot write it \(a symbolic link that loops"):
        write_atomically(tmp_path / "a", "text")
