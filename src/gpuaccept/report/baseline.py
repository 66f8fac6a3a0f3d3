"""Baselines: a run's measured values kept, to gate a later run on the same machine.

After a driver or firmware update the question is not "is it above the floor" but "did it get
worse": a value that drops more than `--max-regression` below the baseline fails its own test,
even while it is still above the profile's floor. The values are read from the measurements
themselves, so a baseline does not depend on the profile's thresholds.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from gpuaccept.errors import InputFileError, Problem
from gpuaccept.facts import Facts
from gpuaccept.facts.coverage import causes_first
from gpuaccept.facts.measurements import GemmResult, HbmResult
from gpuaccept.facts.run_record import Environment, RunRecord
from gpuaccept.files import read_input_text, write_atomically
from gpuaccept.report.results import now
from gpuaccept.vocabulary.links import gpu_key, pair_key
from gpuaccept.vocabulary.steps import ddp_case

BASELINE_FORMAT = "gpu-accept-baseline"
BASELINE_VERSION = 1
# what must match for a comparison to mean something (with the profile): a baseline of 4 GPUs
# cannot judge a run on 2. Software differing is the point of a regression check after an
# update, and another host of the same kind is a golden machine: both are only noted.
HARDWARE_KEYS = ("gpu_model", "gpu_count")
NOTED_KEYS = ("driver", "cuda_driver", "nccl", "torch", "host")
# The most tolerance a value's own spread can earn (twice the spread, see Metric.tolerance).
# Without a cap, runs that disagree make a gate that never fires: one healthy and one broken run
# (all_reduce 355 and 28 GB/s) have a 169% spread. 25% admits the largest drop of a healthy run
# below the median of its set measured here, 22.6% (bidirectional peer copies, 5 runs on 4xH200,
# bench/runs/2026-11-21), and still catches a link that lost a quarter of its bandwidth.
SPREAD_TOLERANCE_CAP = 0.25
SIGNIFICANT_DIGITS = 6  # kept of each value: enough for any measurement, and a CPU run's 1e-5 GB/s stays above 0
NAMES_SHOWN = 5  # value names listed in a note before "and N more"
HEALTHY = "a baseline is a picture of a healthy machine"


@dataclass(frozen=True)
class Metric:
    key: str  # "busbw-all_reduce-1GiB": also the test id
    value: float
    unit: str
    higher_is_better: bool = True
    spread: float = 0.0  # (max - min) / median over the runs the baseline was made from; 0 for one run

    def tolerance(self, max_regression: float) -> float:
        """How much worse a value may be: the asked-for share, or twice what the baseline's own runs
        varied by (at most SPREAD_TOLERANCE_CAP), whichever is larger (a value that moves 10% between
        healthy runs is no regression at 6%)."""
        return max(max_regression, min(2 * self.spread, SPREAD_TOLERANCE_CAP))

    @property
    def capped(self) -> bool:
        """Whether the runs varied more than the tolerance a spread can earn."""
        return 2 * self.spread > SPREAD_TOLERANCE_CAP

    def tolerance_reason(self, max_regression: float) -> str:
        """Why the tolerance is what it is, where the spread decided it: for a verdict's message."""
        if self.tolerance(max_regression) <= max_regression:
            return ""
        cap = f", capped at {SPREAD_TOLERANCE_CAP:.0%}" if self.capped else ""
        return f" (twice the {self.spread:.1%} its baseline runs varied by{cap})"


def measured_values(facts: Facts) -> dict[str, Metric]:
    """Every number the measurements hold, keyed the same way in every run; where a value was
    measured again (a confirmation round), its best attempt, as the run's own verdict took it."""
    found = _values_of(facts)
    for index in range(len(facts.measurements.rounds)):
        for key, again in _values_of(facts.at_attempt(index)).items():
            first = found.get(key)
            better = first is None or (again.value > first.value if again.higher_is_better else again.value < first.value)
            if better:
                found[key] = again
    return found


def _values_of(facts: Facts) -> dict[str, Metric]:
    """The numbers of one attempt: the first measurement, or a confirmation round's in its place."""
    found: dict[str, Metric] = {}

    def add(key: str, value: float, unit: str, higher_is_better: bool = True) -> None:
        found[key] = Metric(key, _kept(value), unit, higher_is_better)

    measured = facts.measurements
    if measured.collectives:
        for r in measured.collectives.results:
            add(f"busbw-{r.collective}-{r.nominal_size}", r.busbw_GBps, "GB/s")
    if measured.pairwise:
        for r in measured.pairwise.results:
            add(f"pair_busbw-{pair_key(*r.gpus)}", r.busbw_GBps, "GB/s")
    if measured.copies:
        for r in measured.copies.results:
            add(f"{r.what}-" + "-".join(gpu_key(g) for g in r.gpus), r.GBps, "GB/s")
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
    if measured.compute:
        # the per-GPU loads: a driver that costs GEMM 8% can still clear a floor set 10% below healthy
        for load in measured.compute.results:
            if isinstance(load, GemmResult):
                add(f"gemm-{gpu_key(load.gpu)}", load.tflops, "TFLOP/s")
            elif isinstance(load, HbmResult):
                add(f"{load.load}-{gpu_key(load.gpu)}", load.GBps, "GB/s")
    return found


