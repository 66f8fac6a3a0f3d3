"""Where the probe's health reading spends its time on a GPU machine: each NVML query the reading
asks, timed over every GPU (the second of two readings: the first warms NVML), the kernel log read
apart, and the NVLink error counters asked per link and counter (what the reading does) beside
one field-values call a GPU (NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY/RECOVERY/CRC scoped to each link),
their answers compared; then whether NVML answers for several GPUs at once: the snapshots of every
GPU taken one GPU after another and with a thread a GPU, in turn, ROUNDS times each (a reading after
a stage, and the start's, which validates the InfoROM), their medians; and with a process a GPU,
each starting NVML on its own and then taking its GPU's start reading at the same moment.

    python bench/nvml_reads.py [--out FILE.json]

Prints a table; with --out, writes the numbers as JSON too. Needs NVML (a GPU machine).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gpuaccept.errors import NoDriverError
from gpuaccept.probe import health
from gpuaccept.probe.nvml import LiveNvml

DL_REPLAY, DL_RECOVERY, DL_CRC = 161, 162, 163  # nvml.h: NVML_FI_DEV_NVLINK_ERROR_DL_*, scoped to a link


class TimedNvml(LiveNvml):
    """LiveNvml that adds each query's time to its name's total."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def query(self, name: str, *args: int) -> Any:
        began = time.perf_counter()
        try:
            return super().query(name, *args)
        finally:
            self.seconds[name] += time.perf_counter() - began
            self.calls[name] += 1


def targets(nvml: LiveNvml) -> list[health.Target]:
    import pynvml as n

    found = []
    for i in range(n.nvmlDeviceGetCount()):
        handle = n.nvmlDeviceGetHandleByIndex(i)
        links = []
        for link in range(n.NVML_NVLINK_MAX_LINKS):
            try:
                if n.nvmlDeviceGetNvLinkState(handle, link) == n.NVML_FEATURE_ENABLED:
                    links.append(link)
            except n.NVMLError:
                break
        found.append(health.Target(i, i, tuple(links), n.nvmlDeviceGetPciInfo(handle).busId))
    return found


def batched_link_counters(target: health.Target) -> tuple[float, dict[int, tuple[int | None, ...]]]:
    """One field-values call for every active link's replay, recovery and CRC counters."""
    import pynvml as n

    handle = n.nvmlDeviceGetHandleByIndex(target.nvml_index)
    asked = [(field, link) for link in target.active_links for field in (DL_REPLAY, DL_RECOVERY, DL_CRC)]
    began = time.perf_counter()
    values = n.nvmlDeviceGetFieldValues(handle, asked) if asked else []
    seconds = time.perf_counter() - began
    by_link: dict[int, list[int | None]] = defaultdict(list)
    for (_, link), value in zip(asked, values, strict=True):
        by_link[link].append(int(value.value.ullVal) if value.nvmlReturn == n.NVML_SUCCESS else None)
    return seconds, {link: tuple(counts) for link, counts in by_link.items()}


ROUNDS = 5


def serial_and_threaded(nvml: LiveNvml, gpus: list[health.Target], label: str) -> dict[str, float]:
    """The median wall time of every GPU's snapshot, one GPU after another and a thread a GPU."""
    times: dict[str, list[float]] = {"serial": [], "threaded": []}
    with ThreadPoolExecutor(max_workers=max(1, len(gpus))) as pool:
        for _ in range(ROUNDS):
            began = time.perf_counter()
            health.take_snapshots(nvml, gpus, label)
            times["serial"].append(time.perf_counter() - began)
            began = time.perf_counter()
            list(pool.map(lambda target: health.take_snapshot(nvml, target, label), gpus))
            times["threaded"].append(time.perf_counter() - began)
    return {way: round(statistics.median(seconds), 4) for way, seconds in times.items()}


def one_gpu(index: int, at: float) -> None:
    """A child's part of `a_process_a_gpu`: NVML started, then GPU `index`'s start reading at `at`."""
    began = time.perf_counter()
    nvml = LiveNvml()
    (target,) = [target for target in targets(nvml) if target.nvml_index == index]
    init_s = time.perf_counter() - began
    time.sleep(max(0.0, at - time.time()))
    reading_began = time.time()
    health.take_snapshot(nvml, target, health.START_LABEL)
    print(json.dumps({"gpu": index, "nvml_start_s": round(init_s, 4), "began": reading_began, "ended": time.time()}))


