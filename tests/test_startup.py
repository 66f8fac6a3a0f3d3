"""Start-up paid once and hidden: the stages' workers set up ahead in waves, each wave's started
while the stage before it measures (torch imported, no GPU touched), a plan that brings its own environment to them, and the
quick level, which imports no torch and starts no worker."""

from __future__ import annotations

from typing import ClassVar

import pytest

from gpuaccept.facts.measurements import Measurements
from gpuaccept.profile import ProfileCatalog
from gpuaccept.stages import store as store_module
from gpuaccept.stages.store import MeasurementStore, starts_ahead
from tests.helpers import example_facts

PROBED = example_facts("h200x4-measured").model_copy(update={"measurements": Measurements()})


class FakePool:
    """Records what the store asks to be started and set up ahead; hands out nothing (the stages are stand-ins)."""

    def __init__(self):
        self.asked: list[tuple[str, list]] = []

    def prepare(self, ranks, imports=()):
        self.asked.append(("import", list(ranks), imports))

    def set_up(self, stage, plans):
        self.asked.append((f"set up {stage}", [ranks for _, ranks in plans]))

    def start_drivers(self, stage, plans):
        self.asked.append((f"drivers {stage}", [ranks for _, ranks in plans]))

    def take(self, ranks):
        return None

    def keep_only(self, stage, plans):
        self.asked.append((f"end {stage}", [ranks for _, ranks in plans]))

    def close(self):
        self.asked.append(("closed", []))


def stand_in(stage, facts, profile, gpus, only=None, attempt=0):
    return Measurements()


def store_setting_up_ahead(tmp_path, monkeypatch):
    """A live store on a GPU machine with cores to spare, its workers a FakePool that records what it
    was asked, its stages measured by `stand_in`: the profile, the store and the pool."""
    profile = ProfileCatalog.with_shipped().load("h200-4-nvswitch")
    monkeypatch.setattr(store_module, "starts_ahead", lambda facts: True)
    store = MeasurementStore(tmp_path, live=True)
    store.pool = pool = FakePool()
    monkeypatch.setattr(store, "_measure", stand_in)
    return profile, store, pool


def test_stages_are_set_up_in_waves_that_end_with_the_memory_test(tmp_path, monkeypatch):
    profile, store, pool = store_setting_up_ahead(tmp_path, monkeypatch)
    store.expect(["copies", "compute", "ddp", "nccl"], PROBED, profile)
    # the first wave, while the tests before it run: the copy stage's one process that sees every
    # GPU, and the compute stage's one a GPU, whose memory test takes what is free as it begins:
    # nothing after it is set up before it has measured
    assert pool.asked == [("set up copies", [1]), ("set up compute", [1, 1, 1, 1])]
    store.with_stage("copies", PROBED, profile)
    # as the first stage began, the next wave's workers started, to import torch (the DDP stage's
    # also what its wrapper imports at its first use) while the first wave measures; none sets up:
    # the compute stage's workers hold
    imports = [("import", [4, 4], ("gpuaccept.measure.ddp_step", "torch.nn.parallel", "torch._dynamo")), ("import", [4], ())]
    assert pool.asked[2:] == imports
    store.with_stage("compute", PROBED, profile, [2])
    # once it measured, they set up together: the DDP stage's four ranks and four for its NVLink A/B
    # arm, and the NCCL stage's four; none started twice
    assert pool.asked[2:] == [*imports, ("set up ddp", [4, 4]), ("set up nccl", [4])]
    store.with_stage("ddp", PROBED, profile)
    store.with_stage("nccl", PROBED, profile)
    store.with_stage("compute", PROBED, profile)  # measured already: nothing starts
    store.close()
    assert pool.asked[6:] == [("closed", [])]


