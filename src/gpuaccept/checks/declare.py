"""Checks declare themselves: `@check(...)` above a check function says, once, what the lists that
read it need, and the registry holds every declaration.

A declaration names the check (the function's own name, unless it says otherwise), its subjects
(the GPUs, pairs or cases a profile asks for, and how each is written in a test id:
`test_link_type[gpu0-gpu1]`), the stage that measures its value, if any (and whether a miss is
measured again before it fails, whether a burn-in judges it over its rounds, whether it is judged
beside the sustained load), and whether its value is judged with the profile's marginal band. The
check function receives its `Judge`, made from the declaration: no check retypes its own name.

It also says what every writer needs of it, carried on each of its verdicts (facts/verdict.py): the
area of the machine it judges (vocabulary/areas.py: its stage's, else its module's), the GPUs each
subject involves, whether its failure is a root cause of other checks (a GPU missing, someone
else's load on a GPU), whether its value is a headline worth seeing when it passes, whether the fleet
compares it across hosts and over a host's runs (fleet medians, history, drift), whether it is a
Prometheus series of its own (a headline or fleet value always is), whether it is a share of something
(a ratio, where its criterion names no unit), which way it improves, and which measured value it
judges where report.html draws that value beside its verdict (vocabulary/measures.py: a link's type,
a collective's busbw, a copy's bandwidth, a DDP setting's efficiency). So coverage by area, causes
first, the fleet's medians, the history, the metrics and the page's charts and matrices are read
from data, and no writer types a
check's name: vocabulary/checks.json holds the same declarations below the checks, for results written
before verdicts carried them and for the SQL of the results store
(`python -m gpuaccept.checks.catalog meanings > src/gpuaccept/vocabulary/checks.json`).

Derived from the registry: the test parametrization of the plugin (plugin/parametrize.py), the
values of each stage (checks/stages.py's stage_values), the health families, the golden verdicts of
the tests, and docs/checks.md (`python -m gpuaccept.checks.catalog > docs/checks.md`). What reads
every declaration asks declared_checks, which imports every module of checks first: a check is found
wherever in checks/ it is declared, whichever modules were imported before.

Most checks are judged by the suites' tests (runner "suites"); the checks of a cluster are judged by
`gpu-accept cluster` over every node of the job (runner "cluster"), from the same declarations.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, Literal, ParamSpec

from gpuaccept.checks.verdict import Better, Judge, Verdict, best_attempt
from gpuaccept.facts.model import Facts
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.areas import AREAS, RootCause
from gpuaccept.vocabulary.checks import CheckMeaning
from gpuaccept.vocabulary.links import gpu_key, pair_key
from gpuaccept.vocabulary.measures import Measure
from gpuaccept.vocabulary.steps import StageName, StepKey

P = ParamSpec("P")
StepKeys = Callable[[Profile, Any], list[StepKey]]  # (profile, subject) -> keys of the values it judges
Runner = Literal["suites", "cluster"]  # who judges a check: the suites' tests, or `gpu-accept cluster`

PACKAGE = "gpuaccept.checks"
# every module of checks that declares checks, in the order the suites go (the layers: inventory
# first), then the regression gate against a baseline, then the checks of a cluster. A module of
# checks that is a package (health) is listed room by room: its checks are one module's (its area,
# its section of docs/checks.md), in the order of its rooms here, whichever room was imported first
CHECK_MODULES = (
    "inventory", "health.memory", "health.state", "health.xids", "health.counters", "health.thermal", "topology", "affinity", "p2p",
    "fabric", "compute", "ddp", "telemetry", "heat", "burnin", "baseline", "cluster",
)
# the area of each module's checks, where a check names no stage (a stage's checks are of the area
# the stage is named after: nccl, copies, ddp, compute)
MODULE_AREAS = {
    "inventory": "inventory", "health": "health", "topology": "topology", "affinity": "topology", "p2p": "p2p", "fabric": "nccl",
    "compute": "compute", "ddp": "ddp", "telemetry": "telemetry", "heat": "burn-in", "burnin": "burn-in", "baseline": "baseline",
    "cluster": "cluster",
}


@dataclass(frozen=True)
class Subjects:
    """One kind of subject: the fixture a suite asks for it by (`gpu`), the subjects a profile asks
    for, how one is written in a test id, and what a profile without any has none of."""

    fixture: str  # "" where no suite test is parametrized by it (the machine, a cluster's nodes)
    of: Callable[[Profile], list[Any]]
    id_of: Callable[[Any], str]
    nothing: str
    described: str  # for people: "each GPU"
    example: str = ""  # one subject as a test id writes it: "gpu0"
    # the GPUs a subject involves (what a missing GPU or someone else's load on one fails); None where
    # no GPU of the machine is its subject (the machine's driver, a baseline value, a cluster's node)
    gpus: Callable[[Profile, Any], list[int]] | None = None


def every_gpu(profile: Profile, subject: Any) -> list[int]:
    """A subject measured on every GPU the profile asks for (a collective at one size)."""
    return list(range(profile.gpu_count))


MACHINE = Subjects("", lambda profile: [None], lambda subject: "", "", "the machine")
GPU = Subjects("gpu", lambda profile: list(range(profile.gpu_count)), gpu_key, "no GPUs", "each GPU", "gpu0", lambda profile, gpu: [gpu])
GPU_PAIR = Subjects(
    "gpu_pair", lambda profile: list(profile.gpu_pairs()), lambda pair: pair_key(*pair), "no GPU pairs", "each GPU pair", "gpu0-gpu1",
    lambda profile, pair: sorted(pair),
)
GPU_ORDERED_PAIR = Subjects(
    "gpu_ordered_pair", lambda profile: list(profile.ordered_gpu_pairs()), lambda pair: pair_key(*pair), "no GPU pairs",
    "each ordered GPU pair (both ways)", "gpu1-gpu0", lambda profile, pair: sorted(pair),
)


@dataclass(frozen=True)
class Declaration:
    name: str
    module: str
    summary: str  # the first line of the check's docstring
    subjects: Subjects
    marginal: bool = False  # its value is judged with the profile's marginal band
    stage: StageName | None = None  # the measurement stage whose value it judges
    asked: Callable[[Profile], bool] | None = None  # whether the profile asks the stage for this value at all
    measured_again: bool = True  # a miss is measured again before it fails (stage values)
    in_burnin: bool = True  # judged over a burn-in's rounds (stage values)
    judged_beside_load: bool = True  # a burn-in round beside the sustained load samples it (stage values)
    key_of: Callable[[Any], StepKey] | None = None  # its key, where some rounds of its stage do not measure it
    attempts: StepKeys | None = None  # judged on every attempt: the steps that measure a subject
    family: str | None = None  # a family of checks the suites mark alike (health_state, health_run)
    test: str | None = None  # the suites' test of it, where it is not test_<name>
    runner: Runner = "suites"
    area: str = ""  # the area of the machine it judges (vocabulary/areas.py)
    root: RootCause | None = None  # what its failure is the root cause of, where it is one
    headline: bool = False  # its value is worth seeing when it passes (the terminal's summary shows it)
    fleet: bool = False  # its value is compared across a fleet's hosts and over a host's runs
    metric: bool = False  # its value is a Prometheus series of its own (a headline or fleet value always is)
    share: bool = False  # its value, without a unit, is a share of something: a ratio
    better: Better | None = None  # which way its value improves, where that is the same for every subject
    measure: Measure | None = None  # the measured value it judges, where report.html draws it beside its verdicts

    @property
    def meaning(self) -> CheckMeaning:
        """What every writer needs of it, as vocabulary/checks.json holds it."""
        better = None if self.better is None else self.better.value
        measure = None if self.measure is None else self.measure.value
        return CheckMeaning(self.area, better, self.fleet, self.headline, self.metric, self.share, measure)

    @property
    def test_name(self) -> str:
        return self.test or f"test_{self.name}"

    def test_id(self, subject: Any) -> str:
        """How a test of this check reads in a run: `test_link_type[gpu0-gpu1]`."""
        shown = self.subjects.id_of(subject)
        return f"{self.test_name}[{shown}]" if shown else self.test_name


class DeclaredCheck(Generic[P]):
    """A check as the suites call it, `(profile, facts, subject) -> Verdict`, with its declaration.
    Where it is judged on every attempt, it is evaluated on the first measurement and on each
    confirmation round that measured its subject's steps, and `best_attempt` makes one verdict."""

    def __init__(self, judged: Callable[Concatenate[Judge, Profile, P], Verdict], declaration: Declaration) -> None:
        self.judged = judged
        self.declaration = declaration
        functools.update_wrapper(self, judged)
        self.__name__ = declaration.name

    def judge(self, profile: Profile) -> Judge:
        """The judge of this check against `profile`."""
        band = profile.marginal_band if self.declaration.marginal else 0.0
        return Judge(self.declaration.name, profile.name, band)

    def step_keys(self, profile: Profile, subject: Any) -> list[StepKey]:
        return self.declaration.attempts(profile, subject) if self.declaration.attempts is not None else []

    def __call__(self, profile: Profile, *args: P.args, **kwargs: P.kwargs) -> Verdict:
        subject = args[1] if len(args) > 1 else None
        return self.declared(self._judged_on_every_attempt(profile, *args, **kwargs), profile, subject)

    def _judged_on_every_attempt(self, profile: Profile, *args: P.args, **kwargs: P.kwargs) -> Verdict:
        judge = self.judge(profile)
        attempts = self.declaration.attempts
        first = self.judged(judge, profile, *args, **kwargs)
        if attempts is None or not args or not isinstance(args[0], Facts):
            return first
        facts, subject = args[0], args[1] if len(args) > 1 else None
        keys = set(attempts(profile, subject))
        found = [first]
        for index, again in enumerate(facts.measurements.rounds):
            if keys & set(again.keys):
                rest = (facts.at_attempt(index), *args[1:])
                found.append(self.judged(judge, profile, *rest, **kwargs))  # type: ignore[arg-type]
        return best_attempt(found)

    def declared(self, verdict: Verdict, profile: Profile, subject: Any) -> Verdict:
        """`verdict` with what this check declares for every writer: its area, the GPUs its subject
        involves (a root cause's own, where it names the GPUs at fault), whether it is a root cause, and
        where its value is shown (a headline, a fleet value, a metric, a share, a measure the page draws)."""
        declaration = self.declaration
        update: dict[str, Any] = {
            "area": declaration.area, "root": declaration.root, "headline": declaration.headline, "fleet": declaration.fleet,
            "metric": declaration.metric, "share": declaration.share, "measure": declaration.measure,
        }
        gpus_of = declaration.subjects.gpus
        if gpus_of is not None and subject is not None and not (declaration.root and verdict.gpus):
            update["gpus"] = gpus_of(profile, subject)
        return verdict.model_copy(update=update)