def a_process_a_gpu(count: int) -> dict[str, object]:
    """Every GPU's start reading, a process a GPU, all begun at one moment: the wall time from that
    moment to the last one's end, and each process's NVML start (all started at once)."""
    at = time.time() + 8.0  # past every child's NVML start
    children = [
        subprocess.Popen([sys.executable, __file__, "--one-gpu", str(index), "--at", str(at)], stdout=subprocess.PIPE, text=True)
        for index in range(count)
    ]
    answers = [json.loads(child.communicate(timeout=120)[0].strip().splitlines()[-1]) for child in children]
    late = max(answer["began"] for answer in answers) - at
    return {
        "wall_s": round(max(answer["ended"] for answer in answers) - at, 4),
        "latest_start_s": round(late, 4),  # a child whose NVML start took past the moment began late
        "nvml_start_s": [answer["nvml_start_s"] for answer in answers],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--one-gpu", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--at", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_gpu is not None:
        one_gpu(args.one_gpu, args.at)
        return 0
    try:
        nvml = TimedNvml()
    except NoDriverError as error:
        print(f"nvml_reads: {error}")
        return 2
    gpus = targets(nvml)
    health.take_snapshots(nvml, gpus, "warm-up")
    nvml.seconds.clear()
    nvml.calls.clear()
    began = time.perf_counter()
    snapshots = health.take_snapshots(nvml, gpus, "timed")
    snapshots_s = time.perf_counter() - began
    began = time.perf_counter()
    health.read_kernel_log(gpus)
    kernel_log_s = time.perf_counter() - began
    batched = {target.gpu: batched_link_counters(target) for target in gpus}
    agree = []
    for snapshot in snapshots:
        _, counts = batched[snapshot.gpu]
        for errors in snapshot.nvlink_errors:
            agree.append(counts.get(errors.link) == (errors.replay, errors.recovery, errors.crc_flit))
    per_link_s = nvml.seconds.get("nvlink_error_counter", 0.0)
    result = {
        "gpus": len(gpus), "active_links": [len(t.active_links) for t in gpus],
        "snapshots_s": round(snapshots_s, 4), "kernel_log_s": round(kernel_log_s, 4),
        "queries": {
            name: {"calls": nvml.calls[name], "ms": round(1000 * s, 2)} for name, s in sorted(nvml.seconds.items(), key=lambda kv: -kv[1])
        },
        "nvlink_counters_per_link_ms": round(1000 * per_link_s, 2),
        "nvlink_counters_batched_ms": round(1000 * sum(s for s, _ in batched.values()), 2),
        "batched_agrees_with_per_link": f"{sum(agree)} of {len(agree)} links (replay, recovery, CRC flit)",
        "after_a_stage_s": serial_and_threaded(nvml, gpus, "after a stage"),
        "start_s": serial_and_threaded(nvml, gpus, health.START_LABEL),
        "start_a_process_a_gpu": a_process_a_gpu(len(gpus)),
    }
    links = result["active_links"]
    print(f"health snapshots of {len(gpus)} GPU(s) ({links} active links): {snapshots_s:.3f} s; kernel log {kernel_log_s:.3f} s")
    for name, numbers in result["queries"].items():
        print(f"  {name:28} {numbers['calls']:5} calls {numbers['ms']:9.2f} ms")
    print(f"NVLink error counters: per link and counter {result['nvlink_counters_per_link_ms']} ms, "
          f"one field-values call a GPU {result['nvlink_counters_batched_ms']} ms; {result['batched_agrees_with_per_link']} agree")
    for name in ("after_a_stage_s", "start_s"):
        way = result[name]
        print(f"every GPU's snapshot ({name.removesuffix('_s').replace('_', ' ')}), median of {ROUNDS}: "
              f"one GPU after another {way['serial']:.3f} s, a thread a GPU {way['threaded']:.3f} s")
    apart = result["start_a_process_a_gpu"]
    print(f"every GPU's start reading, a process a GPU at one moment: {apart['wall_s']:.3f} s "
          f"(NVML's starts, all at once: {apart['nvml_start_s']} s)")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