def test_the_next_waves_drivers_start_once_every_gpus_memory_test_has_begun(tmp_path, monkeypatch):
    from gpuaccept.stages.stage import Stage
    from gpuaccept.vocabulary.steps import LoadKey

    profile = ProfileCatalog.with_shipped().load("h200-4-nvswitch")
    monkeypatch.setattr(store_module, "starts_ahead", lambda facts: True)
    store = MeasurementStore(tmp_path, live=True)
    store.pool = pool = FakePool()
    seen: list[list] = []  # what the pool had been asked after each event

    def said(kind, what, gpu):
        return {"event": kind, "label": f"{what} on gpu{gpu}", "keys": [str(LoadKey(what, gpu))]}

    def measure(stage, spec, run):
        if stage.name == "compute":
            # the GPUs' loads at once: each GPU's GEMM, then each one's memory test, whose passes
            # measure no time once its memory is allocated; one GPU's late, and said twice
            events = [said("start", "gemm", gpu) for gpu in range(4)] + [said("start", "memtest", gpu) for gpu in range(4)]
            events += [said("untimed", "memtest", gpu) for gpu in (0, 1, 2, 2, 3, 3)]
            for event in events:
                run.on_event(event)
                seen.append(list(pool.asked))
        return Measurements()

    monkeypatch.setattr(Stage, "measure", measure)
    store.expect(["copies", "compute", "ddp", "nccl"], PROBED, profile)
    store.with_stage("copies", PROBED, profile)
    before = len(pool.asked)
    store.with_stage("compute", PROBED, profile)
    drivers = [("drivers ddp", [4, 4]), ("drivers nccl", [4])]
    # nothing while any GPU runs a step that measures a time or a rate (its GEMM) or allocates its
    # memory test's memory, nor while one GPU has not got that far; then the DDP stage's two arms
    # and the NCCL stage's ranks start their drivers, once
    def since(asked):  # what was asked since the copies, but the compute stage's own sets kept as they are
        return [entry for entry in asked[before:] if entry != ("end compute", [1, 1, 1, 1])]

    assert [since(asked) for asked in seen[:12]] == [[]] * 12
    assert [since(asked) for asked in seen[12:]] == [drivers, drivers]
    # once it has measured, the same plans are set up: the pool takes the sets whose drivers started
    assert since(pool.asked) == [*drivers, ("set up ddp", [4, 4]), ("set up nccl", [4])]


def test_a_standard_run_sets_up_as_it_is_configured_and_keeps_that_where_its_tests_ask_the_same(tmp_path, monkeypatch):
    profile, store, pool = store_setting_up_ahead(tmp_path, monkeypatch)
    every = ["copies", "compute", "ddp", "nccl"]
    store.expect(every, PROBED, profile)  # configured: a standard run's tests ask for every stage, in this order
    store.expect(every, PROBED, profile)  # collected: they do
    assert pool.asked == [("set up copies", [1]), ("set up compute", [1, 1, 1, 1])]


def test_what_was_set_up_before_collecting_is_ended_where_the_tests_ask_otherwise(tmp_path, monkeypatch):
    profile, store, pool = store_setting_up_ahead(tmp_path, monkeypatch)
    store.expect(["copies", "compute", "ddp", "nccl"], PROBED, profile)
    store.expect(["nccl"], PROBED, profile)  # -k busbw: the NCCL stage alone
    # the copies' and the loads' sets would hold GPU memory beside the NCCL stage: ended before it measures
    assert pool.asked[2:] == [("end compute", []), ("end copies", []), ("set up nccl", [4])]
    store.with_stage("nccl", PROBED, profile)
    assert pool.asked[5:] == []


@pytest.mark.parametrize(
    "level, waiting, early",
    [("standard", [1, 1], True), ("burn-in", [1, 1], False), ("quick", [], False), ("standard", [], False)],
    ids=["standard", "burn-in", "quick", "no-worker-ahead"],
)
def test_only_a_standard_run_with_workers_ahead_sets_its_stages_up_before_collecting(level, waiting, early):
    # a burn-in's rounds measure before the tests; no worker ahead: recorded facts, pytest-xdist, the CPU
    from types import SimpleNamespace

    from gpuaccept.plugin import hooks

    pool = SimpleNamespace(waiting=waiting)
    assert hooks._sets_up_before_collecting(SimpleNamespace(level=level), pool) is early


