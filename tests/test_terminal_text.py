"""What a machine or a file says reaches the terminal escaped: a host name or a profile description
holding escape sequences (set the window title, clear the screen, move up a line to forge a PASS)
is shown as text, never acted on; a key with an invisible or look-alike character is marked."""

import json
import subprocess
import sys

import pytest

from gpuaccept.cli import main
from gpuaccept.errors import format_path, shown
from tests.helpers import EXAMPLES, write

FORGERY = "\x1b]0;owned\x07\x1b[2J\x1b[1A\rtest_busbw PASSED\u202e"


def test_shown_escapes_what_a_terminal_acts_on_and_keeps_what_it_prints():
    assert shown(f"node7{FORGERY}") == "node7\\x1b]0;owned\\x07\\x1b[2J\\x1b[1A\\rtest_busbw PASSED\\u202e"
    assert shown("NVIDIA H200 — 141 GiB, 38 °C\tok") == "NVIDIA H200 — 141 GiB, 38 °C\tok"
    assert shown("two\nlines") == "two\\nlines"
    assert shown(shown(FORGERY)) == shown(FORGERY)
    long = shown("x" * 60_000)
    assert len(long) <= 2000 and long.endswith("... (cut: 60000 characters)")


def test_a_key_with_an_invisible_or_look_alike_character_is_marked():
    assert format_path(("nvlink", "active_links")) == "nvlink.active_links"
    assert format_path(("nvlink", "active\u200b_links")) == "nvlink.'active\\u200b_links'"
    assert format_path(("gp\u0443s", "count")) == "'gp\\u0443s'.count"  # a Cyrillic u


def test_an_unknown_profile_key_with_a_zero_width_space_says_so(tmp_path, capsys):
    path = write(tmp_path / "sick.yaml", "extends: h200-4-nvswitch\nnvlink:\n  active\u200b_links: 18\n")
    assert main(["profile", "validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:3: nvlink.'active\\u200b_links': unknown key (did you mean 'active_links'?)" in err, err
    assert "\u200b" not in err


def test_profile_list_shows_a_description_escaped(tmp_path, capsys):
    write(tmp_path / "forged.yaml", f'extends: h200-4-nvswitch\ndescription: "4x H200{FORGERY.encode("unicode_escape").decode()}"\n')
    assert main(["profile", "list", "--profile-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("forged"))
    assert "4x H200\\x1b]0;owned\\x07\\x1b[2J" in line
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out


@pytest.mark.slow
def test_the_run_header_shows_a_host_name_escaped(tmp_path):
    recorded = json.loads((EXAMPLES / "h200x4-measured.json").read_text(encoding="utf-8"))
    recorded["system"]["hostname"] = f"node7{FORGERY}"
    facts = write(tmp_path / "facts.json", json.dumps(recorded))
    done = subprocess.run(
        [sys.executable, "-m", "gpuaccept", "run", "--profile", "h200-4-nvswitch", "--facts", str(facts),
         "--reports", str(tmp_path / "reports"), "-k", "test_gpu_count"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    header = next(line for line in done.stdout.splitlines() if line.startswith("gpu-accept: profile"))
    assert "node7\\x1b]0;owned\\x07\\x1b[2J\\x1b[1A\\rtest_busbw PASSED\\u202e" in header
    assert "\x1b]" not in done.stdout + done.stderr and "\x07" not in done.stdout + done.stderr
