"""The plugin's options, declared once (`OPTIONS`): pytest's parser takes them from here, and so
does `gpu-accept run`, a thin shim that shows them, passes them on to pytest and hands the plugin
the record it read. `read_options` reads them into a typed record and checks them, before anything
is probed or measured: the one check of every option, whichever door it came in by."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuaccept.errors import OptionError, excerpt
from gpuaccept.facts.run_record import FactsFile, LiveMachine, journal_of
from gpuaccept.process import Bounded
from gpuaccept.report.baseline import Baseline, load_baseline, parse_percent
from gpuaccept.vocabulary.levels import DEFAULT_LEVEL, LEVEL_HELP, LEVELS
from gpuaccept.vocabulary.telemetry import parse_duration

if TYPE_CHECKING:  # pytest is imported by pytest's own run: `gpu-accept` reads this table without it
    import pytest

    from gpuaccept.plugin.head_start import HeadStart

AUTO = "auto"  # what --profile says for the profile whose match rule fits the GPUs installed
DERIVED = "derived"  # what --profile says for a profile derived from the catalogue, whatever profiles match
DEFAULT_MAX_REGRESSION = "5%"


@dataclass(frozen=True)
class AutoProfile:
    """--profile auto: the profile whose match rule fits the GPUs installed, as NVML sees them."""


@dataclass(frozen=True)
class DerivedProfile:
    """--profile derived: expectations from the catalogue alone (GPU model, fabric, count), no profile file."""


@dataclass(frozen=True)
class NamedProfile:
    name: str  # a shipped profile's name, or a YAML path


ProfileChoice = AutoProfile | DerivedProfile | NamedProfile


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
        """(option, path) of every file to write, results.json's journal with them, for one-line
        errors that name the option."""
        found = [
            ("--results", self.results), ("--html-report", self.html), ("--facts-out", self.facts), ("--save-baseline", self.baseline),
            ("--junit-report", self.junit_report), ("--junitxml", self.junitxml),
            ("--results' journal", journal_of(self.results) if self.results is not None else None),
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
    expect_gpus: int | None = None  # --expect-gpus: the GPUs the machine must have, where the user states it

    def inputs(self) -> list[tuple[str, Path | str | None]]:
        """(option, path) of every file the run reads: none may be one of its outputs (outputs.py)."""
        profile = self.profile.name if isinstance(self.profile, NamedProfile) and Path(self.profile.name).is_file() else None
        return [
            ("--facts", self.source.path if isinstance(self.source, FactsFile) else None),
            ("--baseline", self.gate.baseline.path if self.gate is not None else None), ("--profile", profile),
        ]

    def with_junitxml(self, path: str | None) -> RunOptions:
        """With pytest's own --junitxml FILE, which this plugin writes too (read from pytest's options:
        `gpu-accept run` passes it on unread)."""
        return replace(self, outputs=replace(self.outputs, junitxml=_path(path)))


@dataclass(frozen=True)
class Option:
    """One option of the plugin: its flag, where its value goes (`dest`), and what it takes."""

    flag: str
    dest: str
    help: str
    metavar: str | None = None
    type: Callable[[str], Any] | None = None
    default: Any = None
    choices: Sequence[str] | None = None
    append: bool = False  # repeatable: each value is kept
    # in `gpu-accept run`: its flag where that differs, its default where that differs, and whether
    # it is the command's to give at all (the report files are set from --reports)
    command_flag: str | None = None
    command_default: Any = None
    in_command: bool = True

    @property
    def spelled(self) -> str:
        """The flag `gpu-accept run` knows it by."""
        return self.command_flag or self.flag

    def arguments(self) -> dict[str, Any]:
        """What argparse's and pytest's add_argument take."""
        found: dict[str, Any] = {"dest": self.dest, "help": self.help}
        if self.append:
            found.update(action="append", default=[])
        else:
            found["default"] = self.default
        for name in ("metavar", "type", "choices"):
            if getattr(self, name) is not None:
                found[name] = getattr(self, name)
        return found


OPTIONS = (
    Option(
        "--profile", "gpuaccept_profile", metavar="NAME|PATH|auto|derived", command_default=AUTO,
        help="the hardware profile to check against: a shipped name, a YAML path, 'auto' to pick by GPU model and count "
        "(derived from the catalogue where no profile matches), or 'derived' to derive it from the catalogue whatever matches",
    ),
    Option(
        "--expect-gpus", "gpuaccept_expect_gpus", type=int, metavar="N",
        help="the GPUs this machine must have (default: as installed: NVML, the PCI bus, the NVSwitch board); "
        "each one missing fails by name",
    ),
    Option(
        "--profile-dir", "gpuaccept_profile_dirs", metavar="DIR", append=True,
        help="another folder of profiles, searched before the shipped ones (repeatable)",
    ),
    Option(
        "--facts", "gpuaccept_facts", metavar="FILE",
        help="evaluate facts recorded earlier (gpu-accept record) instead of probing this machine",
    ),
    Option(
        "--facts-out", "gpuaccept_facts_out", metavar="FILE", in_command=False,
        help="save the facts this run gathered, to re-check them later with --facts",
    ),
    Option("--baseline", "gpuaccept_baseline", metavar="FILE", help="gate on a baseline saved earlier: one test per value it holds"),
    Option(
        "--max-regression", "gpuaccept_max_regression", metavar="PERCENT",
        help="with --baseline: how much worse than the baseline a value may be (default 5%%)",
    ),
    Option(
        "--confirm", "gpuaccept_confirm", type=int, default=2, metavar="N",
        help="measure a value that misses its criterion again, up to N more times, before it fails; the best attempt "
        "decides and every attempt is reported (default 2, at most 10; 0 judges the first measurement)",
    ),
    Option(
        "--save-baseline", "gpuaccept_save_baseline", metavar="FILE", help="save this run's measured values as a baseline for later runs"
    ),
    Option("--html-report", "gpuaccept_html", metavar="FILE", in_command=False, help="write a self-contained HTML report at the end"),
    Option(
        "--results", "gpuaccept_results", metavar="FILE", in_command=False,
        help="write results.json (facts, every verdict, environment, timings), kept valid as the run goes",
    ),
    Option("--level", "gpuaccept_level", choices=LEVELS, default=DEFAULT_LEVEL, help=f"how deep to test: {LEVEL_HELP}"),
    Option(
        "--burn-in-duration", "gpuaccept_burnin", metavar="DURATION", command_flag="--duration",
        help="with --level burn-in: how long to load the GPUs (90s, 30m, 2h; default the profile's burnin.duration)",
    ),
    Option(
        "--junit-report", "gpuaccept_junit", metavar="FILE", in_command=False,
        help="write JUnit XML, kept valid as the run goes (--junitxml FILE does the same in a gpu-accept run)",
    ),
)
PYTEST_FLAGS = {option.dest: option.flag for option in OPTIONS}
COMMAND_FLAGS = {option.dest: option.spelled for option in OPTIONS}
# the values an empty text would turn into another run: an empty --facts would probe this machine
_NOT_EMPTY = ("gpuaccept_profile", "gpuaccept_facts", "gpuaccept_baseline", "gpuaccept_save_baseline", "gpuaccept_max_regression")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpu-accept", "GPU server acceptance (gpu-accept)")
    for option in OPTIONS:
        group.addoption(option.flag, **option.arguments())


def add_command_options(parser: Any, only: Sequence[str] | None = None, leave_out: Sequence[str] = ()) -> None:
    """The options `gpu-accept run` gives (of `only`, by dest), as that command spells them, to an
    argparse parser or group."""
    for option in OPTIONS:
        if option.in_command and (only is None or option.dest in only) and option.dest not in leave_out:
            arguments = option.arguments()
            if option.command_default is not None:
                arguments["default"] = option.command_default
            parser.add_argument(option.spelled, **arguments)


def command_defaults() -> dict[str, Any]:
    """Every option's value in a `gpu-accept run` that gives none."""
    return {option.dest: [] if option.append else (option.command_default or option.default) for option in OPTIONS}


