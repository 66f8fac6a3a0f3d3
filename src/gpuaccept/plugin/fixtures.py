"""The fixtures the suites ask for: the profile, the facts (with each measurement stage, measured on
first use), the baseline gate, and `verdict`, which turns a check's verdict into the test's outcome."""

from __future__ import annotations

import pytest

from gpuaccept.facts import Facts
from gpuaccept.plugin.context import run_of
from gpuaccept.plugin.options import BaselineGate
from gpuaccept.plugin.verdicts import VerdictRecorder
from gpuaccept.profile import Profile
from gpuaccept.session.burnin import read_burnin
from gpuaccept.session.store import merge
from gpuaccept.session.telemetry import read_telemetry


@pytest.fixture(scope="session")
def profile(request: pytest.FixtureRequest) -> Profile:
    """The profile this run checks against."""
    return run_of(request.config).context.profile


@pytest.fixture(scope="session")
def facts(request: pytest.FixtureRequest) -> Facts:
    """The facts of the machine under test (probed once per session, or replayed from a file)."""
    return run_of(request.config).context.facts


def _with_stage(request: pytest.FixtureRequest, stage: str) -> Facts:
    run = run_of(request.config)
    return run.store.with_stage(stage, run.context.facts, run.context.profile)


@pytest.fixture(scope="session")
def facts_with_nccl(request: pytest.FixtureRequest) -> Facts:
    """The facts with the NCCL stage's collective sweep and pairwise exchange (measured on first use)."""
    return _with_stage(request, "nccl")


@pytest.fixture(scope="session")
def facts_with_copies(request: pytest.FixtureRequest) -> Facts:
    """The facts with the copy stage's bandwidths (measured on first use)."""
    return _with_stage(request, "copies")


@pytest.fixture(scope="session")
def facts_with_ddp(request: pytest.FixtureRequest) -> Facts:
    """The facts with the DDP stage's scaling sweep, and its P2P A/B where asked (measured on first use)."""
    return _with_stage(request, "ddp")


@pytest.fixture
def facts_with_gpu_loads(request: pytest.FixtureRequest, gpu: int) -> Facts:
    """The facts with the per-GPU loads of this test's GPU only (measured on first use, beside
    other GPUs' loads in other pytest-xdist workers)."""
    run = run_of(request.config)
    return run.store.with_compute(run.context.facts, run.context.profile, [gpu])


@pytest.fixture(scope="session")
def facts_with_compute(request: pytest.FixtureRequest) -> Facts:
    """The facts with the per-GPU loads of every GPU: what a comparison between GPUs needs."""
    return _with_stage(request, "compute")


@pytest.fixture(scope="session")
def facts_with_everything(facts_with_nccl: Facts, facts_with_copies: Facts, facts_with_ddp: Facts, facts_with_compute: Facts) -> Facts:
    """The facts with every measurement stage the profile asks for, the per-GPU loads included."""
    facts = merge(merge(facts_with_nccl, facts_with_copies.measurements), facts_with_ddp.measurements)
    return merge(facts, facts_with_compute.measurements)


@pytest.fixture(scope="session")
def facts_with_burnin(request: pytest.FixtureRequest) -> Facts:
    """The facts with the burn-in's rounds (run before the tests, at --level burn-in), or as recorded."""
    run = run_of(request.config)
    burnin = read_burnin(run.store.folder) if run.context.live else None
    return run.context.facts.model_copy(update={"burnin": burnin}) if burnin is not None else run.context.facts


@pytest.fixture(scope="session")
def facts_after_loads(request: pytest.FixtureRequest) -> Facts:
    """The facts once the level's loads ran: every measurement stage the profile asks for at the
    standard level (measured first where they were not yet), the burn-in's rounds at the burn-in
    level, and none at the quick level (it loads nothing)."""
    loaded = {"quick": "facts", "burn-in": "facts_with_burnin"}.get(run_of(request.config).options.level, "facts_with_everything")
    facts: Facts = request.getfixturevalue(loaded)
    return facts


@pytest.fixture(scope="session")
def facts_with_telemetry(request: pytest.FixtureRequest, facts_after_loads: Facts) -> Facts:
    """The facts with the telemetry sampled while the loads ran."""
    run = run_of(request.config)
    telemetry = read_telemetry(run.store.folder) if run.context.live else None
    return facts_after_loads.model_copy(update={"telemetry": telemetry}) if telemetry is not None else facts_after_loads


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
