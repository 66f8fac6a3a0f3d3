"""What NVML says of each GPU's health (ECC, retired and remapped rows, PCIe and NVLink errors,
thermals, processes), snapshot by snapshot, and the XID events seen."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuaccept.facts.record import BoolReading, Count, FloatReading, IntReading, Record, Unavailable


class EccCounts(Record):
    """ECC error counts of one kind of memory (all of it, DRAM or SRAM), as NVML keeps them:
    volatile since the last driver load, aggregate over the GPU's life."""

    corrected_volatile: IntReading
    uncorrected_volatile: IntReading
    corrected_aggregate: IntReading
    uncorrected_aggregate: IntReading


class NvLinkErrors(Record):
    """The error counters of one NVLink (nvmlDeviceGetNvLinkErrorCounter): on the lent H200s
    these answer per link while the all-links total fields do not."""

    link: int
    replay: IntReading
    recovery: IntReading
    crc_flit: IntReading
    crc_data: IntReading


# NVLink's error counters are judged as their change over a run's loads (checks/health/counters.py),
# never as they stand: the quick level, which loads nothing, leaves them out of its one reading
# (a call a link and counter: 72 an H200, the most of a reading after the InfoROM's check, as
# bench/README.md's "Run time" measures it)
LINK_COUNTERS_NOT_AT_QUICK = Unavailable(
    unavailable="not_probed", detail="the quick level reads no NVLink error counter: only their change over a load is judged"
)


class ClockEventTimes(Record):
    """Cumulative time, in ns, the clocks were held down for each reason (NVML fields 74, 76, 269-271)."""

    sw_power_cap: IntReading
    sync_boost: IntReading
    sw_thermal: IntReading
    hw_thermal: IntReading
    hw_power_brake: IntReading


class ComputeProcess(Record):
    pid: int
    used_memory_bytes: IntReading
    name: str = ""  # the command line where this host could read it


class HealthSnapshot(Record):
    """What NVML says about one GPU's health at one moment: `label` says when ("start",
    "after nccl"); every counter a reading, so "not supported" is never read as 0."""

    gpu: Count  # the CUDA ordinal, as in GpuFacts
    label: str
    taken_at: str  # ISO 8601, UTC
    ecc: EccCounts
    dram: EccCounts
    sram: EccCounts
    sram_threshold_exceeded: BoolReading
    retired_pages_sbe: IntReading
    retired_pages_dbe: IntReading
    retired_pending: BoolReading
    remapped_corrected: IntReading
    remapped_uncorrected: IntReading
    remap_pending: BoolReading
    remap_failure: BoolReading
    recovery_action: IntReading  # field 230: 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset
    pcie_replay: IntReading
    pcie_replay_rollover: IntReading
    pcie_correctable: IntReading  # field 173
    pcie_l0_to_recovery: IntReading  # field 169: link retraining, counts up at idle too
    nvlink_errors: list[NvLinkErrors]  # active links only
    clock_event_reasons: IntReading
    clock_event_ns: ClockEventTimes
    temperature_C: IntReading
    memory_temperature_C: IntReading  # HBM, field 82
    slowdown_C: IntReading  # NVML's own thresholds
    shutdown_C: IntReading
    gpu_max_C: IntReading
    memory_max_C: IntReading
    power_W: FloatReading
    power_limit_W: FloatReading
    sm_clock_MHz: IntReading
    sm_clock_max_MHz: IntReading
    persistence_mode: BoolReading
    inforom_valid: BoolReading
    compute_processes: list[ComputeProcess] | Unavailable
    mig_mode: IntReading  # current mode: 0 disabled, 1 enabled
    virtualization_mode: IntReading  # 0 bare metal, 1 passthrough, ...: why some fields are not supported


XidSource = Literal["nvml_event", "kernel_log"]


class XidEvent(Record):
    """An XID (or ECC / recovery-action event) seen for one GPU. `during_run`: seen while this
    run went on, not found already in the kernel log when it began."""

    gpu: Count  # the CUDA ordinal
    xid: int  # the XID number; for NVML's double-bit-ECC and recovery-action events, their data
    kind: Literal["xid", "double_bit_ecc", "recovery_action"] = "xid"
    time: str  # ISO 8601 for NVML events; "boot+SECONDS" for kernel log lines
    source: XidSource
    during_run: bool
    text: str = ""  # the kernel log line


class KernelLog(Record):
    """Whether the kernel log could be read for NVRM Xid lines, and where from or why not."""

    readable: bool
    note: str


class HealthFacts(Record):
    snapshots: list[HealthSnapshot] = Field(default_factory=list)  # in the order taken
    events: list[XidEvent] = Field(default_factory=list)
    listener: str = ""  # how XID events were listened for during the run, or why they were not
    kernel_log: KernelLog | None = None  # the latest reading

    def of(self, gpu: int) -> list[HealthSnapshot]:
        return [snapshot for snapshot in self.snapshots if snapshot.gpu == gpu]