REGISTRY: dict[str, DeclaredCheck[Any]] = {}


def check(
    *,
    subjects: Subjects = MACHINE,
    name: str | None = None,
    marginal: bool = False,
    stage: StageName | None = None,
    asked: Callable[[Profile], bool] | None = None,
    measured_again: bool = True,
    in_burnin: bool = True,
    judged_beside_load: bool = True,
    key_of: Callable[[Any], StepKey] | None = None,
    attempts: StepKeys | None = None,
    family: str | None = None,
    test: str | None = None,
    runner: Runner = "suites",
    area: str | None = None,
    root: RootCause | None = None,
    headline: bool = False,
    fleet: bool = False,
    metric: bool = False,
    share: bool = False,
    better: Better | None = None,
    measure: Measure | None = None,
) -> Callable[[Callable[Concatenate[Judge, Profile, P], Verdict]], DeclaredCheck[P]]:
    """Declare a check (see the module's docstring); it is registered under its name."""

    def declare(judged: Callable[Concatenate[Judge, Profile, P], Verdict]) -> DeclaredCheck[P]:
        summary = (judged.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        module = _module_of(judged)
        named = name or judged.__name__
        earlier = REGISTRY.get(named)
        # a module imported again (pytest's in-process runs restore sys.modules) declares its checks
        # again: the same function replaces itself; another function of the same name is a mistake
        if earlier is not None and (earlier.judged.__module__, earlier.judged.__qualname__) != (judged.__module__, judged.__qualname__):
            raise ValueError(f"check {named!r} is declared twice: {earlier.judged.__module__} and {judged.__module__}")
        if judged.__module__ not in {f"{PACKAGE}.{listed}" for listed in CHECK_MODULES}:
            raise ValueError(
                f"check {named!r} is declared in {judged.__module__}, which CHECK_MODULES (checks/declare.py) does not list: "
                "add the module there, where the suites go"
            )
        declared_area = area or stage or MODULE_AREAS.get(module, "")
        if declared_area not in AREAS:
            raise ValueError(f"check {named!r}: area {declared_area!r} is not one of {', '.join(AREAS)}")
        if fleet and better not in (Better.HIGHER, Better.LOWER):
            raise ValueError(f"check {named!r}: a fleet value says which way it improves (better=Better.HIGHER or LOWER)")
        declaration = Declaration(
            named, module, " ".join(summary.split()), subjects, marginal, stage, asked,
            measured_again, in_burnin, judged_beside_load, key_of, attempts, family, test, runner, declared_area, root, headline,
            fleet, metric or fleet or headline, share, better, measure,
        )
        declared = DeclaredCheck(judged, declaration)
        REGISTRY[declaration.name] = declared
        return declared

    return declare


def _module_of(judged: Callable[..., Any]) -> str:
    """The module of checks a check function is declared in: `health` for gpuaccept.checks.health.xids."""
    return judged.__module__.removeprefix(f"{PACKAGE}.").split(".")[0]


def declared_checks(runner: Runner | None = "suites") -> list[DeclaredCheck[Any]]:
    """Every check `runner` judges (every declared check for None), in the order of CHECK_MODULES
    and, within a module, of the file. Every module of checks (and of a package of checks) is
    imported first, so that each of its declarations is in the registry whatever was imported before."""
    _import_every_module_of_checks()
    return in_suite_order(declared for declared in REGISTRY.values() if runner is None or declared.declaration.runner == runner)


@functools.cache
def _import_every_module_of_checks() -> None:
    """Once a process: a module imported stays so, with its declarations (a collection asks for the
    declared checks once a test function, and walking the package's folders each time cost a few
    hundredths of a second of a quick level)."""
    package = importlib.import_module(PACKAGE)
    for module in pkgutil.walk_packages(package.__path__, f"{PACKAGE}."):
        importlib.import_module(module.name)


def in_suite_order(found: Iterable[DeclaredCheck[Any]]) -> list[DeclaredCheck[Any]]:
    """`found` in the order of CHECK_MODULES (a package's checks room by room) and, within a module,
    of the file: whichever module was imported first."""
    order = {module: index for index, module in enumerate(CHECK_MODULES)}
    return sorted(found, key=lambda declared: order[declared.judged.__module__.removeprefix(f"{PACKAGE}.")])


def subject_kinds() -> dict[str, Subjects]:
    """Every kind of subject the suites' checks have, by the fixture a suite asks for it by."""
    kinds = (declared.declaration.subjects for declared in declared_checks())
    return {kind.fixture: kind for kind in kinds if kind.fixture}


def areas_of_tests() -> dict[str, str]:
    """The area of each suite test, by its function's name (`test_busbw`: nccl): what a run that left
    tests out (-k, -m, test ids) did not check."""
    return {found.declaration.test_name: found.declaration.area for found in declared_checks()}
