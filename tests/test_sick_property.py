"""The promise, as a property: a real recording with evidence taken away or corrupted never passes.

A real 2xH200 run (tests/data/facts/h200x2-health-measured.json: inventory, topology, P2P, every
measurement stage, health snapshots after each) passes its profile. Hypothesis draws one mutation
that removes or corrupts evidence the profile asks for, and the mutated file must either be refused
at load (exit 2) or leave at least one verdict failed or could-not-judge (exit 1): never exit 0.

Deterministic: derandomized, no example database, a bounded number of examples.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaccept.checks import health
from gpuaccept.checks.stages import stage_values
from gpuaccept.checks.verdict import Outcome, Verdict
from gpuaccept.errors import FactsError
from gpuaccept.facts import Facts, parse_facts
from gpuaccept.profile import Profile, ProfileCatalog
from tests.helpers import DATA
from tests.verdicts import SUBJECTS

RECORDED_TEXT = (DATA / "facts" / "h200x2-health-measured.json").read_text(encoding="utf-8")
RECORDED = json.loads(RECORDED_TEXT)
PROFILE = ProfileCatalog.with_shipped().load("h200-2-nvswitch")
Mutation = Callable[[dict], str]  # changes the facts' JSON in place, says what it did


# the recording predates the telemetry and was no burn-in: what it holds is judged, and what it lacks
# could not be (checks/missing.py), which is not what the mutations below take away
NOT_RECORDED = ("telemetry", "burn-in")


def every_verdict(profile: Profile, facts: Facts) -> list[Verdict]:
    """Every verdict the suites give on these facts: inventory to DDP, each stage's values, health."""
    verdicts = []
    for subjects, checks in SUBJECTS:
        for check in checks:
            if check.declaration.area in NOT_RECORDED:
                continue
            for subject in subjects(profile):
                verdicts.append(check(profile, facts) if subject is None else check(profile, facts, subject))
    for values in stage_values().values():
        for value in values:
            verdicts += [value.check(profile, facts, subject) for subject in value.subjects(profile)]
    for check in health.STATE_CHECKS + health.RUN_CHECKS:
        verdicts += [check(profile, facts, gpu) for gpu in range(profile.gpu_count)]
    verdicts += [health.nvlink_errors_during_run(profile, facts, link) for link in health.gpu_links(profile)]
    return verdicts


def exit_code(data: dict) -> int:
    """What `gpu-accept run` would exit with on these facts: 2 refused at load, 1 where a test did not
    pass (a verdict failed, or could not be established), 0 where every test passed or was skipped."""
    try:
        facts = parse_facts(json.dumps(data), "mutated.json")
    except FactsError:
        return 2
    outcomes = {verdict.outcome for verdict in every_verdict(PROFILE, facts)}
    return 1 if outcomes & {Outcome.FAILED, Outcome.ERROR} else 0


def test_the_recording_itself_passes_so_that_every_mutation_below_is_what_fails():
    assert exit_code(json.loads(RECORDED_TEXT)) == 0
    # what it lacks could not judge: never a pass, never a skip
    facts = parse_facts(RECORDED_TEXT, "recorded")
    lacking = [check(PROFILE, facts, 0) for _, checks in SUBJECTS for check in checks if check.declaration.area in NOT_RECORDED]
    assert lacking and all(verdict.outcome is Outcome.ERROR and verdict.missing for verdict in lacking)
    assert len(every_verdict(PROFILE, parse_facts(json.dumps(RECORDED), "recorded"))) > 100


# --- mutations: each removes or corrupts one piece of evidence the profile asks for ---------------

GPUS = st.integers(0, 1)
FACTORS = st.one_of(st.floats(0.001, 0.5), st.floats(2.0, 5000.0))


def _snapshots(data: dict, gpu: int) -> list[dict]:
    return [s for s in data["health"]["snapshots"] if s["gpu"] == gpu]


@st.composite
def drop_a_gpus_snapshots(draw: Any) -> Mutation:
    gpu = draw(GPUS)

    def change(data: dict) -> str:
        data["health"]["snapshots"] = [s for s in data["health"]["snapshots"] if s["gpu"] != gpu]
        return f"every health snapshot of gpu{gpu} removed"

    return change


@st.composite
def drop_a_links_counters_after_the_load(draw: Any) -> Mutation:
    gpu, link = draw(GPUS), draw(st.integers(0, 17))

    def change(data: dict) -> str:
        last = _snapshots(data, gpu)[-1]
        last["nvlink_errors"] = [c for c in last["nvlink_errors"] if c["link"] != link]
        return f"gpu{gpu} link{link}'s counters removed from the last snapshot"

    return change


@st.composite
def drop_a_measured_result(draw: Any) -> Mutation:
    sweep = draw(st.sampled_from(["collectives", "pairwise", "copies", "ddp", "ddp_without_p2p", "compute"]))
    index = draw(st.integers(0, 100))

    def change(data: dict) -> str:
        results = data["measurements"][sweep]["results"]
        removed = results.pop(index % len(results))
        return f"measurements.{sweep} result removed: {removed}"

    return change


@st.composite
def drop_a_sweep(draw: Any) -> Mutation:
    # not the compute sweep: facts recorded before the compute stage existed are judged without it,
    # each compute check skipped with that reason (checks/compute.py NO_MEASUREMENT)
    sweep = draw(st.sampled_from(["collectives", "pairwise", "copies", "ddp", "ddp_without_p2p"]))

    def change(data: dict) -> str:
        data["measurements"][sweep] = None
        return f"measurements.{sweep} removed"

    return change


