"""Derived floors beside the shipped profiles' floors: for each shipped profile, the profile the
catalogue derives for the machine it describes, every floor and ceiling of either side by key, and
the ratio derived / shipped. Computed from the data in this repository alone (CPU, no GPU).

The machine of a shipped profile: its recorded facts where this project recorded that machine
(examples/facts: 1x, 2x, 4xH200, 1xH100); otherwise the `nvidia-smi topo -m` its links describe,
read by the importer with the profile's GPU model stated, as `gpu-accept profile derive
--from-text` would read the machine's own output.

    python bench/derived_floors.py --markdown bench/derived-floors.md     # every value
    python bench/derived_floors.py --summary                              # one row per profile
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from gpuaccept.facts import Facts, load_facts
from gpuaccept.importers import import_files
from gpuaccept.profile import Profile, ProfileCatalog
from gpuaccept.profile.catalogue import load_catalogue
from gpuaccept.profile.derive import Derivation, derive_profile

ROOT = Path(__file__).resolve().parents[1]
RECORDED = {"h200-1": "h200x1", "h200-2-nvswitch": "h200x2", "h200-4-nvswitch": "h200x4", "h100-1": "h100x1"}


def topo_text(profile: Profile) -> str:
    """`nvidia-smi topo -m` as a machine of this profile prints it: its GPU block and the legend."""
    count = profile.gpu_count
    rows = ["\t" + "\t".join(f"GPU{i}" for i in range(count)) + "\tCPU Affinity\tNUMA Affinity"]
    for a in range(count):
        cells = ["X" if a == b else (profile.expected_link(a, b) or "SYS") for b in range(count)]
        rows.append(f"GPU{a}\t" + "\t".join(cells) + "\t0-15\t0")
    return "\n".join(rows) + "\n\nLegend:\n\n  X    = Self\n"


def machine_of(profile: Profile, folder: Path) -> tuple[Facts, str]:
    """The facts of the machine the profile describes, and where they came from."""
    if profile.name in RECORDED:
        name = RECORDED[profile.name]
        return load_facts(ROOT / "examples" / "facts" / f"{name}.json"), f"examples/facts/{name}.json"
    path = folder / f"{profile.name}-topo-m.txt"
    path.write_text(topo_text(profile), encoding="utf-8")
    return import_files([path]).facts, "its links as topo -m"


def floors(profile: Profile) -> dict[str, float]:
    """Every floor and ceiling of a profile by dotted key."""
    found: dict[str, float] = {}

    def walk(data: object, prefix: str) -> None:
        if isinstance(data, dict):
            for key, value in data.items():
                walk(value, f"{prefix}{key}.")
            return
        key = prefix.rstrip(".")
        measured = key.startswith(("nccl.busbw.", "ddp.min_efficiency.", "ddp.max_exposed_comm.", "ddp.nvlink_ab."))
        measured = measured or key in ("pairwise.min_busbw", "compute.gemm.min_tflops", "compute.hbm.copy_min", "compute.hbm.triad_min",
                                       "burnin.min_sm_clock_mhz", "gpus.memory_min_gib")
        measured = measured or (key.startswith("copies.") and key.endswith("_min"))
        if measured and isinstance(data, (int, float)) and not isinstance(data, bool):
            found[key] = float(data)

    walk(profile.spec.model_dump(by_alias=True, exclude_none=True), "")
    return found


def compare(profile: Profile, derivation: Derivation) -> list[tuple[str, float | None, float | None, str]]:
    """(key, shipped, derived, where the derived value came from) for every key either side holds."""
    assert derivation.profile is not None
    shipped, derived = floors(profile), floors(derivation.profile)
    rows = []
    for key in sorted(set(shipped) | set(derived), key=_order):
        value = derivation.values.get(key)
        source = f"{value.origin}: {value.distance or ', '.join(value.records)}" if value else ("catalogue: gpu" if key in derived else "")
        rows.append((key, shipped.get(key), derived.get(key), source))
    return rows


def _order(key: str) -> tuple[int, str]:
    families = ("gpus.", "nccl.", "pairwise.", "copies.", "ddp.", "compute.", "burnin.")
    return next((i for i, family in enumerate(families) if key.startswith(family)), len(families)), key


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", type=Path, help="write the table of every value here")
    parser.add_argument("--summary", action="store_true", help="print one row per profile")
    args = parser.parse_args(argv)
    catalog, catalogue = ProfileCatalog.with_shipped(), load_catalogue()
    every = ["| profile | value | shipped | derived | derived / shipped | derived from |", "| --- | --- | --- | --- | --- | --- |"]
    summary = ["| profile | machine | values both hold | ratio min / median / max | only shipped | only derived |",
               "| --- | --- | --- | --- | --- | --- |"]
    with tempfile.TemporaryDirectory(prefix="derived-floors-") as folder:
        for profile in catalog.load_all():
            facts, machine = machine_of(profile, Path(folder))
            model = profile.spec.gpus.model[0]
            derivation = derive_profile(facts, catalogue, stated_count=profile.gpu_count, stated_model=model)
            rows = compare(profile, derivation)
            ratios = []
            for key, shipped, derived, source in rows:
                ratio = f"{derived / shipped:.3f}" if shipped and derived is not None else ""
                if ratio:
                    ratios.append(derived / shipped)  # type: ignore[operator]
                every.append(f"| {profile.name} | {key} | {_number(shipped)} | {_number(derived)} | {ratio} | {source} |")
            only_shipped = sum(1 for _, s, d, _ in rows if s is not None and d is None)
            only_derived = sum(1 for _, s, d, _ in rows if d is not None and s is None)
            spread = f"{min(ratios):.3f} / {statistics.median(ratios):.3f} / {max(ratios):.3f}" if ratios else ""
            summary.append(f"| {profile.name} | {machine} | {len(ratios)} | {spread} | {only_shipped} | {only_derived} |")
    if args.markdown:
        args.markdown.write_text("\n".join(every) + "\n", encoding="utf-8")
    print("\n".join(summary if args.summary or args.markdown else every))
    return 0


if __name__ == "__main__":
    sys.exit(main())
