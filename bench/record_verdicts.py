"""Every run kept under bench/runs judged again by the profiles gpu-accept gives now: does a healthy
run fail, and does every fault drill still fail?

A run is a facts.json (or the facts in a results.json) inside one of the tar.gz captures of
bench/runs, named by its capture and folder there (trust-h200-4.tar.gz:trust3). A folder whose name
says a fault was injected (a competing load, P2P off, one NCCL channel, a hidden GPU, a stopped
worker...) is a drill; a few kinds of run are counted apart (DRILL_WORDS and what follows it); any
other run is healthy: a lent machine as lent. Each run is judged, with its confirmation
rounds, by every check the suites declare, against the profile `--profile auto` gives its machine
(the shipped one that fits, else one derived from the catalogue), as the suites judge it; a
measurement the run did not make (a quick-level run, a loads bench) is judged as the checks judge
a missing one, could not judge, which is not counted here as a failure.

    python bench/record_verdicts.py --markdown bench/record-verdicts.md

A healthy run that fails here is a false failure of today's floors on a machine this project saw;
a drill that passes is a fault today's floors miss. Computed from the data in this repository
alone (CPU, no GPU).
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from gpuaccept.checks.declare import declared_checks
from gpuaccept.checks.verdict import Better
from gpuaccept.errors import GpuAcceptError
from gpuaccept.facts import Facts, parse_facts
from gpuaccept.outcomes import Outcome
from gpuaccept.profile import Profile, ProfileCatalog
from gpuaccept.profile.from_results import short_uuid

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "bench" / "runs"
# what a run was, by the words of its folder name (scripts/gpu-session.sh names them): a fault
# injected (a competing load, P2P off, one NCCL channel, a hidden GPU, a stopped or hung worker, a
# corrupted product or a flipped bit); a run on part of the machine (bench/run_time.py's runs on its
# first GPU or two, which the machine's profile fails by design: GPUs missing); a run under py-spy
# (bench/run_profile.py: a sampling profiler beside every process). Any other run is healthy, a
# one-off injected dip among them: its confirmation round must pass it.
DRILL_WORDS = ("hog", "nop2p", "onechannel", "slow", "flip", "corrupt", "stop", "hang", "hidden", "gemmload", "inject")
PART_SUFFIXES = ("-1gpu", "-2gpu")
PROFILED_WORD = "profiled"
# machines lent with a fault of their own, not injected: each run on one must fail the check named
FAULTY_AS_LENT = {
    "vm/59116112": ("sram_ecc", "gpu2 counts one uncorrected SRAM ECC error in its aggregate (bench/README.md, the tenth run)"),
}
# runs whose folder name does not say what they were, by name: (kind, why)
NAMED = {
    "2026-11-25/hostlink-h100-1.tar.gz:hostlink-burn": (
        "tool", "the copies beside the load ran out of memory: the memory test held 72 GiB until a garbage collection (fixed in b70bc37)"
    ),
    "2026-11-27/call4/drills-x1.tar.gz:stop": (
        "healthy", "the SIGSTOP drill's rank stopped 3 s after its fork, when it had delivered its values: nothing of the run was lost"
    ),
}
KINDS = ("healthy", "drill", "part", "profiled", "faulty", "tool")
# a healthy run's value this close to its limit (a share of it) is listed as near
NEAR = 0.03
# the checks whose runs the catalogue may draw from the record, by the catalogue's name of the value
# each judges: a DDP value's for each world and batch (its subject), a host copy's for the machine
# (its slowest GPU: the catalogue's value is the machine's floor)
CATALOGUE_KEYS = {"ddp_scaling": "ddp.min_efficiency", "ddp_exposed_comm": "ddp.max_exposed_comm", "ddp_nvlink_speedup": "ddp.nvlink_ab"}
PER_GPU_CATALOGUE_KEYS = {"host_to_device": "copies.host_to_device_min", "device_to_host": "copies.device_to_host_min"}


@dataclass
class Judged:
    """One kept run and what the profile gpu-accept gives its machine today says of it."""

    name: str  # capture:folder
    profile: str
    kind: str  # one of KINDS
    machine: str  # vm/ and its first GPU's UUID's first eight digits, as profiles/catalogue/measured.yaml names machines
    failed: list[str] = field(default_factory=list)  # check[subject]: every attempt's value (what was expected)
    best: dict[str, float] = field(default_factory=dict)  # each value the catalogue may draw from the record: its best attempt
    # check: how far its passing value closest to a limit sat from that limit, a share of the limit
    headroom: dict[str, float] = field(default_factory=dict)

    def fails(self, check: str) -> bool:
        return any(failure.startswith(f"{check}[") for failure in self.failed)


def kept_runs(runs: Path, unread: list[str]) -> list[tuple[str, Facts]]:
    """Every run inside the captures under `runs`, by capture and folder: its facts.json, or where a
    folder kept only results.json, the facts it holds. What is not read (a multi-node job's results,
    which hold no one machine's facts; facts this code refuses) goes to `unread`, with why."""
    found = []
    for capture in sorted(runs.rglob("*.tar.gz")):
        try:
            with tarfile.open(capture) as archive:
                texts = {m.name: archive.extractfile(m).read().decode("utf-8") for m in archive.getmembers()  # type: ignore[union-attr]
                         if m.isfile() and m.name.endswith(("facts.json", "results.json"))}
        except (tarfile.TarError, OSError, UnicodeDecodeError) as error:
            unread.append(f"{capture.relative_to(runs)}: {error}")
            continue
        folders = sorted({str(Path(member).parent) for member in texts})
        for folder in folders:
            name = f"{capture.relative_to(runs)}:{folder}"
            try:
                found.append((name, parse_facts(_facts_text(texts, folder), name)))
            except KeyError:
                unread.append(f"{name}: no one machine's facts (a multi-node job's results)")
            except (GpuAcceptError, ValueError) as error:
                unread.append(f"{name}: its facts refused: {str(error).removeprefix(name + ': ')}")
    return found


def _facts_text(texts: dict[str, str], folder: str) -> str:
    facts = str(Path(folder) / "facts.json")
    if facts in texts:
        return texts[facts]
    return json.dumps(json.loads(texts[str(Path(folder) / "results.json")])["facts"])


def kind_of(name: str, machine: str = "") -> str:
    if name in NAMED:
        return NAMED[name][0]
    folder = name.rsplit(":", 1)[-1].lower()
    if folder.endswith(PART_SUFFIXES):
        return "part"
    if any(word in folder for word in DRILL_WORDS):
        return "drill"
    if machine in FAULTY_AS_LENT:
        return "faulty"
    return "profiled" if PROFILED_WORD in folder else "healthy"


def judge(name: str, facts: Facts, catalog: ProfileCatalog, profiles: list[Profile], unread: list[str]) -> Judged | None:
    """The run judged by the profile `--profile auto` gives its machine: the shipped one that fits,
    else the one derived from the catalogue; None (and why, in `unread`) where neither can be had."""
    try:
        with tempfile.TemporaryDirectory() as folder:
            profile = catalog.select(facts, derive_into=Path(folder), profiles=profiles).profile
    except GpuAcceptError as error:
        unread.append(f"{name}: no profile fits it ({error})")
        return None
    machine = machine_of(facts)
    judged = Judged(name=name, profile=profile.name, kind=kind_of(name, machine), machine=machine)
    for declared in declared_checks():
        if declared.declaration.subjects.fixture == "burnin_case" and facts.burnin is None:
            continue  # the values over a burn-in's rounds: a run of another level holds none
        for subject in declared.declaration.subjects.of(profile):
            verdict = declared(profile, facts) if subject is None else declared(profile, facts, subject)
            key = CATALOGUE_KEYS.get(verdict.check)
            values = [v for v in (verdict.attempts or [verdict.measured]) if isinstance(v, (int, float)) and not isinstance(v, bool)]
            best = (min(values) if verdict.better is Better.LOWER else max(values)) if values else None
            if key and best is not None:
                judged.best[f"{key}.{verdict.subject}"] = best
            gpu_key = PER_GPU_CATALOGUE_KEYS.get(verdict.check)
            if gpu_key and best is not None:
                judged.best[gpu_key] = min(best, judged.best.get(gpu_key, best))
            limit = getattr(verdict.criterion, "limit", None)
            measured_value = verdict.measure_judged is not None  # a rate or share measured, not a spec read (PCIe width, memory)
            if verdict.outcome is Outcome.PASSED and measured_value and best is not None and isinstance(limit, (int, float)) and limit:
                share = (best - limit) / limit if verdict.better is Better.HIGHER else (limit - best) / limit
                if verdict.better in (Better.HIGHER, Better.LOWER):
                    judged.headroom[verdict.check] = min(share, judged.headroom.get(verdict.check, share))
            if verdict.outcome is Outcome.FAILED:
                judged.failed.append(_failure(verdict))
    return judged


def machine_of(facts: Facts) -> str:
    """As profiles/catalogue/measured.yaml names a lent machine (its host name is vm on every one)."""
    return f"vm/{short_uuid(facts)}"


def catalogue_runs(judged: list[Judged]) -> str:
    """Each value of the healthy runs the catalogue may draw from the record, by profile, as
    profiles/catalogue/measured.yaml lists runs:
    [machine, runs, lowest, highest] of each run's best attempt, machine by machine."""
    lines = []
    by_value: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for j in judged:
        if j.kind == "healthy":
            for key, value in j.best.items():
                by_value[(j.profile, key)][j.machine].append(value)
    for (profile, key), machines in sorted(by_value.items()):
        runs = ", ".join(
            f"[{machine}, {len(values)}, {min(values):.4g}, {max(values):.4g}]" for machine, values in sorted(machines.items())
        )
        every = [v for values in machines.values() for v in values]
        lines.append(f"{profile} {key}: {len(every)} runs on {len(machines)} machines, {min(every):.4g}-{max(every):.4g}: [{runs}]")
    return "\n".join(lines) + "\n"


def _failure(verdict) -> str:
    """check[subject]: every attempt's value, and what was expected."""
    subject = f"[{verdict.subject}]" if verdict.subject else ""
    values = ", ".join(_shown(value) for value in (verdict.attempts or [verdict.measured]))
    return f"{verdict.check}{subject}: {values} ({verdict.expected})"


def _shown(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def markdown(judged: list[Judged], unread: list[str]) -> str:
    def of(kind: str, runs: list[Judged] = judged) -> list[Judged]:
        return [j for j in runs if j.kind == kind]

    lines = [
        "# The kept runs judged by the profiles gpu-accept gives them today",
        "",
        "Written by `python bench/record_verdicts.py --markdown bench/record-verdicts.md` from the captures",
        "under bench/runs, each run's confirmation rounds judged with it as the suites judge them. Healthy:",
        "a lent machine as lent (a one-off injected dip among them); drill: a fault injected in software.",
        "",
        "| profile | healthy runs | machines | healthy runs failing | drills | drills passing |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    by_profile: dict[str, list[Judged]] = defaultdict(list)
    for j in judged:
        by_profile[j.profile].append(j)
    for name, runs in sorted(by_profile.items()):
        healthy, drills = of("healthy", runs), of("drill", runs)
        failing, passing = sum(1 for j in healthy if j.failed), sum(1 for j in drills if not j.failed)
        machines = len({j.machine for j in healthy})
        lines.append(f"| {name} | {len(healthy)} | {machines} | {failing} | {len(drills)} | {passing} |")
    failing = [j for j in of("healthy") if j.failed]
    lines += ["", "## Healthy runs that fail", ""]
    lines += [f"- {j.name} ({j.profile}): " + "; ".join(j.failed) for j in failing] or ["None."]
    lines += ["", f"## Healthy runs closest to a limit (every check whose passing value came within {NEAR:.0%} of it)", ""]
    lines += ["| profile | check | runs within | closest | its run |", "| --- | --- | ---: | ---: | --- |"]
    nearest: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)
    for j in of("healthy"):
        for check, share in j.headroom.items():
            if share < NEAR:
                nearest[(j.profile, check)].append((share, j.name))
    for (profile, check), near in sorted(nearest.items(), key=lambda item: min(item[1])[0]):
        share, name = min(near)
        lines.append(f"| {profile} | {check} | {len(near)} | {share:.1%} | {name} |")
    lines += ["", "## Drills", ""]
    for j in of("drill"):
        shown = "; ".join(j.failed[:3]) + (f"; and {len(j.failed) - 3} more" if len(j.failed) > 3 else "")
        lines.append(f"- {j.name} ({j.profile}): " + (f"{len(j.failed)} failed: {shown}" if j.failed else "**passes**"))
    lines += ["", "## Machines lent with a fault of their own", ""]
    if not of("faulty"):
        lines.append("None.")
    for machine, (check, why) in FAULTY_AS_LENT.items():
        runs = [j for j in of("faulty") if j.machine == machine]
        if not runs:
            continue
        caught = [j for j in runs if j.fails(check)]
        others = sorted({f.split(":", 1)[0] for j in runs for f in j.failed if not f.startswith(f"{check}[")})
        lines.append(
            f"- {machine}, {why}: {len(caught)} of {len(runs)} runs fail {check}"
            + (f"; they fail besides: {', '.join(others)}" if others else "; nothing else fails")
        )
    lines += ["", "## Runs a fault of gpu-accept's own failed, since fixed", ""]
    lines += [f"- {j.name} ({j.profile}): {NAMED[j.name][1]}: " + "; ".join(j.failed) for j in of("tool")] or ["None."]
    lines += ["", "## Runs under a profiler (py-spy beside every process)", ""]
    lines += [f"- {j.name} ({j.profile}): " + ("; ".join(j.failed) or "passes") for j in of("profiled")] or ["None."]
    parts = of("part")
    lines += ["", f"Runs on part of a machine (its first GPU or two), which its profile fails by design: {len(parts)}."]
    lines += ["", f"## Not judged: {len(unread)}", ""]
    lines += [f"- {why}" for why in unread] or ["None."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", type=Path, help="write the table and the failures here")
    parser.add_argument(
        "--catalogue-runs", action="store_true",
        help="print the healthy runs of each value the catalogue may draw from the record, as it lists runs",
    )
    parser.add_argument("--runs", type=Path, default=RUNS, help="where the captures are (default: bench/runs)")
    args = parser.parse_args(argv)
    unread: list[str] = []
    judged = judge_all(args.runs, unread)
    if args.catalogue_runs:
        print(catalogue_runs(judged), end="")
        return 0
    text = markdown(judged, unread)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    print(text)
    return exit_code(judged)


def judge_all(runs: Path, unread: list[str]) -> list[Judged]:
    """Every run kept under `runs`, judged; what could not be, with why, in `unread`."""
    catalog = ProfileCatalog.with_shipped()
    profiles = catalog.load_all()
    return [j for name, facts in kept_runs(runs, unread) if (j := judge(name, facts, catalog, profiles, unread))]


def exit_code(judged: list[Judged]) -> int:
    """1 where a healthy run fails, a drill passes or a machine's own fault is not caught; else 0."""
    healthy_failing = any(j.kind == "healthy" and j.failed for j in judged)
    drills_passing = any(j.kind == "drill" and not j.failed for j in judged)
    faults_missed = any(j.kind == "faulty" and not j.fails(FAULTY_AS_LENT[j.machine][0]) for j in judged)
    return 1 if healthy_failing or drills_passing or faults_missed else 0


if __name__ == "__main__":
    sys.exit(main())
