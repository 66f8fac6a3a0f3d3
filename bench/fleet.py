"""Fleet reporting at burn-in scale: N hosts x 8 GPUs of results.json, evaluated and written.

Generates the fleet from the shape of a real 8-GPU run (every test the suites would have), one
host in fifty with a slow NVLink pair, then times, one after the other on the same files: the
file-based `report fleet` of before the store (`--before`: a src/ folder of that code), the
file-based `report fleet` now, `store add` into an empty store and again (nothing new), `report
fleet --db` with and without the page, and `report history`; and with `--replicate K` the report
from a store of K times the hosts. Targets: ingest at most 60 s, the report from the store at most
15 s, on the 2-core CI machine.

    git archive d191bdb src | tar -x -C /tmp/before
    python bench/fleet.py --hosts 10000 --gpus 8 --before /tmp/before/src --replicate 10
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpuaccept.facts import load_facts
from gpuaccept.vocabulary.collectives import COLLECTIVES
from gpuaccept.vocabulary.links import gpu_key, pair_key

SIZES = {"256MiB": 1 << 28, "1GiB": 1 << 30, "4GiB": 1 << 32}
ONE_GPU = Path(__file__).resolve().parents[1] / "examples" / "facts" / "h200x1.json"  # each host's GPUs are copies of this one
BUSBW = {"all_reduce": 355.0, "all_gather": 330.0, "reduce_scatter": 330.0, "alltoall": 335.0, "broadcast": 360.0}


def verdict(check, subject, measured, expected, unit, outcome="passed"):
    return {"check": check, "subject": subject, "outcome": outcome, "measured": measured, "expected": expected, "unit": unit,
            "message": f"{subject}: {check} {measured} {unit}", "profile": "h200-8-nvswitch", "context": {}}


def host_facts(host: str, index: int, gpus: int) -> dict:
    """A host's facts: its GPUs copied from a real H200's, each with its own index, bus and UUID.
    Fleet reports read only the verdicts; the facts make each file a whole results.json."""
    facts = load_facts(ONE_GPU).model_dump(mode="json")
    gpu = facts["gpus"][0]
    facts["system"].update(hostname=host, nvml_gpu_count=gpus, installed_gpus=[])
    facts["cuda"] = {"unavailable": "not_probed", "detail": "a synthetic fleet host"}
    facts["gpus"] = [
        {**gpu, "index": g, "nvml_index": g, "pci_bus_id": f"00000000:{g + 6:02X}:00.0",
         "uuid": f"GPU-{index:04d}{g:04d}-0000-0000-0000-000000000000", "serial": f"{index:06d}{g}"}
        for g in range(gpus)
    ]
    facts["links"], facts["p2p"] = [], []
    return facts


def host_document(index: int, gpus: int, rng: random.Random) -> dict:
    host = f"node{index:04d}"
    slow_pair = (1, 5) if index % 50 == 7 else None
    tests = []

    def add(test_id, module, v):
        outcome = v["outcome"] if v else "skipped"
        tests.append({"id": test_id, "nodeid": f"{module}.py::{test_id}", "outcome": outcome, "duration_s": 0.0004,
                      "message": "" if outcome == "passed" else v["message"], "verdict": v})

    add("test_gpu_count", "test_inventory", verdict("gpu_count", host, gpus, f"== {gpus}", ""))
    for g in range(gpus):
        add(f"test_gpu_model[{gpu_key(g)}]", "test_inventory", verdict("gpu_model", gpu_key(g), "NVIDIA H200", "'NVIDIA H200'", ""))
        add(f"test_gpu_memory[{gpu_key(g)}]", "test_inventory", verdict("gpu_memory", gpu_key(g), 140.4, ">= 140 GiB", "GiB"))
        add(f"test_ecc_mode[{gpu_key(g)}]", "test_inventory", verdict("ecc_mode", gpu_key(g), "enabled", "== enabled", ""))
        for check, value, unit in (("pcie_generation", 5, ""), ("pcie_width", 16, "lanes"), ("nvlink_links", 18, "links")):
            add(f"test_{check}[{gpu_key(g)}]", "test_topology", verdict(check, gpu_key(g), value, f">= {value}", unit))
        add(f"test_fabric_state[{gpu_key(g)}]", "test_topology", verdict("fabric_state", gpu_key(g), "completed", "== completed", ""))
        for check, value in (("local_copy", 2128.0), ("host_to_device", 55.5), ("device_to_host", 55.4)):
            measured = round(value * rng.uniform(0.99, 1.01), 2)
            add(f"test_{check}[{gpu_key(g)}]", "test_bandwidth", verdict(check, gpu_key(g), measured, ">= 50 GB/s", "GB/s"))
    for a in range(gpus):
        for b in range(gpus):
            if a == b:
                continue
            pair = pair_key(a, b)
            add(f"test_p2p_capability[{pair}]", "test_p2p", verdict("p2p_capability", pair, "read=OK write=OK", "== read=OK write=OK", ""))
            add(f"test_p2p_cuda_agrees[{pair}]", "test_p2p", verdict("p2p_cuda_agrees", pair, "yes", "== yes", ""))
            slow = slow_pair in ((a, b), (b, a))
            measured = round((180.0 if slow else 395.0) * rng.uniform(0.99, 1.01), 2)
            add(f"test_p2p_copy[{pair}]", "test_bandwidth", verdict("p2p_copy", pair, measured, ">= 150 GB/s", "GB/s"))
            if a < b:
                add(f"test_link_type[{pair}]", "test_topology", verdict("link_type", pair, "NV18", "== NV18", ""))
                measured = round((170.0 if slow else 370.0) * rng.uniform(0.99, 1.01), 2)
                add(f"test_pair_busbw[{pair}]", "test_nccl", verdict("pair_busbw", pair, measured, ">= 150 GB/s", "GB/s"))
    for collective in COLLECTIVES:
        for size in SIZES:
            case = f"{collective}-{size}"
            measured = round(BUSBW[collective] * rng.uniform(0.985, 1.015), 2)
            add(f"test_busbw[{case}]", "test_nccl", verdict("busbw", f"{collective} {size}", measured, ">= 300 GB/s", "GB/s"))
            correct = verdict("collective_correct", f"{collective} {size}", 0, "== 0 wrong elements", "wrong elements")
            add(f"test_collective_correct[{case}]", "test_nccl", correct)
    for world in (2, 4, 8):
        case = f"{world}gpu-bs8"
        add(f"test_ddp_scaling[{case}]", "test_ddp", verdict("ddp_scaling", case, round(0.9 * rng.uniform(0.98, 1.02), 4), ">= 0.8", ""))
    return {
        "format": "gpu-accept-results", "version": 1, "complete": True,
        "run": {"started_at": "2026-11-21T00:00:00+00:00", "finished_at": "2026-11-21T00:05:00+00:00", "tool_version": "0.1.0",
                "command": ["gpu-accept", "run"], "facts_source": "live",
                "profile": {"name": "h200-8-nvswitch", "path": "profiles/h200-8-nvswitch.yaml", "sha256": "0" * 64}, "exit_status": 0},
        "environment": {"host": host, "driver": "580.159.04", "cuda_driver": "13.0", "nccl": "2.28.9", "torch": "2.11.0+cu130",
                        "gpu_model": "NVIDIA H200", "gpu_count": gpus,
                        "gpus": [{"index": g, "name": "NVIDIA H200", "uuid": f"GPU-{index:04d}{g:04d}-0000-0000-0000-000000000000",
                                  "serial": f"{index:06d}{g}", "pci_bus_id": f"00000000:{g + 6:02X}:00.0"} for g in range(gpus)]},
        "facts": host_facts(host, index, gpus),
        "tests": tests,
        "summary": {},
    }


MEASURE = r"""
import resource, subprocess, sys, time
began = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - began
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
lines = (done.stdout.strip() or done.stderr.strip()).splitlines()
print(f"{wall:.2f} {peak:.0f} {done.returncode}")
print(lines[-1] if lines else "")
"""


def timed(label: str, command: list[str], env: dict | None = None) -> tuple[float, float, int]:
    """Wall seconds, peak resident MB of the largest process (the command or one of its workers), exit."""
    done = subprocess.run([sys.executable, "-c", MEASURE, *command], capture_output=True, text=True, env=env)
    first, _, last = done.stdout.partition("\n")
    wall, peak, code = first.split()
    print(f"{label}: {float(wall):.2f} s wall, peak {float(peak):.0f} MB, exit {code}: {last.strip()[:160]}", flush=True)
    return float(wall), float(peak), int(code)


def replicate(db: Path, target: Path, times: int) -> None:
    """A store of `times` as many hosts, each a renamed copy of a stored one (the generated 100k)."""
    import duckdb

    target.unlink(missing_ok=True)
    connection = duckdb.connect(str(target))
    connection.execute(f"ATTACH '{db}' AS source (READ_ONLY)")
    connection.execute("CREATE TABLE schema_version AS SELECT * FROM source.schema_version")
    for table in ("runs", "gpus", "results", "files"):
        connection.execute(f"CREATE TABLE {table} AS SELECT * FROM source.{table} LIMIT 0")
    for k in range(times):
        suffix = f"-r{k}"
        renamed = f"run_id || '{suffix}' AS run_id, host || '{suffix}' AS host"
        connection.execute(f"INSERT INTO runs SELECT * REPLACE ({renamed}) FROM source.runs")
        connection.execute(f"INSERT INTO results SELECT * REPLACE (run_id || '{suffix}' AS run_id) FROM source.results")
    connection.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--keep", type=Path, help="write the fleet here instead of a temporary folder")
    parser.add_argument("--before", type=Path, help="a src/ folder of gpu-accept before the store, timed side by side (git archive)")
    parser.add_argument("--replicate", type=int, default=0, help="also time the report from a store of this many times the hosts")
    parser.add_argument("--ingest-target-s", type=float, default=60.0)
    parser.add_argument("--report-target-s", type=float, default=15.0)
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="gpuaccept-fleet-"))
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    began = time.perf_counter()
    paths = []
    for index in range(args.hosts):
        path = folder / f"node{index:05d}.json"
        if not path.exists():
            path.write_text(json.dumps(host_document(index, args.gpus, rng)))
        paths.append(str(path))
    size = sum(Path(p).stat().st_size for p in paths)
    print(f"{args.hosts} results files, {size / 1e6:.0f} MB, ready in {time.perf_counter() - began:.1f} s", flush=True)
    gpu_accept = [sys.executable, "-m", "gpuaccept"]
    results: dict[str, tuple[float, float, int]] = {}
    if args.before:
        import os

        env = {**os.environ, "PYTHONPATH": str(args.before)}
        results["before"] = timed(f"before ({args.before}): report fleet FILES -o",
                                  [*gpu_accept, "report", "fleet", *paths, "-o", str(folder / "fleet-before.xml")], env)
        print(f"  fleet-before.xml {(folder / 'fleet-before.xml').stat().st_size / 1e6:.0f} MB", flush=True)
    results["files"] = timed("now: report fleet FILES -o", [*gpu_accept, "report", "fleet", *paths, "-o", str(folder / "fleet-files.xml")])
    db = folder / "fleet.db"
    for leftover in (db, db.with_name("fleet.db.lock"), db.with_name("fleet.db.wal")):
        leftover.unlink(missing_ok=True)
    results["ingest"] = timed("store add (empty store)", [*gpu_accept, "store", "add", *paths, "--db", str(db)])
    results["again"] = timed("store add again (nothing new)", [*gpu_accept, "store", "add", *paths, "--db", str(db)])
    results["report"] = timed("report fleet --db -o", [*gpu_accept, "report", "fleet", "--db", str(db), "-o", str(folder / "fleet.xml")])
    page = [*gpu_accept, "report", "fleet", "--db", str(db), "-o", str(folder / "fleet.xml"), "--html", str(folder / "fleet.html")]
    results["page"] = timed("report fleet --db -o --html", page)
    results["history"] = timed("report history --db", [*gpu_accept, "report", "history", "--db", str(db)])
    print(f"fleet.db {db.stat().st_size / 1e6:.0f} MB, fleet.xml {(folder / 'fleet.xml').stat().st_size / 1e6:.1f} MB, "
          f"fleet.html {(folder / 'fleet.html').stat().st_size / 1e6:.1f} MB")
    if args.replicate:
        big = folder / "fleet-x.db"
        replicate(db, big, args.replicate)
        hosts = args.hosts * args.replicate
        results["report-x"] = timed(f"report fleet --db -o, {hosts} hosts (replicated)",
                                    [*gpu_accept, "report", "fleet", "--db", str(big), "-o", str(folder / "fleet-x.xml")])
        print(f"fleet-x.db {big.stat().st_size / 1e6:.0f} MB, fleet-x.xml {(folder / 'fleet-x.xml').stat().st_size / 1e6:.1f} MB")
    if "before" in results:
        base = results["before"][0]
        print(f"ratios to before: files {base / results['files'][0]:.1f}x, store report {base / results['report'][0]:.1f}x, "
              f"ingest + report {base / (results['ingest'][0] + results['report'][0]):.1f}x")
    ok = results["ingest"][0] <= args.ingest_target_s and results["report"][0] <= args.report_target_s
    ok = ok and all(code in (0, 1) for _, _, code in results.values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
