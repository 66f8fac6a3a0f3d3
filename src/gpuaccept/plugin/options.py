"""The plugin's options: declared for pytest, then read once into a typed record and checked, before
anything is probed or measured."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuaccept.errors import OptionError
from gpuaccept.facts.run_record import FactsFile, LiveMachine
from gpuaccept.report.baseline import Baseline, load_baseline, parse_percent
from gpuaccept.vocabulary.levels import DEFAULT_LEVEL, LEVEL_HELP, LEVELS
from gpuaccept.vocabulary.telemetry import parse_duration

AUTO = "auto"  # what --profile says for the profile whose match rule fits the GPUs installed
DEFAULT_MAX_REGRESSION = "5%"


@dataclass(frozen=True)
class AutoProfile:
    """--profile auto: the profile whose match rule fits the GPUs installed, as NVML sees them."""


@dataclass(frozen=True)
class NamedProfile:
    name: str  # a shipped profile's name, or a YAML path


ProfileChoice = AutoProfile | NamedProfile


@dataclass(frozen=True)
class BaselineGate:
    """--baseline and --max-regression: the values to gate on, and how much worse each may be."""

    baseline: Baseline
    max_regression: float  # a share: 0.05 for 5%


@dataclass(frozen=True)
class Outputs:
    """The files a run writes: proven writable before it starts (a report that cannot be written is
    otherwise found at the end of a full run)."""

    results: Path | None = None
    html: Path | None = None
    facts: Path | None = None
    baseline: Path | None = None
    junit_report: Path | None = None
    junitxml: Path | None = None  # pytest's option: in a gpu-accept run this plugin writes that file too

    @property
    def junit(self) -> tuple[Path, ...]:
        """Where the run's JUnit goes, each path once."""
        return tuple(dict.fromkeys(path for path in (self.junit_report, self.junitxml) if path is not None))

    def named(self) -> list[tuple[str, Path]]:
        """(option, path) of every file to write, for one-line errors that name the option."""
        found = [
            ("--results", self.results), ("--html-report", self.html), ("--facts-out", self.facts), ("--save-baseline", self.baseline),
            ("--junit-report", self.junit_report), ("--junitxml", self.junitxml),
        ]
        return [(option, path) for option, path in found if path is not None]


@dataclass(frozen=True)
class RunOptions:
    profile: ProfileChoice
    source: LiveMachine | FactsFile
    profile_dirs: tuple[Path, ...]
    gate: BaselineGate | None
    confirm: int  # how many times more a value that misses its criterion is measured
    outputs: Outputs
    level: str = DEFAULT_LEVEL  # plugin/levels.py
    burnin_s: float | None = None  # --burn-in-duration, in seconds; else the profile's burnin.duration


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpu-accept", "GPU server acceptance (gpu-accept)")
    group.addoption(
        "--profile",
        dest="gpuaccept_profile",
        metavar="NAME|PATH|auto",
        help="the hardware profile to check against: a shipped name, a YAML path, or 'auto' to pick by GPU model and count",
    )
    group.addoption(
        "--profile-dir",
        dest="gpuaccept_profile_dirs",
        action="append",
        default=[],
        metavar="DIR",
        help="another folder of profiles, searched before the shipped ones (repeatable)",
    )
    group.addoption(
        "--facts",
        dest="gpuaccept_facts",
        metavar="FILE",
        help="evaluate facts recorded earlier (gpu-accept record) instead of probing this machine",
    )
    group.addoption(
        "--facts-out",
        dest="gpuaccept_facts_out",
        metavar="FILE",
        help="save the facts this run gathered, to re-check them later with --facts",
    )
    group.addoption(
        "--baseline",
        dest="gpuaccept_baseline",
        metavar="FILE",
        help="gate on a baseline saved earlier: one test per value it holds",
    )
    group.addoption(
        "--max-regression",
        dest="gpuaccept_max_regression",
        metavar="PERCENT",
        help="with --baseline: how much worse than the baseline a value may be (default 5%%)",
    )
    group.addoption(
        "--confirm",
        dest="gpuaccept_confirm",
        type=int,
        default=2,
        metavar="N",
        help="measure a value that misses its criterion again, up to N more times, before it fails; the best attempt "
        "decides and every attempt is reported (default 2; 0 judges the first measurement)",
    )
    group.addoption(
        "--save-baseline",
        dest="gpuaccept_save_baseline",
        metavar="FILE",
        help="save this run's measured values as a baseline for later runs",
    )
    group.addoption(
        "--html-report",
        dest="gpuaccept_html",
        metavar="FILE",
        help="write a self-contained HTML report at the end",
    )
    group.addoption(
        "--results",
        dest="gpuaccept_results",
        metavar="FILE",
        help="write results.json (facts, every verdict, environment, timings), kept valid as the run goes",
    )
    group.addoption(
        "--level",
        dest="gpuaccept_level",
        choices=LEVELS,
        default=DEFAULT_LEVEL,
        help=f"how deep to test: {LEVEL_HELP}",
    )
    group.addoption(
        "--burn-in-duration",
        dest="gpuaccept_burnin",
        metavar="DURATION",
        help="with --level burn-in: how long to load the GPUs (90s, 30m, 2h; default the profile's burnin.duration)",
    )
    group.addoption(
        "--junit-report",
        dest="gpuaccept_junit",
        metavar="FILE",
        help="write JUnit XML, kept valid as the run goes (--junitxml FILE does the same in a gpu-accept run)",
    )


