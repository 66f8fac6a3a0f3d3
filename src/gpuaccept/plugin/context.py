"""What a run is about: one profile and one set of facts, decided once per session.

The controlling pytest process builds the context (probing the machine, or reading a facts file)
and hands it to pytest-xdist workers as JSON, so a machine is probed once however many workers
evaluate it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from gpuaccept.facts import Facts, load_facts, parse_facts
from gpuaccept.probe import probe_machine
from gpuaccept.profile import Profile, ProfileCatalog, load_profile

AUTO = "auto"


@dataclass(frozen=True)
class RunContext:
    profile: Profile
    facts: Facts
    facts_source: str  # "live" or the facts file evaluated
    profile_folders: tuple[str, ...]
    chosen_because: str = ""  # why --profile auto chose this profile; "" where it was named

    @classmethod
    def build(cls, profile_name: str, facts_file: str | None, profile_dirs: list[str]) -> RunContext:
        catalog = ProfileCatalog.with_shipped([Path(d) for d in profile_dirs])
        # a named profile is loaded first: a bad profile is reported before any hardware is touched
        profile = catalog.load(profile_name) if profile_name != AUTO else None
        facts = load_facts(Path(facts_file)) if facts_file else probe_machine()
        reason = ""
        if profile is None:
            selection = catalog.auto_select(*facts.installed())
            profile, reason = selection.profile, selection.reason
        return cls(profile, facts, facts_file or "live", tuple(str(f) for f in catalog.folders), reason)

    @property
    def live(self) -> bool:
        """Whether this run probes and measures the machine it runs on (not replayed facts)."""
        return self.facts_source == "live"

    def to_json(self) -> str:
        return json.dumps(
            {
                "profile_path": str(self.profile.path),
                "profile_folders": list(self.profile_folders),
                "facts": self.facts.model_dump(mode="json"),
                "facts_source": self.facts_source,
                "chosen_because": self.chosen_because,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> RunContext:
        data = json.loads(text)
        folders = [Path(f) for f in data["profile_folders"]]
        profile = load_profile(Path(data["profile_path"]), folders)
        facts = parse_facts(json.dumps(data["facts"]), "facts from the controlling process")
        return cls(profile, facts, data["facts_source"], tuple(data["profile_folders"]), data["chosen_because"])

    def describe(self) -> str:
        gpus = self.facts.gpus
        model = gpus[0].name if gpus else "no GPU"
        where = "probed live" if self.facts_source == "live" else f"replayed from {self.facts_source}"
        if self.facts.imported_from is not None:
            where = f"read from command outputs ({', '.join(self.facts.imported_from.files)}) via {self.facts_source}"
        hidden = self.facts.hidden_gpus
        installed = f" ({len(hidden)} more installed, not under test)" if hidden else ""
        chosen = f"; chosen by --profile auto: {self.chosen_because}" if self.chosen_because else ""
        return (
            f"profile {self.profile.name} ({self.profile.path}){chosen}; facts {where}: {self.facts.system.hostname}, "
            f"{len(gpus)}x {model}{installed}, driver {self.facts.system.driver_version}"
        )