def passed_to_pytest(values: argparse.Namespace) -> list[str]:
    """The options in `values` as pytest's command line gives them, each flag and its value one
    word (a value that begins with "-" is not taken for an option)."""
    found: list[str] = []
    for option in OPTIONS:
        value = getattr(values, option.dest, None)
        for each in (value or []) if option.append else [value]:
            if each is not None:
                found.append(f"{option.flag}={each}")
    return found


class GivenOptions:
    """The options as `gpu-accept run` read and checked them, handed to the plugin beside pytest's
    own plugins (`pytest.main(..., plugins=[...])`): the controlling process does not read them
    again. `probe`: the probe's child, where the command started it as it began (gpuaccept/entry.py);
    `head_start`: torch's check and the first workers, where it started them once these options
    were read (plugin/head_start.py)."""

    def __init__(self, options: RunOptions, probe: Bounded | None = None, head_start: HeadStart | None = None):
        self.options = options
        self.probe = probe
        self.head_start = head_start


def given_options(plugins: Iterable[object]) -> RunOptions | None:
    return next((plugin.options for plugin in plugins if isinstance(plugin, GivenOptions)), None)


# Each confirmation measures a missed value again: a bound keeps a run that misses from running for ever
MAX_CONFIRM = 10


def given_probe(plugins: Iterable[object]) -> Bounded | None:
    """The probe the command started as it began, where it did."""
    return next((plugin.probe for plugin in plugins if isinstance(plugin, GivenOptions)), None)


