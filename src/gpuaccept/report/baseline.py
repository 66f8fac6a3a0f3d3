"""Baselines: a run's measured values kept, to gate a later run on the same machine.

After a driver or firmware update the question is not "is it above the floor" but "did it get
worse": a value that drops more than `--max-regression` below the baseline fails its own test,
even while it is still above the profile's floor. The values are read from the measurements
themselves, so a baseline does not depend on the profile's thresholds.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from gpuaccept.errors import InputFileError, Problem
from gpuaccept.facts import Facts
from gpuaccept.facts.model import ddp_case
from gpuaccept.report.results import environment_of, now

BASELINE_FORMAT = "gpu-accept-baseline"
BASELINE_VERSION = 1
# what must match for a comparison to mean something; anything else differing is only noted
MACHINE_KEYS = ("gpu_model", "gpu_count", "driver", "cuda_driver", "nccl", "torch", "host")


@dataclass(frozen=True)
class Metric:
    key: str  # "busbw-all_reduce-1GiB": also the test id
    value: float
    unit: str
    higher_is_better: bool = True
    spread: float = 0.0  # (max - min) / median over the runs the baseline was made from; 0 for one run

    def tolerance(self, max_regression: float) -> float:
        """How much worse a value may be: the asked-for share, or twice what the baseline's own runs
        varied by, whichever is larger (a value that moves 10% between healthy runs is no regression at 6%)."""
        return max(max_regression, 2 * self.spread)


def measured_values(facts: Facts) -> dict[str, Metric]:
    """Every number the measurements hold, keyed the same way in every run."""
    found: dict[str, Metric] = {}

    def add(key: str, value: float, unit: str, higher_is_better: bool = True) -> None:
        found[key] = Metric(key, round(value, 4), unit, higher_is_better)

    measured = facts.measurements
    if measured.collectives:
        for r in measured.collectives.results:
            add(f"busbw-{r.collective}-{r.nominal_size}", r.busbw_GBps, "GB/s")
    if measured.pairwise:
        for r in measured.pairwise.results:
            add(f"pair_busbw-gpu{r.gpus[0]}-gpu{r.gpus[1]}", r.busbw_GBps, "GB/s")
    if measured.copies:
        for r in measured.copies.results:
            add(f"{r.what}-" + "-".join(f"gpu{g}" for g in r.gpus), r.GBps, "GB/s")
    if measured.ddp:
        for r in measured.ddp.results:
            case = ddp_case(r.world, r.batch, r.accumulation)
            add(f"ddp_throughput-{case}", r.samples_per_s_per_gpu, "samples/s per GPU")
            efficiency = measured.ddp_efficiency(r.world, r.batch, r.accumulation)
            if efficiency is not None and r.world > 1:
                add(f"ddp_efficiency-{case}", efficiency, "")
            speedup = measured.ddp_speedup(r.world, r.batch, r.accumulation)
            if speedup is not None:
                add(f"ddp_nvlink_speedup-{case}", speedup, "x")
    return found


def machine_of(facts: Facts, profile_name: str) -> dict:
    environment = environment_of(facts)
    machine = {key: environment.get(key) for key in MACHINE_KEYS}
    machine["profile"] = profile_name
    return machine


def save_baseline(path: Path, facts: Facts, profile_name: str, more_runs: list[Facts] = ()) -> int:
    """The measured values of `facts`; with `more_runs`, the median of every run and their spread."""
    runs = [measured_values(facts)] + [measured_values(other) for other in more_runs]
    values = []
    for key, first in runs[0].items():
        found = [run[key].value for run in runs if key in run]
        if len(found) != len(runs):
            continue  # measured in some runs only: no stable reference
        middle = statistics.median(found)
        spread = (max(found) - min(found)) / middle if middle else 0.0
        values.append(
            {"key": key, "value": round(middle, 4), "unit": first.unit, "higher_is_better": first.higher_is_better,
             "spread": round(spread, 4), "runs": len(found)}
        )
    document = {
        "format": BASELINE_FORMAT,
        "version": BASELINE_VERSION,
        "saved_at": now(),
        "machine": machine_of(facts, profile_name),
        "values": values,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return len(values)


@dataclass(frozen=True)
class Baseline:
    path: str
    machine: dict
    metrics: dict[str, Metric]

    def differences(self, facts: Facts) -> list[str]:
        """What differs between the machine the baseline came from and this one (unknowns skipped)."""
        now_machine = machine_of(facts, "")
        return [
            f"{key} {self.machine.get(key)} -> {now_machine.get(key)}"
            for key in MACHINE_KEYS
            if self.machine.get(key) is not None and now_machine.get(key) is not None and str(self.machine[key]) != str(now_machine[key])
        ]


def load_baseline(path: Path) -> Baseline:
    path = Path(path)

    def problem(message: str, key: str = "") -> InputFileError:
        return InputFileError([Problem(str(path), None, key, message)])

    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise problem(f"cannot read baseline: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise problem(f"not a gpu-accept baseline: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise InputFileError([Problem(str(path), exc.lineno, "", f"invalid JSON: {exc.msg}")]) from None
    if not isinstance(document, dict) or document.get("format") != BASELINE_FORMAT:
        raise problem(f"not a gpu-accept baseline (format {BASELINE_FORMAT!r} expected)", "format")
    if document.get("version") != BASELINE_VERSION:
        raise problem(f"baseline version {document.get('version')!r} is not {BASELINE_VERSION}", "version")
    metrics = {}
    for index, entry in enumerate(document.get("values", [])):
        try:
            metrics[entry["key"]] = Metric(
                entry["key"], float(entry["value"]), str(entry["unit"]), bool(entry["higher_is_better"]), float(entry.get("spread", 0.0))
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise problem(f"malformed entry ({type(exc).__name__}: {exc})", f"values[{index}]") from None
    return Baseline(str(path), document.get("machine", {}), metrics)


def parse_percent(text: str) -> float:
    """'5%' or '0.05' -> 0.05."""
    value = text.strip()
    try:
        fraction = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        raise ValueError(f"{text!r} is not a percentage (write 5% or 0.05)") from None
    if not 0 <= fraction < 1:
        raise ValueError(f"{text!r} is not between 0% and 100%")
    return fraction
