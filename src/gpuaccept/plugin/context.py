"""What a run is about: one profile and one set of facts, decided once per session.

The controlling pytest process builds the context (probing the machine, or reading a facts file)
and hands it to pytest-xdist workers as JSON, so a machine is probed once however many workers
evaluate it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuaccept.facts import Facts, load_facts, parse_facts
from gpuaccept.facts.run_record import FACTS_SOURCE, FactsFile, LiveMachine
from gpuaccept.measure.drills import NO_DRILLS, Drills
from gpuaccept.plugin.options import DerivedProfile, NamedProfile, ProfileChoice, RunOptions
from gpuaccept.probe import probe_machine
from gpuaccept.process import Bounded
from gpuaccept.profile import Profile, ProfileCatalog, load_profile
from gpuaccept.profile.catalogue import load_catalogue
from gpuaccept.stages.store import MeasurementStore


@dataclass(frozen=True)
class RunContext:
    profile: Profile
    facts: Facts
    facts_source: LiveMachine | FactsFile
    profile_folders: tuple[str, ...]
    chosen_because: str = ""  # why --profile auto chose (or derived) this profile; "" where it was named
    drills: Drills = NO_DRILLS  # the fault drills of a live run, read at the door; kept in the facts' environment

    @classmethod
    def build(
        cls,
        choice: ProfileChoice,
        source: LiveMachine | FactsFile,
        profile_dirs: tuple[Path, ...],
        drills: Drills = NO_DRILLS,
        expect_gpus: int | None = None,
        derive_into: Path | None = None,
        started_probe: Bounded | None = None,
        quick: bool = False,
    ) -> RunContext:
        """`derive_into`: where a profile derived from the catalogue is kept (beside the reports);
        `started_probe`: the probe's child, where the command started it as it began; `quick`: a
        run of the quick level, whose probe reads no NVLink error counter."""
        catalog = ProfileCatalog.with_shipped(list(profile_dirs))
        # a named profile is loaded first: a bad profile is reported before any hardware is touched
        profile = catalog.load(choice.name) if isinstance(choice, NamedProfile) else None
        derived_only = isinstance(choice, DerivedProfile)
        catalogue, candidates = None, None
        if profile is None:
            # --profile auto: the catalogue and every profile are read while the probe still runs
            catalogue = load_catalogue()
            candidates = None if derived_only else catalog.load_all()
        if isinstance(source, FactsFile):
            facts, drills = load_facts(Path(source.path)), NO_DRILLS  # replayed facts: nothing runs, no drill acts
        else:
            facts = drills.recorded_in(probe_machine(started=started_probe, quick=quick))
        reason = ""
        if profile is None:
            selection = catalog.select(facts, expect_gpus, derive_into, derived_only=derived_only, catalogue=catalogue, profiles=candidates)
            profile, reason = selection.profile, selection.reason
        return cls(profile, facts, source, tuple(str(f) for f in catalog.folders), reason, drills)

    @property
    def live(self) -> bool:
        """Whether this run probes and measures the machine it runs on (not replayed facts)."""
        return isinstance(self.facts_source, LiveMachine)

    def to_json(self) -> str:
        return json.dumps(
            {
                "profile_path": str(self.profile.path),
                "profile_folders": list(self.profile_folders),
                "facts": self.facts.model_dump(mode="json"),
                "facts_source": FACTS_SOURCE.dump_python(self.facts_source, mode="json"),
                "chosen_because": self.chosen_because,
                "drills": self.drills.model_dump(mode="json"),
            }
        )

    @classmethod
    def from_json(cls, text: str) -> RunContext:
        data = json.loads(text)
        folders = [Path(f) for f in data["profile_folders"]]
        profile = load_profile(Path(data["profile_path"]), folders)
        facts = parse_facts(json.dumps(data["facts"]), "facts from the controlling process")
        source = FACTS_SOURCE.validate_python(data["facts_source"])
        drills = Drills.model_validate(data["drills"])
        return cls(profile, facts, source, tuple(data["profile_folders"]), data["chosen_because"], drills)

    def describe(self) -> str:
        gpus = self.facts.gpus
        model = gpus[0].name if gpus else "no GPU"
        where = f"replayed from {self.facts_source}" if isinstance(self.facts_source, FactsFile) else "probed live"
        if self.facts.imported_from is not None:
            where = f"read from command outputs ({', '.join(self.facts.imported_from.files)}) via {self.facts_source}"
        hidden = self.facts.hidden_gpus
        installed = f" ({len(hidden)} more installed, not under test)" if hidden else ""
        chosen = f"; {self.chosen_because}" if self.chosen_because else ""
        return (
            f"profile {self.profile.name} ({self.profile.path}){chosen}; facts {where}: {self.facts.system.hostname}, "
            f"{len(gpus)}x {model}{installed}, driver {self.facts.system.driver_version}"
        )


@dataclass(frozen=True)
class GpuAcceptRun:
    """A gpu-accept run as each pytest process (controller or xdist worker) holds it."""

    options: RunOptions
    context: RunContext
    store: MeasurementStore


RUN_KEY = pytest.StashKey[GpuAcceptRun]()


def run_of(config: pytest.Config) -> GpuAcceptRun:
    run = config.stash.get(RUN_KEY, None)
    if run is None:
        raise pytest.UsageError("gpu-accept: these tests need --profile NAME|PATH|auto (or --facts FILE)")
    return run