def given_head_start(plugins: Iterable[object]) -> HeadStart | None:
    """Torch's check and the first workers the command started, where it did."""
    return next((plugin.head_start for plugin in plugins if isinstance(plugin, GivenOptions)), None)


def read_options(option: argparse.Namespace, spelled: Mapping[str, str] = PYTEST_FLAGS) -> RunOptions | None:
    """The options of a gpu-accept run, checked; None where this pytest run is none (neither
    --profile nor --facts given: the plugin stays inert). `spelled`: each option's flag as the
    errors name it (`gpu-accept run` knows --burn-in-duration as --duration). Raises OptionError or
    InputFileError."""
    for dest in _NOT_EMPTY:
        given = getattr(option, dest, None)
        if given is not None and not str(given).strip():
            raise OptionError(f"{spelled[dest]}: the value is empty")
    if any(not str(folder).strip() for folder in getattr(option, "gpuaccept_profile_dirs", None) or []):
        raise OptionError(f"{spelled['gpuaccept_profile_dirs']}: the folder's name is empty")  # it would be taken for "."
    confirm = getattr(option, "gpuaccept_confirm", 0)
    if not 0 <= confirm <= MAX_CONFIRM:
        raise OptionError(f"{spelled['gpuaccept_confirm']} {excerpt(confirm)}: the number of measurements more to make, 0 to "
                          f"{MAX_CONFIRM} (a value that misses its criterion {MAX_CONFIRM} times more is no one-off dip)")
    baseline_file = getattr(option, "gpuaccept_baseline", None)
    max_regression = getattr(option, "gpuaccept_max_regression", None)
    if max_regression is not None and not baseline_file:
        raise OptionError(
            f"{spelled['gpuaccept_max_regression']} needs {spelled['gpuaccept_baseline']} FILE: "
            "it is how far below that baseline a value may fall"
        )
    gate = None
    if baseline_file:
        gate = BaselineGate(load_baseline(Path(baseline_file)), _share(max_regression or DEFAULT_MAX_REGRESSION, spelled))
    level = getattr(option, "gpuaccept_level", DEFAULT_LEVEL)
    burnin_text = getattr(option, "gpuaccept_burnin", None)
    facts = getattr(option, "gpuaccept_facts", None)
    burnin_s = None
    if burnin_text is not None:
        name = spelled["gpuaccept_burnin"]
        if level != "burn-in":
            raise OptionError(f"{name} {burnin_text}: only a burn-in has a duration (--level burn-in, not {level})")
        try:
            burnin_s = parse_duration(burnin_text)
        except ValueError as error:
            raise OptionError(f"{name} {error}") from None
        if facts:
            raise OptionError(
                f"{name} {burnin_text}: recorded facts are judged on the rounds they hold; nothing runs (leave out --facts)"
            )
    profile = getattr(option, "gpuaccept_profile", None)
    if profile is None and facts is None:
        return None
    expect_gpus = getattr(option, "gpuaccept_expect_gpus", None)
    if expect_gpus is not None and not 1 <= expect_gpus <= 1024:
        raise OptionError(f"{spelled['gpuaccept_expect_gpus']} {expect_gpus}: the GPUs the machine must have, 1 to 1024")
    if expect_gpus is not None and profile not in (None, AUTO, DERIVED):
        raise OptionError(
            f"{spelled['gpuaccept_expect_gpus']} {expect_gpus}: a named profile states its GPU count (gpus.count); "
            f"the count is for --profile {AUTO} or {DERIVED}"
        )
    choice: ProfileChoice = AutoProfile() if profile in (None, AUTO) else DerivedProfile() if profile == DERIVED else NamedProfile(profile)
    return RunOptions(
        profile=choice,
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
        expect_gpus=expect_gpus,
    )


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _share(text: str, spelled: Mapping[str, str]) -> float:
    try:
        return parse_percent(text)
    except ValueError as error:
        raise OptionError(f"{spelled['gpuaccept_max_regression']} {error}") from None