def _kept(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def _usable(value: float) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def machine_of(facts: Facts, profile_name: str) -> dict:
    environment = Environment.of(facts)
    return {
        "gpu_model": environment.gpu_model,
        "gpu_count": environment.gpu_count,
        "driver": environment.driver,
        "cuda_driver": environment.cuda_driver,
        "nccl": environment.nccl,
        "torch": environment.torch,
        "host": environment.host,
        "profile": profile_name,
    }


def named(keys: list[str], shown: int = NAMES_SHOWN) -> str:
    """`a, b, c and 27 more`."""
    more = len(keys) - shown
    return ", ".join(keys[:shown]) + (f" and {more} more" if more > 0 else "")


def baseline_runs(records: list[RunRecord], sources: list[str]) -> list[Facts]:
    """The facts of runs a baseline may be made of: every run complete and passed (a baseline is a
    picture of a healthy machine), all of one profile on one kind of machine. Every file that cannot
    be used is named, one line each."""
    problems = []
    first: tuple[str, dict[str, object]] | None = None
    for record, source in zip(records, sources, strict=True):
        unhealthy = record.not_a_pass(causes_first)
        if unhealthy:
            advice = "; save one from runs that passed" if "did not pass" in unhealthy else ""
            problems.append(Problem(source, None, "", f"{unhealthy}: {HEALTHY}{advice}"))
            continue
        if not measured_values(record.facts):
            problems.append(Problem(source, None, "", "the run measured nothing (a quick level, or recorded facts without measurements)"))
            continue
        environment = record.environment
        kind: dict[str, object] = {
            "profile": record.run.profile.name, "gpu_model": environment.gpu_model, "gpu_count": environment.gpu_count,
        }
        if first is None:
            first = (source, kind)
        elif kind != first[1]:
            differing = "; ".join(f"{key} {kind[key]} here, {first[1][key]} in {first[0]}" for key in kind if kind[key] != first[1][key])
            problems.append(Problem(source, None, "", f"{differing}: one baseline holds runs of one profile on one kind of machine"))
    if problems:
        raise InputFileError(problems)
    return [record.facts for record in records]


@dataclass(frozen=True)
class SavedBaseline:
    """What a saved baseline holds, and what it could not."""

    values: int
    runs: int
    left_out: tuple[str, ...]  # values not measured in every run: no stable reference
    capped: tuple[tuple[str, float], ...]  # (key, spread) of values whose runs varied more than the cap allows for

    def notes(self) -> list[str]:
        lines = []
        if self.left_out:
            lines.append(f"left out {len(self.left_out)} value(s) not measured in every run: {named(list(self.left_out))}")
        if self.capped:
            cap = f"{SPREAD_TOLERANCE_CAP:.0%}"
            shown = named([f"{key} (spread {spread:.1%})" for key, spread in self.capped])
            lines.append(
                f"{len(self.capped)} value(s) hit the {cap} cap on the tolerance a spread earns (twice their spread would allow "
                f"more; a later run may be at most {cap} worse there): {shown}"
            )
        return lines


def save_baseline(path: Path, facts: Facts, profile_name: str, more_runs: list[Facts] = (), sources: list[str] = ()) -> SavedBaseline:
    """The measured values of `facts`; with `more_runs`, the median of every run and their spread.
    `sources` name the runs in errors (a value that is not finite or not above 0 is refused)."""
    runs = [facts, *more_runs]
    names = list(sources) or ["this run"] + [f"run {index + 2}" for index in range(len(more_runs))]
    measured = []
    for run, name in zip(runs, names, strict=True):
        found = measured_values(run)
        broken = [Problem(name, None, key, f"measured {metric.value!r} {metric.unit}: a baseline holds only finite values above 0".rstrip())
                  for key, metric in found.items() if not _usable(metric.value)]
        if broken:
            raise InputFileError(broken[:1])
        measured.append(found)
    keys = list(dict.fromkeys(key for found in measured for key in found))
    values, left_out, capped = [], [], []
    for key in keys:
        found = [run[key] for run in measured if key in run]
        if len(found) != len(measured):
            left_out.append(key)
            continue
        numbers = [metric.value for metric in found]
        middle = statistics.median(numbers)
        spread = round((max(numbers) - min(numbers)) / middle, 4)
        values.append(
            {"key": key, "value": _kept(middle), "unit": found[0].unit, "higher_is_better": found[0].higher_is_better,
             "spread": spread, "runs": len(found)}
        )
        if 2 * spread > SPREAD_TOLERANCE_CAP:
            capped.append((key, spread))
    document = {
        "format": BASELINE_FORMAT,
        "version": BASELINE_VERSION,
        "saved_at": now(),
        "machine": machine_of(facts, profile_name),
        "values": values,
    }
    write_atomically(path, json.dumps(document, indent=1) + "\n")  # a baseline is never half a file
    return SavedBaseline(len(values), len(runs), tuple(left_out), tuple(capped))


@dataclass(frozen=True)
class Baseline:
    path: str
    machine: dict
    metrics: dict[str, Metric]

    def _differing(self, facts: Facts, profile_name: str, keys: tuple[str, ...]) -> list[str]:
        now_machine = machine_of(facts, profile_name)
        return [
            f"{key} {self.machine.get(key)} -> {now_machine.get(key)}"
            for key in keys
            if self.machine.get(key) is not None and now_machine.get(key) is not None and str(self.machine[key]) != str(now_machine[key])
        ]

    def mismatch(self, facts: Facts, profile_name: str) -> list[str]:
        """Why this baseline cannot judge a run of `facts` against `profile_name`: other GPUs, or another
        profile (unknowns skipped). Empty where it can."""
        return self._differing(facts, profile_name, HARDWARE_KEYS + ("profile",))

    def differences(self, facts: Facts) -> list[str]:
        """The software and host that differ from the baseline's: noted, never a reason to refuse it."""
        return self._differing(facts, "", NOTED_KEYS)


def load_baseline(path: Path) -> Baseline:
    path = Path(path)

    def problem(message: str, key: str = "") -> InputFileError:
        return InputFileError([Problem(str(path), None, key, message)])

    try:
        text = read_input_text(path)
        if not text.strip():
            raise problem("the file is empty: expected the baseline that gpu-accept baseline save writes")
        document = json.loads(text)
    except OSError as exc:
        raise problem(f"cannot read baseline: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise problem(f"not a gpu-accept baseline: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise InputFileError([Problem(str(path), exc.lineno, "", f"invalid JSON: {exc.msg}")]) from None
    except ValueError as exc:  # an integer of thousands of digits, which Python will not read
        raise problem(f"invalid JSON: {str(exc).split(';')[0]}") from None
    except RecursionError:
        raise problem("not a gpu-accept baseline: nested too deeply") from None
    if not isinstance(document, dict) or document.get("format") != BASELINE_FORMAT:
        raise problem(f"not a gpu-accept baseline (format {BASELINE_FORMAT!r} expected)", "format")
    if document.get("version") != BASELINE_VERSION:
        raise problem(f"baseline version {document.get('version')!r} is not {BASELINE_VERSION}", "version")
    values = document.get("values")
    if not isinstance(values, list) or not values:
        said = "missing" if values is None else f"got {type(values).__name__}" if not isinstance(values, list) else "it is empty"
        raise problem(f"expected the list of measured values a baseline gates on ({said})", "values")
    metrics: dict[str, Metric] = {}
    for index, entry in enumerate(values):
        try:
            key, value, unit = str(entry["key"]), float(entry["value"]), str(entry["unit"])
            if not isinstance(entry["higher_is_better"], bool):
                raise TypeError(f"higher_is_better is {entry['higher_is_better']!r}, not true or false")
            metric = Metric(key, value, unit, entry["higher_is_better"], float(entry.get("spread", 0.0)))
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise problem(f"malformed entry ({type(exc).__name__}: {exc})", f"values[{index}]") from None
        if key in metrics:
            raise problem(f"{key} is given twice: which value would gate is not clear", f"values[{index}]")
        if not _usable(metric.value):
            raise problem(f"{metric.key}: value {entry['value']!r} is not a finite number above 0", f"values[{index}]")
        if not (math.isfinite(metric.spread) and metric.spread >= 0):
            raise problem(f"{metric.key}: spread {entry.get('spread')!r} is not a finite number of at least 0", f"values[{index}]")
        metrics[metric.key] = metric
    machine = document.get("machine")
    if not isinstance(machine, dict):
        said = "missing" if machine is None else f"got {type(machine).__name__}"
        raise problem(f"expected the machine the baseline was saved on ({said}): without it any machine would be judged", "machine")
    # what decides whether it may judge a run (`mismatch`); a GPU model NVML did not name is saved as null
    if "gpu_model" not in machine or not isinstance(machine["gpu_model"], (str, type(None))):
        raise problem(f"expected the GPU model's name, got {machine.get('gpu_model')!r}", "machine.gpu_model")
    if not isinstance(machine.get("gpu_count"), int) or isinstance(machine.get("gpu_count"), bool):
        raise problem(f"expected the number of GPUs, got {machine.get('gpu_count')!r}", "machine.gpu_count")
    if not isinstance(machine.get("profile"), str):
        raise problem(f"expected the profile's name, got {machine.get('profile')!r}", "machine.profile")
    return Baseline(str(path), machine, metrics)


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
