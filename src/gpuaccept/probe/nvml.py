"""A narrow door to NVML: named queries with plain arguments and JSON-able answers.

The probe asks only through `Nvml.query(name, *args)`. Three implementations stand behind it:
`LiveNvml` (nvidia-ml-py on a real machine), `RecordingNvml` (wraps another and keeps every
answer, errors included) and `ReplayNvml` (answers from such a recording). A recording taken on a
real machine therefore drives the same probe code on a CPU-only one, and faults are made by
editing answers, not by mocking functions.

`nvml_of_this_machine` is the one place that chooses among them: every reader of NVML (the probe,
the health snapshots, the XID listener, the telemetry sampler) opens it there. Test hook:
GPUACCEPT_NVML_REPLAY=<recording> answers from a recording made with `gpu-accept record
--nvml-log` instead of the driver, so the whole live path runs on CPU machines.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuaccept.errors import GpuAcceptError
from gpuaccept.files import read_input_text

NVML_RECORDING_VERSION = 1
NVML_REPLAY = "GPUACCEPT_NVML_REPLAY"  # a recording to answer from, in place of the driver

# Queries whose answers come one after another (each wait returns the next event): recorded in
# order and replayed in order; a wait with nothing left times out, as a quiet GPU's does.
SEQUENCED_QUERIES = ("event_wait",)


class NvmlCallError(Exception):
    """An NVML call that returned an error: `code` is NVML's name for it (NOT_SUPPORTED, ...)."""

    def __init__(self, query: str, args: tuple, code: str, message: str = ""):
        self.query, self.query_args, self.code, self.message = query, tuple(args), code, message
        super().__init__(f"{query}{list(args)}: {message or code}")


class Nvml:
    def query(self, name: str, *args: int) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        pass


