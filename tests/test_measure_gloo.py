"""The real measurement path (workers, launcher, watchdog) on CPU with gloo, 2 and 4 processes."""

import os
import signal
import subprocess
import sys
import time

import pytest

from gpuaccept.checks.verdict import Outcome
from gpuaccept.measure.drills import Drills
from gpuaccept.measure.launch import MACHINE, WorkerPool, Workers, run_plan, settle
from gpuaccept.measure.pairwise_step import round_robin, schedule
from gpuaccept.measure.plan import CollectiveStep, MemtestStep, PairwiseStep, Plan
from gpuaccept.measure.worker import GO_FILE, PREPARE_FILE, PREPARE_MARK, WAITING_MARK, driver_started_file
from gpuaccept.profile.spec import ProfileSpec
from gpuaccept.stages.fabric import nccl_plan, run_nccl_stage
from gpuaccept.vocabulary.collectives import COLLECTIVES
from gpuaccept.vocabulary.steps import CollectiveKey, LoadKey, PairKey
from tests.helpers import needs_torch

pytestmark = needs_torch


def small_spec(ranks: int, **extra) -> ProfileSpec:
    return ProfileSpec.model_validate(
        {
            "schema": 1,
            "gpus": {"count": ranks, "model": "cpu"},
            "nccl": {"dtype": "float32", "warmup": 1, "iterations": 3, "timeout_s": 30,
                     "busbw": {c: {"64KiB": 0.001, "1MiB": 0.001} for c in COLLECTIVES}},
            "pairwise": {"size": "256KiB", "dtype": "float32", "warmup": 1, "iterations": 2, "concurrent": True, "min_busbw": 0.001},
            **extra,
        }
    )


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [2, 4])
def test_every_collective_and_pair_is_measured_and_correct(ranks):
    collectives, pairs = run_nccl_stage(small_spec(ranks), ranks, backend="gloo")
    assert collectives.failures == [] and pairs.failures == []
    assert collectives.backend == "gloo" and collectives.ranks == ranks and collectives.nccl_version is None
    assert sorted((r.collective, r.nominal_size) for r in collectives.results) == sorted(
        (c, s) for c in COLLECTIVES for s in ("64KiB", "1MiB")
    )
    for result in collectives.results:
        assert result.wrong == 0, result
        assert result.busbw_GBps > 0 and result.time_us > 0 and result.iterations == 3
    assert sorted(tuple(r.gpus) for r in pairs.results) == [(a, b) for a in range(ranks) for b in range(a + 1, ranks)]
    assert all(r.wrong == 0 and r.busbw_GBps > 0 for r in pairs.results)
    assert len({r.round for r in pairs.results}) == ranks - 1  # concurrent: N-1 rounds
    # each collective's connections made while the set set up, not by its first timed step (the
    # phase is there once they were made: its seconds may round to 0 on a fast loopback)
    assert "start-up: prepare: connections" in collectives.phases


@pytest.mark.slow
def test_the_pairs_alone_have_their_connections_made_while_the_set_sets_up():
    step = PairwiseStep(size_bytes=64 << 10, dtype="float32", warmup=1, iterations=2, pairs=[PairKey(0, 1)])
    outcome = run_plan(Plan(steps=[step], backend="gloo"), 2)
    assert list(outcome.values) == [PairKey(0, 1)] and outcome.failures == []
    assert "start-up: prepare: connections" in outcome.phases


