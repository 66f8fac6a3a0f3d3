"""bench/ranks_at_once.py starts the processes of the set-up benches together and gives them one
go: none starts its timed part before every one is ready, each gets its own arguments and
environment, and the answers come back in the order the processes were given."""

from __future__ import annotations

import os

import pytest

from bench import context_creation, context_visibility, driver_start
from bench.ranks_at_once import WAIT_FOR_GO, run_at_one_go

ANSWER = "import os\n" + WAIT_FOR_GO + r'''
json.dump({"argument": sys.argv[3], "setting": os.environ["SETTING"], "went": went, "began": time.time(),
           "ready_files": sorted(name for name in os.listdir(os.path.dirname(out)) if name.endswith(".ready"))}, open(out, "w"))
'''


@pytest.mark.slow  # starts processes, as the benches do
def test_every_process_begins_after_one_go_given_once_all_are_ready(tmp_path):
    processes = [(ANSWER, [f"rank {rank}"], {**os.environ, "SETTING": f"set {rank % 2}"}) for rank in range(3)]
    answers = run_at_one_go(processes, tmp_path)
    assert [answer["argument"] for answer in answers] == ["rank 0", "rank 1", "rank 2"]
    assert [answer["setting"] for answer in answers] == ["set 0", "set 1", "set 0"]
    assert len({answer["went"] for answer in answers}) == 1  # one go, read whole by each
    assert all(answer["began"] >= answer["went"] for answer in answers)
    # each began once all three had said they were ready
    assert all(answer["ready_files"] == [f"process{n}.json.ready" for n in range(3)] for answer in answers)
    assert not list(tmp_path.glob("*.ready"))  # cleared for the next run


@pytest.mark.slow
def test_a_process_that_fails_is_said(tmp_path):
    failing = ("import sys\n" + WAIT_FOR_GO + "sys.exit(3)\n", [], dict(os.environ))
    with pytest.raises(RuntimeError, match="exited with 3"):
        run_at_one_go([failing], tmp_path)


@pytest.mark.parametrize(
    "code",
    [context_creation.RANK_CODE, context_visibility.RANK_CODE, *(driver_start.rank_code(before) for before in driver_start.WAYS.values())],
    ids=["creation", "visibility", "driver at the go", "driver before the go"],
)
def test_each_bench_s_rank_code_compiles(code):
    compile(code, "<rank>", "exec")


@pytest.mark.slow
def test_a_process_that_ends_before_it_is_ready_is_said_and_the_others_are_not_left_waiting(tmp_path):
    broken = ("import no_such_module\n" + WAIT_FOR_GO, [], dict(os.environ))
    waiting = ("import os\n" + WAIT_FOR_GO + "json.dump({}, open(out, 'w'))\n", [], dict(os.environ))
    with pytest.raises(RuntimeError, match="exited with 1 before it was ready"):
        run_at_one_go([waiting, broken], tmp_path)
