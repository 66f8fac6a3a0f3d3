"""Runs as Prometheus metrics: the text format node_exporter's textfile collector reads.

`render_run_metrics(command, verdict, record)` is what `gpu-accept run|burn-in|health-check --metrics
FILE` writes: the run's verdict (verdict.json's record) and, where the run left results, its tests
and measured values. `render_metrics(records)` is the fleet's (`gpu-accept report metrics`): each
host's latest run.

Names follow Prometheus' conventions: a `gpu_accept_` prefix, the base unit last (bytes per
second, not GB/s; hertz, not MHz), no `_total` (nothing here counts up over a process' life: every
value is a gauge of one run), and what varies within a metric as labels (`gpu`, `pair`,
`collective`, `size`, `setting`, `link`). No sample carries a timestamp: node_exporter refuses
them in textfiles, and `gpu_accept_run_timestamp_seconds` says when the run ended.

Every series carries `command` (run, burn-in, health-check; fleet for `report metrics`): node_exporter
merges every file of its folder, and two files with one series would make it drop one of them
silently. Metric names come only from a fixed vocabulary (the names of the declared checks whose value is
a metric, vocabulary/checks.json; the units of `_UNITS`): a results.json may say anything, and what it
says reaches the text only as label values, escaped as the exposition format says.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from gpuaccept.facts.run_record import RunRecord, TestRecord
from gpuaccept.facts.run_verdict import RunVerdict
from gpuaccept.facts.verdict import Verdict
from gpuaccept.vocabulary.checks import declared_meanings

PREFIX = "gpu_accept"
COMMANDS = ("run", "burn-in", "health-check", "cluster", "fleet")  # the values of the `command` label

# a verdict's unit -> (the metric name's unit suffix, the factor to the base unit)
_UNITS: dict[str, tuple[str, float]] = {
    "GB/s": ("bytes_per_second", 1e9),
    "GiB": ("bytes", float(2**30)),
    "TFLOP/s": ("flop_per_second", 1e12),
    "MHz": ("hertz", 1e6),
    "°C": ("celsius", 1.0),
    "%": ("ratio", 0.01),
    "x": ("ratio", 1.0),
    "lanes": ("lanes", 1.0),
    "links": ("links", 1.0),
    "s": ("seconds", 1.0),
}


@dataclass
class _Family:
    name: str
    help: str
    samples: dict[tuple[tuple[str, str], ...], float] = field(default_factory=dict)

    def add(self, labels: dict[str, str], value: float) -> None:
        key = tuple(sorted(labels.items()))
        self.samples.setdefault(key, value)  # the first of two equal series stands: a scrape refuses duplicates


class _Families:
    def __init__(self) -> None:
        self.families: dict[str, _Family] = {}

    def add(self, name: str, help_text: str, labels: dict[str, str], value: float) -> None:
        family = self.families.setdefault(name, _Family(name, help_text))
        family.add(labels, value)

    def text(self) -> str:
        lines: list[str] = []
        for family in self.families.values():
            lines.append(f"# HELP {family.name} {_escape_help(family.help)}")
            lines.append(f"# TYPE {family.name} gauge")
            for labels, value in family.samples.items():
                inner = ",".join(f'{key}="{_escape_label(text)}"' for key, text in labels)
                lines.append(f"{family.name}{{{inner}}} {_number(value)}" if inner else f"{family.name} {_number(value)}")
        return "\n".join(lines) + "\n" if lines else ""


def render_metrics(records: Iterable[RunRecord], command: str = "fleet") -> str:
    """The runs' verdicts and measured values as Prometheus text. One record per host: where two
    share a host, the later one given stands (a fleet passes each host's latest run)."""
    latest: dict[str, RunRecord] = {}
    for record in records:
        latest[record.environment.host] = record
    families = _Families()
    for record in latest.values():
        _run_metrics(families, command, record.recorded_verdict(), record)
    return families.text()


def render_run_metrics(command: str, verdict: RunVerdict, record: RunRecord | None) -> str:
    """The metrics of one run of `command`: its verdict, and its tests where it left results. A run
    in progress (or killed before its end) says so, exit code 2: node_exporter never serves the
    previous run's pass for a check that did not finish."""
    families = _Families()
    _run_metrics(families, command, verdict, record)
    return families.text()


def _run_metrics(families: _Families, command: str, verdict: RunVerdict, record: RunRecord | None) -> None:
    if command not in COMMANDS:
        raise ValueError(f"command {command!r} is none of {', '.join(COMMANDS)}")
    run = {"host": verdict.host, "profile": verdict.profile, "command": command}
    code = verdict.exit_code
    families.add(f"{PREFIX}_run_exit_code", "gpu-accept's exit code: 0 every check passed, 1 a check failed, 2 could not judge", run, code)
    families.add(f"{PREFIX}_run_passed", "1 where every check of the run passed (exit code 0), else 0", run, 1.0 if code == 0 else 0.0)
    families.add(f"{PREFIX}_run_in_progress", "1 from the run's start until its end: a run killed before its end stays 1", run,
                 float(verdict.in_progress))
    complete = record.complete if record is not None else False
    families.add(f"{PREFIX}_run_complete", "1 where the run reached its end and judged its tests, else 0", run, float(complete))
    started = _timestamp(verdict.started_at)
    finished = _timestamp(verdict.finished_at)
    if finished is not None:
        families.add(f"{PREFIX}_run_timestamp_seconds", "when the run ended, in seconds since the Unix epoch", run, finished)
    if started is not None:
        families.add(f"{PREFIX}_run_start_timestamp_seconds", "when the run began, in seconds since the Unix epoch", run, started)
    if started is not None and finished is not None:
        families.add(f"{PREFIX}_run_duration_seconds", "how long the run took", run, max(finished - started, 0.0))
    if record is None:
        return
    families.add(f"{PREFIX}_gpus", "GPUs under test in the run", run, float(record.environment.gpu_count))
    for outcome in ("passed", "failed", "error", "skipped"):
        count = float(getattr(record.summary, outcome))
        families.add(f"{PREFIX}_tests", "tests of the run, by outcome", {**run, "outcome": outcome}, count)
    for area in record.coverage:  # what the run checked, by area: an area not wholly checked is not proven good
        where = {**run, "area": area.area or "other"}
        families.add(
            f"{PREFIX}_area_checked", "1 where every test of the area the run asked for was judged, 0 where some were not (not judged "
            "or not selected)", where, 1.0 if area.state in ("checked", "not asked") else 0.0,
        )
        for outcome, count in (("passed", area.passed), ("failed", area.failed), ("error", area.not_judged),
                               ("skipped", area.skipped), ("not_selected", area.not_selected)):
            families.add(f"{PREFIX}_area_tests", "tests of the run by area and outcome", {**where, "outcome": outcome}, float(count))
    for test in record.tests:
        _test_metrics(families, run, test)


def _test_metrics(families: _Families, run: dict[str, str], test: TestRecord) -> None:
    if test.outcome == "skipped":
        return  # not judged: a skip says nothing of the hardware
    labels = {**run, "test": test.id, **subject_labels(test.id)}
    families.add(
        f"{PREFIX}_test_passed", "1 where the test passed, 0 where it failed or could not be established (error)", labels,
        1.0 if test.outcome == "passed" else 0.0,
    )
    verdict = test.verdict
    if verdict is None or verdict.numeric is None or _direction(verdict) is None:
        return  # a state, not a quantity: its pass or fail above is all there is to plot
    named = _value_name(verdict)
    if named is None or not verdict.is_metric or verdict.check not in declared_meanings():
        return  # a name outside the vocabulary never becomes a metric's name: only a declared check's
    name, factor = named
    value_labels = {**run, **subject_labels(test.id)}
    value = verdict.numeric * factor
    if math.isfinite(value):
        families.add(f"{PREFIX}_{verdict.check}_{name}" if name else f"{PREFIX}_{verdict.check}",
                     f"{verdict.check}: the value measured ({verdict.unit or 'no unit'} in gpu-accept's reports)", value_labels, value)
    limit = _limit(verdict)
    if limit is not None and math.isfinite(limit * factor):
        families.add(f"{PREFIX}_{verdict.check}_limit_{name}" if name else f"{PREFIX}_{verdict.check}_limit",
                     f"{verdict.check}: the profile's limit (a floor where higher is better, a ceiling where lower is)",
                     value_labels, limit * factor)


_EXPECTED = re.compile(r"^\s*(>=|<=)\s*([-+0-9.eE]+)")


def _direction(verdict: Verdict) -> str | None:
    """higher or lower: which way the value improves. Results written before verdicts said so
    (no `better`) tell it by their expectation's text, `>= 326.8 GB/s`."""
    if verdict.better in ("higher", "lower"):
        return verdict.better
    if verdict.better is None and (match := _EXPECTED.match(verdict.expected)):
        return "higher" if match.group(1) == ">=" else "lower"
    return None


def _limit(verdict: Verdict) -> float | None:
    if verdict.limit is not None:
        return verdict.limit
    match = _EXPECTED.match(verdict.expected) if verdict.better is None else None
    try:
        return float(match.group(2)) if match else None
    except ValueError:
        return None


def _value_name(verdict: Verdict) -> tuple[str, float] | None:
    if verdict.unit in _UNITS:
        return _UNITS[verdict.unit]
    if verdict.unit == "":
        return ("ratio", 1.0) if verdict.is_share else ("", 1.0)  # a share of something: a ratio in Prometheus' words
    return None  # a unit without a base unit here: reported by pass or fail only


_GPU = re.compile(r"^gpu(\d+)$")
_PAIR = re.compile(r"^gpu(\d+)-gpu(\d+)$")
_LINK = re.compile(r"^gpu(\d+)-link(\d+)$")
_NODE_GPU = re.compile(r"^(node\d+)-gpu(\d+)$")
_COLLECTIVE = re.compile(r"^([a-z_]+)-(\d+(?:[KMGT]iB|B))$")


def subject_labels(test_id: str) -> dict[str, str]:
    """The labels a test id's parameter gives: `test_busbw[all_reduce-1GiB]` -> collective and
    size; `[gpu3]` -> gpu; `[gpu0-gpu1]` -> pair; `[gpu0-link5]` -> gpu and link; anything else
    (a DDP setting `4gpu-bs8`, a burn-in value) -> setting."""
    if "[" not in test_id or not test_id.endswith("]"):
        return {}
    parameter = test_id[test_id.index("[") + 1 : -1]
    if match := _GPU.match(parameter):
        return {"gpu": f"gpu{match.group(1)}"}
    if _PAIR.match(parameter):
        return {"pair": parameter}
    if match := _LINK.match(parameter):
        return {"gpu": f"gpu{match.group(1)}", "link": match.group(2)}
    if match := _NODE_GPU.match(parameter):
        return {"node": match.group(1), "gpu": f"gpu{match.group(2)}"}
    if match := _COLLECTIVE.match(parameter):
        return {"collective": match.group(1), "size": match.group(2)}
    return {"setting": parameter}


def _timestamp(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None  # an older file's odd date: no timestamp rather than a wrong one


def _number(value: float) -> str:
    """As the text format writes numbers: NaN, +Inf, -Inf; a whole number without its '.0'."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _escape_label(text: str) -> str:
    """A label value as the exposition format writes it: backslash, newline and double quote escaped;
    a code point UTF-8 cannot carry (a lone surrogate from a JSON escape) as its escape."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")