@pytest.mark.slow
def test_a_hung_collective_is_killed_named_and_the_rest_still_measured():
    drills = Drills.from_environment({"GPUACCEPT_INJECT_HANG": "all_gather 64 KiB"})
    # only the step that hangs has a short limit: the others must finish, on however loaded a machine
    steps = [
        CollectiveStep(collective=c, size_bytes=64 << 10, dtype="float32", warmup=1, iterations=2,
                       timeout_s=4 if c == "all_gather" else 120)
        for c in ("all_reduce", "all_gather", "broadcast")
    ]
    outcome = run_plan(Plan(steps=steps, backend="gloo", drills=drills), 2)
    assert list(outcome.values) == [CollectiveKey("all_reduce", 64 << 10), CollectiveKey("broadcast", 64 << 10)]
    (failure,) = outcome.failures
    assert failure.reason == "timeout" and failure.message == "all_gather 64 KiB did not finish within 4 s"
    assert failure.keys == [CollectiveKey("all_gather", 64 << 10)] and failure.step == "all_gather 64 KiB"


@pytest.mark.slow
def test_a_wrong_result_is_counted():
    drills = Drills.from_environment({"GPUACCEPT_INJECT_WRONG": "all_reduce 64 KiB"})
    step = CollectiveStep(collective="all_reduce", size_bytes=64 << 10, dtype="float32", warmup=0, iterations=1)
    outcome = run_plan(Plan(steps=[step], backend="gloo", drills=drills), 2)
    assert outcome.values[CollectiveKey("all_reduce", 64 << 10)]["wrong"] == 1


@pytest.mark.slow
def test_a_crashing_worker_is_reported_with_its_error_not_waited_for():
    step = CollectiveStep(collective="all_reduce", size_bytes=64 << 10, dtype="float64", warmup=0, iterations=1)
    broken = Plan(steps=[step], backend="gloo").model_copy(update={"steps": [step.model_copy(update={"dtype": "complex7"})]})
    outcome = run_plan(broken, 2, max_restarts=0)
    (failure,) = outcome.failures
    assert failure.reason == "crashed" and "AttributeError" in failure.message and "complex7" in failure.message
    assert failure.keys == [CollectiveKey("all_reduce", 64 << 10)] and outcome.values == {}



