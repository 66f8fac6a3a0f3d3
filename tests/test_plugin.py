"""The pytest plugin end to end (pytester): the shipped suites against recorded facts, JUnit out."""

import json
import xml.etree.ElementTree as ET

import pytest

from gpuaccept.facts import save_facts
from gpuaccept.outcomes import EXIT_NOT_JUDGED
from gpuaccept.resources import shipped_dir
from tests.helpers import DATA, EXAMPLES, example_facts, mutated, older_example

SUITES = shipped_dir("suites")


def run_suites(pytester, *args, subprocess=False):
    junit = pytester.path / "junit.xml"
    argv = [str(SUITES), "-c", str(SUITES / "pytest.ini"), "--rootdir", str(SUITES), "--junitxml", str(junit), *args]
    result = pytester.runpytest_subprocess(*argv) if subprocess else pytester.runpytest(*argv)
    return result, ET.parse(junit).getroot() if junit.exists() else None


def properties(element):
    return {p.get("name"): p.get("value") for p in element.findall("properties/property")}


def cases_by_name(root):
    return {case.get("name"): case for case in root.iter("testcase")}


def test_recorded_h200x4_could_not_judge_what_its_facts_lack_and_says_so_by_area(pytester):
    # facts recorded before the health readings, the per-GPU loads and the telemetry existed
    result, root = run_suites(pytester, "--profile", "h200-4-nvswitch", "--facts", str(older_example("h200x4-measured")))
    outcomes = result.parseoutcomes()
    # nothing failed, and the areas the profile asks for that the facts lack could not judge: never a pass
    assert result.ret == 2 and "failed" not in outcomes and outcomes["passed"] >= 65 and outcomes["errors"] == 180
    suite = properties(root.find("testsuite"))
    assert suite["coverage.compute"] == (
        "not checked: 0 passed, 0 failed, 24 not judged, 0 skipped (the facts hold no per-GPU loads)"
    )
    assert suite["coverage.nccl"] == "checked: 36 passed, 0 failed, 0 not judged, 1 skipped"
    assert suite["not_checked"].splitlines()[1:] == [
        "not checked: compute — the facts hold no per-GPU loads (24 test(s) not judged)",
        "not checked: telemetry — the facts hold no telemetry (12 test(s) not judged)",
    ]
    assert result.stdout.lines.count(
        "COULD NOT JUDGE: 180 test(s) could not judge, none failed; not checked: health, compute, telemetry"
    ) == 1
    gemm = properties(cases_by_name(root)["test_gemm_throughput[gpu1]"])
    assert gemm["area"] == "compute" and gemm["outcome"] == "error"


def test_recorded_h200x4_passes_every_area_and_junit_holds_the_exact_values(pytester):
    result, root = run_suites(pytester, "--profile", "h200-4-nvswitch", "--facts", str(EXAMPLES / "h200x4-measured.json"))
    outcomes = result.parseoutcomes()
    assert result.ret == 0 and "failed" not in outcomes and "errors" not in outcomes and outcomes["passed"] >= 65
    assert result.stdout.lines.count("PASS: every check passed") == 1
    suite = properties(root.find("testsuite"))
    assert suite["coverage.compute"] == "checked: 24 passed, 0 failed, 0 not judged, 0 skipped"
    assert suite["not_checked"] == ""
    cases = cases_by_name(root)
    assert "test_link_type[gpu0-gpu1]" in cases and "test_p2p_capability[gpu3-gpu2]" in cases
    memory = properties(cases["test_gpu_memory[gpu2]"])
    # the exact value judged (150754820096 B), not a rounded one; the message rounds for people
    assert float(memory["measured"]) == 150754820096 / 2**30 and memory["expected"] == ">= 140 GiB" and memory["unit"] == "GiB"
    assert memory["profile"] == "h200-4-nvswitch" and memory["subject"] == "gpu2" and memory["outcome"] == "passed"
    assert suite["profile"] == "h200-4-nvswitch" and suite["gpu_model"] == "NVIDIA H200" and suite["gpu_count"] == "4"
    assert suite["driver"] == "580.159.04" and suite["host"]