class LiveNvml(Nvml):
    """nvidia-ml-py on this machine. Constructing it initializes NVML; NoDriverError if it cannot."""

    def __init__(self):
        import pynvml

        self._nvml = pynvml
        self._handles: dict[int, Any] = {}
        self._event_set: Any = None
        self._event_handles: dict[int | None, int] = {}
        self._error_names = {
            value: name[len("NVML_ERROR_") :]
            for name, value in vars(pynvml).items()
            if name.startswith("NVML_ERROR_") and isinstance(value, int)
        }
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            from gpuaccept.errors import NoDriverError

            raise NoDriverError(f"no NVIDIA driver found: NVML could not start ({exc})") from None
        self._queries: dict[str, Callable[..., Any]] = self._build_queries()

    def close(self) -> None:
        with contextlib.suppress(self._nvml.NVMLError):
            self._nvml.nvmlShutdown()

    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            self._handles[index] = self._nvml.nvmlDeviceGetHandleByIndex(index)
        return self._handles[index]

    def query(self, name: str, *args: int) -> Any:
        try:
            return self._queries[name](*args)
        except self._nvml.NVMLError as exc:
            code = self._error_names.get(exc.value, f"CODE_{exc.value}")
            raise NvmlCallError(name, args, code, str(exc)) from None
        except (ctypes.ArgumentError, TypeError, AttributeError) as exc:
            # a binding that does not match the library: recorded as an error, never a crash
            raise NvmlCallError(name, args, "BINDING", f"{type(exc).__name__}: {exc}") from None

    def _build_queries(self) -> dict[str, Callable[..., Any]]:
        n = self._nvml
        h = self._handle

        def text(value: Any) -> str:
            return value.decode() if isinstance(value, bytes) else str(value)

        def fabric(i: int) -> dict:
            if hasattr(n, "c_nvmlGpuFabricInfoV_t") and hasattr(n, "nvmlDeviceGetGpuFabricInfoV"):
                info = n.c_nvmlGpuFabricInfoV_t()
                n.nvmlDeviceGetGpuFabricInfoV(h(i), ctypes.byref(info))
            else:
                info = n.c_nvmlGpuFabricInfo_t()
                n.nvmlDeviceGetGpuFabricInfo(h(i), ctypes.byref(info))
            return {
                "state": int(info.state),
                "status": int(info.status),
                "clique_id": int(info.cliqueId),
                "cluster_uuid": bytes(info.clusterUuid).hex(),
            }

        def field(i: int, field_id: int, scope: int = 0) -> float:
            # each field value carries its own return code: an unanswered field is an error, never 0
            value = n.nvmlDeviceGetFieldValues(h(i), [(field_id, scope)])[0]
            if value.nvmlReturn != n.NVML_SUCCESS:
                raise n.NVMLError(value.nvmlReturn)
            member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(value.valueType, "uiVal")
            return float(getattr(value.value, member))

        def nvlink_speed(i: int, link: int) -> float:
            # field NVLINK_GET_SPEED scoped to one link: the speed `nvidia-smi nvlink -s` prints, in MB/s
            value = n.nvmlDeviceGetFieldValues(h(i), [(n.NVML_FI_DEV_NVLINK_GET_SPEED, link)])[0]
            if value.nvmlReturn != n.NVML_SUCCESS:
                raise n.NVMLError(value.nvmlReturn)
            member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(value.valueType, "uiVal")
            return float(getattr(value.value, member))

        def field_value(i: int, field: int, scope: int = 0) -> float | int:
            # one NVML field; each field value carries its own return code
            value = n.nvmlDeviceGetFieldValues(h(i), [(field, scope)])[0]
            if value.nvmlReturn != n.NVML_SUCCESS:
                raise n.NVMLError(value.nvmlReturn)
            member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(value.valueType, "uiVal")
            number = getattr(value.value, member)
            return float(number) if member == "dVal" else int(number)

        def sram_ecc_status(i: int) -> dict:
            status = n.c_nvmlEccSramErrorStatus_v1_t()
            n.nvmlDeviceGetSramEccErrorStatus(h(i), ctypes.byref(status))
            return {name: int(getattr(status, name)) for name, _ in status._fields_ if name != "version"}

        def inforom_valid(i: int) -> bool:
            n.nvmlDeviceValidateInforom(h(i))  # raises CORRUPTED_INFOROM where the checksum fails
            return True

        def compute_processes(i: int) -> list[dict]:
            return [
                {"pid": int(p.pid), "used_memory": None if p.usedGpuMemory is None else int(p.usedGpuMemory)}
                for p in n.nvmlDeviceGetComputeRunningProcesses(h(i))
            ]

        def event_register(i: int, mask: int) -> bool:
            if self._event_set is None:
                self._event_set = n.nvmlEventSetCreate()
            n.nvmlDeviceRegisterEvents(h(i), int(mask), self._event_set)
            self._event_handles[ctypes.cast(h(i), ctypes.c_void_p).value] = i
            return True

        def event_wait(timeout_ms: int) -> dict:
            # pynvml 13 has no nvmlEventSetWaitFor: nvmlEventSetWait (its _v2) returns one event or TIMEOUT
            data = n.nvmlEventSetWait(self._event_set, int(timeout_ms))
            device = self._event_handles.get(ctypes.cast(data.device, ctypes.c_void_p).value, -1)
            return {"nvml_index": device, "type": int(data.eventType), "data": int(data.eventData)}

        def event_set_free() -> bool:
            if self._event_set is not None:
                n.nvmlEventSetFree(self._event_set)
                self._event_set = None
            return True

        return {
            "field_value": field_value,
            "total_ecc_errors": lambda i, kind, counter: int(n.nvmlDeviceGetTotalEccErrors(h(i), kind, counter)),
            "memory_error_counter": lambda i, kind, counter, where: int(n.nvmlDeviceGetMemoryErrorCounter(h(i), kind, counter, where)),
            "sram_ecc_status": sram_ecc_status,
            "retired_pages": lambda i, cause: len(n.nvmlDeviceGetRetiredPages(h(i), cause)),
            "retired_pages_pending": lambda i: int(n.nvmlDeviceGetRetiredPagesPendingStatus(h(i))),
            "remapped_rows": lambda i: [int(v) for v in n.nvmlDeviceGetRemappedRows(h(i))],
            "pcie_replay_counter": lambda i: int(n.nvmlDeviceGetPcieReplayCounter(h(i))),
            "nvlink_error_counter": lambda i, link, counter: int(n.nvmlDeviceGetNvLinkErrorCounter(h(i), link, counter)),
            "temperature": lambda i: int(n.nvmlDeviceGetTemperature(h(i), n.NVML_TEMPERATURE_GPU)),
            "temperature_threshold": lambda i, which: int(n.nvmlDeviceGetTemperatureThreshold(h(i), which)),
            "power_usage_mw": lambda i: int(n.nvmlDeviceGetPowerUsage(h(i))),
            "power_limit_mw": lambda i: int(n.nvmlDeviceGetEnforcedPowerLimit(h(i))),
            "clock_mhz": lambda i, which: int(n.nvmlDeviceGetClockInfo(h(i), which)),
            "max_clock_mhz": lambda i, which: int(n.nvmlDeviceGetMaxClockInfo(h(i), which)),
            "inforom_valid": inforom_valid,
            "compute_processes": compute_processes,
            "mig_mode": lambda i: [int(v) for v in n.nvmlDeviceGetMigMode(h(i))],
            "virtualization_mode": lambda i: int(n.nvmlDeviceGetVirtualizationMode(h(i))),
            "event_register": event_register,
            "event_wait": event_wait,
            "event_set_free": event_set_free,
            "driver_version": lambda: text(n.nvmlSystemGetDriverVersion()),
            "cuda_driver_version": lambda: int(n.nvmlSystemGetCudaDriverVersion()),
            "nvml_version": lambda: text(n.nvmlSystemGetNVMLVersion()),
            "device_count": lambda: int(n.nvmlDeviceGetCount()),
            "name": lambda i: text(n.nvmlDeviceGetName(h(i))),
            "uuid": lambda i: text(n.nvmlDeviceGetUUID(h(i))),
            "pci_bus_id": lambda i: text(n.nvmlDeviceGetPciInfo(h(i)).busId),
            "serial": lambda i: text(n.nvmlDeviceGetSerial(h(i))),
            "vbios": lambda i: text(n.nvmlDeviceGetVbiosVersion(h(i))),
            "memory_total": lambda i: int(n.nvmlDeviceGetMemoryInfo(h(i)).total),
            "ecc_mode": lambda i: [int(v) for v in n.nvmlDeviceGetEccMode(h(i))],
            "persistence_mode": lambda i: int(n.nvmlDeviceGetPersistenceMode(h(i))),
            "numa_node": lambda i: int(n.nvmlDeviceGetNumaNodeId(h(i))),
            "clock_event_reasons": lambda i: int(n.nvmlDeviceGetCurrentClocksEventReasons(h(i))),
            "pcie_generation_current": lambda i: int(n.nvmlDeviceGetCurrPcieLinkGeneration(h(i))),
            "pcie_generation_max": lambda i: int(n.nvmlDeviceGetMaxPcieLinkGeneration(h(i))),
            "pcie_generation_gpu_max": lambda i: int(n.nvmlDeviceGetGpuMaxPcieLinkGeneration(h(i))),
            "pcie_width_current": lambda i: int(n.nvmlDeviceGetCurrPcieLinkWidth(h(i))),
            "pcie_width_max": lambda i: int(n.nvmlDeviceGetMaxPcieLinkWidth(h(i))),
            "nvlink_state": lambda i, link: int(n.nvmlDeviceGetNvLinkState(h(i), link)),
            "nvlink_version": lambda i, link: int(n.nvmlDeviceGetNvLinkVersion(h(i), link)),
            "nvlink_remote_type": lambda i, link: int(n.nvmlDeviceGetNvLinkRemoteDeviceType(h(i), link)),
            "nvlink_remote_bus_id": lambda i, link: text(n.nvmlDeviceGetNvLinkRemotePciInfo(h(i), link).busId),
            "nvlink_speed_mbps": nvlink_speed,
            "fabric_info": fabric,
            "topology_common_ancestor": lambda i, j: int(n.nvmlDeviceGetTopologyCommonAncestor(h(i), h(j))),
            "p2p_status": lambda i, j, cap: int(n.nvmlDeviceGetP2PStatus(h(i), h(j), int(cap))),
            # telemetry (probe/telemetry.py): what a GPU does under load, sampled while a run goes on
            "sm_clock_mhz": lambda i: int(n.nvmlDeviceGetClockInfo(h(i), n.NVML_CLOCK_SM)),
            "memory_clock_mhz": lambda i: int(n.nvmlDeviceGetClockInfo(h(i), n.NVML_CLOCK_MEM)),
            "max_sm_clock_mhz": lambda i: int(n.nvmlDeviceGetMaxClockInfo(h(i), n.NVML_CLOCK_SM)),
            "temperature_c": lambda i: int(n.nvmlDeviceGetTemperature(h(i), n.NVML_TEMPERATURE_GPU)),
            "slowdown_temperature_c": lambda i: int(
                n.nvmlDeviceGetTemperatureThreshold(h(i), n.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)
            ),
            "memory_temperature_c": lambda i: int(field(i, 82)),  # NVML_FI_DEV_MEMORY_TEMP: HBM
            "power_mw": lambda i: int(n.nvmlDeviceGetPowerUsage(h(i))),
            "utilization_pct": lambda i: int(n.nvmlDeviceGetUtilizationRates(h(i)).gpu),
        }