def with_torch_that_imports(tmp_path, source: str, stalled_s: float = 20.0):
    """run_plan of one collective on 2 ranks, with a torch package of `source` found first on the path."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(source)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    step = CollectiveStep(collective="all_reduce", size_bytes=64 << 10, dtype="float32", warmup=0, iterations=1)
    return run_plan(Plan(steps=[step], backend="gloo", stalled_s=stalled_s), 2, env=env, max_restarts=0)


@pytest.mark.slow
def test_a_torch_that_cannot_be_imported_is_one_line_and_no_rank_starts(tmp_path):
    # a torch that breaks as it is imported: the process that would fork the ranks fails before
    # any rank exists, and says so as rank 0
    outcome = with_torch_that_imports(tmp_path, 'raise ImportError("this torch is broken")\n')
    (failure,) = outcome.failures
    assert failure.reason == "crashed"
    assert failure.message == "start-up: rank 0: ImportError: this torch is broken"
    assert outcome.values == {} and outcome.ready is None


@pytest.mark.slow
def test_a_slow_import_of_torch_is_no_stalled_rank(tmp_path):
    # torch taking 8 s to import (a cold network filesystem takes longer) against a stall limit of
    # 5 s: the ranks' heartbeats go on while it is imported for them, so what ends the start-up is
    # what the import said, not a rank taken for stopped
    source = 'import time\ntime.sleep(8)\nraise ImportError("this torch is slow, then broken")\n'
    (failure,) = with_torch_that_imports(tmp_path, source, stalled_s=5).failures
    assert failure.message == "start-up: rank 0: ImportError: this torch is slow, then broken", failure.message

def wait_until_waiting(workers: Workers) -> None:
    """Until every rank is forked and waits for its plan: its log says so, and the process that forked
    it has written its pid (a rank forked on a loaded machine can print before its parent writes it:
    until then a rank's pid is its forker's)."""
    deadline = time.monotonic() + 120

    def waiting(rank: int) -> bool:
        log = workers.workdir / f"rank{rank}.log"
        return (workers.workdir / f"rank{rank}.pid").exists() and log.exists() and WAITING_MARK in log.read_text()

    while not all(waiting(rank) for rank in range(workers.ranks)):
        assert time.monotonic() < deadline, "workers never got to waiting"
        time.sleep(0.05)


@pytest.mark.slow
def test_workers_started_ahead_run_a_plan_given_later():
    step = CollectiveStep(collective="all_reduce", size_bytes=64 << 10, dtype="float32", warmup=0, iterations=1)
    workers = Workers(2)
    wait_until_waiting(workers)  # the plan comes while they wait
    events: list[dict] = []
    outcome = run_plan(Plan(steps=[step], backend="gloo"), 2, workers=workers, on_event=events.append)
    assert outcome.failures == [] and outcome.values[CollectiveKey("all_reduce", 64 << 10)]["wrong"] == 0
    (ready,) = [event for event in events if event["event"] == "ready"]
    assert ready["startup_s"]["waited"] > 0 and ready["startup_s"]["import"] > 0
    # where the time went, as the stage's facts keep it: rank 0's start-up, the hold, the step
    assert {"start-up: import", "start-up: device", "start-up: group", "start-up", "held", "waited for the machine",
            "step: all_reduce 64 KiB"} <= set(outcome.phases)
    assert all(seconds >= 0 for seconds in outcome.phases.values())
    settle()  # the set ends after its plan: its ranks are reaped meanwhile
    assert workers.processes == [] and not workers.workdir.exists()


@pytest.mark.slow
def test_a_set_kept_after_its_plan_holds_idle_until_it_is_ended_and_a_failed_one_ends_at_once():
    step = CollectiveStep(collective="all_reduce", size_bytes=64 << 10, dtype="float32", warmup=0, iterations=1)
    kept = Workers(2)
    try:
        outcome = run_plan(Plan(steps=[step], backend="gloo"), 2, workers=kept, keep=True)
        assert outcome.failures == [] and outcome.values[CollectiveKey("all_reduce", 64 << 10)]["wrong"] == 0
        time.sleep(1.0)  # a rank that tore itself down after its plan would have exited by now
        assert [rank.poll() for rank in kept.processes] == [None, None] and kept.state == "held"
        assert all(_alive(rank.pid) for rank in kept.processes)
        pids = [rank.pid for rank in kept.processes]
        kept.end()
        settle()
        assert not any(_alive(pid) for pid in pids) and kept.state == "gone"
    finally:
        kept.close()
    # a set whose plan failed is ended whatever the caller asked: its ranks may be hung or gone
    broken = CollectiveStep(collective="all_reduce", size_bytes=64 << 10, dtype="float64", warmup=0, iterations=1)
    broken = broken.model_copy(update={"dtype": "complex7"})
    failing = Workers(2)
    outcome = run_plan(Plan(steps=[step], backend="gloo").model_copy(update={"steps": [broken]}), 2, workers=failing, keep=True,
                       max_restarts=0)
    assert [failure.reason for failure in outcome.failures] == ["crashed"]
    assert failing.state in ("ending", "gone")
    settle()
    assert failing.processes == []


@pytest.mark.slow
def test_a_set_asked_to_start_its_driver_ahead_counts_as_starting_until_every_rank_has_then_runs_that_plan_only():
    step = CollectiveStep(collective="all_reduce", size_bytes=64 << 10, dtype="float32", warmup=0, iterations=1)
    plan = Plan(steps=[step], backend="gloo", environment={"NCCL_TEST_MARK": "driven"})
    pool = WorkerPool()
    try:
        pool.prepare([2])
        (workers,) = pool._ready[(2, ())]
        wait_until_waiting(workers)
        ranks = [rank.pid for rank in workers.processes]
        for pid in ranks:  # held still, so that their start cannot be over before it is looked at
            os.kill(pid, signal.SIGSTOP)
        pool.start_drivers("nccl", [(plan, 2)])
        time.sleep(0.3)
        assert workers.state == "starting"  # no set may begin to measure beside it
        for pid in ranks:
            os.kill(pid, signal.SIGCONT)
        deadline = time.monotonic() + 60
        while not all(driver_started_file(workers.workdir, rank).exists() for rank in range(2)):
            assert time.monotonic() < deadline, "the ranks never said their driver was started"
            time.sleep(0.05)
        assert workers.state == "idle" and workers.plan is None  # no context, no plan yet: it holds nothing
        other = plan.model_copy(update={"environment": {"NCCL_TEST_MARK": "other"}})
        assert not workers.serves(other) and workers.serves(plan)
        assert pool.take_for(other, 2) is None and pool.take(2) is None  # kept for its own plan
        pool.set_up("nccl", [(plan, 2)])  # its stage's wave sets up: this set, given that plan
        assert workers.plan == plan
        events: list[dict] = []
        outcome = run_plan(plan, 2, pool=pool, on_event=events.append)
        assert outcome.failures == [] and outcome.values[CollectiveKey("all_reduce", 64 << 10)]["wrong"] == 0
        (ready,) = [event for event in events if event["event"] == "ready"]
        assert "driver before the go" in ready["startup_s"] and ready["environment"]["NCCL_TEST_MARK"] == "driven"
        settle()
        assert workers.state == "gone"  # the set that ran the plan was the one that started its driver
    finally:
        pool.close()


@pytest.mark.slow
def test_a_memory_test_says_when_its_untimed_passes_begin_once_its_memory_is_allocated():
    step = MemtestStep(gpu=0, fraction=0.5, max_bytes=8 << 20, chunk_bytes=1 << 20)
    events: list[dict] = []
    outcome = run_plan(Plan(steps=[step], backend="gloo"), 1, on_event=events.append)
    assert outcome.failures == [] and outcome.values[LoadKey("memtest", 0)]["mismatches"] == 0
    said = [(event["event"], event.get("keys")) for event in events if event["event"] in ("start", "untimed", "result")]
    assert said == [("start", ["load/memtest/gpu0"]), ("untimed", ["load/memtest/gpu0"]), ("result", None)]


@pytest.mark.slow
def test_a_set_whose_rank_died_before_starting_its_driver_keeps_nothing_waiting():
    plan = Plan(steps=[CollectiveStep(collective="all_reduce", size_bytes=64 << 10, dtype="float32")], backend="gloo")
    workers = Workers(2)
    try:
        wait_until_waiting(workers)
        ranks = [rank.pid for rank in workers.processes]
        os.kill(ranks[0], signal.SIGSTOP)  # the other rank could not start its driver before it is looked at
        os.kill(ranks[1], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while workers.processes[1].poll() is None:
            assert time.monotonic() < deadline, "the dead rank's exit was never written"
            time.sleep(0.05)
        workers.start_driver(plan)
        # not "starting" until its start-up limit: no other set's measurement waits on a dead rank
        assert workers.state == "idle"
        os.kill(ranks[0], signal.SIGCONT)
    finally:
        workers.close()


def test_the_driver_starts_with_the_plans_environment_set_first(monkeypatch):
    import ctypes

    from gpuaccept.measure import worker

    calls: list[tuple[str, str | None]] = []

    class Library:
        def __init__(self, name):
            if name == "libnvidia-ml.so.1":
                raise OSError(f"{name}: cannot open shared object file")  # no NVML here: nothing is said
            self.name = name

        def __getattr__(self, function):
            def call(*arguments):
                # the ordinal asked for a handle; the handle a context is asked for
                asked = {"cuDeviceGet": lambda: arguments[1], "cuDevicePrimaryCtxRetain": lambda: arguments[1].value}
                calls.append((function, os.environ.get("CUDA_VISIBLE_DEVICES"), *([asked[function]()] if function in asked else [])))
                if function == "cuDeviceGet":  # the driver writes the handle of the ordinal asked for
                    ctypes.cast(arguments[0], ctypes.POINTER(ctypes.c_int)).contents.value = 100 + arguments[1]
                return 0  # CUDA_SUCCESS

            return call

    monkeypatch.setattr(ctypes, "CDLL", Library)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # restored after the test, whatever the start set
    seconds = worker.start_driver({"CUDA_VISIBLE_DEVICES": "2,3"}, device=1)
    # CUDA reads which GPUs it sees as its driver starts: the plan's choice is in place before; the
    # context made is the primary one (torch's) of this rank's GPU as the process sees it
    assert [call[:2] for call in calls] == [("cuInit", "2,3"), ("cuDeviceGet", "2,3"), ("cuDevicePrimaryCtxRetain", "2,3")]
    assert calls[1][2:] == (1,) and calls[2][2:] == (101,) and seconds >= 0


@pytest.mark.slow
def test_a_set_started_for_a_stage_imports_what_its_steps_import_while_it_waits(tmp_path):
    # a module that leaves a mark as it is imported, and one that cannot be imported: the first is
    # imported before the set is given a plan; the second is left to a step that would need it,
    # and the set still serves
    (tmp_path / "marks_its_import.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    step = CollectiveStep(collective="all_reduce", size_bytes=64 << 10, dtype="float32", warmup=0, iterations=1)
    workers = Workers(2, env, imports=("marks_its_import", "no_such_module_here"))
    try:
        wait_until_waiting(workers)
        assert (tmp_path / "imported").exists(), "not imported before the go"
        outcome = run_plan(Plan(steps=[step], backend="gloo"), 2, env=env, workers=workers)
        assert outcome.failures == [] and outcome.values[CollectiveKey("all_reduce", 64 << 10)]["wrong"] == 0
    finally:
        workers.close()


@pytest.mark.slow
def test_a_set_makes_its_device_and_group_beside_a_set_that_ends_and_prepares_its_steps_once_it_is_gone():
    # another set of the machine ending (a load's processes, holding most of each GPU's memory, torn
    # down): this one is given its go and makes its device and process group meanwhile, but waits
    # to prepare what its steps take memory for until the other is gone
    class EndingSet:
        state = "ending"

    other = EndingSet()
    MACHINE.add(other)  # type: ignore[arg-type]
    step = CollectiveStep(collective="all_reduce", size_bytes=64 << 10, dtype="float32", warmup=0, iterations=1)
    plan = Plan(steps=[step], backend="gloo")
    workers = Workers(2)
    try:
        workers.begin(plan)
        deadline = time.monotonic() + 120
        logs = [workers.workdir / f"rank{rank}.log" for rank in range(2)]
        while not all(log.exists() and PREPARE_MARK in log.read_text() for log in logs):
            assert time.monotonic() < deadline, "the ranks never made their device and process group"
            time.sleep(0.05)
        assert (workers.workdir / GO_FILE).exists() and not (workers.workdir / PREPARE_FILE).exists()
        assert workers.state == "starting"  # no other set may measure meanwhile
        other.state = "gone"
        events: list[dict] = []
        outcome = run_plan(plan, 2, workers=workers, on_event=events.append)
        assert outcome.failures == [] and outcome.values[CollectiveKey("all_reduce", 64 << 10)]["wrong"] == 0
        (ready,) = [event for event in events if event["event"] == "ready"]
        assert ready["startup_s"]["waited to prepare"] > 0
    finally:
        MACHINE.remove(other)  # type: ignore[arg-type]
        workers.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited


@pytest.mark.slow
def test_waiting_workers_exit_when_their_launcher_dies():
    launcher = (
        "import os, time; from gpuaccept.measure.launch import Workers\n"
        "workers = Workers(2)\n"
        "print(*[p.pid for p in workers.processes], flush=True)\n"
        "time.sleep(0.5); os._exit(9)  # gone without closing them\n"
    )
    done = subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True, timeout=60)
    pids = [int(pid) for pid in done.stdout.split()]
    assert done.returncode == 9 and len(pids) == 2
    deadline = time.monotonic() + 60
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids), "workers outlived their launcher"


@pytest.mark.slow
def test_workers_closed_without_a_plan_leave_nothing_behind():
    workers = Workers(2)
    pids = [process.pid for process in workers.processes]
    workers.close()
    assert not any(_alive(pid) for pid in pids) and not workers.workdir.exists()


def test_plans_follow_the_profile():
    plan = nccl_plan(small_spec(4), 4)
    labels = [step.label for step in plan.steps]
    assert labels[:2] == ["all_reduce 64 KiB", "all_reduce 1 MiB"] and labels[-1] == "pairwise send/receive 256 KiB"
    # each step its own limit: as the profile sets it, or derived where it does not: 50 x 3 rounds of
    # 4 exchanges of 256 KiB at the floor's 0.001 GB/s
    assert [step.timeout_s for step in plan.steps] == [30] * 10 + [pytest.approx(50 * 3 * 4 * 2**18 / 1e6)]
    assert plan.startup_timeout_s == 60 and plan.stalled_s == 20


def test_step_limits_not_set_in_the_profile_follow_size_and_floor():
    from gpuaccept.profile import ProfileCatalog

    spec = ProfileCatalog.with_shipped().load("h200-4-nvswitch").spec
    limits = {step.label: step.timeout_s for step in nccl_plan(spec, 4).steps}
    # 50 x what 5 + 20 + 2 operations of 4 GiB take at the floor's pace (2 bytes on the wire per byte)
    assert limits["all_reduce 4 GiB"] == pytest.approx(50 * 27 * 2 * 4 * 2**30 / 336.2e9)
    assert limits["all_reduce 256 MiB"] == 20 and limits["pairwise send/receive 256 MiB"] == 20


def test_a_plan_for_values_measured_again_holds_only_their_steps():
    spec = small_spec(4)
    plan = nccl_plan(spec, 4, only={CollectiveKey("alltoall", 1 << 20), PairKey(1, 3), PairKey(0, 2)})
    assert [step.label for step in plan.steps] == ["alltoall 1 MiB", "pairwise send/receive 256 KiB"]
    assert plan.steps[1].pairs == [PairKey(0, 2), PairKey(1, 3)]
    assert schedule(4, True, [(0, 2), (1, 3), (2, 3)]) == [[(0, 2), (1, 3)], [(2, 3)]]


def test_a_plan_names_the_keys_of_its_values_and_reads_back_as_written():
    from gpuaccept.profile import ProfileCatalog
    from gpuaccept.stages.fabric import copy_plan, ddp_plan

    spec = ProfileCatalog.with_shipped().load("h200-4-nvswitch").spec
    plans = [nccl_plan(spec, 4), copy_plan(spec, 4), ddp_plan(spec, 4), ddp_plan(spec, 4, without_p2p=True)]
    for plan in plans:
        again = Plan.model_validate_json(plan.model_dump_json())
        assert again == plan and [step.keys for step in again.steps] == [step.keys for step in plan.steps]
    nccl, copies, ddp, without = plans
    assert [str(key) for key in nccl.steps[0].keys] == ["collective/all_reduce/256MiB"]
    assert [str(key) for key in nccl.steps[-1].keys] == [f"pair/gpu{a}-gpu{b}" for a in range(4) for b in range(a + 1, 4)]
    assert len(copies.steps[0].keys) == 12 + 6 + 4 + 4 + 4 and "copy/p2p/gpu3-gpu0" in {str(key) for key in copies.steps[0].keys}
    assert [str(key) for step in ddp.steps for key in step.keys] == ["ddp/1gpu-bs8", "ddp/4gpu-bs8"]  # one GPU and all four
    assert [str(key) for step in without.steps for key in step.keys] == ["ddp_without_p2p/4gpu-bs8"]


def test_host_copies_take_the_profiles_host_size_and_their_time_limit_counts_it():
    from gpuaccept.profile import ProfileCatalog
    from gpuaccept.stages.fabric import copy_plan

    spec = ProfileCatalog.with_shipped().load("h200-4-nvswitch").spec
    step = copy_plan(spec, 4).steps[0]
    assert (step.size_bytes, step.host_size_bytes, step.host_bytes) == (2**30, 2**28, 2**28)
    whole = spec.model_copy(update={"copies": spec.copies.model_copy(update={"host_size": None})})
    same_size = copy_plan(whole, 4).steps[0]
    assert same_size.host_size_bytes is None and same_size.host_bytes == 2**30
    # a slow floor makes the limit the copies' own time at it: a quarter of the bytes, a quarter of the time
    slow = {"host_to_device_min": 15.0, "device_to_host_min": 15.0}
    limits = [
        copy_plan(spec.model_copy(update={"copies": copies.model_copy(update=slow)}), 4).steps[0].timeout_s
        for copies in (spec.copies, whole.copies)
    ]
    assert 60 < limits[0] < limits[1] * 0.4 and limits[1] < 600


@pytest.mark.parametrize("step", [
    {"kind": "pairwise", "size_bytes": 1024, "pairs": [[0, 1]]},
    {"kind": "pairwise", "size_bytes": 1024},
    {"kind": "pairwise", "size_bytes": 1024, "pairs": ["pair/gpu0-gpu1", "pair/gpu0-gpu1"]},
    {"kind": "copies", "size_bytes": 1024, "what": ["p2p"]},
    {"kind": "copies", "size_bytes": 1024, "copies": ["pair/gpu0-gpu1"]},
])
def test_a_plan_whose_steps_do_not_name_their_values_is_refused(step):
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        Plan.model_validate({"steps": [step]})


@pytest.mark.parametrize("ranks", [2, 3, 4, 5, 8])
def test_round_robin_covers_every_pair_once_in_disjoint_rounds(ranks):
    rounds = round_robin(ranks)
    pairs = [pair for r in rounds for pair in r]
    assert sorted(pairs) == [(a, b) for a in range(ranks) for b in range(a + 1, ranks)]
    for r in rounds:
        members = [g for pair in r for g in pair]
        assert len(members) == len(set(members))
    assert len(rounds) == (ranks - 1 if ranks % 2 == 0 else ranks)
    assert schedule(ranks, concurrent=False) == [[pair] for pair in sorted(pairs)]
    assert schedule(ranks, True, sorted(pairs, reverse=True)) == rounds  # every pair listed: the full schedule


@pytest.mark.slow
def test_measuring_again_runs_only_the_steps_asked_for():
    collectives, pairs = run_nccl_stage(small_spec(4), 4, backend="gloo", only={CollectiveKey("alltoall", 1 << 20), PairKey(1, 3)})
    assert [str(r.key) for r in collectives.results] == ["collective/alltoall/1MiB"] and collectives.failures == []
    assert [tuple(r.gpus) for r in pairs.results] == [(1, 3)] and pairs.results[0].wrong == 0


@pytest.mark.slow
def test_a_stopped_worker_is_named_by_its_heartbeat_not_waited_for():
    import signal

    step = CollectiveStep(collective="all_reduce", size_bytes=64 << 10, dtype="float32", warmup=0, iterations=1)
    pairwise = PairwiseStep(size_bytes=64 << 10, dtype="float32", warmup=0, iterations=1, pairs=[PairKey(0, 1)])
    # the rank left running beats every second: 10 s without a beat spares it a loaded machine's pauses
    plan = Plan(steps=[step, pairwise], backend="gloo", stalled_s=10)
    workers = Workers(2)
    wait_until_waiting(workers)
    os.kill(workers.processes[1].pid, signal.SIGSTOP)  # as a user's drill does: the rank is frozen
    outcome = run_plan(plan, 2, workers=workers, max_restarts=0)
    # a start-up failure: every step fails with it, each covering its own values
    assert [(f.step, f.keys) for f in outcome.failures] == [
        ("all_reduce 64 KiB", [CollectiveKey("all_reduce", 64 << 10)]), ("pairwise send/receive 64 KiB", [PairKey(0, 1)])
    ]
    for failure in outcome.failures:
        assert failure.reason == "timeout" and failure.message.startswith("start-up: rank 1 stopped responding: no sign of life for")
        assert failure.message.endswith("(process stopped by a signal)")
    settle()
    assert workers.processes == [] and not workers.workdir.exists()


RENAMED_PROFILE = """
    schema: 1
    gpus: {count: 2, model: cpu}
    nccl:
      dtype: float32
      warmup: 1
      iterations: 2
      timeout_s: 10
      busbw: {all_reduce: {64KiB: 0.0001}, all_gather: {64KiB: 0.0001}}
    pairwise: {size: 64KiB, dtype: float32, iterations: 2, concurrent: true, min_busbw: 0.0001}