def test_a_selection_passes_what_it_judged_and_names_the_areas_it_left_out(pytester):
    result, root = run_suites(
        pytester, "--profile", "h200-4-nvswitch", "--facts", str(EXAMPLES / "h200x4-measured.json"),
        "-k", "not test_health.py and not test_telemetry.py",
    )
    outcomes = result.parseoutcomes()
    assert result.ret == 0 and "failed" not in outcomes and outcomes["passed"] >= 65
    # a pass of what was judged, the areas left out named as not checked
    line = "PARTLY CHECKED: every check judged passed; not checked: health, telemetry"
    assert result.stdout.lines.count(line) == 1
    suite = properties(root.find("testsuite"))
    assert suite["coverage.telemetry"] == "not checked: 0 passed, 0 failed, 0 not judged, 0 skipped, 12 not selected"
    assert suite["coverage.compute"] == "checked: 24 passed, 0 failed, 0 not judged, 0 skipped"


def test_a_fault_fails_exactly_its_test_with_value_and_threshold_in_junit(pytester, tmp_path):
    faulty = tmp_path / "x8.json"
    save_facts(mutated(example_facts("h200x4-measured"), lambda d: d["gpus"][2]["pcie"].update(width_current=8)), faulty)
    result, root = run_suites(pytester, "--profile", "h200-4-nvswitch", "--facts", str(faulty))
    assert result.parseoutcomes()["failed"] == 1
    assert result.ret == 1
    failure = cases_by_name(root)["test_pcie_width[gpu2]"].find("failure")
    assert failure.get("message") == "gpu2: PCIe width 8 lanes < 16 lanes (link max x16) (profile h200-4-nvswitch)"
    # said once, in the gpu-accept summary: not again in pytest's failure section and short summary
    line = "  FAILED test_pcie_width[gpu2]: gpu2: PCIe width 8 lanes < 16 lanes (link max x16) (profile h200-4-nvswitch)"
    assert result.stdout.lines.count(line) == 1
    assert result.stdout.str().count("PCIe width 8 lanes") == 1


def test_three_visible_gpus_against_the_four_gpu_profile(pytester, tmp_path):
    from tests.test_checks import without_gpu3

    three = tmp_path / "three.json"
    save_facts(mutated(example_facts("h200x4"), without_gpu3), three)
    result, root = run_suites(
        pytester, "--profile", "h200-4-nvswitch", "--facts", str(three), "-k", "inventory or topology or p2p and not copy"
    )
    failed = sorted(name for name, case in cases_by_name(root).items() if case.find("failure") is not None)
    assert "test_gpu_count" in failed
    assert all(name == "test_gpu_count" or "gpu3" in name for name in failed)
    assert {"test_link_type[gpu0-gpu3]", "test_p2p_capability[gpu3-gpu0]", "test_gpu_model[gpu3]"} <= set(failed)
    assert result.ret == 1


def test_auto_profile_from_facts(pytester):
    # probed facts, no measurement: the quick level (at the standard one, h100-1's host-link copies could not be judged)
    result, root = run_suites(pytester, "--profile", "auto", "--level", "quick", "--facts", str(EXAMPLES / "h100x1.json"))
    assert properties(root.find("testsuite"))["profile"] == "h100-1"
    assert "failed" not in result.parseoutcomes()
    skipped = cases_by_name(root)["test_link_type[none]"].find("skipped")
    assert skipped.get("message") == "profile h100-1 has no GPU pairs to test (1 GPU(s))"


@pytest.mark.slow
def test_suite_properties_survive_xdist(pytester):
    pytest.importorskip("xdist")
    from lxml import etree

    facts = str(EXAMPLES / "h200x4-measured.json")
    result, root = run_suites(
        pytester, "-n", "2", "--profile", "h200-4-nvswitch", "--facts", facts, "-k", "not test_compute.py", subprocess=True
    )
    assert result.ret == 0
    suite = properties(root.find("testsuite"))
    # what the workers left out reaches the controller's record: the areas it did not check, named
    assert suite["coverage.compute"] == "not checked: 0 passed, 0 failed, 0 not judged, 0 skipped, 24 not selected"
    assert "PARTLY CHECKED: every check judged passed; not checked: compute" in result.stdout.lines
    assert suite["profile"] == "h200-4-nvswitch" and suite["host"]
    assert suite["facts_source"] == str(EXAMPLES / "h200x4-measured.json") and suite["gpu_accept_version"] and suite["complete"] == "true"
    assert properties(cases_by_name(root)["test_link_type[gpu1-gpu2]"])["measured"] == "NV18"
    junit = etree.parse(str(pytester.path / "junit.xml"))
    assert etree.XMLSchema(etree.parse(str(DATA / "junit.xsd"))).validate(junit)
    # the standard level's 340 tests but the 24 per-GPU load tests left out
    assert len(junit.findall(".//testcase")) == int(junit.getroot().get("tests")) == 340 - 24


