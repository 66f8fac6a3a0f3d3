"""The `gpu-accept` command: exit codes that tell the truth, one-line errors, no tracebacks."""

import contextlib
import json
import os
import re
import subprocess
import sys

import pytest

from gpuaccept.cli import main
from gpuaccept.errors import OptionError
from gpuaccept.facts import save_facts
from gpuaccept.facts.run_record import load_results
from gpuaccept.outputs import check_output_folder
from gpuaccept.profile import load_profile
from gpuaccept.resources import shipped_dir
from tests.helpers import EXAMPLES, alias_bomb, example_facts, mutated, older_example, write

NVML_MISSING = """
    import pynvml

    def _missing(name, *args, **kwargs):
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    pynvml.CDLL = _missing  # what pynvml meets on a machine without the driver
"""


def gpu_accept(*args, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "gpuaccept", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def without_driver(folder) -> dict:
    """This environment as if no NVIDIA driver were installed, on GPU machines too: NVML's library
    cannot be loaded in the command or in the probe it starts."""
    shim = write(folder / "no-driver" / "sitecustomize.py", NVML_MISSING)
    environment = {key: value for key, value in os.environ.items() if key != "GPUACCEPT_NVML_REPLAY"}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shim.parent), os.environ.get("PYTHONPATH")]))
    return environment


RECORDED = ("--profile", "h200-4-nvswitch", "--facts", str(EXAMPLES / "h200x4-measured.json"))