def test_a_stage_set_up_ahead_is_ended_only_where_its_own_stage_asks_otherwise(monkeypatch):
    from gpuaccept.measure import launch

    class HeldSet:
        def __init__(self, ranks, env=None, imports=()):
            self.ended = False

        def begin(self, plan):
            self.plan = plan

        def end(self):
            self.ended = True

    monkeypatch.setattr(launch, "Workers", HeldSet)
    pool = launch.WorkerPool()
    plan_a, plan_b, plan_c = (launch.Plan(steps=[], backend="gloo", environment={"WHICH": name}) for name in "abc")
    pool.set_up("ddp", [(plan_a, 4), (plan_b, 4)])
    pool.set_up("nccl", [(plan_c, 4)])
    held = {name: workers for _, given, _, workers in pool._set_up for name in [given.environment["WHICH"]]}
    pool.keep_only("ddp", [(plan_a, 4)])  # the DDP stage runs one arm only: the other arm's set goes, the NCCL stage's holds
    assert [held[name].ended for name in "abc"] == [False, True, False]
    assert pool.take_for(plan_c, 4) is held["c"] and pool.take_for(plan_b, 4) is None


def test_nothing_starts_ahead_for_a_stage_measured_already_or_that_cannot_run(tmp_path, monkeypatch):
    profile, store, pool = store_setting_up_ahead(tmp_path, monkeypatch)
    store.with_stage("copies", PROBED, profile)  # measured before the session said what comes
    one_gpu = PROBED.model_copy(update={"gpus": PROBED.gpus[:1]})
    store.expect(["copies", "nccl"], one_gpu, profile)  # copies done; NCCL needs two GPUs
    assert pool.asked == []


def test_workers_start_ahead_only_beside_gpu_measurements_with_cores_to_spare(monkeypatch):
    cpu_only = PROBED.model_copy(update={"cuda": PROBED.cuda.model_copy(update={"device_count": 0})})
    monkeypatch.setattr(store_module.os, "sched_getaffinity", lambda pid: set(range(64)))
    assert starts_ahead(PROBED) and not starts_ahead(cpu_only)  # on the CPU, the import would slow what is measured
    monkeypatch.setattr(store_module.os, "sched_getaffinity", lambda pid: set(range(9)))
    assert not starts_ahead(PROBED)  # 4 GPUs' ranks and an import beside them want 10 cores


@pytest.mark.parametrize(
    "level, source, xdist, driver, started",
    [
        ("standard", "live", None, True, [[1]]),  # imports torch while the machine is probed
        ("burn-in", "live", None, True, [[1]]),
        ("quick", "live", None, True, []),  # the quick level starts no worker
        ("standard", "facts", None, True, []),  # recorded facts: nothing is measured
        ("standard", "live", 4, True, []),  # pytest-xdist: which process measures first is not known
        ("standard", "live", None, False, []),  # no CUDA driver: the CPU measures, and an import beside it would slow it
    ],
    ids=["standard", "burn-in", "quick", "recorded", "xdist", "cpu"],
)
def test_the_first_worker_starts_before_the_probe_only_where_gpus_are_measured(monkeypatch, level, source, xdist, driver, started):
    from types import SimpleNamespace

    from gpuaccept.facts.run_record import FactsFile, LiveMachine
    from gpuaccept.plugin import head_start

    prepared: list[list[int]] = []
    monkeypatch.setattr(head_start.WorkerPool, "prepare", lambda self, ranks, imports=(): prepared.append(list(ranks)))
    monkeypatch.setattr(head_start, "driver_loads", lambda: driver)
    monkeypatch.setattr(head_start, "gpus_listed", lambda: 0)
    options = SimpleNamespace(level=level, source=LiveMachine() if source == "live" else FactsFile(path="facts.json"))
    head_start.first_wave(options, distributed=xdist is not None, collect_only=False)  # type: ignore[arg-type]
    assert prepared == started


@pytest.mark.parametrize(
    "listed, visible, cores, started",
    [
        (["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0"], None, 64, [[1] * 5]),  # copies, and each GPU's loads
        (["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0"], "0,1", 64, [[1] * 3]),
        (["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0"], None, 8, [[1]]),  # five imports want ten cores
        (None, None, 64, [[1]]),  # the driver lists nothing: the copy stage's alone
    ],
    ids=["every-gpu", "visible", "few-cores", "unlisted"],
)
def test_the_first_wave_starts_a_worker_for_each_gpu_the_driver_lists(monkeypatch, listed, visible, cores, started):
    from types import SimpleNamespace

    from gpuaccept.facts.run_record import LiveMachine
    from gpuaccept.plugin import head_start

    prepared: list[list[int]] = []
    monkeypatch.setattr(head_start.WorkerPool, "prepare", lambda self, ranks, imports=(): prepared.append(list(ranks)))
    monkeypatch.setattr(head_start, "driver_loads", lambda: True)
    real_listdir = head_start.os.listdir

    def listdir(path):
        if path != "/proc/driver/nvidia/gpus":
            return real_listdir(path)
        if listed is None:
            raise FileNotFoundError(path)
        return listed

    monkeypatch.setattr(head_start.os, "listdir", listdir)
    monkeypatch.setattr(head_start.os, "sched_getaffinity", lambda pid: set(range(cores)))
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    head_start.first_wave(SimpleNamespace(level="standard", source=LiveMachine()), distributed=False, collect_only=False)  # type: ignore[arg-type]
    assert prepared == started