def test_junitxml_in_a_gpu_accept_run_is_written_by_the_plugin_from_the_run_record(pytester, tmp_path):
    junit, own = pytester.path / "junit.xml", tmp_path / "own.xml"
    result, root = run_suites(
        pytester, "--profile", "h200-4-nvswitch", "--facts", str(EXAMPLES / "h200x4.json"), "-k", "inventory", "--junit-report", str(own)
    )
    assert result.ret == 0
    assert junit.read_text() == own.read_text()  # one writer, one shape, at both paths
    assert root.get("name") == "gpu-accept" and [s.get("name") for s in root.findall("testsuite")] == ["vm"]
    case = cases_by_name(root)["test_gpu_count"]
    assert [child.tag for child in case] == ["properties"]
    assert properties(case)["attempts"] == "" and properties(case)["transient"] == "false"


def test_a_bad_profile_is_a_usage_error_in_one_line(pytester, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema: 1\ngpus:\n  count: 2\n  model: X\n  colour: red\n")
    result, _ = run_suites(pytester, "--profile", str(bad), "--facts", str(EXAMPLES / "h200x4.json"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert errors == [f"ERROR: gpu-accept: {bad}:5: gpus.colour: unknown key; known keys here: count, model, memory_min_gib, ecc"]


@pytest.mark.parametrize("option", ["--save-baseline", "--results", "--html-report", "--facts-out", "--junit-report"])
def test_an_output_that_cannot_be_written_is_a_usage_error_before_the_run(pytester, option):
    result, _ = run_suites(pytester, "--profile", "h200-4-nvswitch", "--facts", str(EXAMPLES / "h200x4.json"), option, "/sys/out.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: gpu-accept: {option} /sys/out.json: cannot write in /sys ("), errors
    assert "passed" not in result.stdout.str()


def test_a_session_that_judges_nothing_is_not_a_pass(pytester):
    recorded = ("--profile", "h200-4-nvswitch", "--facts", str(EXAMPLES / "h200x4.json"))
    result, _ = run_suites(pytester, *recorded, "-k", "no_regression")
    assert result.ret == EXIT_NOT_JUDGED  # plain pytest exits with the run's verdict, as gpu-accept run does
    result.stdout.fnmatch_lines(["nothing was judged: the one selected test was skipped (no --baseline given)"])
    listed, _ = run_suites(pytester, *recorded, "-k", "no_regression", "--collect-only")
    assert listed.ret == EXIT_NOT_JUDGED  # listing tests judges nothing: never the 0 that says every check passed
    listed.stdout.fnmatch_lines(["nothing judged: --collect-only lists the tests without running them"])


def test_the_suites_declare_every_marker_they_use_and_a_misspelt_need_is_a_usage_error(pytester):
    recorded = ("--profile", "h200-4-nvswitch", "--facts", str(EXAMPLES / "h200x4-measured.json"))
    listed, _ = run_suites(pytester, *recorded, "--strict-markers", "--collect-only")
    assert listed.ret == EXIT_NOT_JUDGED  # listed, not judged
    listed.stdout.fnmatch_lines(["*340 tests collected*"])  # the standard level's, as before levels were markers
    pytester.makepyfile(test_misspelt="""
        import pytest

        pytestmark = pytest.mark.needs("ncl")

        def test_busbw(facts):
            pass
    """)
    result = pytester.runpytest(*recorded, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "test_misspelt.py::test_busbw: needs('ncl'): not a need (a stage: copies, compute, ddp, nccl;" in result.stderr.str()


def test_the_plugin_is_inert_without_its_options(pytester):
    pytester.makepyfile("def test_plain():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "gpu-accept:" not in result.stdout.str()


def test_facts_out_saves_what_was_evaluated(pytester, tmp_path):
    out = tmp_path / "saved.json"
    run_suites(pytester, "--facts", str(EXAMPLES / "h200x1.json"), "--facts-out", str(out))
    assert json.loads(out.read_text())["gpus"][0]["name"] == "NVIDIA H200"


def test_a_sigterm_dropped_in_a_finalizer_still_ends_the_run_as_interrupted(pytester, monkeypatch):
    from gpuaccept.plugin import hooks

    monkeypatch.setattr(hooks, "TERMINATED", [])
    pytester.makepyfile(
        """
        from gpuaccept.plugin import hooks

        def test_first():
            hooks.TERMINATED.append(15)  # the handler ran, its KeyboardInterrupt was lost (as in a __del__)

        def test_second():
            pass
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert result.parseoutcomes().get("passed") == 1  # the second test never started