@st.composite
def drop_a_fact_of_the_machine(draw: Any) -> Mutation:
    where = draw(st.sampled_from(["gpus", "links", "p2p"]))
    index = draw(st.integers(0, 10))

    def change(data: dict) -> str:
        entries = data[where]
        entries.pop(index % len(entries))
        return f"{where}[{index % (len(entries) + 1)}] removed"

    return change


@st.composite
def scale_a_measured_figure(draw: Any) -> Mutation:
    """One figure of a result changed alone: the result no longer agrees with itself, or misses its floor."""
    sweep, field = draw(st.sampled_from([
        ("collectives", "busbw_GBps"), ("collectives", "algbw_GBps"), ("collectives", "time_us"),
        ("pairwise", "busbw_GBps"), ("pairwise", "time_us"),
    ]))
    index, factor = draw(st.integers(0, 100)), draw(FACTORS)

    def change(data: dict) -> str:
        results = data["measurements"][sweep]["results"]
        result = results[index % len(results)]
        result[field] *= factor
        return f"{sweep} {result.get('collective', '')} {field} x {factor}"

    return change


@st.composite
def a_measurement_over_no_time(draw: Any) -> Mutation:
    sweep = draw(st.sampled_from(["collectives", "pairwise"]))
    index = draw(st.integers(0, 100))

    def change(data: dict) -> str:
        results = data["measurements"][sweep]["results"]
        results[index % len(results)]["time_us"] = 0.0
        return f"{sweep} result with time 0"

    return change


@st.composite
def measured_again_worse(draw: Any) -> Mutation:
    """The same collective and size a second time, consistent in itself and slower: never hidden."""
    index, factor = draw(st.integers(0, 100)), draw(st.floats(2.0, 100.0))

    def change(data: dict) -> str:
        results = data["measurements"]["collectives"]["results"]
        first = results[index % len(results)]
        again = {**first, "time_us": first["time_us"] * factor, "algbw_GBps": first["algbw_GBps"] / factor,
                 "busbw_GBps": first["busbw_GBps"] / factor}
        results.append(again)
        return f"{first['collective']} {first['nominal_size']} measured again {factor}x slower"

    return change


@st.composite
def wrong_elements(draw: Any) -> Mutation:
    sweep = draw(st.sampled_from(["collectives", "pairwise", "copies"]))
    index, wrong = draw(st.integers(0, 100)), draw(st.integers(1, 10**6))

    def change(data: dict) -> str:
        results = data["measurements"][sweep]["results"]
        results[index % len(results)]["wrong"] = wrong
        return f"{sweep} result with {wrong} wrong elements"

    return change


@st.composite
def a_memory_test_of_nothing(draw: Any) -> Mutation:
    gpu = draw(GPUS)

    def change(data: dict) -> str:
        memtest = next(r for r in data["measurements"]["compute"]["results"] if r["load"] == "memtest" and r["gpu"] == gpu)
        memtest.update(bytes_tested=0, passes_done=0)
        return f"gpu{gpu}'s memory test tested nothing"

    return change


@st.composite
def an_error_counted_during_the_run(draw: Any) -> Mutation:
    gpu, count = draw(GPUS), draw(st.integers(1, 10**6))
    counter = draw(st.sampled_from(["ecc", "dram", "nvlink_replay", "nvlink_recovery", "remapped_uncorrected"]))

    def change(data: dict) -> str:
        last = _snapshots(data, gpu)[-1]
        if counter in ("ecc", "dram"):
            last[counter]["uncorrected_volatile"] = count
        elif counter.startswith("nvlink"):
            last["nvlink_errors"][0][counter.removeprefix("nvlink_")] = count
        else:
            last[counter] = 512 + count
        return f"gpu{gpu}: {counter} {count} after the load"

    return change


@st.composite
def a_snapshot_out_of_time(draw: Any) -> Mutation:
    index = draw(st.integers(2, 11))
    taken_at = draw(st.sampled_from(["2026-11-23T00:00:00.000+00:00", "not a time", "2026-11-23T00:59:00", ""]))

    def change(data: dict) -> str:
        data["health"]["snapshots"][index]["taken_at"] = taken_at
        return f"health.snapshots[{index}].taken_at = {taken_at!r}"

    return change


@st.composite
def two_gpus_made_one(draw: Any) -> Mutation:
    field = draw(st.sampled_from(["uuid", "pci_bus_id", "nvml_index"]))

    def change(data: dict) -> str:
        data["gpus"][1][field] = data["gpus"][0][field]
        return f"gpus[1].{field} = gpus[0].{field}"

    return change


@st.composite
def a_pair_of_gpus_not_there(draw: Any) -> Mutation:
    where = draw(st.sampled_from(["links", "p2p"]))
    pair = draw(st.sampled_from([[0, 0], [1, 1], [0, 2], [5, 1]]))

    def change(data: dict) -> str:
        data[where][0]["gpus"] = pair
        return f"{where}[0].gpus = {pair}"

    return change


MUTATIONS = st.one_of(
    drop_a_gpus_snapshots(), drop_a_links_counters_after_the_load(), drop_a_measured_result(), drop_a_sweep(),
    drop_a_fact_of_the_machine(), scale_a_measured_figure(), a_measurement_over_no_time(), measured_again_worse(),
    wrong_elements(), a_memory_test_of_nothing(), an_error_counted_during_the_run(), a_snapshot_out_of_time(),
    two_gpus_made_one(), a_pair_of_gpus_not_there(),
)


@settings(derandomize=True, database=None, max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MUTATIONS)
def test_no_mutation_that_removes_or_corrupts_evidence_exits_0(mutation: Mutation):
    data = json.loads(RECORDED_TEXT)  # a copy of its own to mutate
    what = mutation(data)
    assert exit_code(data) != 0, f"exit 0 with {what}"
