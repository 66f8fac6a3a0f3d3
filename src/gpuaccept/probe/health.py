"""Health readings through the NVML door: a snapshot of each GPU's error counters, clock events,
temperatures and software state; XID events listened for while the suite runs; NVRM Xid lines
in the kernel log.

Every value is a reading: NVML's "not supported" (common in VMs) is kept as such, never as 0.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuaccept.facts.health import (
    LINK_COUNTERS_NOT_AT_QUICK,
    ClockEventTimes,
    ComputeProcess,
    EccCounts,
    HealthFacts,
    HealthSnapshot,
    KernelLog,
    NvLinkErrors,
    XidEvent,
)
from gpuaccept.facts.machine import GpuFacts
from gpuaccept.facts.record import Unavailable, is_known, not_probed
from gpuaccept.probe import collect
from gpuaccept.probe.collect import normalize_bus_id
from gpuaccept.probe.nvml import Nvml, NvmlCallError

# NVML's numbers, spelled out here so that replay needs no pynvml
CORRECTED, UNCORRECTED = 0, 1  # nvmlMemoryErrorType_t
VOLATILE, AGGREGATE = 0, 1  # nvmlEccCounterType_t
DRAM, SRAM = 2, 7  # nvmlMemoryLocation_t
RETIRED_SBE, RETIRED_DBE = 0, 1  # nvmlPageRetirementCause_t: multiple single-bit ECC errors, a double-bit ECC error
NVLINK_REPLAY, NVLINK_RECOVERY, NVLINK_CRC_FLIT, NVLINK_CRC_DATA = 0, 1, 2, 3  # nvmlNvLinkErrorCounter_t
THRESHOLD_SHUTDOWN, THRESHOLD_SLOWDOWN, THRESHOLD_MEM_MAX, THRESHOLD_GPU_MAX = 0, 1, 2, 3
CLOCK_SM = 1


class Field:
    """NVML field ids (nvmlDeviceGetFieldValues)."""

    SW_POWER_CAP_NS = 74
    SYNC_BOOST_NS = 76
    MEMORY_TEMP = 82
    PCIE_REPLAY = 94
    PCIE_REPLAY_ROLLOVER = 95
    REMAPPED_COR = 142
    REMAPPED_UNC = 143
    REMAPPED_PENDING = 144
    REMAPPED_FAILURE = 145
    PCIE_L0_TO_RECOVERY = 169
    PCIE_CORRECTABLE = 173
    RECOVERY_ACTION = 230
    SW_THERMAL_NS = 269
    HW_THERMAL_NS = 270
    HW_POWER_BRAKE_NS = 271


# nvmlEventType: what the listener registers for, and how each is named in the facts
EVENT_DOUBLE_BIT_ECC = 0x2
EVENT_XID_CRITICAL = 0x8
EVENT_RECOVERY_ACTION = 0x8000
EVENT_MASK = EVENT_XID_CRITICAL | EVENT_DOUBLE_BIT_ECC | EVENT_RECOVERY_ACTION
EVENT_KINDS = {EVENT_XID_CRITICAL: "xid", EVENT_DOUBLE_BIT_ECC: "double_bit_ecc", EVENT_RECOVERY_ACTION: "recovery_action"}


@dataclass(frozen=True)
class Target:
    """A GPU to read: its CUDA ordinal (the `gpuN` of test ids), NVML index and active NVLinks."""

    gpu: int
    nvml_index: int
    active_links: tuple[int, ...]
    pci_bus_id: str = ""

    @classmethod
    def of(cls, gpu: GpuFacts) -> Target:
        links = tuple(link.link for link in gpu.nvlinks if link.active) if isinstance(gpu.nvlinks, list) else ()
        return cls(gpu.index, gpu.nvml_index, links, gpu.pci_bus_id)


def read(nvml: Nvml, name: str, *args: int, convert: Callable[[Any], Any] = lambda v: v) -> Any:
    """A reading; a recording made before this query was asked has no answer for it: not read, not an error."""
    value = collect.read(nvml, name, *args, convert=convert)
    if isinstance(value, Unavailable) and "NOT_RECORDED" in value.detail:
        return not_probed(f"not in this NVML recording: {name}")
    return value


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


# The InfoROM is judged on the reading before any load (checks/health/state.py): validating it
# takes about 70 ms a GPU (an H200's), paid again by every reading after a stage for nothing.
START_LABEL = "start"
INFOROM_AT_START_ONLY = not_probed("the InfoROM is validated in the reading at the start only")


def take_snapshot(
    nvml: Nvml, target: Target, label: str, own_pids: frozenset[int] = frozenset(), link_counters: bool = True
) -> HealthSnapshot:
    """One GPU's health as NVML answers now. `own_pids`: processes of the suite itself (the probe
    holds a CUDA context while it runs), left out of the GPU's compute processes. The InfoROM is
    validated where `label` is the start's reading; NVLink's error counters are read unless
    `link_counters` is False (the quick level's reading)."""
    i = target.nvml_index

    def link_counter(link: int, counter: int) -> Any:
        return read(nvml, "nvlink_error_counter", i, link, counter) if link_counters else LINK_COUNTERS_NOT_AT_QUICK

    def field(number: int) -> Any:
        return read(nvml, "field_value", i, number, 0)  # scope 0: the whole GPU

    def ecc(location: int | None) -> EccCounts:
        def count(kind: int, counter: int) -> Any:
            if location is None:
                return read(nvml, "total_ecc_errors", i, kind, counter)
            return read(nvml, "memory_error_counter", i, kind, counter, location)

        return EccCounts(
            corrected_volatile=count(CORRECTED, VOLATILE),
            uncorrected_volatile=count(UNCORRECTED, VOLATILE),
            corrected_aggregate=count(CORRECTED, AGGREGATE),
            uncorrected_aggregate=count(UNCORRECTED, AGGREGATE),
        )

    remap = read(nvml, "remapped_rows", i)
    if is_known(remap):
        corrected, uncorrected, pending, failure = remap[0], remap[1], bool(remap[2]), bool(remap[3])
    else:
        corrected = uncorrected = pending = failure = remap
    sram = read(nvml, "sram_ecc_status", i)
    power = read(nvml, "power_usage_mw", i, convert=lambda mw: mw / 1000)
    limit = read(nvml, "power_limit_mw", i, convert=lambda mw: mw / 1000)
    mig = read(nvml, "mig_mode", i, convert=lambda modes: int(modes[0]))
    return HealthSnapshot(
        gpu=target.gpu,
        label=label,
        taken_at=now(),
        ecc=ecc(None),
        dram=ecc(DRAM),
        sram=ecc(SRAM),
        sram_threshold_exceeded=bool(sram["bThresholdExceeded"]) if is_known(sram) else sram,
        retired_pages_sbe=read(nvml, "retired_pages", i, RETIRED_SBE),
        retired_pages_dbe=read(nvml, "retired_pages", i, RETIRED_DBE),
        retired_pending=read(nvml, "retired_pages_pending", i, convert=bool),
        remapped_corrected=corrected,
        remapped_uncorrected=uncorrected,
        remap_pending=pending,
        remap_failure=failure,
        recovery_action=field(Field.RECOVERY_ACTION),
        pcie_replay=read(nvml, "pcie_replay_counter", i),
        pcie_replay_rollover=field(Field.PCIE_REPLAY_ROLLOVER),
        pcie_correctable=field(Field.PCIE_CORRECTABLE),
        pcie_l0_to_recovery=field(Field.PCIE_L0_TO_RECOVERY),
        nvlink_errors=[
            NvLinkErrors(
                link=link,
                replay=link_counter(link, NVLINK_REPLAY),
                recovery=link_counter(link, NVLINK_RECOVERY),
                crc_flit=link_counter(link, NVLINK_CRC_FLIT),
                crc_data=link_counter(link, NVLINK_CRC_DATA),
            )
            for link in target.active_links
        ],
        clock_event_reasons=read(nvml, "clock_event_reasons", i),
        clock_event_ns=ClockEventTimes(
            sw_power_cap=field(Field.SW_POWER_CAP_NS),
            sync_boost=field(Field.SYNC_BOOST_NS),
            sw_thermal=field(Field.SW_THERMAL_NS),
            hw_thermal=field(Field.HW_THERMAL_NS),
            hw_power_brake=field(Field.HW_POWER_BRAKE_NS),
        ),
        temperature_C=read(nvml, "temperature", i),
        memory_temperature_C=read(nvml, "field_value", i, Field.MEMORY_TEMP, 0, convert=int),
        slowdown_C=read(nvml, "temperature_threshold", i, THRESHOLD_SLOWDOWN),
        shutdown_C=read(nvml, "temperature_threshold", i, THRESHOLD_SHUTDOWN),
        gpu_max_C=read(nvml, "temperature_threshold", i, THRESHOLD_GPU_MAX),
        memory_max_C=read(nvml, "temperature_threshold", i, THRESHOLD_MEM_MAX),
        power_W=float(power) if is_known(power) else power,
        power_limit_W=float(limit) if is_known(limit) else limit,
        sm_clock_MHz=read(nvml, "clock_mhz", i, CLOCK_SM),
        sm_clock_max_MHz=read(nvml, "max_clock_mhz", i, CLOCK_SM),
        persistence_mode=read(nvml, "persistence_mode", i, convert=bool),
        inforom_valid=_inforom(nvml, i) if label == START_LABEL else INFOROM_AT_START_ONLY,
        compute_processes=_processes(nvml, i, own_pids),
        mig_mode=mig,
        virtualization_mode=read(nvml, "virtualization_mode", i),
    )


def _inforom(nvml: Nvml, i: int) -> bool | Unavailable:
    try:
        return bool(nvml.query("inforom_valid", i))
    except NvmlCallError as error:
        if error.code == "CORRUPTED_INFOROM":
            return False  # the answer itself: the checksum failed
        return read(nvml, "inforom_valid", i)  # type: ignore[no-any-return]  # the same error, as a reading


def _processes(nvml: Nvml, i: int, own_pids: frozenset[int]) -> list[ComputeProcess] | Unavailable:
    found = read(nvml, "compute_processes", i)
    if not is_known(found):
        return found  # type: ignore[no-any-return]
    kept = []
    for process in found:
        if process["pid"] in own_pids:
            continue
        used = process.get("used_memory")
        kept.append(
            ComputeProcess(
                pid=process["pid"],
                used_memory_bytes=used if isinstance(used, int) else Unavailable(unavailable="not_supported", detail="used memory"),
                name=_command_of(process["pid"]),
            )
        )
    return kept


def _command_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return ""  # another container's process, or gone already


def take_snapshots(
    nvml: Nvml, targets: list[Target], label: str, own_pids: frozenset[int] = frozenset(), link_counters: bool = True
) -> list[HealthSnapshot]:
    return [take_snapshot(nvml, target, label, own_pids, link_counters) for target in targets]


# --- the kernel log ---------------------------------------------------------------------------

# "[ 1234.567890] NVRM: Xid (PCI:0000:18:00): 79, pid=..., GPU has fallen off the bus.", as dmesg
# prints it; a log file puts syslog's date and host before it ("Nov 23 07:00:01 gpu-17 kernel: [...")
XID_LINE = re.compile(r"^(?P<prefix>.*?)NVRM: Xid \(PCI:(?P<bus>[0-9A-Fa-f:.]+)\): (?P<xid>\d+),")
KERNEL_SECONDS = re.compile(r"\[\s*(?P<seconds>\d+\.\d+)\]")


def parse_kernel_xids(text: str, gpus_by_bus: dict[str, int], during_run: bool = False) -> list[XidEvent]:
    """NVRM Xid lines of a kernel log, for the GPUs under test (matched by PCI bus id)."""
    events = []
    for line in text.splitlines():
        found = XID_LINE.search(line)
        if not found:
            continue
        bus = _bus_key(found["bus"])
        gpu = gpus_by_bus.get(bus)
        if gpu is None:
            continue  # a GPU not under test
        stamp = KERNEL_SECONDS.search(found["prefix"])
        when = f"boot+{stamp['seconds']}s" if stamp else "since boot"
        events.append(
            XidEvent(gpu=gpu, xid=int(found["xid"]), time=when, source="kernel_log", during_run=during_run, text=line.strip()[:300])
        )
    return events


def _bus_key(bus_id: str) -> str:
    """Kernel lines name the device without its function (0000:18:00): compare domain, bus, device."""
    text = bus_id if bus_id.count(".") else bus_id + ".0"
    return normalize_bus_id(text).rsplit(".", 1)[0]


def gpus_by_bus(targets: list[Target]) -> dict[str, int]:
    return {_bus_key(target.pci_bus_id): target.gpu for target in targets if target.pci_bus_id}


KERNEL_LOG_FILES = (Path("/var/log/kern.log"), Path("/var/log/messages"))


def read_kernel_log(
    targets: list[Target], run: Callable[[list[str]], str] | None = None, files: tuple[Path, ...] = KERNEL_LOG_FILES
) -> tuple[KernelLog, list[XidEvent]]:
    """NVRM Xid lines since boot, from `dmesg`, else a log file; where neither can be read, say why."""
    run = run or _dmesg
    reasons = []
    try:
        text = run(["dmesg", "--kernel", "--nopager"])
        return KernelLog(readable=True, note="dmesg"), parse_kernel_xids(text, gpus_by_bus(targets))
    except (OSError, subprocess.SubprocessError) as error:
        reasons.append(f"dmesg: {error}")
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as error:
            reasons.append(f"{path}: {error.strerror or error}")
            continue
        # a log file spans reboots: its Xid lines may predate this boot, which the note says
        return KernelLog(readable=True, note=f"{path} (may hold lines from before this boot)"), parse_kernel_xids(
            text, gpus_by_bus(targets)
        )
    return KernelLog(readable=False, note="the kernel log is not readable here: " + "; ".join(reasons)), []


def _dmesg(command: list[str]) -> str:
    finished = subprocess.run(command, capture_output=True, text=True, timeout=20, check=False)
    if finished.returncode != 0:
        raise OSError(finished.stderr.strip() or f"exit {finished.returncode}")
    return finished.stdout


# --- NVML events while the suite runs ------------------------------------------------------------


class XidListener:
    """Registers for critical XID, double-bit ECC and recovery-action events on every GPU under
    test, then waits for them on a daemon thread until stopped. NVML keeps no events from before
    registration: start it before the first load. `on_event` is called for each event (from the
    listening thread)."""

    # each wait for events lasts this long at most; the run's end waits for the one under way (a
    # tenth of a second, every run: events that come meanwhile are kept by NVML for the next wait)
    WAIT_MS = 100

    def __init__(self, nvml: Nvml, targets: list[Target], on_event: Callable[[XidEvent], None] = lambda event: None):
        self.nvml = nvml
        self.targets = targets
        self.on_event = on_event
        self.events: list[XidEvent] = []
        self.note = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._heard = self._refused = self._ended = ""
        self._by_nvml = {target.nvml_index: target.gpu for target in targets}

    def start(self) -> str:
        """Register and start listening; returns what was registered, or why not."""
        registered, refused = [], []
        for target in self.targets:
            try:
                self.nvml.query("event_register", target.nvml_index, EVENT_MASK)
                registered.append(f"gpu{target.gpu}")
            except NvmlCallError as error:
                if error.code != "NOT_SUPPORTED":
                    refused.append(f"gpu{target.gpu}: {error.code} {error.message}".strip())
                    continue
                # registration refuses the whole mask for one type it lacks: recovery-action events need driver R570+
                try:
                    self.nvml.query("event_register", target.nvml_index, EVENT_MASK & ~EVENT_RECOVERY_ACTION)
                    registered.append(f"gpu{target.gpu} (XID and ECC events only: recovery-action events not supported)")
                except NvmlCallError as again:
                    refused.append(f"gpu{target.gpu}: {again.code} {again.message}".strip())
        if registered:
            self._thread = threading.Thread(target=self._listen, name="gpuaccept-xid-listener", daemon=True)
            self._thread.start()
        self._heard = f"NVML events listened for on {', '.join(registered)} from {now()}" if registered else "no NVML event listener"
        self._refused = f"; not registered: {'; '.join(refused)}" if refused else ""
        self.note = self._heard + self._refused
        return self.note

    def _listen(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                answer = self.nvml.query("event_wait", self.WAIT_MS)
            except NvmlCallError as error:
                if error.code != "TIMEOUT":
                    self._ended = f"; listening ended early: {error.code} {error.message}".rstrip()
                    return
                # a replayed wait answers at once: wait out the rest of the time here
                self._stop.wait(max(0.0, self.WAIT_MS / 1000 - (time.monotonic() - began)))
                continue
            event = self._event(answer)
            if event is not None:
                self.events.append(event)
                self.on_event(event)

    def _event(self, answer: dict) -> XidEvent | None:
        gpu = self._by_nvml.get(answer.get("nvml_index", -1))
        kind = EVENT_KINDS.get(answer.get("type", 0))
        if gpu is None or kind is None:
            return None
        return XidEvent(gpu=gpu, xid=int(answer.get("data", 0)), kind=kind, time=now(), source="nvml_event", during_run=True)  # type: ignore[arg-type]

    def stop(self) -> list[XidEvent]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.WAIT_MS / 1000 + 5)
        with contextlib.suppress(NvmlCallError):  # freeing is tidiness: the process ends soon after
            self.nvml.query("event_set_free")
        if self._thread is not None:
            self.note = f"{self._heard} to {now()}{self._refused}{self._ended}"
        return list(self.events)


def own_pids() -> frozenset[int]:
    return frozenset({os.getpid()})


KERNEL_LOG_OVERRIDE = "GPUACCEPT_KERNEL_LOG"  # test hook: read this file as the kernel log


def health_reading(
    nvml: Nvml, targets: list[Target], label: str, environ: dict[str, str] | None = None, link_counters: bool = True
) -> HealthFacts:
    """Snapshots of every target and the kernel log's Xid lines as they stand now (none of them
    marked as seen during the run: that is decided against the first reading)."""
    environ = dict(os.environ if environ is None else environ)
    snapshots = take_snapshots(nvml, targets, label, own_pids(), link_counters)
    override = environ.get(KERNEL_LOG_OVERRIDE)
    if override:
        log, events = read_kernel_log(targets, run=_unreadable, files=(Path(override),))
    else:
        log, events = read_kernel_log(targets)
    return HealthFacts(snapshots=snapshots, events=events, kernel_log=log)


def _unreadable(command: list[str]) -> str:
    raise OSError("not read: GPUACCEPT_KERNEL_LOG names the file to read")
