"""What a Slurm node's drain reason says about a run: the tests that did not pass, by id.

Slurm shows the reason in `sinfo -R` and `scontrol show node`; an operator reads it to know what to
look at, so it names the failing tests first, root causes first (`test_no_other_compute_process[gpu1]` before
the collectives it slowed; `test_gpu_model[gpu3]`)
and is cut to a length that stays one line in those listings. A node drained because values could
not be established (exit 2, outcomes.py) says so: `gpu-accept: could not judge: test_xid_during_run[gpu0] (...)`.
"""

from __future__ import annotations

from gpuaccept.facts.coverage import causes_first
from gpuaccept.facts.run_record import RunRecord
from gpuaccept.outcomes import EXIT_NOT_JUDGED

REASON_MAX = 200  # characters: long enough for a handful of test ids, one line in `sinfo -R`


def drain_reason(record: RunRecord | None, exit_code: int, limit: int = REASON_MAX) -> str:
    """`gpu-accept: test_gpu_model[gpu3] test_pcie_width[gpu3,gpu5] (+4 more; exit 1, profile h100-8-nvswitch)`:
    the tests that did not pass, those of one test function together, as many as fit."""
    if record is None:
        return _cut(f"gpu-accept: could not judge the node (exit {exit_code}; no results were written)", limit)
    tail = f"exit {exit_code}, profile {record.run.profile.name}"
    # could not judge: the values not established, which is why the node is not proven good
    not_judged = exit_code == EXIT_NOT_JUDGED
    grouped: dict[str, list[str]] = {}
    for test in causes_first(record.tests):  # a root cause (a GPU missing, someone else's load) first
        if test.outcome == "error" if not_judged else test.did_not_pass:
            name, _, parameter = test.id.partition("[")
            grouped.setdefault(name, []).append(parameter.removesuffix("]"))
    total = sum(len(parameters) for parameters in grouped.values())
    if not total:
        why = "could not judge the node" if exit_code != 1 else "a check failed"
        return _cut(f"gpu-accept: {why} ({tail})", limit)
    shown = 0
    text = "gpu-accept: could not judge:" if not_judged else "gpu-accept:"
    for name, parameters in grouped.items():
        taken: list[str] = []
        for parameter in parameters:
            candidate = _group(name, [*taken, parameter])
            more = total - shown - len(taken) - 1
            ending = f" (+{more} more; {tail})" if more else f" ({tail})"
            if len(f"{text} {candidate}{ending}") > limit and (shown or taken):
                break
            taken.append(parameter)
        if not taken:
            break
        text += f" {_group(name, taken)}"
        shown += len(taken)
        if len(taken) < len(parameters):
            break
    left = total - shown
    return _cut(text + (f" (+{left} more; {tail})" if left else f" ({tail})"), limit)


def _group(name: str, parameters: list[str]) -> str:
    return f"{name}[{','.join(parameters)}]" if any(parameters) else name


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
