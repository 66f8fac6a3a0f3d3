"""Checks declare themselves once (checks/declare.py): the lists read from the declarations (the
suites' tests, the plugin's subjects, each stage's values, the health families, docs/checks.md)
are what they were when kept by hand, and say where a criterion's marginal line is."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import gpuaccept.checks
from gpuaccept.checks import compute, declare, fabric, health
from gpuaccept.checks.burnin import burnin_cases
from gpuaccept.checks.catalog import checks_markdown
from gpuaccept.checks.declare import REGISTRY, check, declared_checks, subject_kinds
from gpuaccept.checks.stages import stage_values
from gpuaccept.checks.verdict import AtLeast, Judge, Outcome
from gpuaccept.facts.run_record import TestRecord
from gpuaccept.profile import ProfileCatalog
from gpuaccept.report.junit import case_properties
from tests.helpers import ROOT

SUITES = ROOT / "suites"


def test_docs_checks_md_is_what_the_declarations_say():
    written = (ROOT / "docs" / "checks.md").read_text(encoding="utf-8")
    assert written == checks_markdown(), "run: python -m gpuaccept.checks.catalog > docs/checks.md"


def _suite_tests() -> set[str]:
    found = set()
    for path in SUITES.glob("test_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found |= {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}
    return found


def test_every_declared_check_has_its_suite_test_and_every_suite_test_its_check():
    declared = {found.declaration.test_name for found in declared_checks()}
    assert _suite_tests() - declared == set()
    assert declared - _suite_tests() == set()
    # the checks of a cluster are judged by `gpu-accept cluster`, not by a suite's test
    assert {found.declaration.test_name for found in declared_checks("cluster")} & _suite_tests() == set()



def test_a_check_is_named_by_its_function_unless_it_says_otherwise():
    names = {found.__name__: found.declaration.name for found in declared_checks()}
    assert names["busbw"] == "busbw" and names["ddp_scaling"] == "ddp_scaling"
    assert fabric.busbw.__name__ == "busbw" and compute.memtest.declaration.module == "compute"
    assert len(names) == len(declared_checks())  # each name once


def test_the_subjects_the_plugin_parametrizes_come_from_the_declarations():
    assert set(subject_kinds()) == {"gpu", "gpu_pair", "gpu_ordered_pair", "busbw_case", "ddp_case", "burnin_case", "gpu_link"}


def test_each_stages_values_are_those_kept_by_hand_before():
    view = {
        stage: [(v.check.__name__, v.measured_again, v.in_burnin, v.judged_beside_load, v.key_of is not None) for v in values]
        for stage, values in stage_values().items()
    }
    assert view == {
        "compute": [
            ("gemm_throughput", True, True, True, True), ("gemm_within_best", False, True, True, True),
            ("gemm_correct", False, True, True, True), ("hbm_copy", True, True, True, True), ("hbm_triad", True, True, True, True),
            ("memtest", False, True, True, True),
        ],
        "nccl": [
            ("busbw", True, True, False, False), ("collective_correct", False, True, True, False), ("pair_busbw", True, True, False, False),
        ],
        "copies": [
            ("local_copy", True, True, False, False), ("host_to_device", True, True, False, False),
            ("device_to_host", True, True, False, False), ("p2p_copy", True, True, False, False),
            ("p2p_copy_bidirectional", True, True, False, False),
        ],
        "ddp": [
            ("ddp_scaling", True, False, True, False), ("ddp_exposed_comm", True, False, True, False),
            ("ddp_nvlink_speedup", True, False, True, False),
        ],
    }


ELSEWHERE = "gpuaccept.checks.elsewhere"  # a module of checks that no other module imports
ELSEWHERE_SOURCE = '''
from gpuaccept.checks.declare import GPU, check


@check(subjects=GPU, stage="compute")
def steady_gemm(judge, profile, facts, gpu):
    """A compute stage's value declared outside the modules of the stages."""
    return judge.error(f"gpu{gpu}", "never judged")