@pytest.mark.slow
def test_a_set_started_ahead_serves_any_plan_of_its_size_with_the_plans_own_environment():
    from gpuaccept.measure.launch import WorkerPool, run_plan
    from gpuaccept.measure.plan import CollectiveStep, Plan

    pool = WorkerPool()
    try:
        pool.prepare([2, 2])
        pool.prepare([2])  # two wait already: none more
        assert pool.waiting == [2, 2]
        step = CollectiveStep(collective="all_reduce", size_bytes=64 << 10, dtype="float32", warmup=0, iterations=1)
        plan = Plan(steps=[step], backend="gloo", environment={"NCCL_ALGO": "Ring", "CUDA_VISIBLE_DEVICES": "7,5"})
        outcome = run_plan(plan, 2, pool=pool)
        assert pool.waiting == [2]  # one taken
        assert set(outcome.values) == set(step.keys) and not outcome.failures
        ready = outcome.ready or {}
        # set in the ranks after torch's import, before anything of CUDA or NCCL: as the ranks saw it
        assert ready["environment"]["NCCL_ALGO"] == "Ring" and ready["environment"]["CUDA_VISIBLE_DEVICES"] == "7,5"
        assert pool.take(3) is None  # no set of that size waits: the stage starts its own
    finally:
        pool.close()
    assert pool.waiting == []


# what a quick level or health-check never imports, in any of its processes: torch (the driver
# answers for CUDA), the results store's engine and data frames, the charts (its report draws none:
# nothing was measured or sampled), and the test tools of a development environment (the suites use none)
HEAVY_MODULES = ("torch", "numpy", "pandas", "duckdb", "plotly", "narwhals", "hypothesis", "jsonschema", "lxml")


