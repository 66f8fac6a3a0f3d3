"""results.json: one run's facts, every test with its verdict, the environment and the timings.

The document is rewritten whole (to a temporary file, then renamed) after every test, so at any
moment, including after a kill, the file on disk is valid JSON holding what finished; `complete`
says whether the run reached its end. Readers (HTML, fleet JUnit, baselines, profile init) work
from this file alone and never touch hardware.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from gpuaccept import __version__
from gpuaccept.facts import Facts, is_known
from gpuaccept.files import write_atomically

RESULTS_FORMAT = "gpu-accept-results"
RESULTS_VERSION = 1


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def environment_of(facts: Facts) -> dict[str, Any]:
    sweeps = [s for s in (facts.measurements.collectives, facts.measurements.ddp) if s is not None]
    nccl = next((s.nccl_version for s in sweeps if s.nccl_version), None)
    torch = next((s.torch_version for s in sweeps if s.torch_version), None)
    if torch is None and is_known(facts.cuda):
        torch = facts.cuda.torch_version
    return {
        "host": facts.system.hostname,
        "driver": _text(facts.system.driver_version),
        "cuda_driver": str(facts.system.cuda_driver_version),
        "nccl": nccl,
        "torch": torch,
        "gpu_model": _text(facts.gpus[0].name) if facts.gpus else None,
        "gpu_count": facts.gpu_count,
        "gpus": [
            {
                "index": g.index,
                "name": _text(g.name),
                "uuid": g.uuid,
                "serial": g.serial if isinstance(g.serial, str) else None,
                "pci_bus_id": g.pci_bus_id,
            }
            for g in facts.gpus
        ],
    }


def _text(reading: Any) -> str | None:
    """A reading as results.json holds it: the text, or None where the facts could not tell."""
    return reading if isinstance(reading, str) else None


def suite_properties(environment: dict[str, Any], profile: dict[str, Any]) -> dict[str, str]:
    """A run's JUnit testsuite properties, the same in its own JUnit and in fleet JUnit."""
    return {
        "host": str(environment.get("host")),
        "driver": str(environment.get("driver")),
        "cuda_driver": str(environment.get("cuda_driver")),
        "gpu_model": str(environment.get("gpu_model")),
        "gpu_count": str(environment.get("gpu_count")),
        "gpu_uuids": ",".join(g.get("uuid", "") for g in environment.get("gpus", [])),
        "profile": str(profile.get("name")),
        "profile_sha256": str(profile.get("sha256")),
    }


class ResultsWriter:
    def __init__(self, path: Path, profile, facts: Facts, facts_source: str, command: list[str], chosen_because: str = ""):
        self.path = Path(path)
        self.document: dict[str, Any] = {
            "format": RESULTS_FORMAT,
            "version": RESULTS_VERSION,
            "complete": False,
            "run": {
                "started_at": now(),
                "finished_at": None,
                "tool_version": __version__,
                "command": command,
                "facts_source": facts_source,
                "profile": {"name": profile.name, "path": str(profile.path), "sha256": profile.sha256, "chosen_because": chosen_because},
                "exit_status": None,
            },
            "environment": environment_of(facts),
            "facts": facts.model_dump(mode="json"),
            "tests": [],
            "summary": {},
        }
        self.write()

    def add_test(self, record: dict[str, Any], facts: Facts | None = None) -> None:
        self.document["tests"].append(record)
        if facts is not None:
            self.document["facts"] = facts.model_dump(mode="json")
            self.document["environment"] = environment_of(facts)
        self.write()

    def finish(self, exit_status: int, facts: Facts | None = None) -> None:
        if facts is not None:
            self.document["facts"] = facts.model_dump(mode="json")
            self.document["environment"] = environment_of(facts)
        run = self.document["run"]
        run["finished_at"] = now()
        run["exit_status"] = exit_status
        self.document["complete"] = True
        self.write()

    def write(self) -> None:
        self.document["summary"] = summarize(self.document["tests"])
        write_atomically(self.path, json.dumps(self.document, indent=1) + "\n")


def summarize(tests: list[dict]) -> dict[str, int]:
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    for test in tests:
        counts[test["outcome"]] = counts.get(test["outcome"], 0) + 1
    counts["total"] = len(tests)
    return counts


def load_results(path: Path) -> dict[str, Any]:
    """A results document, checked to be one (a one-line error otherwise)."""
    from gpuaccept.errors import InputFileError, Problem

    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputFileError([Problem(str(path), None, "", f"cannot read results: {exc.strerror or exc}")]) from None
    except UnicodeDecodeError as exc:
        message = f"not a gpu-accept results file: not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise InputFileError([Problem(str(path), None, "", message)]) from None
    except json.JSONDecodeError as exc:
        raise InputFileError([Problem(str(path), exc.lineno, "", f"invalid JSON: {exc.msg}")]) from None
    if not isinstance(document, dict) or document.get("format") != RESULTS_FORMAT:
        raise InputFileError([Problem(str(path), None, "format", f"not a gpu-accept results file (format {RESULTS_FORMAT!r} expected)")])
    if document.get("version") != RESULTS_VERSION:
        raise InputFileError([Problem(str(path), None, "version", f"results version {document.get('version')!r} is not {RESULTS_VERSION}")])
    return document