def one_error_line(done) -> str:
    """What bad input gets: exit 2 ("could not judge"), no traceback, one line on stderr."""
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.slow
def test_run_on_recorded_facts_passes_and_writes_junit(tmp_path):
    # the README's demo: every area the profile asks for is in those facts, judged, and passes
    done = gpu_accept(
        "run", "--profile", "h200-4-nvswitch", "--facts", str(EXAMPLES / "h200x4-measured.json"), "--reports", str(tmp_path),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "failed" not in done.stdout and "314 passed, 26 skipped" in done.stdout
    assert "PASS: every check passed" in done.stdout and "not checked" not in done.stdout
    assert (tmp_path / "junit.xml").is_file()
    # facts recorded before the health readings, the per-GPU loads and the telemetry: what they lack
    # could not be judged, never a pass
    older = gpu_accept("run", "--profile", "h200-4-nvswitch", "--facts", str(older_example("h200x4-measured")),
                       "--reports", str(tmp_path / "older"), "-q")
    assert older.returncode == 2 and "COULD NOT JUDGE: 180 test(s) could not judge, none failed" in older.stdout


@pytest.mark.slow
def test_run_exits_1_when_a_check_fails(tmp_path):
    faulty = tmp_path / "faulty.json"
    save_facts(mutated(example_facts("h200x4-measured"), lambda d: d["gpus"][0].update(name="NVIDIA A100-SXM4-80GB")), faulty)
    done = gpu_accept("run", "--profile", "h200-4-nvswitch", "--facts", str(faulty), "--reports", str(tmp_path), "-q")
    assert done.returncode == 1
    assert "gpu0: model 'NVIDIA A100-SXM4-80GB', expected 'NVIDIA H200'" in done.stdout


@pytest.mark.slow
def test_run_without_a_driver_says_so_in_one_line_and_exits_2(tmp_path):
    done = gpu_accept("run", "--reports", str(tmp_path / "reports"), env=without_driver(tmp_path))
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "no NVIDIA driver found" in lines[0], done.stderr
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.slow
def test_record_without_a_driver_says_so_in_one_line_and_exits_2(tmp_path):
    done = gpu_accept("record", "-o", str(tmp_path / "facts.json"), env=without_driver(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith("gpu-accept: no NVIDIA driver found") and done.stderr.count("\n") == 1
    assert not (tmp_path / "facts.json").exists()


@pytest.mark.slow
def test_unknown_profile_exits_2_in_one_line(tmp_path):
    done = gpu_accept("run", "--profile", "h300-8", "--facts", str(EXAMPLES / "h200x4.json"), "--reports", str(tmp_path))
    assert done.returncode == 2
    assert "no profile named 'h300-8'" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_profile_validate_reports_every_problem_and_exits_2(tmp_path):
    good = write(tmp_path / "good.yaml", "schema: 1\ngpus: {count: 1, model: X}\n")
    bad = write(tmp_path / "bad.yaml", "schema: 1\ngpus:\n  count: 0\n  model: X\n  ecc: on\n")
    done = gpu_accept("profile", "validate", str(good), str(bad))
    assert done.returncode == 2
    assert done.stdout.strip() == f"ok: {good} (good)"
    assert done.stderr.splitlines() == [
        f"{bad}:3: gpus.count: Input should be greater than or equal to 1 (got 0)",
        f"{bad}:5: gpus.ecc: Input should be 'enabled' or 'disabled' (got True)",
    ]


@pytest.mark.slow
def test_profile_show_round_trips_to_the_same_profile(tmp_path):
    done = gpu_accept("profile", "show", "rtx3090-4-nvlink-pairs")
    assert done.returncode == 0
    shown = tmp_path / "shown.yaml"
    shown.write_text(done.stdout)
    original = load_profile(EXAMPLES.parents[1] / "profiles" / "rtx3090-4-nvlink-pairs.yaml", [EXAMPLES.parents[1] / "profiles"])
    again = load_profile(shown)
    assert again.spec.model_dump(exclude={"extends"}) == original.spec.model_dump(exclude={"extends"})
    assert "# GA102 whitepaper" in done.stdout  # provenance travels with the values


@pytest.mark.slow
def test_profile_list_names_every_shipped_profile():
    done = gpu_accept("profile", "list")
    assert done.returncode == 0
    names = [line.split()[0] for line in done.stdout.splitlines()]
    assert {"h200-4-nvswitch", "h200-2-nvswitch", "h200-1", "h100-1", "h100-8-nvswitch", "a100-8-nvswitch",
            "rtx3090-2-nvlink", "rtx3090-4-nvlink-pairs", "rtx4090-2-pcie", "rtx4090-4-pcie"} <= set(names)


@pytest.mark.slow
def test_unknown_arguments_outside_run_are_usage_errors():
    done = gpu_accept("profile", "list", "--bogus")
    assert done.returncode == 2 and "unrecognized arguments: --bogus" in done.stderr


@pytest.mark.slow
def test_record_measure_runs_the_profile_stages(tmp_path):
    pytest.importorskip("torch")
    import json
    import os

    from gpuaccept.resources import shipped_dir
    from tests.helpers import DATA
    from tests.live_cpu import cpu_profile

    environment = {**os.environ, "GPUACCEPT_NVML_REPLAY": str(DATA / "nvml" / "h200x4.json")}
    done = subprocess.run(
        [sys.executable, "-m", "gpuaccept", "record", "-o", str(tmp_path / "f.json"), "--measure",
         "--profile", str(cpu_profile(tmp_path)), "--profile-dir", str(shipped_dir("profiles"))],
        capture_output=True, text=True, env=environment, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    recorded = json.loads((tmp_path / "f.json").read_text())
    measured = recorded["measurements"]
    assert measured["collectives"]["backend"] == "gloo" and len(measured["collectives"]["results"]) == 3
    assert len(measured["pairwise"]["results"]) == 6 and len(measured["ddp"]["results"]) == 2
    assert measured["copies"] is None  # the profile asks for none
    assert "gpu-accept: measuring all_reduce 64 KiB" in done.stderr
    # what a standard run judges besides: the health readings after each stage, and the telemetry
    # sampled meanwhile with the stages' load windows (facts without them could not judge those checks)
    assert {snapshot["label"] for snapshot in recorded["health"]["snapshots"]} >= {"start", "after nccl"}
    telemetry = recorded["telemetry"]
    assert telemetry["samples"] and {load["stage"] for load in telemetry["loads"]} >= {"nccl", "ddp"}


@pytest.mark.slow
def test_a_size_written_in_gb_is_one_located_line_from_validate_and_from_run(tmp_path):
    shipped = (shipped_dir("profiles") / "h200-4-nvswitch.yaml").read_text()
    first = shipped.index("\n      1GiB: ") + 1  # all_reduce's, the first size of the NCCL floors
    profile = tmp_path / "gb.yaml"
    profile.write_text(shipped[:first] + shipped[first:].replace("1GiB: ", "1GB: ", 1))
    line = 1 + shipped[:first].count("\n")
    expected = (
        f"{profile}:{line}: nccl.busbw.all_reduce.1GB: '1GB' is not a size: "
        "write it with a binary unit, e.g. 256MiB, 1GiB, 4GiB (not MB or GB)"
    )
    assert one_error_line(gpu_accept("profile", "validate", str(profile))) == expected
    done = gpu_accept("run", "--profile", str(profile), *RECORDED[2:], "--reports", str(tmp_path / "reports"))
    assert one_error_line(done) == f"ERROR: gpu-accept: {expected}"
    assert not (tmp_path / "reports" / "results.json").exists()


PASTED_IN_COLOUR = (
    'schema: 1\ngpus: {count: 2, model: "NVIDIA H200"}\nlinks:\n  matrix: |\n'
    "    \x1b[1m        GPU0    GPU1    CPU Affinity\x1b[0m\n"
    "    \x1b[1mGPU0\x1b[0m     X      NV18    0-15\n"
    "    \x1b[1mGPU1\x1b[0m    NV18     X      0-15\n"
)


@pytest.mark.parametrize(
    "content, expected",
    [
        (PASTED_IN_COLOUR, "{path}:5: links.matrix: a terminal escape code (ESC, as in colour codes copied from a terminal) "
                           "is not allowed: strip the colour codes, or paste plain text"),
        (alias_bomb(merge_keys=True), "{path}: its aliases (*name) and merge keys (<<) expand to "),
        (b"schema: 1\n\xff\xfe", "{path}: not UTF-8 text: invalid start byte at byte 10"),
        (None, "{path}: cannot read: Is a directory"),
    ],
    ids=["terminal-colours", "merge-key-bomb", "binary", "folder"],
)
def test_profile_validate_refuses_unreadable_profiles_in_one_line(tmp_path, capsys, content, expected):
    path = tmp_path / "p.yaml"
    if content is None:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    assert main(["profile", "validate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(expected.format(path=path)), err


@pytest.mark.slow
@pytest.mark.parametrize(
    "facts, expected",
    [
        (bytes(range(256)), "not a facts file: not UTF-8 text (invalid start byte at byte 128)"),
        (b"", "the file is empty: expected the facts JSON that gpu-accept record writes"),
        (None, "cannot read facts: Is a directory"),
        (
            (EXAMPLES.parent / "results" / "h200x4.json").read_bytes(),
            "a gpu-accept results file, not a facts file: pass the facts.json written beside it",
        ),
    ],
    ids=["binary", "empty", "folder", "results-file"],
)
def test_run_on_a_file_that_is_not_facts_is_one_line(tmp_path, facts, expected):
    path = tmp_path / "facts.json"
    if facts is None:
        path.mkdir()
    else:
        path.write_bytes(facts)
    done = gpu_accept("run", "--profile", "h200-4-nvswitch", "--facts", str(path), "--reports", str(tmp_path / "reports"))
    assert one_error_line(done) == f"ERROR: gpu-accept: {path}: {expected}"


@pytest.mark.parametrize(
    "reports, expected",
    [
        ("{tmp}/a-file", "--reports {tmp}/a-file: is a file, not a folder"),
        ("{tmp}/a-file/reports", "--reports {tmp}/a-file/reports: cannot create the folder {tmp}/a-file/reports (Not a directory)"),
        ("/proc", "--reports /proc: cannot write in /proc (No such file or directory)"),
        ("/proc/gpu-accept", "--reports /proc/gpu-accept: cannot create the folder /proc/gpu-accept (No such file or directory)"),
        ("/sys/kernel", "--reports /sys/kernel: cannot write in /sys/kernel ("),
        ("", "--reports: the folder's name is empty"),
    ],
    ids=["a-file", "under-a-file", "proc", "under-proc", "sys", "empty"],
)
def test_run_refuses_a_reports_folder_it_cannot_write_before_anything_runs(tmp_path, capsys, reports, expected):
    (tmp_path / "a-file").write_text("not a folder")
    assert main(["run", *RECORDED, "--reports", reports.format(tmp=tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("gpu-accept: " + expected.format(tmp=tmp_path)), err


def test_a_folder_without_write_permission_is_refused_unless_it_takes_a_file_anyway(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir(mode=0o500)
    try:
        try:
            (folder / "probe").touch()  # root ignores the mode: then the folder is writable, and taken
            (folder / "probe").unlink()
        except PermissionError:
            with pytest.raises(OptionError, match=rf"^--reports {folder}: cannot write in {folder} \(Permission denied\)$"):
                check_output_folder(folder, "--reports")
        else:
            check_output_folder(folder, "--reports")
    finally:
        folder.chmod(0o700)


@pytest.mark.slow
def test_run_refuses_a_baseline_it_cannot_save_before_anything_runs(tmp_path):
    done = gpu_accept("run", *RECORDED, "--reports", str(tmp_path), "--save-baseline", "/sys/base.json")
    assert one_error_line(done).startswith("gpu-accept: --save-baseline /sys/base.json: cannot write in /sys (")
    assert list(tmp_path.iterdir()) == []


RESULTS = str(EXAMPLES.parent / "results" / "h200x4.json")


@pytest.mark.parametrize(
    "command",
    [
        ["report", "html", RESULTS],
        ["report", "junit", RESULTS],
        ["report", "fleet", RESULTS],
        ["baseline", "save", RESULTS],
        ["profile", "init", "--from", RESULTS, "--name", "x"],
        ["record"],
    ],
    ids=lambda command: "-".join(command[:2]) if len(command) > 1 else command[0],
)
@pytest.mark.parametrize("target", ["/sys/out", "{tmp}"], ids=["unwritable", "a-folder"])
def test_every_output_file_that_cannot_be_written_is_refused_before_the_work(tmp_path, capsys, command, target):
    target = target.format(tmp=tmp_path)
    assert main([*command, "-o", target]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    if target == "/sys/out":
        assert err.startswith("gpu-accept: -o /sys/out: cannot write in /sys ("), err
    else:
        assert err == f"gpu-accept: -o {tmp_path}: is a folder: name a file to write\n"


def test_run_help_lists_the_options_it_passes_to_pytest(capsys):
    with pytest.raises(SystemExit) as done:
        main(["run", "--help"])
    assert done.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    for option in ("--baseline FILE", "--save-baseline FILE", "--max-regression PERCENT", "--confirm N"):
        assert option in shown
    assert "the best attempt decides" in shown


@pytest.mark.slow
def test_run_passes_the_baseline_options_on_to_the_suites(tmp_path, capsys):
    # a baseline is of one profile, and of a run that passed what it judged
    first = gpu_accept("run", *RECORDED, "--reports", str(tmp_path / "first"))
    assert first.returncode == 0, first.stdout + first.stderr
    assert main(["baseline", "save", str(tmp_path / "first" / "results.json"), "-o", str(tmp_path / "base.json")]) == 0
    done = gpu_accept(
        "run", *RECORDED, "--reports", str(tmp_path / "reports"), "--baseline", str(tmp_path / "base.json"),
        "--max-regression", "1%", "--confirm", "0", "-k", "no_regression",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    values = json.loads((tmp_path / "base.json").read_text(encoding="utf-8"))["values"]
    assert f"{len(values)} passed" in done.stdout  # one test_no_regression per value
    assert "host_to_device-gpu0          55.42 GB/s   expected >= 54.86 GB/s" in done.stdout  # 55.42 GB/s less 1%


@pytest.mark.slow
@pytest.mark.parametrize(
    "options, expected",
    [
        (["--max-regression", "3%"], "gpu-accept: --max-regression needs --baseline FILE: "
                                     "it is how far below that baseline a value may fall"),
        (["--confirm", "-1"], "gpu-accept: --confirm -1: the number of measurements more to make, 0 to 10 (a value that misses "
                              "its criterion 10 times more is no one-off dip)"),
        (["--confirm", "1" + "0" * 30], "gpu-accept: --confirm 1000000000000000000000000000000: the number of measurements more "
                                        "to make, 0 to 10 (a value that misses its criterion 10 times more is no one-off dip)"),
        (["--confirm", "twice"], "gpu-accept run: argument --confirm: invalid int value: 'twice' (see gpu-accept run --help)"),
        (["--profile-dir", "/no/such/folder"], "ERROR: gpu-accept: --profile-dir /no/such/folder: no such folder"),
    ],
    ids=["max-regression-without-baseline", "negative-confirm", "endless-confirm", "confirm-not-a-number", "missing-profile-dir"],
)
def test_run_refuses_options_that_cannot_work_in_one_line(tmp_path, options, expected):
    done = gpu_accept("run", *RECORDED, "--reports", str(tmp_path), *options)
    assert one_error_line(done) == expected
    assert not (tmp_path / "results.json").exists()


def test_a_missing_profile_dir_is_refused_by_every_command_that_takes_one(tmp_path, capsys):
    for command in (["profile", "list"], ["profile", "show", "h200-1"], ["profile", "validate", str(tmp_path / "p.yaml")]):
        assert main([*command, "--profile-dir", str(tmp_path / "none")]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err == f"gpu-accept: --profile-dir {tmp_path / 'none'}: no such folder\n"


@pytest.mark.slow
def test_a_misspelt_profile_name_gets_a_suggestion(tmp_path):
    done = gpu_accept("run", "--profile", "h200-4-nvswich", *RECORDED[2:], "--reports", str(tmp_path))
    assert one_error_line(done).startswith(
        "ERROR: gpu-accept: no profile named 'h200-4-nvswich' (did you mean 'h200-4-nvswitch'?); known profiles: a100-8-nvswitch, "
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "selection, expected",
    [
        ("no_such_test", "no test was selected: -k, -m or the test ids given match none of the suites' tests"),
        ("no_regression", "nothing was judged: the one selected test was skipped (no --baseline given)"),
    ],
    ids=["nothing-selected", "only-skipped-selected"],
)
def test_a_run_that_judges_nothing_exits_2_in_one_line(tmp_path, selection, expected):
    done = gpu_accept("run", *RECORDED, "--reports", str(tmp_path), "-k", selection)
    assert done.returncode == 2 and one_error_line(done) == f"gpu-accept: {expected} (exit 2)"
    assert expected in done.stdout  # also in the run's own summary
    verdict = json.loads((tmp_path / "verdict.json").read_text())  # and in the verdict, as results.json recorded it
    assert verdict["exit_code"] == 2 and verdict["stopped"] == [expected] == load_results(tmp_path / "results.json").verdict.stopped


@pytest.mark.parametrize(
    "command",
    [["report", "html", "{bad}", "-o", "{tmp}/r.html"], ["report", "fleet", "{bad}"], ["baseline", "save", "{bad}", "-o", "{tmp}/b.json"]],
    ids=["report-html", "report-fleet", "baseline-save"],
)
def test_a_binary_results_file_is_one_line(tmp_path, capsys, command):
    bad = tmp_path / "results.json"
    bad.write_bytes(bytes(range(256)))
    assert main([part.format(bad=bad, tmp=tmp_path) for part in command]) == 2
    _, err = capsys.readouterr()
    assert err == f"gpu-accept: {bad}: not a gpu-accept results file: not UTF-8 text (invalid start byte at byte 128)\n"


@pytest.mark.slow
def test_a_binary_baseline_is_one_line(tmp_path):
    bad = tmp_path / "base.json"
    bad.write_bytes(bytes(range(256)))
    done = gpu_accept("run", *RECORDED, "--reports", str(tmp_path / "reports"), "--baseline", str(bad))
    assert one_error_line(done) == f"gpu-accept: {bad}: not a gpu-accept baseline: not UTF-8 text (invalid start byte at byte 128)"


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["report", "fleet", str(EXAMPLES.parent / "results" / "h200x4.json"), "--tolerance", "abc"],
         "--tolerance 'abc' is not a percentage (write 5% or 0.05)"),
        (["run", "--level", "burn-in", "--duration", "abc"],
         "--duration 'abc' is not a duration: write a number with s, m or h (90s, 30m, 2h)"),
        (["record", "-o", "facts.json", "--confirm", "-1"], "--confirm -1: the number of measurements more to make, 0 to 10 (a "
         "value that misses its criterion 10 times more is no one-off dip)"),
        (["record", "-o", "facts.json", "--measure", "--profile-dir", ""], "--profile-dir: the folder's name is empty"),
        (["cluster", "--out", "out"], "--profile: name the profile of the cluster (a name or a YAML path with a cluster: section); "
         "auto picks by one node's GPUs and knows no cluster"),
    ],
    ids=["tolerance", "duration-of-run", "record-confirm", "record-empty-folder", "cluster-without-profile"],
)
def test_an_option_value_that_cannot_be_used_is_named_in_one_line(tmp_path, capsys, monkeypatch, arguments, said):
    monkeypatch.chdir(tmp_path)
    assert main(arguments) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"gpu-accept: {said}"]


@pytest.mark.slow
def test_pytests_own_options_are_not_taken_for_abbreviations_of_ours(tmp_path):
    # --co is pytest's --collect-only, not gpu-accept's --confirm
    done = subprocess.run(
        [sys.executable, "-m", "gpuaccept", "run", "--facts", str(EXAMPLES / "h200x4-measured.json"), "--profile", "h200-4-nvswitch",
         "--reports", str(tmp_path), "--co", "-q"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    # listing judges nothing: not the exit 0 that says every check passed
    assert done.returncode == 2, done.stderr
    assert "tests collected" in done.stdout and "passed" not in done.stdout
    assert done.stderr.splitlines()[-1] == "gpu-accept: nothing judged: --collect-only lists the tests without running them (exit 2)"


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["report", "html", "{pipe}", "-o", "{tmp}/r.html"], "{pipe}: the file is empty: expected the results.json"),
        (["report", "fleet", "{pipe}"], "{pipe}: the file is empty: expected the results.json"),
        (["profile", "validate", "{pipe}"], "{pipe}:1: the file is empty"),
        (["import", "{pipe}", "-o", "{tmp}/f.json"], "{pipe}: the file is empty"),
        (["run", "--profile", "h200-4-nvswitch", "--facts", "{pipe}", "--reports", "{tmp}/r"], "{pipe}: the file is empty"),
        (["run", *RECORDED, "--reports", "{tmp}/r", "--baseline", "{pipe}"], "{pipe}: the file is empty: expected the baseline"),
    ],
    ids=["report-html", "report-fleet", "profile-validate", "import", "run-facts", "run-baseline"],
)
@pytest.mark.slow
def test_a_named_pipe_that_nothing_writes_to_is_one_line_not_a_wait(tmp_path, command, said):
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    done = subprocess.run(
        [sys.executable, "-m", "gpuaccept", *(part.format(pipe=pipe, tmp=tmp_path) for part in command)],
        capture_output=True, text=True, timeout=120,
    )
    assert said.format(pipe=pipe) in one_error_line(done)


def test_a_folder_given_as_the_profile_is_named_as_a_folder(capsys):
    assert main(["profile", "show", str(shipped_dir("profiles"))]) == 2
    assert capsys.readouterr().err == (
        f"gpu-accept: {shipped_dir('profiles')} is a folder, not a profile file (a folder of profiles goes to --profile-dir)\n"
    )


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["cluster", "--out", "", "--profile", "x"], "gpu-accept cluster: argument --out: the name is empty"),
        (["report", "html", str(EXAMPLES.parent / "results" / "h200x4.json"), "-o", ""], "gpu-accept report html: argument -o/--output"),
        (["baseline", "save", "", "-o", "b.json"], "gpu-accept baseline save: argument results: the name is empty"),
    ],
    ids=["cluster-out", "report-output", "baseline-results"],
)
def test_an_empty_path_is_refused_not_taken_for_the_current_folder(capsys, arguments, said):
    with pytest.raises(SystemExit) as ended:
        main(arguments)
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(said), err


@pytest.mark.parametrize(
    "command", [["baseline", "save", "{dir}", "-o", "{dir}/b.json"], ["report", "html", "{dir}", "-o", "{dir}/r.html"]]
)
def test_a_folder_given_as_a_results_file_is_one_line_naming_the_file_inside(tmp_path, capsys, command):
    (tmp_path / "results.json").write_text("{}")
    assert main([part.format(dir=tmp_path) for part in command]) == 2
    assert capsys.readouterr().err == f"gpu-accept: {tmp_path}: a folder, not a results file: pass {tmp_path / 'results.json'}\n"


@pytest.mark.parametrize(
    "command", [["report", "html", "{bad}", "-o", "{tmp}/r.html"], ["baseline", "save", "{bad}", "-o", "{tmp}/b.json"]]
)
def test_a_number_too_long_to_read_is_one_line(tmp_path, capsys, command):
    bad = tmp_path / "results.json"
    bad.write_text('{"format": "gpu-accept-results", "version": ' + "1" * 5000 + "}")
    assert main([part.format(bad=bad, tmp=tmp_path) for part in command]) == 2
    err = capsys.readouterr().err
    assert err == f"gpu-accept: {bad}: invalid JSON: Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits\n"


@pytest.mark.parametrize("option", ["--facts", "--baseline", "--save-baseline", "--max-regression", "--profile"])
def test_an_empty_value_of_a_run_option_is_refused_not_ignored(tmp_path, capsys, option):
    arguments = ["run", "--profile", "h200-4-nvswitch", "--facts", str(EXAMPLES / "h200x4-measured.json")]
    arguments += ["--reports", str(tmp_path / "r"), option, ""]
    assert main(arguments) == 2
    assert capsys.readouterr().err == f"gpu-accept: {option}: the value is empty\n"


@pytest.mark.slow
def test_a_file_whose_name_begins_with_a_dash_is_a_value_not_an_option(tmp_path):
    (tmp_path / "-facts.json").write_bytes((EXAMPLES / "h200x4-measured.json").read_bytes())
    done = gpu_accept(
        "run", "--profile", "h200-4-nvswitch", "--facts=-facts.json", "--reports=-reports", "-q", cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "-reports" / "junit.xml").is_file()


@pytest.mark.parametrize("command", [["profile", "list"], ["run", "--facts", str(EXAMPLES / "h200x4-measured.json")]])
def test_an_empty_profile_dir_is_refused_not_taken_for_the_current_folder(tmp_path, capsys, command):
    assert main([*command, "--profile-dir", "", *(["--reports", str(tmp_path)] if command[0] == "run" else [])]) == 2
    assert capsys.readouterr().err == "gpu-accept: --profile-dir: the folder's name is empty\n"


def _every_parser(parser, name="gpu-accept"):
    import argparse

    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                yield from _every_parser(sub, f"{name} {command}")


def test_every_command_and_option_says_what_it_does():
    import argparse

    from gpuaccept.cli import _parser

    for name, parser in _every_parser(_parser()):
        assert parser.description, f"{name} --help says nothing of what the command does"
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction, argparse._VersionAction)):
                continue
            option = "/".join(action.option_strings) or action.dest
            assert action.help, f"{name} --help: {option} has no help text"
            # an option's help names only options this command takes (burn-in takes no --level)
            taken = {flag for other in parser._actions for flag in other.option_strings}
            named = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", action.help))
            assert named <= taken, f"{name} --help: {option} names {sorted(named - taken)}, which {name} does not take"


SIGNALS_WHILE_WRITING = """
import os, signal
import gpuaccept.files as files

written = files.write_atomically

def interrupted_while_writing(path, text):
    # Ctrl-C, then SIGTERM twice, as the reports are written at the end of the run
    if str(path).endswith("report.html"):
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGTERM):
            os.kill(os.getpid(), number)
    written(path, text)

files.write_atomically = interrupted_while_writing
"""


@pytest.mark.slow
def test_signals_while_the_reports_are_written_wait_for_them(tmp_path):
    shim = write(tmp_path / "shim" / "sitecustomize.py", SIGNALS_WHILE_WRITING)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(shim.parent), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-m", "gpuaccept", "run", *RECORDED, "--reports", str(tmp_path / "reports"), "-q"],
        capture_output=True, text=True, env=environment, timeout=300,
    )
    said = done.stdout + done.stderr
    assert "Traceback" not in said and "KeyboardInterrupt" not in said, said[-3000:]
    assert done.returncode == 0, said[-3000:]  # every test had ended: the verdict stands
    assert done.stderr.splitlines()[-1] == ("gpu-accept: SIGINT, SIGTERM, SIGTERM arrived while the reports were written: they "
                                            "were finished first")
    assert load_results(tmp_path / "reports" / "results.json").complete
    assert (tmp_path / "reports" / "report.html").is_file() and (tmp_path / "reports" / "junit.xml").is_file()


def test_a_reader_that_went_away_ends_the_command_quietly():
    # `gpu-accept profile list | head`: the pipe's reader gone before the command writes
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run([sys.executable, "-m", "gpuaccept", "profile", "list"], stdout=writer, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(writer)
    assert done.returncode == 128 + 13 and done.stderr == b""  # as a process ended by SIGPIPE, with no traceback


def test_the_command_leaves_sigpipe_ignored_so_a_child_that_dies_never_takes_the_process_with_it(capsys):
    import signal

    assert main(["profile", "list"]) == 0
    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN  # as Python sets it
    child = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.PIPE)
    child.wait()
    assert child.stdin is not None
    with pytest.raises(BrokenPipeError):  # an error to handle, not the end of this process
        child.stdin.write(b"x" * 65536)
        child.stdin.flush()
    with contextlib.suppress(BrokenPipeError):
        child.stdin.close()
