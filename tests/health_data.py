"""NVML recordings of a healthy 2xH200 with its health answers, and facts holding health snapshots
made from them: what the fault tests inject into.

The answers come from tests/data/reference/h200x2-nvml-health.json, what NVML answered on a lent
2xH200 VM (driver 580.159.04, pynvml 13.x; "ret N" or "ERR ..." is an NVML error). Where that
capture lacks an answer this recording states its assumption beside it; the GPU session's
`health` stage keeps the real answers (scripts/gpu-session.sh).
"""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path
from typing import Any

from gpuaccept.facts import Facts
from gpuaccept.facts.health import HealthFacts, KernelLog
from gpuaccept.probe.health import (
    AGGREGATE,
    CLOCK_SM,
    CORRECTED,
    DRAM,
    EVENT_MASK,
    NVLINK_CRC_DATA,
    NVLINK_CRC_FLIT,
    NVLINK_RECOVERY,
    NVLINK_REPLAY,
    RETIRED_DBE,
    RETIRED_SBE,
    SRAM,
    THRESHOLD_MEM_MAX,
    THRESHOLD_SLOWDOWN,
    UNCORRECTED,
    VOLATILE,
    Field,
    Target,
    XidListener,
    take_snapshots,
)
from gpuaccept.probe.nvml import NVML_RECORDING_VERSION, ReplayNvml
from tests.helpers import DATA, nvml_replay, probe_replay

REFERENCE = DATA / "reference" / "h200x2-nvml-health.json"
FIELDS = {
    "f_recovery_action": Field.RECOVERY_ACTION,
    "f_pcie_replay_rollover": Field.PCIE_REPLAY_ROLLOVER,
    "f_pcie_l0_to_recovery": Field.PCIE_L0_TO_RECOVERY,
    "f_pcie_correctable": Field.PCIE_CORRECTABLE,
    "f_clk_sw_power_cap_ns": Field.SW_POWER_CAP_NS,
    "f_clk_sw_thermal_ns": Field.SW_THERMAL_NS,
    "f_clk_hw_thermal_ns": Field.HW_THERMAL_NS,
    "f_clk_hw_power_brake_ns": Field.HW_POWER_BRAKE_NS,
    "f_mem_temp": Field.MEMORY_TEMP,
}
STARTED = datetime.datetime(2026, 11, 22, 12, 0, 0, tzinfo=datetime.timezone.utc)


def _answer(replay: ReplayNvml, query: str, *args: int, value: Any) -> None:
    """The reference's value, or its NVML error ("ERR Not Supported", "ret 3": NOT_SUPPORTED)."""
    if isinstance(value, str) and (value.startswith("ERR") or value.startswith("ret")):
        replay.answer(query, *args, error="NOT_SUPPORTED")
    else:
        replay.answer(query, *args, value=value)