"""


@pytest.mark.slow
def test_a_reworded_step_label_changes_the_messages_never_which_tests_a_hang_fails(tmp_path, monkeypatch):
    from gpuaccept.checks import fabric
    from gpuaccept.measure import plan as plan_module
    from gpuaccept.profile import load_profile
    from gpuaccept.stages.store import MeasurementStore
    from tests.helpers import example_facts, write

    # the launcher and the checks read the reworded label; the workers, other processes, the old one
    for module in (plan_module, fabric):
        monkeypatch.setattr(module, "collective_label", lambda collective, size: f"{collective} of {size} bytes")
    drills = Drills.from_environment({"GPUACCEPT_INJECT_HANG": "collective/all_gather/64KiB"})
    profile = load_profile(write(tmp_path / "renamed.yaml", RENAMED_PROFILE), [])
    facts = MeasurementStore(tmp_path, live=True, drills=drills).with_stage("nccl", example_facts("h200x2"), profile)
    (failure,) = facts.measurements.collectives.failures
    assert failure.keys == [CollectiveKey("all_gather", 64 << 10)] and failure.step == "all_gather of 65536 bytes"
    verdicts = {(check.__name__, case): check(profile, facts, case)
                for check in (fabric.busbw, fabric.collective_correct) for case in fabric.busbw_cases(profile)}
    verdicts.update({("pair_busbw", pair): fabric.pair_busbw(profile, facts, pair) for pair in profile.gpu_pairs()})
    failed = {name: verdict.message for name, verdict in verdicts.items() if verdict.outcome is not Outcome.PASSED}
    message = "all_gather of 65536 bytes: all_gather of 65536 bytes did not finish within 10 s (profile renamed)"
    assert failed == {("busbw", ("all_gather", "64KiB")): message, ("collective_correct", ("all_gather", "64KiB")): message}


@pytest.mark.slow
@pytest.mark.parametrize("attempt, dipped", [(0, True), (1, False)])
def test_the_dip_drill_slows_a_first_measurement_only_as_its_plan_says(tmp_path, monkeypatch, attempt, dipped):
    import torch
    import torch.distributed as dist

    from gpuaccept.measure import collective_step
    from gpuaccept.measure.worker import Rank

    step = CollectiveStep(collective="all_reduce", size_bytes=64 * 1024, dtype="float32", warmup=1, iterations=2, timeout_s=30)
    drills = Drills(dip=step.label).for_attempt(attempt)
    plan = Plan.model_validate_json(Plan(steps=[step], drills=drills).model_dump_json())  # as a worker reads it
    wrapped = []
    monkeypatch.setattr(collective_step, "_with_dip", lambda operation: wrapped.append(step.label) or operation)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        (record,) = collective_step.measure_collective(step, Rank(0, 1, 0, torch.device("cpu"), "gloo"), plan.drills)
    finally:
        dist.destroy_process_group()
    assert record["wrong"] == 0 and wrapped == ([step.label] if dipped else [])
