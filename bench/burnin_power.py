"""How hard a burn-in burns: gpu-accept's burn-in beside gpu-burn, on the same GPUs, for the same time.

    python bench/burnin_power.py --duration 120 --gpu-burn .gpu-burn/gpu_burn --out DIR [--profile NAME]

Runs, one after the other: gpu-burn (FP32, as users run it), gpu-burn -tc (tensor cores), and
`gpu-accept burn-in`, each for `--duration` seconds, every GPU sampled through NVML at 1 Hz by the
same sampler gpu-accept's telemetry uses (for gpu-accept, its own telemetry).

Each tool is judged over its load window, by one rule for both: from the moment the tool says its
load began to the moment it says its load ended, as each tool says it. gpu-burn: its first progress
report ("proc'd: ...", printed once a GPU has returned work) to "Killing processes", after which it
waits for its workers (about 25 s at idle power on an H200) before "done" and its exit; gpu-accept:
its sustained load's start and end (results.json's `load_started_s`, `load_ended_s`), after the
fabric stages at rest and before its reports. What came after each window (a tear-down, the
reports) is shown apart, never mixed in. Over the window, after its first minute: power median and
10th percentile as a share of NVML's power limit; the hottest temperature; the time from the load's
start to thermal steady state (checks/heat.py's rule, the profile's defaults); the throughput the
tool reports. Writes DIR/burnin-power.json and prints a table; gpu-burn's own output and
gpu-accept's results.json are kept in DIR. gpu-burn is built from its public source outside this
repository (a git-ignored folder); where it is missing its rows say so.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from gpuaccept.checks.heat import POWER_SETTLE_S, LoadTimeline, steady_state
from gpuaccept.facts.measurements import GemmResult
from gpuaccept.facts.run_record import load_results
from gpuaccept.facts.telemetry import BurnIn, Telemetry, TelemetryLimits, TelemetrySample
from gpuaccept.probe.nvml import nvml_of_this_machine
from gpuaccept.probe.telemetry import TelemetrySampler
from gpuaccept.profile.spec import BurninSpec

GFLOPS = re.compile(r"\((\d+(?:\.\d+)?) Gflop/s\)")
GPU_BURN_LOAD_BEGAN = "proc'd:"  # its progress line, printed once a GPU has returned work
GPU_BURN_LOAD_ENDED = "Killing processes"  # the run length is over: its workers are told to stop


def _gpus() -> list[tuple[int, int]]:
    nvml = nvml_of_this_machine()
    try:
        return [(index, index) for index in range(nvml.query("device_count"))]
    finally:
        nvml.close()


class Output:
    """A tool's output as it came, each piece with when it came (seconds on the sampler's clock)."""

    def __init__(self) -> None:
        self.text = ""
        self.arrivals: list[tuple[int, float]] = []  # (offset in text, when its piece arrived)

    def add(self, piece: str, at: float) -> None:
        self.arrivals.append((len(self.text), at))
        self.text += piece

    def first(self, marker: str) -> float | None:
        """When `marker` first began to arrive; None where it never did."""
        offset = self.text.find(marker)
        if offset < 0:
            return None
        return max(at for start, at in self.arrivals if start <= offset)


def sampled(command: list[str], seconds: float, log: Path, cwd: Path | None = None) -> tuple[Telemetry, float, float, Output]:
    """Run `command` with every GPU sampled at 1 Hz: the telemetry, the process's start and end, and its
    output with when each piece came (also written to `log`)."""
    limits: list[TelemetryLimits] = []
    samples: list[TelemetrySample] = []
    started = time.time()
    sampler = TelemetrySampler(nvml_of_this_machine, _gpus(), 1.0, limits.extend, samples.extend, started=started)
    sampler.start()
    began = time.time() - started
    output = Output()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd)
    assert process.stdout is not None
    overdue = threading.Timer(seconds + 120, process.kill)  # a tool that hangs ends the read too
    overdue.start()
    try:
        while chunk := process.stdout.read1(65536):  # type: ignore[attr-defined]
            output.add(chunk.decode(errors="replace"), time.time() - started)
        process.wait()
    finally:
        overdue.cancel()
    ended = time.time() - started
    sampler.stop()
    log.write_text(output.text, encoding="utf-8")
    at = datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(timespec="milliseconds")
    return Telemetry(started_at=at, period_s=1.0, limits=limits, samples=samples), began, ended, output


def power_share(telemetry: Telemetry, gpu: int, began: float, ended: float) -> float | None:
    """The median power of `gpu` between `began` and `ended`, as a share of its limit (%)."""
    limit = next((limit.power_limit_w for limit in telemetry.limits if limit.gpu == gpu), None)
    power = [s.power_w for s in telemetry.samples if s.gpu == gpu and began <= s.t_s <= ended and isinstance(s.power_w, float)]
    return round(100 * statistics.median(power) / limit, 1) if power and isinstance(limit, float) else None


def summary(
    tool: str, telemetry: Telemetry, began: float, ended: float, throughput: dict[int, float], unit: str, window: str,
    process: tuple[float, float],
) -> list[dict]:
    """Each GPU over the load window [began, ended] (seconds on the telemetry's clock); what came
    after it until the process ended (`process`: its start and end) shown apart."""
    spec = BurninSpec()
    timeline = LoadTimeline(telemetry, BurnIn(duration_s=1, elapsed_s=1, ended="deadline"), 0.0, began, ended)
    rows = []
    for limit in telemetry.limits:
        gpu = limit.gpu
        after = timeline.samples(gpu, after_s=began + POWER_SETTLE_S)
        power = [s.power_w for s in after if isinstance(s.power_w, float)]
        heat = [s.temperature_c for s in timeline.samples(gpu) if isinstance(s.temperature_c, int)]
        share = [100 * p / limit.power_limit_w for p in power] if isinstance(limit.power_limit_w, float) and power else []
        steady = steady_state(timeline, gpu, spec.steady_window_s, spec.steady_slope_c_per_min)
        rows.append({
            "tool": tool, "gpu": gpu, "power_limit_w": limit.power_limit_w,
            "power_median_pct": round(statistics.median(share), 1) if share else None,
            "power_p10_pct": round(statistics.quantiles(share, n=10)[0], 1) if len(share) >= 2 else None,
            "max_temperature_c": max(heat) if heat else None,
            "steady_after_s": round(steady.reached_s - began, 1) if steady.reached_s is not None else None,
            "throughput": throughput.get(gpu), "unit": unit, "samples_after_first_minute": len(share),
            "window": window, "load_s": round(ended - began, 1), "process_s": round(process[1] - process[0], 1),
            "after_load_s": round(process[1] - ended, 1), "after_load_power_median_pct": power_share(telemetry, gpu, ended, process[1]),
        })
    return rows


def gpu_burn(binary: Path, seconds: int, tensor: bool, out: Path) -> list[dict]:
    name = "gpu-burn -tc" if tensor else "gpu-burn"
    log = out / f"{name.replace(' ', '')}.log"
    if not binary.exists():
        return [{"tool": name, "missing": f"{binary} was not built"}]
    command = [str(binary.resolve()), *(["-tc"] if tensor else []), str(seconds)]
    # gpu-burn reads its compare kernel (compare.fatbin) from the folder it runs in
    telemetry, began, ended, output = sampled(command, seconds, log.resolve(), cwd=binary.parent)
    load_began, load_ended = output.first(GPU_BURN_LOAD_BEGAN), output.first(GPU_BURN_LOAD_ENDED)
    if load_began is None or load_ended is None:
        return [{"tool": name, "missing": f"its output holds no {GPU_BURN_LOAD_BEGAN!r} or {GPU_BURN_LOAD_ENDED!r}: no load window"}]
    # gpu-burn prints every GPU's rate as it goes, "(12345 Gflop/s)" per GPU in order: the median of the later half
    readings = [float(x) for x in GFLOPS.findall(output.text)]
    gpus = len(telemetry.limits) or 1
    per_gpu = {}
    for gpu in range(gpus):
        own = readings[gpu::gpus]
        if own:
            per_gpu[gpu] = statistics.median(own[len(own) // 2 :]) / 1000
    window = f"first {GPU_BURN_LOAD_BEGAN!r} to {GPU_BURN_LOAD_ENDED!r}"
    return summary(name, telemetry, load_began, load_ended, per_gpu, "TFLOP/s (gpu-burn's own count)", window, (began, ended))


def gpu_accept(seconds: int, profile: str, out: Path) -> list[dict]:
    reports = out / "gpu-accept"
    command = [sys.executable, "-m", "gpuaccept", "burn-in", "--duration", f"{seconds}s", "--profile", profile, "--reports", str(reports)]
    with open(out / "gpu-accept.log", "w", encoding="utf-8") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=seconds + 600, check=False)
    record = load_results(reports / "results.json")
    telemetry, burnin = record.facts.telemetry, record.facts.burnin
    if telemetry is None or burnin is None or burnin.load_started_s is None or burnin.load_ended_s is None:
        return [{"tool": "gpu-accept burn-in", "missing": f"no sustained load recorded (exit {done.returncode})"}]
    offset = burnin.offset_on(telemetry)
    rates: dict[int, list[float]] = {}
    for burnin_round in burnin.rounds:
        sweep = burnin_round.measurements.compute
        for result in sweep.results if sweep else []:
            if isinstance(result, GemmResult):
                rates.setdefault(result.gpu, []).append(result.tflops)
    per_gpu = {gpu: statistics.median(values) for gpu, values in rates.items()}
    load = (offset + burnin.load_started_s, offset + burnin.load_ended_s)
    last = max((sample.t_s for sample in telemetry.samples), default=load[1])
    window = "the sustained load's start to end (load_started_s, load_ended_s)"
    rows = summary("gpu-accept burn-in", telemetry, *load, per_gpu, "TFLOP/s (bf16, median round)", window, (0.0, last))
    for row in rows:
        row["exit_code"] = done.returncode
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=120)
    parser.add_argument("--gpu-burn", type=Path, default=Path(".gpu-burn/gpu_burn"))
    parser.add_argument("--profile", default="auto")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--skip", nargs="*", default=[], choices=["gpu-burn", "gpu-burn-tc", "gpu-accept"])
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    if "gpu-burn" not in args.skip:
        rows += gpu_burn(args.gpu_burn, args.duration, False, args.out)
    if "gpu-burn-tc" not in args.skip:
        rows += gpu_burn(args.gpu_burn, args.duration, True, args.out)
    if "gpu-accept" not in args.skip:
        rows += gpu_accept(args.duration, args.profile, args.out)
    found = {"duration_s": args.duration, "host": os.uname().nodename, "rows": rows}
    (args.out / "burnin-power.json").write_text(json.dumps(found, indent=1))
    print(
        f"{'tool':20} {'gpu':>3} {'load s':>6} {'power med %':>11} {'p10 %':>6} {'max °C':>6} {'steady s':>8} {'throughput':>10} "
        f"{'after load s':>12} {'its power %':>11}  unit; window"
    )
    for row in rows:
        if "missing" in row:
            print(f"{row['tool']:20} {row['missing']}")
            continue
        names = (
            "load_s", "power_median_pct", "power_p10_pct", "max_temperature_c", "steady_after_s", "throughput", "after_load_s",
            "after_load_power_median_pct",
        )
        cells = [row[name] for name in names]
        shown = ["-" if c is None else (f"{c:.1f}" if isinstance(c, float) else str(c)) for c in cells]
        print(
            f"{row['tool']:20} {row['gpu']:>3} {shown[0]:>6} {shown[1]:>11} {shown[2]:>6} {shown[3]:>6} {shown[4]:>8} {shown[5]:>10} "
            f"{shown[6]:>12} {shown[7]:>11}  {row['unit']}; {row['window']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