def quick_level(folder, *, command=("run", "--level", "quick"), no_peer=()):
    """`gpu-accept` at the quick level on the 4xH200 NVML recording, with the fake CUDA driver
    (tests/cuda_driver.py) answering for the same GPUs, and a torch first on the path that leaves a
    mark and refuses to be imported. Each of its processes writes the modules it imported as it
    exits (a sitecustomize first on the path), for `imported_modules`."""
    import os
    import subprocess
    import sys

    from gpuaccept.resources import shipped_dir
    from tests.cuda_driver import driver_environment, fake_cuda_driver
    from tests.helpers import nvml_replay, write
    from tests.telemetry_nvml import telemetry_recording

    replay = nvml_replay("h200x4")
    uuids = [replay.query("uuid", i).removeprefix("GPU-") for i in range(4)]
    mark = folder / "torch-was-imported"
    write(folder / "poisoned" / "torch" / "__init__.py", f"open({str(mark)!r}, 'w').close()\nraise ImportError('no torch here')\n")
    modules = folder / "modules"
    modules.mkdir()
    write(folder / "poisoned" / "sitecustomize.py", (
        "import atexit, os, sys\n"
        f"open(os.path.join({str(modules)!r}, 'started-' + str(os.getpid())), 'w').write(' '.join(sys.orig_argv[1:]))\n"
        f"atexit.register(lambda: open(os.path.join({str(modules)!r}, str(os.getpid())), 'w').write('\\n'.join(sorted(sys.modules))))\n"
    ))
    (folder / "tmp").mkdir()
    env = {
        **os.environ, **driver_environment(uuids, no_peer=no_peer),
        # the recording answers the telemetry's queries too, as a GPU machine does
        "GPUACCEPT_NVML_REPLAY": str(telemetry_recording(folder / "h200x4-telemetry.json")),
        "LD_LIBRARY_PATH": str(fake_cuda_driver(folder / "cuda")),
        "PYTHONPATH": os.pathsep.join([str(folder / "poisoned"), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "TMPDIR": str(folder / "tmp"),  # where a measurement worker would make its folder
    }
    env.pop("CUDA_VISIBLE_DEVICES", None)
    done = subprocess.run(
        [sys.executable, "-m", "gpuaccept", *command, "--profile", "h200-4-nvswitch", "--profile-dir", str(shipped_dir("profiles")),
         "--reports", str(folder / "reports")],
        capture_output=True, text=True, env=env, timeout=300,
    )
    return done, mark


def imported_modules(folder) -> list[set[str]]:
    """The modules each process of a `quick_level` run had imported when it exited."""
    return [set(path.read_text().splitlines()) for path in sorted((folder / "modules").glob("[0-9]*"))]


def assert_imports_nothing_heavy(folder) -> None:
    """One probe started (the one the command started as it began, for the quick level); the
    command's own process ran pytest and wrote report.html with Jinja2; the probe's child imported
    neither, and ended on its own once read (its modules written as it exited); no process imported
    a heavy module (HEAVY_MODULES)."""
    started = [path.read_text() for path in (folder / "modules").glob("started-*")]
    assert [argv for argv in started if "gpuaccept.probe" in argv] == ["-m gpuaccept.probe --quick"], started
    processes = imported_modules(folder)
    command = [modules for modules in processes if "gpuaccept.cli" in modules]
    probe = [modules for modules in processes if "gpuaccept.probe.collect" in modules and "gpuaccept.cli" not in modules]
    assert len(command) == 1 and len(probe) == 1, f"{len(processes)} processes: {len(command)} command, {len(probe)} probe"
    assert {"pytest", "jinja2"} <= command[0] and not {"pytest", "jinja2"} & probe[0]
    for modules in processes:
        heavy = sorted(name for name in modules if name.split(".")[0] in HEAVY_MODULES)
        assert heavy == [], f"imported {heavy[:5]}"


def outcomes_of(folder) -> dict[str, str]:
    from gpuaccept.facts.run_record import load_results

    return {test.id: test.outcome for test in load_results(folder / "reports" / "results.json").tests}


@pytest.mark.slow
def test_the_quick_level_asks_cuda_through_the_driver_and_never_imports_torch_or_starts_a_worker(tmp_path):
    done, mark = quick_level(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    found = outcomes_of(tmp_path)
    agrees = {test: outcome for test, outcome in found.items() if test.startswith("test_p2p_cuda_agrees[")}
    assert len(agrees) == 12 and set(agrees.values()) == {"passed"}  # every ordered pair, from the driver's answer
    assert not mark.exists(), "torch was imported"
    assert list((tmp_path / "tmp").glob("gpuaccept-measure-*")) == []  # no measurement worker started
    assert_imports_nothing_heavy(tmp_path)


@pytest.mark.slow
def test_the_health_check_fails_a_pair_the_driver_says_has_no_peer_access(tmp_path):
    done, mark = quick_level(tmp_path, command=("health-check",), no_peer=[(0, 3)])
    assert done.returncode == 1, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("gpu-accept health-check: FAIL: ") and "test_p2p_cuda_agrees[gpu0-gpu3]" in last
    failed = {test for test, outcome in outcomes_of(tmp_path).items() if outcome == "failed"}
    assert failed == {"test_p2p_cuda_agrees[gpu0-gpu3]"} and not mark.exists()
    assert_imports_nothing_heavy(tmp_path)


@pytest.mark.slow
def test_the_probe_reads_cuda_beside_nvml_and_says_where_its_time_went(tmp_path):
    import json
    import os
    import subprocess
    import sys

    from gpuaccept.facts import parse_facts
    from tests.cuda_driver import driver_environment, fake_cuda_driver
    from tests.helpers import DATA, nvml_replay

    replay = nvml_replay("h200x4")
    uuids = [replay.query("uuid", i).removeprefix("GPU-") for i in range(4)]
    env = {**os.environ, **driver_environment(uuids, no_peer=[(1, 2)]), "GPUACCEPT_NVML_REPLAY": str(DATA / "nvml" / "h200x4.json"),
           "LD_LIBRARY_PATH": str(fake_cuda_driver(tmp_path / "cuda"))}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    done = subprocess.run([sys.executable, "-m", "gpuaccept.probe", "--phases"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    facts = parse_facts(done.stdout, "probe output")
    assert facts.cuda.device_count == 4 and facts.cuda.peer_access[1][2] is False and facts.cuda.peer_access[0][3] is True
    phases = json.loads(done.stderr.strip().splitlines()[-1])["probe_phases_s"]
    assert {"imports", "CUDA", "NVML start", "NVML facts", "health reading", "whole, after Python's start"} == set(phases)
    assert all(seconds >= 0 for seconds in phases.values())


@pytest.mark.parametrize(
    "argv, probes",
    [
        (["run"], True),
        (["run", "--level", "quick", "--profile", "h200-4-nvswitch"], True),
        (["health-check", "--reports", "r"], True),
        (["burn-in", "--duration", "30m"], True),
        (["run", "--facts", "facts.json"], False),  # recorded facts: nothing of this machine is read
        (["run", "--facts=facts.json"], False),
        (["run", "--import", "topo.txt"], False),
        (["run", "--help"], False),
        (["record", "-o", "facts.json"], False),  # its probe keeps its own options (--nvml-log)
        (["profile", "list"], False),
        (["run", "--", "--facts"], True),  # after "--", pytest's arguments
        ([], False),
    ],
)
def test_the_command_starts_its_probe_as_it_begins_only_where_it_reads_this_machine(argv, probes):
    from gpuaccept.entry import _probes

    assert _probes(argv) is probes


@pytest.mark.parametrize(
    "argv, quick",
    [
        (["health-check"], True),
        (["health-check", "--profile", "h200-4-nvswitch"], True),
        (["run", "--level", "quick"], True),
        (["run", "--level=quick", "-q"], True),
        (["run"], False),
        (["run", "--level", "standard"], False),
        (["run", "--level", "quick", "--level", "standard"], False),  # two levels: the probe reads all, the run checks
        (["run", "--", "--level", "quick"], False),  # after "--": pytest's arguments, not gpu-accept's
        (["burn-in", "--duration", "30m"], False),
    ],
)
def test_the_probe_is_started_for_the_quick_level_only_where_the_arguments_say_so(argv, quick):
    from gpuaccept.entry import _quick

    assert _quick(argv) is quick


def test_a_probe_started_for_another_level_is_ended_and_one_for_the_runs_level_read(tmp_path, monkeypatch):
    import sys

    from gpuaccept.facts.health import LINK_COUNTERS_NOT_AT_QUICK
    from gpuaccept.probe import probe_machine
    from gpuaccept.process import Bounded
    from tests.cuda_driver import driver_environment, fake_cuda_driver
    from tests.helpers import DATA, nvml_replay

    replay = nvml_replay("h200x4")
    uuids = [replay.query("uuid", i).removeprefix("GPU-") for i in range(4)]
    for key, value in {**driver_environment(uuids), "GPUACCEPT_NVML_REPLAY": str(DATA / "nvml" / "h200x4.json"),
                       "LD_LIBRARY_PATH": str(fake_cuda_driver(tmp_path / "cuda"))}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for guessed, level_quick in ((["--quick"], False), ([], True)):
        wrong = Bounded([sys.executable, "-m", "gpuaccept.probe", *guessed], timeout_s=120)
        facts = probe_machine(started=wrong, quick=level_quick)
        assert wrong.process.poll() is not None  # ended, unread
        counters = [c for snapshot in facts.health.snapshots for c in snapshot.nvlink_errors]
        assert len(counters) == 72
        assert all((c.replay == LINK_COUNTERS_NOT_AT_QUICK) is level_quick for c in counters)


def test_a_burn_in_sets_nothing_up_ahead_of_its_rounds(tmp_path, monkeypatch):
    profile, store, pool = store_setting_up_ahead(tmp_path, monkeypatch)
    store.expect(["copies", "nccl"], PROBED, profile, set_up_now=False)
    assert pool.asked == [("import", [1], ())]  # torch imported for the first stage; no GPU touched beside the rounds
    store.with_stage("copies", PROBED, profile)  # after the rounds, the stages set up ahead as in a standard run
    assert pool.asked[1:] == [("import", [4], ()), ("set up nccl", [4])]


def test_the_reports_imports_and_templates_can_be_readied_ahead_of_its_drawing():
    # a standard run readies them in a thread while its stages measure: the drawing at its end then pays none of it
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from gpuaccept.report import charts\n"
        "charts.ready_to_draw('report.html.j2')\n"
        "modules = ('plotly.graph_objs._figure', 'plotly.graph_objs._scatter', 'plotly.graph_objs._bar', 'jinja2')\n"
        "print([name for name in modules if name not in sys.modules])\n"
        "print(charts._plotly_js.cache_info().currsize, sorted(key[1] for key in charts.page_templates().cache))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "1 ['page.html.j2', 'report.html.j2']"], done.stdout


@pytest.mark.parametrize(
    "pytest_args, distributed, collect_only",
    [
        ([], False, False),
        (["-k", "busbw"], False, False),
        (["-n", "4"], True, False),
        (["-n4"], True, False),
        (["-nauto"], True, False),
        (["--numprocesses=2"], True, False),
        (["--co"], False, True),
        (["--collect-only", "-n", "2"], True, True),
    ],
)
def test_the_command_guesses_from_pytest_arguments_what_its_first_workers_are_for(monkeypatch, pytest_args, distributed, collect_only):
    from types import SimpleNamespace

    from gpuaccept.facts.run_record import LiveMachine
    from gpuaccept.plugin import head_start

    waves: list[tuple[bool, bool]] = []
    monkeypatch.setattr(head_start.TorchCheck, "of_run", classmethod(lambda cls, options: None))
    monkeypatch.setattr(head_start, "first_wave", lambda options, xdist, collect: waves.append((xdist, collect)) or head_start.WorkerPool())
    started = head_start.HeadStart.of_command(SimpleNamespace(level="standard", source=LiveMachine()), pytest_args)  # type: ignore[arg-type]
    assert waves == [(distributed, collect_only)]
    # the plugin takes the workers only where pytest, once it parsed its arguments, runs what was guessed
    assert started.fits(distributed, collect_only) and not started.fits(not distributed, collect_only)


class RecordedHeadStart:
    """A head start that records that it was started and ended, with no check and no worker."""

    started: ClassVar[list[list[str]]] = []
    stopped = 0

    def __init__(self, pytest_args):
        from gpuaccept.measure.launch import WorkerPool

        self.torch_check = None
        self.pool = WorkerPool()
        RecordedHeadStart.started.append(pytest_args)

    @classmethod
    def of_command(cls, options, pytest_args):
        return cls(pytest_args)

    def fits(self, distributed, collect_only):
        return True

    def stop(self):
        RecordedHeadStart.stopped += 1


@pytest.mark.parametrize(
    "argv, started, code",
    [
        (["run"], 1, 2),  # started before pytest; on this machine no driver: could not judge, and ended
        (["run", "--", "--no-such-pytest-option"], 1, 2),  # refused by pytest's own parser: ended unused
        (["run", "--level", "quick"], 0, 2),  # the quick level starts neither
        (["run", "--facts", "FACTS"], 0, 0),  # recorded facts: nothing of this machine
    ],
    ids=["live", "refused", "quick", "recorded"],
)
def test_a_measuring_run_starts_torch_check_and_first_workers_before_pytest_and_ends_them(tmp_path, monkeypatch, argv, started, code):
    from gpuaccept import cli
    from gpuaccept.plugin import head_start
    from tests.helpers import EXAMPLES

    RecordedHeadStart.started, RecordedHeadStart.stopped = [], 0
    monkeypatch.setattr(head_start, "HeadStart", RecordedHeadStart)
    monkeypatch.setenv("GPUACCEPT_NVML_REPLAY", str(tmp_path / "no-such-recording.json"))  # no GPU here, whatever this machine has
    argv = [str(EXAMPLES / "h200x4-measured.json") if word == "FACTS" else word for word in argv]
    argv[1:1] = ["--profile", "h200-4-nvswitch", "--reports", str(tmp_path / "reports")]
    assert cli.main(argv) == code
    assert len(RecordedHeadStart.started) == started
    assert RecordedHeadStart.stopped == started  # ended by the command, whatever happened