def read_options(option: argparse.Namespace) -> RunOptions | None:
    """The options of a gpu-accept run, checked; None where this pytest run is none (neither
    --profile nor --facts given: the plugin stays inert). Raises OptionError or InputFileError."""
    confirm = getattr(option, "gpuaccept_confirm", 0)
    if confirm < 0:
        raise OptionError(f"--confirm {confirm}: the number of measurements more to make, 0 or more")
    baseline_file = getattr(option, "gpuaccept_baseline", None)
    max_regression = getattr(option, "gpuaccept_max_regression", None)
    if max_regression is not None and not baseline_file:
        raise OptionError("--max-regression needs --baseline FILE: it is how far below that baseline a value may fall")
    gate = None
    if baseline_file:
        gate = BaselineGate(load_baseline(Path(baseline_file)), _share(max_regression or DEFAULT_MAX_REGRESSION))
    level = getattr(option, "gpuaccept_level", DEFAULT_LEVEL)
    burnin_text = getattr(option, "gpuaccept_burnin", None)
    burnin_s = None
    if burnin_text is not None:
        if level != "burn-in":
            raise OptionError(f"--burn-in-duration {burnin_text}: only a burn-in has a duration (--level burn-in, not {level})")
        try:
            burnin_s = parse_duration(burnin_text)
        except ValueError as error:
            raise OptionError(f"--burn-in-duration {error}") from None
    profile = getattr(option, "gpuaccept_profile", None)
    facts = getattr(option, "gpuaccept_facts", None)
    if profile is None and facts is None:
        return None
    return RunOptions(
        profile=AutoProfile() if profile in (None, AUTO) else NamedProfile(profile),
        source=FactsFile(path=facts) if facts else LiveMachine(),
        profile_dirs=tuple(Path(folder) for folder in getattr(option, "gpuaccept_profile_dirs", [])),
        gate=gate,
        confirm=confirm,
        outputs=Outputs(
            results=_path(getattr(option, "gpuaccept_results", None)),
            html=_path(getattr(option, "gpuaccept_html", None)),
            facts=_path(getattr(option, "gpuaccept_facts_out", None)),
            baseline=_path(getattr(option, "gpuaccept_save_baseline", None)),
            junit_report=_path(getattr(option, "gpuaccept_junit", None)),
            junitxml=_path(getattr(option, "xmlpath", None)),  # absent where pytest's junitxml plugin is disabled
        ),
        level=level,
        burnin_s=burnin_s,
    )


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _share(text: str) -> float:
    try:
        return parse_percent(text)
    except ValueError as error:
        raise OptionError(f"--max-regression {error}") from None
