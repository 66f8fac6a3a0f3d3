"""Finding profiles: by path, by name in the profile folders, or by matching the machine."""

from __future__ import annotations

import difflib
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpuaccept.errors import OptionError, ProfileNotFound
from gpuaccept.facts.model import Facts
from gpuaccept.files import write_atomically
from gpuaccept.profile.catalogue import Catalogue, load_catalogue
from gpuaccept.profile.derive import derive_profile
from gpuaccept.profile.load import load_profile, load_profile_text
from gpuaccept.profile.machine import UnknownMachine, installed_gpus
from gpuaccept.profile.model import Profile
from gpuaccept.resources import shipped_dir

BASES_FOLDER = "bases"


@dataclass
class ProfileCatalog:
    """Profile folders, searched in order: the user's first, the shipped ones last."""

    folders: list[Path] = field(default_factory=list)

    @classmethod
    def with_shipped(cls, extra: Sequence[Path | str] = ()) -> ProfileCatalog:
        """The shipped profiles behind the folders of --profile-dir, each of which must exist."""
        if any(not str(folder).strip() for folder in extra):
            raise OptionError("--profile-dir: the folder's name is empty")  # as a Path it would be ".", the current folder
        for folder in map(Path, extra):
            if not folder.is_dir():
                problem = "is a file, not a folder of profiles" if folder.exists() else "no such folder"
                raise OptionError(f"--profile-dir {folder}: {problem}")
        return cls([Path(p) for p in extra] + [shipped_dir("profiles")])

    def base_folders(self) -> list[Path]:
        """Where `extends: NAME` looks: each folder itself (so `extends: bases/x` works) first."""
        return list(self.folders)

    def names(self) -> list[tuple[str, Path]]:
        """Concrete profiles (not bases), first folder wins a name."""
        seen: dict[str, Path] = {}
        for folder in self.folders:
            for path in sorted(folder.glob("*.y*ml")):
                if path.suffix in (".yaml", ".yml") and path.stem not in seen:
                    seen[path.stem] = path
        return sorted(seen.items())

    def resolve(self, name_or_path: str) -> Path:
        candidate = Path(name_or_path)
        if candidate.suffix in (".yaml", ".yml") or "/" in name_or_path:
            if candidate.is_dir():
                raise ProfileNotFound(f"{name_or_path} is a folder, not a profile file (a folder of profiles goes to --profile-dir)")
            if candidate.exists():  # a file, or a pipe or /dev/stdin: read as given
                return candidate
            raise ProfileNotFound(f"profile file {name_or_path} does not exist")
        for name, path in self.names():
            if name == name_or_path:
                return path
        names = [name for name, _ in self.names()]
        close = difflib.get_close_matches(name_or_path, names, n=1, cutoff=0.8)  # a typo, not any H-something
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ProfileNotFound(f"no profile named {name_or_path!r}{hint}; known profiles: {', '.join(names) or 'none'}")

    def load(self, name_or_path: str) -> Profile:
        return load_profile(self.resolve(name_or_path), self.base_folders())

    def load_all(self) -> list[Profile]:
        return [load_profile(path, self.base_folders()) for _, path in self.names()]

    def auto_select(self, gpu_model: str, gpu_count: int, described: str = "", profiles: list[Profile] | None = None) -> Selection:
        """The profile whose match rule fits `gpu_count` GPUs of `gpu_model`: the one of the first
        profile folder (a user's --profile-dir before the shipped ones). Raises ProfileNotFound
        listing the profiles that have match rules. `described`: the machine in words, for the reason;
        `profiles`: this catalog's, where they were loaded already."""
        profiles = self.load_all() if profiles is None else profiles
        machine = f"{gpu_count}x {gpu_model}"
        exact = [p for p in profiles if p.matches_machine(gpu_model, gpu_count)]
        if exact:
            chosen = self._first_folder(exact, machine)
            why = f"chosen by --profile auto: its match rule fits this machine ({described or machine})"
            others = [p for p in exact if p is not chosen]
            if others:
                why += f"; chosen over {', '.join(f'{p.name} ({p.path})' for p in others)}: profile folders are searched in order"
            return Selection(chosen, why)
        candidates = [f"{p.name} ({p.spec.match.gpu_count}x {'|'.join(p.spec.match.gpu_model)})" for p in profiles if p.spec.match]
        raise ProfileNotFound(
            f"no profile matches this machine ({machine}); profiles with match rules: "
            + (", ".join(candidates) or "none")
            + "; pass --profile NAME or write one (gpu-accept profile init)"
        )

    def select(
        self,
        facts: Facts,
        expect_gpus: int | None = None,
        derive_into: Path | None = None,
        derived_only: bool = False,
        catalogue: Catalogue | None = None,
        profiles: list[Profile] | None = None,
    ) -> Selection:
        """--profile auto: the profile of the machine as installed (NVML's view, the PCI bus, the
        NVSwitch board; not CUDA's: CUDA_VISIBLE_DEVICES must not make a 4-GPU server look like a
        3-GPU one, nor a GPU that fell off the bus a 7-GPU one). A profile whose match rule fits
        wins; where none does, one is derived from the catalogue and kept in `derive_into`
        (`derived_only`: derived whatever matches). A machine missing GPUs is judged as the
        machine it must be, and its missing GPUs fail their tests. `profiles`: this catalog's
        profiles where they were loaded already (load_all)."""
        catalogue = catalogue or load_catalogue()
        installed = installed_gpus(facts, catalogue, expect_gpus)
        how = f"{installed.describe()} as installed: {'; '.join(installed.evidence)}"
        if not derived_only:
            try:
                return self.auto_select(installed.model, installed.count, how, profiles)
            except ProfileNotFound as error:
                if catalogue.gpu_named(installed.model) is None:
                    raise ProfileNotFound(
                        f"{error}; the catalogue does not know {installed.model!r} either, so none can be derived"
                    ) from None
        try:
            derivation = derive_profile(facts, catalogue, stated_count=expect_gpus, path=None)
        except UnknownMachine as error:
            raise ProfileNotFound(str(error)) from None
        path = (derive_into or Path(tempfile.mkdtemp(prefix="gpuaccept-derived-"))) / f"{derivation.name}.yaml"
        write_atomically(path, derivation.text)
        profile = load_profile_text(derivation.text, path)
        lead = "derived from the catalogue (--profile derived)" if derived_only else (
            f"no profile matches {installed.count}x {installed.model}: derived from the catalogue by --profile auto"
        )
        return Selection(profile, f"{lead} ({how}): {derivation.summary}")

    def _first_folder(self, profiles: list[Profile], machine: str) -> Profile:
        """The one profile of the earliest folder among `profiles`; several there cannot be told apart."""
        def folder_of(profile: Profile) -> int:
            parent = profile.path.resolve().parent
            return next((i for i, folder in enumerate(self.folders) if folder.resolve() == parent), len(self.folders))

        first = min(folder_of(p) for p in profiles)
        tied = [p for p in profiles if folder_of(p) == first]
        if len(tied) > 1:
            raise ProfileNotFound(
                f"several profiles match this machine ({machine}): "
                + ", ".join(f"{p.name} ({p.path})" for p in tied)
                + "; pass --profile NAME to choose"
            )
        return tied[0]


@dataclass(frozen=True)
class Selection:
    """The profile `--profile auto` chose, and why, in words for the report."""

    profile: Profile
    reason: str
