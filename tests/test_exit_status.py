"""The run's exit status is decided once, at the end of the session, and recorded: in every way a run
can end, pytest's exit code is the verdict results.json holds (plain pytest with the plugin; `gpu-accept
run` returns the same verdict, tests/test_cli.py)."""

import pytest

from gpuaccept.facts import save_facts
from gpuaccept.facts.measurements import Measurements
from gpuaccept.facts.run_record import load_results
from gpuaccept.facts.run_verdict import RunVerdict
from gpuaccept.facts.telemetry import BurnIn, BurnInRound
from gpuaccept.outcomes import EXIT_FAILED, EXIT_NOT_JUDGED, EXIT_PASSED
from gpuaccept.resources import shipped_dir
from tests.helpers import EXAMPLES, example_facts, mutated

SUITES = shipped_dir("suites")
HEALTHY = EXAMPLES / "h200x4-measured.json"
PROFILE = ("--profile", "h200-4-nvswitch")


def recorded_run(pytester: pytest.Pytester, facts, *args: str) -> tuple[int, RunVerdict]:
    """The suites judged against `facts` in this process: pytest's exit code, and the verdict results.json recorded."""
    results = pytester.path / "results.json"
    result = pytester.runpytest_inprocess(
        str(SUITES), "-c", str(SUITES / "pytest.ini"), "--rootdir", str(SUITES), *PROFILE, "--facts", str(facts),
        "--results", str(results), "-p", "no:cacheprovider", "-p", "no:randomly", *args, no_reraise_ctrlc=True,
    )
    verdict = load_results(results).verdict
    assert verdict is not None, result.stdout.str()
    assert int(result.ret) == verdict.exit_code, (result.ret, verdict)  # one status, decided once, recorded
    return int(result.ret), verdict


def sick_facts(tmp_path) -> str:
    def narrow(data: dict) -> None:
        data["gpus"][2]["pcie"]["width_current"] = 4  # gpu2 down to x4: test_pcie_width fails it

    path = tmp_path / "sick.json"
    save_facts(mutated(example_facts("h200x4-measured"), narrow), path)
    return str(path)


def interrupter(pytester: pytest.Pytester, test_name: str) -> tuple[str, str]:
    """A plugin that presses Ctrl-C as `test_name` runs."""
    pytester.syspathinsert()
    pytester.makepyfile(interrupter=f"""
        def pytest_runtest_call(item):
            if item.name.startswith({test_name!r}):
                raise KeyboardInterrupt
    """)
    return "-p", "interrupter"


def test_a_run_that_passes_records_and_exits_0(pytester):
    code, verdict = recorded_run(pytester, HEALTHY, "-k", "test_gpu_count or test_pcie_width")
    assert code == EXIT_PASSED and verdict.result == "passed" and verdict.stopped == [] and verdict.cause == ""


def test_a_check_that_failed_records_and_exits_1(pytester, tmp_path):
    code, verdict = recorded_run(pytester, sick_facts(tmp_path), "-k", "test_gpu_count or test_pcie_width")
    assert code == EXIT_FAILED and verdict.failed == ["test_pcie_width[gpu2]"]
    assert verdict.cause.startswith("test_pcie_width[gpu2]: gpu2: PCIe width 4 lanes < 16 lanes")


def test_a_value_that_could_not_be_established_records_and_exits_2(pytester):
    code, verdict = recorded_run(pytester, EXAMPLES / "h200x4.json", "-k", "test_gpu_count or test_busbw")
    assert code == EXIT_NOT_JUDGED and verdict.result == "not_judged" and verdict.failed == [] and verdict.not_judged
    assert verdict.stopped == [] and verdict.cause.startswith("could not judge: test_busbw[")


