"""Recorded burn-ins judged again for power under the sustained load: over every settled sample (the
rule before the products-alone window) and over the samples taken while each GPU's products ran
alone (checks/heat.py now), side by side, GPU by GPU.

    python bench/power_window.py RESULTS.json... [--markdown]

Each results.json is judged against the shipped profile of its GPU model and count (the floor the
burn-in profiles extend: 90% of NVML's power limit for H100 and H200).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from unittest import mock

from gpuaccept.checks import heat
from gpuaccept.checks.verdict import Verdict
from gpuaccept.facts.run_record import load_results
from gpuaccept.profile import ProfileCatalog

SHIPPED = {("H100", 1): "h100-1", ("H200", 1): "h200-1", ("H200", 2): "h200-2-nvswitch", ("H200", 4): "h200-4-nvswitch"}


def shown(verdict: Verdict) -> str:
    return f"{verdict.outcome.value} {verdict.measured} %" if verdict.measured is not None else verdict.outcome.value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    args = parser.parse_args()
    catalog = ProfileCatalog.with_shipped()
    print("| burn-in | load (s) | GPU | every settled sample (before) | products alone (now) |")
    print("| --- | ---: | --- | --- | --- |")
    for path in args.results:
        facts = load_results(path).facts
        if facts.burnin is None or facts.burnin.load_started_s is None or facts.burnin.load_ended_s is None:
            continue
        model = "H100" if facts.gpus and "H100" in facts.gpus[0].name else "H200"
        name = SHIPPED.get((model, facts.gpu_count), "h200-2-nvswitch")
        profile = catalog.load(name)
        load_s = facts.burnin.load_ended_s - facts.burnin.load_started_s
        now = [heat.power_under_load(profile, facts, gpu) for gpu in range(facts.gpu_count)]
        with mock.patch.object(heat, "_other_work", lambda timeline, gpu: []), mock.patch.object(heat, "POWER_MIN_SAMPLES", 1):
            before = [heat.power_under_load(profile, facts, gpu) for gpu in range(facts.gpu_count)]
        for gpu in range(facts.gpu_count):
            print(f"| {path.parent.parent.name}/{path.parent.name} | {load_s:.0f} | gpu{gpu} | {shown(before[gpu])} | {shown(now[gpu])} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