def healthy_h200x2() -> ReplayNvml:
    """tests/data/nvml/h200x2.json with the health answers of the reference capture."""
    replay = nvml_replay("h200x2")
    reference = json.loads(REFERENCE.read_text(encoding="utf-8"))
    for gpu in reference["gpus"]:
        i = gpu["index"]
        _answer(replay, "virtualization_mode", i, value=gpu["virt_mode"])
        _answer(replay, "total_ecc_errors", i, CORRECTED, VOLATILE, value=gpu["ecc_corr_vol"])
        _answer(replay, "total_ecc_errors", i, UNCORRECTED, VOLATILE, value=gpu["ecc_unc_vol"])
        _answer(replay, "total_ecc_errors", i, UNCORRECTED, AGGREGATE, value=gpu["ecc_unc_agg"])
        # not in the capture: aggregate corrected, and the DRAM / SRAM split (FIELD-NOTES: all ECC counters 0)
        _answer(replay, "total_ecc_errors", i, CORRECTED, AGGREGATE, value=0)
        for location in (DRAM, SRAM):
            for kind in (CORRECTED, UNCORRECTED):
                for counter in (VOLATILE, AGGREGATE):
                    _answer(replay, "memory_error_counter", i, kind, counter, location, value=0)
        _answer(replay, "remapped_rows", i, value=gpu["remapped_rows"])
        _answer(replay, "retired_pages_pending", i, value=gpu["retired_pending"])
        _answer(replay, "retired_pages", i, RETIRED_SBE, value=gpu["retired_pending"])  # Hopper: not supported either
        _answer(replay, "retired_pages", i, RETIRED_DBE, value=gpu["retired_pending"])
        _answer(replay, "pcie_replay_counter", i, value=gpu["pcie_replay"])
        for key, number in FIELDS.items():
            _answer(replay, "field_value", i, number, 0, value=gpu[key])
        _answer(replay, "temperature", i, value=gpu["temp"])
        _answer(replay, "temperature_threshold", i, THRESHOLD_SLOWDOWN, value=gpu["temp_slowdown"])
        _answer(replay, "temperature_threshold", i, THRESHOLD_MEM_MAX, value=95)  # not in the capture: H200 HBM3e max operating 95 C
        _answer(replay, "power_usage_mw", i, value=gpu["power_mw"])
        _answer(replay, "power_limit_mw", i, value=gpu["power_limit_mw"])
        _answer(replay, "clock_mhz", i, CLOCK_SM, value=gpu["sm_clock"])
        _answer(replay, "max_clock_mhz", i, CLOCK_SM, value=gpu["sm_clock_max"])
        _answer(replay, "inforom_valid", i, value=gpu["inforom_valid"] == "None")  # nvmlDeviceValidateInforom returns None when valid
        _answer(replay, "mig_mode", i, value=gpu["mig_mode"])
        _answer(replay, "compute_processes", i, value=[])  # not in the capture: an idle GPU
        for link in range(18):
            # the capture read link 0 (replay, CRC flit: 0); every link reads the same here, recovery and CRC data assumed 0 too
            _answer(replay, "nvlink_error_counter", i, link, NVLINK_REPLAY, value=gpu["nvlink0_replay"])
            _answer(replay, "nvlink_error_counter", i, link, NVLINK_CRC_FLIT, value=gpu["nvlink0_crc_flit"])
            _answer(replay, "nvlink_error_counter", i, link, NVLINK_RECOVERY, value=0)
            _answer(replay, "nvlink_error_counter", i, link, NVLINK_CRC_DATA, value=0)
        if gpu["events"].startswith("registered"):
            _answer(replay, "event_register", i, EVENT_MASK, value=True)
        # not answered: the SRAM ECC status struct and field 76 (sync boost): their readings say "not in this recording"
    return replay


def with_health(start: ReplayNvml, after: ReplayNvml | None = None, seconds: float = 60.0) -> Facts:
    """Facts probed from `start`, a start snapshot from it, and where `after` is given a snapshot
    "after nccl" `seconds` later from it, with the events an XID listener heard from `after`."""
    facts = probe_replay(start)
    targets = [Target.of(gpu) for gpu in facts.gpus]
    snapshots = [s.model_copy(update={"taken_at": STARTED.isoformat()}) for s in take_snapshots(start, targets, "start")]
    events, listener = [], ""
    if after is not None:
        expected = len(after._sequences["event_wait"])
        heard = XidListener(after, targets)
        heard.start()
        deadline = time.monotonic() + 20  # a replayed event is answered at once: this only bounds a broken listener
        while len(heard.events) < expected and time.monotonic() < deadline:
            time.sleep(0.01)
        events = heard.stop()
        listener = heard.note
        later = (STARTED + datetime.timedelta(seconds=seconds)).isoformat()
        snapshots += [s.model_copy(update={"taken_at": later}) for s in take_snapshots(after, targets, "after nccl")]
    health = HealthFacts(snapshots=snapshots, events=events, listener=listener, kernel_log=KernelLog(readable=True, note="dmesg"))
    return facts.model_copy(update={"health": health})


def save_recording(replay: ReplayNvml, path: Path) -> Path:
    """A replay's answers as an NVML recording file, for GPUACCEPT_NVML_REPLAY (a live run on CPU)."""
    answers = list(replay._answers.values()) + [answer for queue in replay._sequences.values() for answer in queue]
    path.write_text(json.dumps({"nvml_recording": NVML_RECORDING_VERSION, "answers": answers}), encoding="utf-8")
    return path