class RecordingNvml(Nvml):
    """Passes queries through and keeps every answer and error, to be saved and replayed."""

    def __init__(self, inner: Nvml, save_to: Path | None = None):
        self.inner = inner
        self.answers: list[dict] = []
        self.save_to = save_to  # where the answers are written when it is closed

    def query(self, name: str, *args: int) -> Any:
        entry: dict[str, Any] = {"query": name, "args": list(args)}
        try:
            value = self.inner.query(name, *args)
        except NvmlCallError as exc:
            if not (name in SEQUENCED_QUERIES and exc.code == "TIMEOUT"):  # a quiet wait is what a replay gives when none is left
                entry.update(error=exc.code, message=exc.message)
                self.answers.append(entry)
            raise
        entry["value"] = value
        self.answers.append(entry)
        return value

    def close(self) -> None:
        self.inner.close()
        if self.save_to is not None:
            self.save(self.save_to)

    def save(self, path: Path) -> None:
        document = {"nvml_recording": NVML_RECORDING_VERSION, "answers": self.answers}
        Path(path).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


class ReplayNvml(Nvml):
    """Answers from a recording. A query the recording lacks is an error, never a guess."""

    def __init__(self, answers: list[dict]):
        self._answers = {(a["query"], tuple(a["args"])): a for a in answers if a["query"] not in SEQUENCED_QUERIES}
        self._sequences: dict[str, list[dict]] = {name: [a for a in answers if a["query"] == name] for name in SEQUENCED_QUERIES}

    @classmethod
    def from_file(cls, path: Path) -> ReplayNvml:
        try:
            document = json.loads(read_input_text(path))
            if document.get("nvml_recording") != NVML_RECORDING_VERSION:
                raise ValueError(f"not an NVML recording of version {NVML_RECORDING_VERSION}")
            return cls(document["answers"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
            said = error.strerror if isinstance(error, OSError) else f"{type(error).__name__}: {error}"
            raise GpuAcceptError(f"{path}: not a readable NVML recording ({said})") from None

    def query(self, name: str, *args: int) -> Any:
        if name in SEQUENCED_QUERIES:
            queue = self._sequences[name]
            if not queue:
                raise NvmlCallError(name, args, "TIMEOUT", "Timeout")
            answer = queue.pop(0)
            if "error" in answer:
                raise NvmlCallError(name, args, answer["error"], answer.get("message", ""))
            return answer["value"]
        answer = self._answers.get((name, tuple(args)))
        if answer is None:
            raise NvmlCallError(name, args, "NOT_RECORDED", "the recording has no answer for this query")
        if "error" in answer:
            raise NvmlCallError(name, args, answer["error"], answer.get("message", ""))
        return answer["value"]

    def answer(self, name: str, *args: int, value: Any = None, error: str | None = None) -> None:
        """Change one answer (how tests make a faulty machine out of a healthy recording); for a
        sequenced query (an event wait), add the next answer."""
        entry: dict[str, Any] = {"query": name, "args": list(args)}
        if error:
            entry.update(error=error, message=error.replace("_", " ").title())
        else:
            entry["value"] = value
        if name in SEQUENCED_QUERIES:
            self._sequences[name].append(entry)
        else:
            self._answers[(name, tuple(args))] = entry


def nvml_of_this_machine(record_to: Path | str | None = None) -> Nvml:
    """NVML as this run reads it: the machine's driver, or the recording GPUACCEPT_NVML_REPLAY names;
    with `record_to`, every answer is also kept and written there when it is closed. Raises
    NoDriverError where there is no driver, GpuAcceptError where the recording cannot be read."""
    replay = os.environ.get(NVML_REPLAY)
    nvml: Nvml = ReplayNvml.from_file(Path(replay)) if replay else LiveNvml()
    return RecordingNvml(nvml, save_to=Path(record_to)) if record_to else nvml
