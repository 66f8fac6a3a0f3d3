"""A bounded child's output, read as soon as the child closes it (the probe's facts, before its
drivers' teardown as it exits), and the probe's facts taken that way."""

from __future__ import annotations

import sys
import time

import pytest

from gpuaccept.errors import ProbeError
from gpuaccept.probe import probe_machine
from gpuaccept.process import Bounded
from tests.helpers import ROOT

FACTS = ROOT / "examples" / "facts" / "h200x4-measured.json"

CLOSES_THEN_LINGERS = (  # writes its argument, or the file it names after "@", closes its output, lingers
    "import os, sys, time\n"
    "said = sys.argv[1]\n"
    "sys.stderr.write('said before its output closed'); sys.stderr.flush()\n"
    "sys.stdout.write(open(said[1:]).read() if said.startswith('@') else said); sys.stdout.flush()\n"
    "os.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n"
    "time.sleep(60)\n"
)


def test_the_output_is_read_once_closed_without_waiting_for_the_end():
    child = Bounded([sys.executable, "-c", CLOSES_THEN_LINGERS, "the facts\n"], timeout_s=120)
    try:
        assert child.output_once_closed() == "the facts\n"
        assert child.process.poll() is None  # still running: its end was not waited for
    finally:
        child.stop()
    finished = child.finished()
    assert finished.stdout == "the facts\n" and finished.stderr == "said before its output closed"


def test_a_child_that_ends_without_closing_first_gives_all_it_wrote_and_its_exit():
    script = "import sys; sys.stdout.write('half a'); sys.stderr.write('gpu-accept: it broke'); sys.exit(3)"
    child = Bounded([sys.executable, "-c", script], timeout_s=120)
    assert child.output_once_closed() == "half a"
    finished = child.finished()
    assert (finished.returncode, finished.stdout, finished.stderr) == (3, "half a", "gpu-accept: it broke")


def test_a_child_that_floods_its_errors_before_its_output_is_still_read():
    # a full pipe of errors, unread, would stop it before it writes its output
    script = "import sys; sys.stderr.write('x' * 1_000_000); sys.stderr.flush(); sys.stdout.write('done')"
    child = Bounded([sys.executable, "-c", script], timeout_s=120)
    assert child.output_once_closed() == "done"
    finished = child.finished()
    assert finished.returncode == 0 and len(finished.stderr) == 1_000_000


def test_a_child_that_never_closes_its_output_is_killed_at_its_time_limit(tmp_path):
    wrote = tmp_path / "wrote"
    script = "import sys, time; sys.stdout.write('part'); sys.stdout.flush(); open(sys.argv[1], 'w').close(); time.sleep(60)"
    child = Bounded([sys.executable, "-c", script, str(wrote)], timeout_s=1)
    deadline = time.monotonic() + 60
    while not wrote.exists():  # what it wrote is in the pipe, however slow its start (read or not by the limit)
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert child.output_once_closed() is None
    finished = child.finished()
    assert finished.timed_out and finished.stdout == "part"
    assert child.process.poll() is not None  # killed, not left running


def test_the_probes_facts_are_taken_as_it_closes_its_output():
    probe = Bounded([sys.executable, "-c", CLOSES_THEN_LINGERS, f"@{FACTS}"], timeout_s=120)
    try:
        facts = probe_machine(started=probe)
        assert len(facts.gpus) == 4 and facts.system.hostname == "vm"
        assert probe.process.poll() is None
    finally:
        probe.stop()


def test_a_probe_cut_short_is_judged_by_its_exit_and_its_words():
    script = "import sys; sys.stdout.write(open(sys.argv[1]).read()[:5000]); sys.stderr.write('gpu-accept: NVML said no'); sys.exit(3)"
    probe = Bounded([sys.executable, "-c", script, str(FACTS)], timeout_s=120)
    with pytest.raises(ProbeError, match=r"the probe failed \(exit 3\): NVML said no"):
        probe_machine(started=probe)
