"""How hard a burn-in burns: gpu-accept's burn-in beside gpu-burn, on the same GPUs, for the same time.

    python bench/burnin_power.py --duration 120 --gpu-burn .gpu-burn/gpu_burn --out DIR [--profile NAME]

Runs, one after the other: gpu-burn (FP32, as users run it), gpu-burn -tc (tensor cores), and
`gpu-accept burn-in`, each for `--duration` seconds, every GPU sampled through NVML at 1 Hz by the
same sampler gpu-accept's telemetry uses (for gpu-accept, its own telemetry). For each, after the
first minute: power median and 10th percentile as a share of NVML's power limit, the hottest
temperature, the time to thermal steady state (checks/heat.py's rule, the profile's defaults) and
the throughput the tool reports. Writes DIR/burnin-power.json and prints a table; gpu-burn's own
output and gpu-accept's results.json are kept in DIR. gpu-burn is built from its public source
outside this repository (a git-ignored folder); where it is missing its rows say so.
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
import time
from pathlib import Path

from gpuaccept.checks.heat import POWER_SETTLE_S, LoadTimeline, steady_state
from gpuaccept.facts.model import BurnIn, GemmResult, Telemetry, TelemetryLimits, TelemetrySample
from gpuaccept.facts.run_record import load_results
from gpuaccept.probe.nvml import nvml_of_this_machine
from gpuaccept.probe.telemetry import TelemetrySampler
from gpuaccept.profile.spec import BurninSpec

GFLOPS = re.compile(r"\((\d+(?:\.\d+)?) Gflop/s\)")


def _gpus() -> list[tuple[int, int]]:
    nvml = nvml_of_this_machine()
    try:
        return [(index, index) for index in range(nvml.query("device_count"))]
    finally:
        nvml.close()


def sampled(command: list[str], seconds: float, log: Path, cwd: Path | None = None) -> tuple[Telemetry, float, float]:
    """Run `command` with every GPU sampled at 1 Hz; its output to `log`."""
    limits: list[TelemetryLimits] = []
    samples: list[TelemetrySample] = []
    started = time.time()
    sampler = TelemetrySampler(nvml_of_this_machine, _gpus(), 1.0, limits.extend, samples.extend, started=started)
    sampler.start()
    began = time.time() - started
    with open(log, "w", encoding="utf-8") as out:
        subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=seconds + 120, check=False, cwd=cwd)
    ended = time.time() - started
    sampler.stop()
    at = datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(timespec="milliseconds")
    return Telemetry(started_at=at, period_s=1.0, limits=limits, samples=samples), began, ended


def summary(tool: str, telemetry: Telemetry, began: float, ended: float, throughput: dict[int, float], unit: str) -> list[dict]:
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
        })
    return rows


def gpu_burn(binary: Path, seconds: int, tensor: bool, out: Path) -> list[dict]:
    name = "gpu-burn -tc" if tensor else "gpu-burn"
    log = out / f"{name.replace(' ', '')}.log"
    if not binary.exists():
        return [{"tool": name, "missing": f"{binary} was not built"}]
    command = [str(binary.resolve()), *(["-tc"] if tensor else []), str(seconds)]
    # gpu-burn reads its compare kernel (compare.fatbin) from the folder it runs in
    telemetry, began, ended = sampled(command, seconds, log.resolve(), cwd=binary.parent)
    # gpu-burn prints every GPU's rate as it goes, "(12345 Gflop/s)" per GPU in order: the median of the later half
    readings = [float(x) for x in GFLOPS.findall(log.read_text(errors="replace"))]
    gpus = len(telemetry.limits) or 1
    per_gpu = {}
    for gpu in range(gpus):
        own = readings[gpu::gpus]
        if own:
            per_gpu[gpu] = statistics.median(own[len(own) // 2 :]) / 1000
    return summary(name, telemetry, began, ended, per_gpu, "TFLOP/s (gpu-burn's own count)")


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
    rows = summary("gpu-accept burn-in", telemetry, *load, per_gpu, "TFLOP/s (bf16, median round)")
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
    print(f"{'tool':20} {'gpu':>3} {'power med %':>11} {'p10 %':>6} {'max °C':>6} {'steady s':>8} {'throughput':>10}  unit")
    for row in rows:
        if "missing" in row:
            print(f"{row['tool']:20} {row['missing']}")
            continue
        cells = [row["power_median_pct"], row["power_p10_pct"], row["max_temperature_c"], row["steady_after_s"], row["throughput"]]
        shown = ["-" if c is None else (f"{c:.1f}" if isinstance(c, float) else str(c)) for c in cells]
        print(f"{row['tool']:20} {row['gpu']:>3} {shown[0]:>11} {shown[1]:>6} {shown[2]:>6} {shown[3]:>8} {shown[4]:>10}  {row['unit']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
