"""Every verdict the checks give on the example facts and results: what a refactoring must not change.

Each measured facts file in examples/facts is judged against every shipped profile, and each
results file in examples/results against the profile it was judged against then (found by its
content hash among the shipped profiles and those kept in bench/runs), with every check declared
(checks/declare.py) for the subjects it declares, as the plugin parametrizes them. So are the
facts `gpu-accept import` reads from the reference 4xH200 machine's command outputs (nvidia-smi
topo -m, topo -p2p r and its nccl-tests logs), against every shipped profile. `python -m tests.verdicts` writes what the code gives now to
tests/data/verdicts.json; test_verdicts.py holds the code to that file. Regenerate it only for a
change of verdicts that is meant, and say which in the commit.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuaccept.checks.declare import declared_checks
from gpuaccept.facts import Facts, load_facts, parse_facts
from gpuaccept.importers import import_files
from gpuaccept.profile import Profile, ProfileCatalog, load_profile

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = ROOT / "tests" / "data" / "verdicts.json"
CATALOG = ProfileCatalog.with_shipped()
REFERENCE = Path("tests") / "data" / "reference" / "h200x4"  # command outputs of a real 4xH200 machine
REFERENCE_OUTPUTS = ["nvidia-smi-topo-m.txt", "nvidia-smi-topo-p2p-r.txt", "nccl-tests-*-g4.txt"]

# each declared check, with the subjects it is run for (as the plugin parametrizes them); but the
# burn-in's judgement of each value over its rounds, which is those same checks again over rounds
# that no example holds
SUBJECTS: list[tuple[Callable[[Profile], list[Any]], list[Callable[..., Any]]]] = [
    (declared.declaration.subjects.of, [declared])
    for declared in declared_checks()
    if declared.declaration.subjects.fixture != "burnin_case"
]


def verdicts(profile: Profile, facts: Facts) -> list[list[Any]]:
    """(check, subject, outcome, measured) of every verdict, in the suites' order."""
    found = []
    for subjects, checks in SUBJECTS:
        for check in checks:
            for subject in subjects(profile):
                verdict = check(profile, facts) if subject is None else check(profile, facts, subject)
                record = verdict.as_data()
                found.append([record["check"], record["subject"], record["outcome"], record["measured"]])
    return found


def _profiles_by_hash() -> dict[str, Profile]:
    folders = CATALOG.base_folders()
    candidates = [path for _, path in CATALOG.names()] + sorted((ROOT / "bench" / "runs").glob("*/*.yaml"))
    profiles = [load_profile(path, folders) for path in candidates]
    return {profile.sha256: profile for profile in profiles}


def judged_sets() -> dict[str, list[list[Any]]]:
    """Every set of verdicts, named by what was judged against what."""
    sets: dict[str, list[list[Any]]] = {}
    profiles = CATALOG.load_all()
    for path in sorted((ROOT / "examples" / "facts").glob("*-measured.json")):
        facts = load_facts(path)
        for profile in profiles:
            sets[f"examples/facts/{path.name} against {profile.name}"] = verdicts(profile, facts)
    by_hash = _profiles_by_hash()
    for path in sorted((ROOT / "examples" / "results").glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        profile = by_hash[document["run"]["profile"]["sha256"]]
        facts = parse_facts(json.dumps(document["facts"]), str(path))
        sets[f"examples/results/{path.name} against {profile.name}"] = verdicts(profile, facts)
    outputs = [path for pattern in REFERENCE_OUTPUTS for path in sorted((ROOT / REFERENCE).glob(pattern))]
    imported = import_files(outputs).facts
    for profile in profiles:
        sets[f"{REFERENCE}/ outputs imported against {profile.name}"] = verdicts(profile, imported)
    return sets


def dump(sets: dict[str, list[list[Any]]]) -> str:
    """One verdict a line, so that a changed verdict is one changed line in a diff."""
    blocks = []
    for name, found in sets.items():
        lines = ",\n".join("  " + json.dumps(verdict) for verdict in found)
        blocks.append(f"{json.dumps(name)}: [\n{lines}\n]")
    return "{\n" + ",\n".join(blocks) + "\n}\n"


if __name__ == "__main__":
    EXPECTED.write_text(dump(judged_sets()), encoding="utf-8")
    print(f"wrote {EXPECTED.relative_to(ROOT)}", file=sys.stderr)