def test_a_run_interrupted_records_and_exits_2_or_1_where_a_check_had_failed(pytester, tmp_path):
    stop = interrupter(pytester, "test_pcie_width")
    code, verdict = recorded_run(pytester, HEALTHY, "-k", "test_gpu_count or test_pcie_width", *stop)
    assert code == EXIT_NOT_JUDGED and verdict.stopped == ["interrupted (Ctrl-C, SIGINT)"]
    assert verdict.cause == "could not judge: interrupted (Ctrl-C, SIGINT)"
    # interrupted after a check failed: the machine is shown faulty all the same
    code, verdict = recorded_run(pytester, sick_facts(tmp_path), "-k", "test_pcie_width", *interrupter(pytester, "test_pcie_width[gpu3]"))
    assert code == EXIT_FAILED and verdict.failed == ["test_pcie_width[gpu2]"] and verdict.stopped == ["interrupted (Ctrl-C, SIGINT)"]


def test_a_run_stopped_by_x_records_what_stopped_it(pytester, tmp_path):
    code, verdict = recorded_run(pytester, sick_facts(tmp_path), "-k", "test_pcie_width or test_gpu_count", "-x")
    assert code == EXIT_FAILED and verdict.failed == ["test_pcie_width[gpu2]"]
    # -x at a value that could not be established: could not judge, none failed
    code, verdict = recorded_run(pytester, EXAMPLES / "h200x4.json", "-k", "test_busbw or test_gpu_count", "-x")
    assert code == EXIT_NOT_JUDGED and len(verdict.not_judged) == 1 and verdict.failed == []


def test_a_collection_error_records_and_exits_2(pytester):
    broken = pytester.makepyfile(test_broken="import a_module_that_is_not_there\n")
    code, verdict = recorded_run(pytester, HEALTHY, str(broken), "-k", "test_gpu_count")
    assert code == EXIT_NOT_JUDGED and verdict.failed == [] and verdict.not_judged == []
    # a module outside the suites' folder is the session's to collect (inside it, its id: test_x.py)
    assert verdict.stopped == ["collection error: the session: ModuleNotFoundError: No module named 'a_module_that_is_not_there'"]
    # the other tests run all the same: still no pass, as pytest's own exit status 1 would have it be a failure
    code, verdict = recorded_run(pytester, HEALTHY, str(broken), "-k", "test_gpu_count", "--continue-on-collection-errors")
    assert code == EXIT_NOT_JUDGED and verdict.stopped[0].startswith("collection error: the session: ModuleNotFoundError")


def test_nothing_judged_records_and_exits_2(pytester):
    code, verdict = recorded_run(pytester, HEALTHY, "-k", "no_regression")
    assert code == EXIT_NOT_JUDGED and verdict.stopped == ["nothing was judged: the one selected test was skipped (no --baseline given)"]
    code, verdict = recorded_run(pytester, HEALTHY, "-k", "test_gpu_count", "--collect-only")
    assert code == EXIT_NOT_JUDGED and verdict.stopped == ["nothing judged: --collect-only lists the tests without running them"]


@pytest.mark.parametrize(("ended", "code"), [("deadline", EXIT_PASSED), ("interrupted", EXIT_NOT_JUDGED)])
def test_a_recorded_burn_in_cut_short_records_and_exits_2(pytester, tmp_path, ended, code):
    measured = example_facts("h200x4-measured")
    one_round = BurnInRound(
        index=1, started_s=0.0, wall_s=30.0, stages=["nccl"], measurements=Measurements(collectives=measured.measurements.collectives)
    )
    facts = tmp_path / "burnin.json"
    save_facts(measured.model_copy(update={"burnin": BurnIn(duration_s=300, elapsed_s=20.0, ended=ended, rounds=[one_round])}), facts)
    exit_code, verdict = recorded_run(pytester, facts, "--level", "burn-in", "-k", "test_burnin_value and busbw and not pair")
    assert exit_code == code and verdict.failed == [] and verdict.not_judged == []
    cut = ["the burn-in was cut short by a signal: 1 round(s) in 20s of 5m00s"]
    assert verdict.stopped == (cut if ended == "interrupted" else [])
