"""Measure once, check many: each measurement stage runs at most once per session.

The first test that needs a stage runs it; every other test, in this process or in another
pytest-xdist worker, reads its result. One lock guards the GPUs: two stages never run at once,
and no stage runs twice. Replayed facts (--facts) carry their measurements with them.
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import Callable

import pytest

from gpuaccept.facts import Facts
from gpuaccept.facts.model import CollectiveSweep, Measurements, PairSweep, StepFailure
from gpuaccept.measure.stages import nccl_plan, run_copy_stage, run_ddp_stage, run_nccl_stage

STAGE_FILES = {"nccl": "nccl.json", "copies": "copies.json", "ddp": "ddp.json"}


class MeasurementStore:
    def __init__(self, folder: Path, live: bool, say: Callable[[str], None] = lambda text: None):
        self.folder = Path(folder)
        self.live = live
        self.say = say

    def with_stage(self, stage: str, facts: Facts, profile) -> Facts:
        """`facts` with the stage's measurements in them, measuring first if this is the first ask."""
        if not self.live:
            return facts
        path = self.folder / STAGE_FILES[stage]
        with open(self.folder / "gpus.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not path.exists():
                measured = self._measure(stage, facts, profile)
                temporary = path.with_suffix(".partial")
                temporary.write_text(measured.model_dump_json(), encoding="utf-8")
                temporary.replace(path)
        return merge(facts, Measurements.model_validate_json(path.read_text(encoding="utf-8")))

    def collected(self) -> Measurements:
        """Everything measured in this session so far, from every worker."""
        found = Measurements()
        for stage, name in STAGE_FILES.items():
            path = self.folder / name
            if path.exists():
                found = _combine(found, Measurements.model_validate_json(path.read_text(encoding="utf-8")))
        return found

    def _measure(self, stage: str, facts: Facts, profile) -> Measurements:
        spec = profile.spec

        def progress(event: dict) -> None:
            if event.get("event") == "start":
                self.say(f"gpu-accept: measuring {event['label']}")

        if stage == "nccl":
            if facts.gpu_count < 2:
                return _nccl_not_run(spec, f"needs at least 2 GPUs; {facts.gpu_count} under test")
            self.say(f"gpu-accept: NCCL stage on {facts.gpu_count} GPUs (profile {profile.name})")
            collectives, pairwise = run_nccl_stage(spec, facts.gpu_count, on_event=progress)
            return Measurements(collectives=collectives, pairwise=pairwise)
        if stage == "ddp":
            self.say(f"gpu-accept: DDP stage on up to {facts.gpu_count} GPU(s) (profile {profile.name})")
            sweep, without_p2p = run_ddp_stage(spec, facts.gpu_count, on_event=progress)
            return Measurements(ddp=sweep, ddp_without_p2p=without_p2p)
        self.say(f"gpu-accept: copy stage on {facts.gpu_count} GPU(s) (profile {profile.name})")
        return Measurements(copies=run_copy_stage(spec, on_event=progress))


def _nccl_not_run(spec, reason: str) -> Measurements:
    """Every step of the NCCL stage, failed with the reason it could not run (so each test says it)."""
    failures = [
        StepFailure(step=step.label, reason="not_run", message=f"{step.label} not run: {reason}") for step in nccl_plan(spec).steps
    ]
    collectives = pairwise = None
    if spec.nccl:
        collectives = CollectiveSweep(
            backend="", nccl_version=None, torch_version="", ranks=0, environment={}, wall_s=0.0, results=[],
            failures=[f for f in failures if not f.step.startswith("pairwise")],
        )
    if spec.pairwise:
        pairwise = PairSweep(
            backend="", concurrent=spec.pairwise.concurrent, wall_s=0.0, results=[],
            failures=[f for f in failures if f.step.startswith("pairwise")],
        )
    return Measurements(collectives=collectives, pairwise=pairwise)


def _combine(first: Measurements, second: Measurements) -> Measurements:
    return Measurements(**{name: getattr(second, name) or getattr(first, name) for name in Measurements.model_fields})


def merge(facts: Facts, measured: Measurements) -> Facts:
    return facts.model_copy(update={"measurements": _combine(facts.measurements, measured)})


def terminal_line(config: pytest.Config) -> Callable[[str], None]:
    """Print a line now, past output capture, where this process has a terminal (not xdist workers)."""

    def say(text: str) -> None:
        # looked up when called: the terminal reporter registers after this plugin configures
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        if reporter is None or hasattr(config, "workerinput"):
            return
        if capture is not None:
            with capture.global_and_fixture_disabled():
                reporter.write_line(text)
        else:
            reporter.write_line(text)

    return say
