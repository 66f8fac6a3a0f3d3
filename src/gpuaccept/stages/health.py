"""Health readings around the measurement stages of a session: a snapshot of every GPU after each
stage (a bounded child process, as the probe is), XID events heard while the suite runs, and the
facts with all of them, as any pytest process of the session (xdist workers too) sees them.

Everything is kept as files in the session's folder, beside the stages' measurements:
`health-<time>-<pid>.json` per reading, `xid-events.jsonl` one event a line.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from gpuaccept.errors import GpuAcceptError
from gpuaccept.facts import Facts
from gpuaccept.facts.health import HealthFacts, HealthSnapshot, XidEvent
from gpuaccept.facts.relations import readable_time
from gpuaccept.files import write_atomically
from gpuaccept.probe.health import Target, XidListener
from gpuaccept.probe.nvml import Nvml, nvml_of_this_machine
from gpuaccept.process import kill_group

SNAPSHOT_TIMEOUT_S = 60.0
SNAPSHOT_LOG = "health-snapshots.log"
EVENTS_FILE = "xid-events.jsonl"
LISTENER_FILE = "xid-listener.txt"


def targets(facts: Facts) -> list[Target]:
    return [Target.of(gpu) for gpu in facts.gpus]


class SnapshotAfterStage:
    """A MeasurementStore hook: after a stage ran, read every GPU's health, labelled "after STAGE".

    The readings come from one child process kept for the session (probe/snapshot.py's --serve),
    started at the first reading or ahead of it (`start`): each reading is bounded by
    SNAPSHOT_TIMEOUT_S, and a child that hangs or dies is killed and a new one started for the
    next reading."""

    def __init__(self, folder: Path, say=lambda text: None):
        self.folder = Path(folder)
        self.say = say
        self._server: subprocess.Popen | None = None

    def start(self, facts: Facts) -> None:
        """Start the child now (its imports and NVML's start), for the first reading to find it ready."""
        if facts.health.snapshots and self._server is None:
            spec = [[t.gpu, t.nvml_index, list(t.active_links), t.pci_bus_id] for t in targets(facts)]
            command = [sys.executable, "-m", "gpuaccept.probe.snapshot", "--serve", "--targets", json.dumps(spec)]
            with open(self.folder / SNAPSHOT_LOG, "ab") as log:  # what it says on stderr: why it ended, where it did
                self._server = subprocess.Popen(
                    command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=dict(os.environ), start_new_session=True,
                )

    def __call__(self, stage: str, facts: Facts) -> None:
        if not facts.health.snapshots:
            return  # facts probed without health readings: nothing to compare a later one with
        label = f"after {stage}"
        self.start(facts)
        answer, why = self._ask(label)
        if answer is None:
            self.say(f"gpu-accept: health snapshot {label} not taken: {why}")
            return
        reading = HealthFacts.model_validate(answer)
        # named by when it was written and by whom: xdist workers each take theirs, at once (a count
        # of the files there gave two workers one name, and one reading was lost)
        write_atomically(self.folder / f"health-{time.time_ns():020d}-{os.getpid()}.json", reading.model_dump_json())

    def _ask(self, label: str) -> tuple[dict | None, str]:
        """The reading labelled `label`, or None and why not (the child is then ended)."""
        server = self._server
        assert server is not None and server.stdin is not None and server.stdout is not None
        try:
            server.stdin.write((label + "\n").encode())
            server.stdin.flush()
            line = _line_within(server.stdout, SNAPSHOT_TIMEOUT_S)
        except OSError:
            line = b""
        if line is None:
            self.close()
            return None, "timed out"
        if not line:
            self.close()
            said = (self.folder / SNAPSHOT_LOG).read_text(encoding="utf-8", errors="replace").strip().splitlines()
            return None, said[-1].removeprefix("gpu-accept: ") if said else "no message"
        answer = json.loads(line)
        if "error" in answer:
            return None, answer["error"]
        return answer["reading"], ""

    def close(self) -> None:
        """End the child (its input closed; killed where it does not end at once)."""
        server, self._server = self._server, None
        if server is None:
            return
        with contextlib.suppress(OSError):
            if server.stdin is not None:
                server.stdin.close()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            kill_group(server)
            server.wait()
        if server.stdout is not None:
            server.stdout.close()


def _line_within(stream, timeout_s: float) -> bytes | None:
    """One line of `stream` (b"" at its end), or None where none came within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    found = b""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        while not found.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                return None
            chunk = os.read(stream.fileno(), 1 << 20)
            if not chunk:
                return b""
            found += chunk
    return found


def with_health(facts: Facts, folder: Path) -> Facts:
    """`facts` with the readings taken after stages and the events heard so far: snapshots in the
    order taken, kernel log Xid lines not in the first reading marked as seen during the run.

    Each reading holds the whole log again. A line is new where a reading holds more lines like it
    than any reading before: lines without a time of their own (a log file whose lines carry no
    kernel timestamp) look alike, so they are counted, not only matched."""
    folder = Path(folder)
    health = facts.health
    snapshots = list(health.snapshots)
    events = list(health.events)
    known = Counter(_line_of(event) for event in events)
    kernel_log = health.kernel_log
    for path in sorted(folder.glob("health-*.json")):
        reading = HealthFacts.model_validate_json(path.read_text(encoding="utf-8"))
        snapshots.extend(reading.snapshots)
        kernel_log = reading.kernel_log or kernel_log
        here: Counter[tuple] = Counter()
        for event in reading.events:
            line = _line_of(event)
            here[line] += 1
            if here[line] > known[line]:
                known[line] += 1
                events.append(event.model_copy(update={"during_run": True}))
    heard = folder / EVENTS_FILE
    if heard.exists():
        for line in heard.read_text(encoding="utf-8").splitlines():
            if line.strip():
                events.append(XidEvent.model_validate_json(line))
    listener_note = folder / LISTENER_FILE
    listener = listener_note.read_text(encoding="utf-8") if listener_note.exists() else health.listener
    merged = HealthFacts(snapshots=in_order_taken(snapshots), events=events, listener=listener, kernel_log=kernel_log)
    return facts.model_copy(update={"health": merged})


def in_order_taken(snapshots: list[HealthSnapshot]) -> list[HealthSnapshot]:
    """The snapshots by the time each was taken: readings of several workers finish, and are
    written, in any order. One whose time cannot be read keeps its place (the facts refuse it,
    naming it)."""
    taken = [readable_time(snapshot.taken_at) for snapshot in snapshots]
    if any(moment is None for moment in taken):
        return snapshots
    order = sorted(range(len(snapshots)), key=lambda index: (taken[index], index))
    return [snapshots[index] for index in order]


def _line_of(event: XidEvent) -> tuple:
    # a line with the kernel's own time is the same line however it was read (dmesg, or a log file
    # that puts syslog's prefix before it); one without is told from others by its text
    stamped = event.time.startswith("boot+")
    return (event.source, event.gpu, event.xid, event.time, "" if stamped else event.text)


def keep_event(folder: Path, event: XidEvent) -> None:
    """One event heard by the listener, appended where every pytest process of the session reads it."""
    with open(Path(folder) / EVENTS_FILE, "a", encoding="utf-8") as file:
        file.write(event.model_dump_json() + "\n")


def keep_listener_note(folder: Path, note: str) -> None:
    write_atomically(Path(folder) / LISTENER_FILE, note)


class SessionListener:
    """The XID listener of a session: registered before the first stage, its events kept as files
    in the session's folder as they arrive. NVML is asked through the door the probe uses
    (probe/nvml.py: a recording replayed answers events too)."""

    def __init__(self, facts: Facts, folder: Path):
        self.folder = Path(folder)
        self.facts = facts
        self.listener: XidListener | None = None
        self.nvml: Nvml | None = None

    def start(self) -> str:
        if not self.facts.health.snapshots:
            return ""  # facts without health readings: a run of an older probe, or text
        try:
            self.nvml = nvml_of_this_machine()
        except GpuAcceptError as error:
            note = f"no NVML event listener: {error}"
            keep_listener_note(self.folder, note)
            return note
        self.listener = XidListener(self.nvml, targets(self.facts), on_event=lambda event: keep_event(self.folder, event))
        note = self.listener.start()
        keep_listener_note(self.folder, note)
        return note

    def stop(self) -> None:
        if self.listener is not None:
            self.listener.stop()
            keep_listener_note(self.folder, self.listener.note)
        if self.nvml is not None:
            self.nvml.close()
