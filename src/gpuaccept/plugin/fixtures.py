"""The fixtures the suites ask for: the profile, the facts (with what the test's markers ask for,
plugin/needs.py: each measurement stage measured on first use), the baseline gate, and `verdict`,
which turns a check's verdict into the test's outcome."""

from __future__ import annotations

import pytest

from gpuaccept.burnin.driver import read_burnin
from gpuaccept.facts import Facts
from gpuaccept.plugin.context import GpuAcceptRun, run_of
from gpuaccept.plugin.needs import Needs, needs_of, stages_asked
from gpuaccept.plugin.options import BaselineGate
from gpuaccept.plugin.verdicts import VerdictRecorder
from gpuaccept.profile import Profile
from gpuaccept.stages.health import with_health
from gpuaccept.stages.registry import STAGES
from gpuaccept.stages.telemetry import read_telemetry

FACTS_KEY = pytest.StashKey[dict[tuple[Needs, int | None], Facts]]()  # the facts each need gave, kept for the session


@pytest.fixture(scope="session")
def profile(request: pytest.FixtureRequest) -> Profile:
    """The profile this run checks against."""
    return run_of(request.config).context.profile


@pytest.fixture
def facts(request: pytest.FixtureRequest) -> Facts:
    """The facts of the machine under test (probed once per session, or replayed from a file), with
    what this test's markers ask for (plugin/needs.py): stages measured on first ask, the burn-in's
    rounds, the telemetry, the health readings after the loads. What is read once for the session
    is kept for it: the same facts for every test that asks the same."""
    needs = needs_of(request.node)
    gpu = request.node.callspec.params.get("gpu") if needs.per_gpu and hasattr(request.node, "callspec") else None
    known = request.config.stash.setdefault(FACTS_KEY, {})
    if (needs, gpu) not in known:
        known[(needs, gpu)] = facts_with(run_of(request.config), needs, gpu)
    return known[(needs, gpu)]


def facts_with(run: GpuAcceptRun, needs: Needs, gpu: int | None) -> Facts:
    """The run's facts with `needs` in them; a per-GPU stage's loads of `gpu` alone where given."""
    context, store = run.context, run.store
    burnin = needs.burnin or (needs.level_loads and run.options.level == "burn-in")
    facts = context.facts
    for name in stages_asked(needs, run.options.level):
        stage = STAGES[name]
        facts = store.with_stage(name, facts, context.profile, [gpu] if gpu is not None and stage.per_gpu else None)
    if not context.live:
        return facts  # replayed facts carry their rounds, telemetry and health readings with them
    if burnin and (rounds := read_burnin(store.folder)) is not None:
        facts = facts.model_copy(update={"burnin": rounds})
    if needs.health:
        # the snapshot taken after each stage and the XID events heard so far; at the quick level
        # no stage runs: the run checks see the start snapshot alone and say that no load ran
        facts = with_health(facts, store.folder)
    if needs.telemetry or needs.health:  # when the stages loaded the GPUs: what a slowdown's share is of
        telemetry = read_telemetry(store.folder)
        facts = facts.model_copy(update={"telemetry": telemetry}) if telemetry is not None else facts
    return facts


@pytest.fixture(scope="session")
def baseline(request: pytest.FixtureRequest) -> BaselineGate:
    """The baseline and the regression it allows (--baseline, --max-regression). One of other GPUs or
    another profile never gets here (a usage error at configure); other software is noted in the
    gpu-accept summary."""
    gate = run_of(request.config).options.gate
    if gate is None:
        raise pytest.UsageError("gpu-accept: the baseline tests need --baseline FILE")
    return gate


@pytest.fixture
def verdict(request: pytest.FixtureRequest) -> VerdictRecorder:
    """Call with a Verdict: records it on the test (JUnit properties, reports) and passes, fails or skips."""
    return VerdictRecorder(request.node)
