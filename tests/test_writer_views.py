"""Every writer reads what a check means from its declaration (checks/declare.py), carried by each
verdict and held as data below the checks (vocabulary/checks.json): a declared check is in every
view its declaration puts it in (the summary's areas and headlines, the fleet's medians, the store's
history, the metrics, the values report.html draws), whether its verdict was written with what it
means or before verdicts said."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from gpuaccept.checks.catalog import meanings_json
from gpuaccept.checks.declare import DeclaredCheck, declared_checks
from gpuaccept.checks.verdict import AtLeast, AtMost, Better, Judge, Verdict
from gpuaccept.facts.run_record import Environment, RunRecord, TestRecord, load_results
from gpuaccept.profile.catalog import ProfileCatalog
from gpuaccept.report.fleet import MEDIAN_CHECKS, OLDER_RESULTS_LOWER_IS_BETTER
from gpuaccept.report.html import render_html
from gpuaccept.report.metrics import render_metrics
from gpuaccept.report.summary import headline_lines, summary_lines
from gpuaccept.store.fleet import fleet_database, fleet_values, hosts_of
from gpuaccept.store.history import HISTORY_CHECKS
from gpuaccept.vocabulary.areas import AREAS
from gpuaccept.vocabulary.measures import Measure
from tests.helpers import ROOT, example_facts
from tests.verdicts import SUBJECTS

DECLARED = declared_checks(runner=None)
RUN = ROOT / "examples" / "results" / "h200x4.json"
WRITERS = ROOT / "src" / "gpuaccept"


def _verdict(declared: DeclaredCheck[Any], *, written_before: bool = False) -> Verdict:
    """A passing verdict of `declared` with a number, as its check gives it; or as results written
    before verdicts said what their check means hold it."""
    declaration = declared.declaration
    unit = "" if declaration.share else "GB/s"
    criterion = AtMost(2.0, unit) if declaration.better is Better.LOWER else AtLeast(0.5, unit)
    judged = declared.declared(Judge(declaration.name, "test")("gpu0", "value", 1.0, criterion), profile=None, subject=None)  # type: ignore[arg-type]
    if written_before:
        return judged.model_copy(update={"fleet": None, "metric": None, "share": None, "better": None, "measure": None})
    return judged


def _run(written_before: bool = False) -> tuple[RunRecord, dict[str, str]]:
    """A run with one passing test of every declared check, and the check of each test id."""
    tests, check_of = [], {}
    for declared in DECLARED:
        name = declared.declaration.name
        test_id = f"{declared.declaration.test_name}[gpu0]"
        verdict = _verdict(declared, written_before=written_before)
        tests.append(TestRecord(id=test_id, nodeid=f"test_{name}.py::{test_id}", outcome="passed", verdict=verdict))
        check_of[test_id] = name
    return load_results(RUN).with_tests(tests), check_of


def _where(**flags: Any) -> set[str]:
    return {d.declaration.name for d in DECLARED if all(getattr(d.declaration, key) == value for key, value in flags.items())}


def test_vocabulary_checks_json_is_what_the_declarations_say():
    written = (WRITERS / "vocabulary" / "checks.json").read_text(encoding="utf-8")
    assert written == meanings_json(), "run: python -m gpuaccept.checks.catalog meanings > src/gpuaccept/vocabulary/checks.json"


def test_every_declared_area_is_one_the_summary_lists():
    assert {d.declaration.area for d in DECLARED} <= set(AREAS)
    # every check of the run could not judge, for want of facts: the summary says so of each area
    tests = []
    for declared in DECLARED:
        test_id = f"{declared.declaration.test_name}[gpu0]"
        could_not = Judge(declared.declaration.name, "test").error("gpu0", "no facts").model_copy(update={"missing": "no facts"})
        verdict = declared.declared(could_not, profile=None, subject=None)  # type: ignore[arg-type]
        tests.append(TestRecord(id=test_id, nodeid=f"test_x.py::{test_id}", outcome="error", verdict=verdict))
    lines = summary_lines(tests)
    named = [area for line in lines for area in AREAS if line.startswith(f"not checked: {area} — ")]
    assert named == [area for area in AREAS if area in {d.declaration.area for d in DECLARED}]


@pytest.mark.parametrize("written_before", [False, True], ids=["carried", "written-before"])
def test_every_fleet_value_is_compared_by_the_fleet_and_kept_in_the_history(written_before: bool, tmp_path):
    record, check_of = _run(written_before)
    fleet = _where(fleet=True)
    assert fleet, "no check declares a fleet value"
    path = tmp_path / "results.json"
    path.write_text(record.to_json(), encoding="utf-8")
    with fleet_database([str(path)]) as connection:  # as `report fleet` reads a results file
        hosts_of(connection)
        values = {test_id: value for (_, test_id), value in fleet_values(connection).items()}
    assert {check_of[test_id] for test_id in values} == fleet
    assert fleet == MEDIAN_CHECKS
    assert set(HISTORY_CHECKS) == fleet  # the store's SQL filters its rows by these names
    lower = {check_of[test_id] for test_id, (is_lower, _, _) in values.items() if is_lower}
    assert lower == OLDER_RESULTS_LOWER_IS_BETTER == _where(fleet=True, better=Better.LOWER)


@pytest.mark.parametrize("written_before", [False, True], ids=["carried", "written-before"])
def test_every_metric_is_a_series_of_its_own(written_before: bool):
    record, _ = _run(written_before)
    text = render_metrics([record])
    series = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    metrics = _where(metric=True)
    assert _where(fleet=True) | _where(headline=True) <= metrics
    with_series = {
        name for name in (d.declaration.name for d in DECLARED)
        if {f"gpu_accept_{name}_bytes_per_second", f"gpu_accept_{name}_ratio"} & series
    }
    assert with_series == metrics
    assert {name for name in metrics if f"gpu_accept_{name}_ratio" in series} == _where(metric=True, share=True)


def test_every_headline_is_in_the_summary():
    record, _ = _run()
    lines = headline_lines(record.tests)
    shown = {line.removesuffix(":") for line in lines if not line.startswith(" ")}
    assert shown == _where(headline=True)


def _cluster_verdicts(tmp_path: Path) -> list[Verdict]:
    """Every verdict of a cluster of two nodes that measured busbw and DDP over both (tests/test_cluster_network.py's)."""
    from gpuaccept.checks.cluster import cluster_verdicts
    from gpuaccept.facts.cluster import ClusterFacts
    from gpuaccept.facts.measurements import CollectiveResult, DdpResult
    from gpuaccept.profile import load_profile
    from tests.test_cluster_network import PROFILE, TREE, node

    path = tmp_path / "two-rails.yaml"
    path.write_text(PROFILE + "  ddp_min_efficiency: 0.8\nddp: {model: tiny, world_sizes: [1, 2], batches: [8]}\n", encoding="utf-8")
    profile = load_profile(path)
    trained = [DdpResult(world=world, batch=8, accumulation=1, step_s=0.08, no_sync_step_s=None, samples_per_s_per_gpu=100.0,
                         tokens_per_s_per_gpu=3200.0, parameters=1000) for world in (2, 4)]
    busbw = CollectiveResult(collective="all_reduce", nominal_size="1GiB", size_bytes=1 << 30, dtype="float32", ranks=4, warmup=5,
                             iterations=20, time_us=100000.0, algbw_GBps=30.0, busbw_GBps=45.0, wrong=0)
    facts = ClusterFacts(profile=profile.name, backend="nccl", torch_version="2.13.0", nccl_version="2.28.3", world=4, gpus_per_node=2,
                         nodes=[node(TREE, index=0), node(TREE, index=1)], collectives=[busbw], ddp=trained)
    return cluster_verdicts(profile, facts)


def test_each_value_improves_the_way_its_check_declares(tmp_path):
    profile = ProfileCatalog.with_shipped().load("h200-4-nvswitch")
    facts = example_facts("h200x4-measured")
    seen = set()
    for verdict in _cluster_verdicts(tmp_path):  # a cluster's checks judge a cluster's facts
        declared = next(d.declaration.better for d in DECLARED if d.declaration.name == verdict.check)
        if declared is not None and verdict.outcome in ("passed", "failed") and verdict.numeric is not None:
            assert verdict.better is declared, f"{verdict.check}: {verdict.better} is not the declared {declared}"
            seen.add(verdict.check)
    for subjects, checks in SUBJECTS:
        for check in checks:
            declared = check.declaration.better
            if declared is None:
                continue
            for subject in subjects(profile):
                verdict = check(profile, facts) if subject is None else check(profile, facts, subject)
                if verdict.outcome in ("passed", "failed") and verdict.numeric is not None:
                    assert verdict.better is declared, f"{verdict.check}: {verdict.better} is not the declared {declared}"
                    seen.add(verdict.check)
    assert _where(fleet=True) <= seen


def _page(record: RunRecord, tests: list[TestRecord]) -> str:
    return render_html(record.with_tests(tests))


def _with_verdicts(tests: list[TestRecord], **update: Any) -> list[TestRecord]:
    return [test.model_copy(update={"verdict": test.verdict.model_copy(update=update)}) for test in tests if test.verdict is not None]


def test_every_value_the_page_draws_is_joined_to_the_verdict_that_judged_it():
    # examples/results/h200x4.json measured every value report.html draws, and judged each: written
    # before verdicts carried their measure, as the page still reads such results
    record = load_results(RUN)
    drawn = {d.declaration.name: d.declaration.measure for d in DECLARED if d.declaration.measure is not None}
    assert set(drawn.values()) == set(Measure)  # nothing drawn that no check judges
    for name, measure in drawn.items():
        given = _verdict(next(d for d in DECLARED if d.declaration.name == name))  # as its check gives it now
        assert given.measure is measure and Verdict.from_data(given.as_data()).measure is measure  # and as results.json holds it
        tests = [test for test in record.tests if test.verdict is not None and test.verdict.check == name]
        assert tests, f"{RUN.name} holds no verdict of {name}"
        carried = _page(record, _with_verdicts(tests, measure=measure))
        assert carried == _page(record, _with_verdicts(tests, measure=None)), f"{name}: written before, its verdicts join alike"
        # the same verdicts, of a check that declares nothing: the value is drawn with no verdict beside it
        assert carried != _page(record, _with_verdicts(tests, check="not_declared", measure=None)), f"{name} is not on the page"
    # a check whose value the page does not draw changes nothing but its row in the list of tests,
    # which does not show a check's name: so what differs above is the join
    undrawn = [test for test in record.tests if test.verdict is not None and test.verdict.check == "nvlink_links"]
    assert undrawn and _page(record, undrawn) == _page(record, _with_verdicts(undrawn, check="not_declared"))


# No writer joins a measurement to its verdict by the check's name: report.html by the verdict's
# measure, the cluster's view and reports by what its check declares and by its subject.


def _check_names_typed(path: Path, names: set[str]) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{path.relative_to(WRITERS)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    ]


def test_no_writer_types_a_check_name():
    # a run's environment has fields named as checks are (gpu_model, gpu_count): those are its fields
    names = {d.declaration.name for d in DECLARED} - set(Environment.model_fields)
    writers = [
        path for path in sorted(WRITERS.rglob("*.py"))
        if path.relative_to(WRITERS).parts[0] in ("report", "store", "cluster")
    ]
    assert len(writers) > 10
    typed = [found for path in writers for found in _check_names_typed(path, names)]
    assert typed == []
    assert WRITERS / "report" / "html.py" in writers  # its charts and matrices join by the verdict's measure
    assert WRITERS / "report" / "cluster_view.py" in writers  # its grid by the declarations and the subjects
    # the test finds a name where one is typed: a check's own module names it
    assert _check_names_typed(WRITERS / "checks" / "cluster.py", names)