'''


def _checks_module_elsewhere(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """ELSEWHERE, written in `folder` and on the checks package's path for one test; its check is
    taken out of the registry after it. The package's modules are looked for again, as a process
    started with the module there would (a process looks once)."""
    (folder / "elsewhere.py").write_text(ELSEWHERE_SOURCE, encoding="utf-8")
    monkeypatch.setattr(gpuaccept.checks, "__path__", [*gpuaccept.checks.__path__, str(folder)])
    declare._import_every_module_of_checks.cache_clear()
    yield
    REGISTRY.pop("steady_gemm", None)
    sys.modules.pop(ELSEWHERE, None)
    declare._import_every_module_of_checks.cache_clear()


@pytest.fixture
def listed_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(declare, "CHECK_MODULES", (*declare.CHECK_MODULES, "elsewhere"))
    yield from _checks_module_elsewhere(tmp_path, monkeypatch)


@pytest.fixture
def unlisted_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from _checks_module_elsewhere(tmp_path, monkeypatch)


def test_a_stage_value_declared_in_a_module_no_stage_imports_is_one_of_the_stages_values(listed_elsewhere):
    # the stage values used to be the registry as checks/stages.py's own imports (compute, ddp,
    # fabric) had filled it: nothing has imported the module, so its check was not there
    assert ELSEWHERE not in sys.modules
    assert "steady_gemm" not in [name for name, found in REGISTRY.items() if found.declaration.stage == "compute"]
    # read from the declarations, it is the compute stage's last value, and a burn-in judges it
    assert [value.check.__name__ for value in stage_values()["compute"]] == [
        "gemm_throughput", "gemm_within_best", "gemm_correct", "hbm_copy", "hbm_triad", "memtest", "steady_gemm",
    ]
    profile = ProfileCatalog.with_shipped().load("h200-2-nvswitch")
    assert {case.id for case in burnin_cases(profile) if case.stage == "compute"} >= {"steady_gemm-gpu0", "steady_gemm-gpu1"}


def test_a_check_declared_in_a_module_left_out_of_the_suites_order_is_refused_when_the_checks_are_read(unlisted_elsewhere):
    with pytest.raises(ValueError, match=r"check 'steady_gemm' is declared in gpuaccept\.checks\.elsewhere, which CHECK_MODULES"):
        declared_checks()
    assert "steady_gemm" not in REGISTRY


def test_the_health_families_come_from_the_declarations():
    assert [c.__name__ for c in health.STATE_CHECKS] == [
        "row_remapping", "retired_pages", "ecc_corrected", "sram_ecc", "recovery_action", "persistence_mode", "inforom",
        "other_processes", "vbios_consistent", "mig_mode", "xid_since_boot",
    ]
    assert {c.__name__ for c in health.RUN_CHECKS} == {
        "xid_during_run", "recovery_action_after_run", "ecc_errors_during_run", "ecc_corrected_during_run", "remapping_during_run",
        "pcie_replay_rate", "pcie_correctable_rate", "clock_slowdown_during_run", "gpu_temperature", "memory_temperature",
    }


def test_the_health_rooms_are_one_module_of_checks_in_the_order_its_checks_always_had():
    # the order every list read from the declarations has (the golden verdicts, docs/checks.md):
    # by room as CHECK_MODULES lists them, not by which room a caller happened to import first
    found = [d for d in declared_checks() if d.declaration.module == "health"]
    assert [d.declaration.name for d in found] == [
        "row_remapping", "retired_pages", "ecc_corrected", "sram_ecc", "recovery_action", "recovery_action_after_run",
        "persistence_mode", "inforom", "other_processes", "vbios_consistent", "mig_mode", "xid_since_boot", "xid_during_run",
        "ecc_errors_during_run", "ecc_corrected_during_run", "remapping_during_run", "pcie_replay_rate", "pcie_correctable_rate",
        "nvlink_errors_during_run", "clock_slowdown_during_run", "gpu_temperature", "memory_temperature",
    ]
    assert {d.judged.__module__ for d in found} == {
        f"gpuaccept.checks.health.{room}" for room in ("memory", "state", "xids", "counters", "thermal")
    }
    assert {d.declaration.area for d in found} == {"health"}
    # the families the suites mark alike, in the same order
    per_gpu = [d for d in found if d.declaration.subjects.fixture == "gpu"]
    assert list(health.STATE_CHECKS) == [d for d in per_gpu if d.declaration.family == "health_state"]
    assert list(health.RUN_CHECKS) == [d for d in per_gpu if d.declaration.family == "health_run"]
    # each is the suites' `health.<name>`, as suites/test_health.py calls it
    assert all(getattr(health, d.declaration.name) is d for d in found)


def test_declared_checks_keep_their_order_whatever_was_registered_first(monkeypatch):
    before = [d.declaration.name for d in declared_checks(runner=None)]
    # the registry as a process that imported the thermal room before the others would fill it
    shuffled = dict(sorted(REGISTRY.items(), key=lambda item: item[1].judged.__module__ != "gpuaccept.checks.health.thermal"))
    assert list(shuffled) != list(REGISTRY)
    monkeypatch.setattr(declare, "REGISTRY", shuffled)
    assert [d.declaration.name for d in declared_checks(runner=None)] == before


def test_the_marginal_line_is_inside_the_criterion_and_every_writer_says_where():
    judge = Judge("busbw", "h200-4-nvswitch", marginal_band=0.05)
    verdict = judge("all_reduce 1 GiB", "busbw", 340.0, AtLeast(330.0, "GB/s"))
    assert verdict.outcome is Outcome.PASSED and verdict.marginal
    assert verdict.criterion.model_dump(mode="json") == {"op": ">=", "limit": 330.0, "marginal_minimum": 346.5, "unit": "GB/s"}
    assert verdict.marginal_line == "marginal below 346.5 GB/s" and verdict.expected == ">= 330 GB/s"
    clear = judge("all_reduce 1 GiB", "busbw", 350.0, AtLeast(330.0, "GB/s"))
    assert not clear.marginal and clear.criterion == verdict.criterion  # the line is the criterion's, whatever the value
    test = TestRecord(id="test_busbw[all_reduce-1GiB]", nodeid="test_nccl.py::test_busbw[x]", outcome="passed", verdict=verdict)
    assert case_properties(test)["marginal_line"] == "marginal below 346.5 GB/s"
    # a check judged without a band writes its criterion as before: no line
    plain = Judge("gpu_memory", "p")("gpu0", "memory", 141.0, AtLeast(140.0, "GiB"))
    assert "marginal_minimum" not in plain.criterion.model_dump(mode="json") and plain.marginal_line == ""


def test_two_checks_of_one_name_are_refused_and_a_module_imported_again_declares_itself_again():
    with pytest.raises(ValueError, match="'busbw' is declared twice"):
        check(name="busbw")(lambda judge, profile, facts: judge.error("x", "never judged"))
    before = REGISTRY["busbw"]
    again = check(name="busbw")(before.judged)  # as a module imported again declares it
    assert REGISTRY["busbw"] is again
    REGISTRY["busbw"] = before


def _suite_marks() -> dict[str, list[pytest.Mark]]:
    """Each suite test's marks, its own before its module's (the closest first, as pytest reads them)."""
    import importlib

    from _pytest.mark.structures import get_unpacked_marks

    found: dict[str, list[pytest.Mark]] = {}
    for path in sorted(SUITES.glob("test_*.py")):
        module = importlib.import_module(f"gpuaccept.suites.{path.stem}")
        module_marks = list(get_unpacked_marks(module))
        for name, function in vars(module).items():
            if name.startswith("test_") and callable(function):
                found[name] = [*get_unpacked_marks(function), *module_marks]
    return found


def test_a_suite_test_asks_for_the_stage_and_the_health_readings_its_check_declares():
    """A test whose facts lack its check's stage would skip (a compute check with no sweep is not
    applicable) and pass a machine that was never loaded: the suite's marker and the check's
    declaration must agree, and nothing else holds them together."""
    marks = _suite_marks()
    for found in declared_checks():
        declaration = found.declaration
        test_marks = marks[declaration.test_name]
        needs = next((mark for mark in test_marks if mark.name == "needs"), None)
        asked = set(needs.args) if needs else set()
        if declaration.stage is not None:
            assert declaration.stage in asked or "every_stage" in asked, (declaration.test_name, declaration.stage, asked)
        if declaration.family is not None:
            assert any(mark.name == declaration.family for mark in test_marks), (declaration.test_name, declaration.family)
