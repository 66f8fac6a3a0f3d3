"""Where a run's verdict meets Slurm: the node name a drain may name, the drain reason, which runs
drain (the health check's --on-fail and --on-error), and the drain.

The reason is what `sinfo -R` and `scontrol show node` show; an operator reads it to know what to
look at. `sinfo -R` shows its first 20 characters by default, so the most telling words come first:
the failing tests, root causes first (`test_no_other_compute_process[gpu1]` before the collectives it
slowed; `test_gpu_model[gpu3] test_pcie_width[gpu3,gpu5] (+4 more; gpu-accept exit 1, ...)`)
or `could not judge: ` and why (`could not judge: no NVIDIA driver found: ...`). Its first word is
never `NHC:`, the note by which NHC's node-mark-online knows a drain as its own to resume
(docs/slurm.md): gpu-accept's drains stay until an operator resumes the node.

A node name reaches `scontrol update nodename=...`, which reads it as a hostlist expression: `gpu[1-64]`
or `a,b` would drain every node it expands to. Only one plain node name is accepted, before
anything runs. Nothing here ever resumes a node.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable

from gpuaccept.errors import OptionError, shown
from gpuaccept.facts.run_verdict import RunVerdict, one_line
from gpuaccept.outcomes import EXIT_FAILED

REASON_MAX = 200  # characters: long enough for a handful of test ids, one line in `sinfo -R`
NODE_NAME_MAX = 64
# one plain node name: what Slurm's hostlist reads as itself. Brackets are ranges, commas and spaces
# separate names, and a leading '-' would read as an option elsewhere.
PLAIN_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
SCONTROL_TIMEOUT_S = 30


def check_node_name(name: str, where: str) -> str:
    """`name` where it is one plain Slurm node name; else an OptionError of one line naming `where`
    (--node, SLURMD_NODENAME) and what is wrong."""
    if not name.strip():
        raise OptionError(f"{where}: the node's name is empty")
    if len(name) > NODE_NAME_MAX or not PLAIN_NODE_NAME.fullmatch(name):
        raise OptionError(
            f"{where} {one_line(repr(name), 80)}: not one plain Slurm node name (letters, digits, '.', '_' and '-', at most "
            f"{NODE_NAME_MAX} characters): Slurm would read brackets, commas or spaces as a list of nodes to drain"
        )
    return name


def node_to_drain(named: str | None, host: str) -> str:
    """The node a drain names, checked before anything runs: the one `named` (--node), else the one
    slurmd names its programs' node by ($SLURMD_NODENAME), else this host's short name."""
    if named is not None:
        return check_node_name(named, "--node")
    slurmd = os.environ.get("SLURMD_NODENAME")
    if slurmd is not None:
        return check_node_name(slurmd, "SLURMD_NODENAME")
    return check_node_name(host.split(".")[0], "this host's short name (give --node)")


def drain_asked(verdict: RunVerdict, on_fail: str, on_error: str) -> bool:
    """Whether a run that did not pass drains its node, by the health check's --on-fail and --on-error
    ("none" or "drain"). A node whose checks ran and could not establish a value is not proven good:
    --on-fail drains it as it drains a failed one; --on-error adds the runs that judged nothing (no
    driver, a probe that hung)."""
    judged_something = verdict.result == "failed" or bool(verdict.not_judged)
    return (on_fail if judged_something else on_error) == "drain"


def drain_reason(verdict: RunVerdict, limit: int = REASON_MAX) -> str:
    """The drain reason of a run that did not pass: the failing tests, those of one test function
    together, as many as fit (`test_pcie_width[gpu3,gpu5] (+4 more; gpu-accept exit 1, profile X)`);
    `could not judge: ` and the tests not judged; or, where no test was judged, the cause."""
    tail = f"gpu-accept exit {verdict.exit_code}" + (f", profile {verdict.profile}" if verdict.profile else "")
    if verdict.exit_code == EXIT_FAILED:
        ids, head = verdict.failed, ""
    else:
        ids, head = [test.id for test in verdict.not_judged], "could not judge:"
    if not ids:
        cause = verdict.cause or "could not judge: no cause recorded"
        return _cut(one_line(f"{cause} ({tail})", 10 * limit), limit)
    grouped: dict[str, list[str]] = {}
    for test_id in ids:
        name, _, parameter = test_id.partition("[")
        grouped.setdefault(name, []).append(parameter.removesuffix("]"))
    total, shown_count, text = len(ids), 0, head
    for name, parameters in grouped.items():
        taken: list[str] = []
        for parameter in parameters:
            candidate = _group(name, [*taken, parameter])
            more = total - shown_count - len(taken) - 1
            ending = f" (+{more} more; {tail})" if more else f" ({tail})"
            if len(one_line(f"{text} {candidate}{ending}".strip(), 10 * limit)) > limit and (shown_count or taken):
                break
            taken.append(parameter)
        if not taken:
            break
        text = f"{text} {_group(name, taken)}".strip()
        shown_count += len(taken)
        if len(taken) < len(parameters):
            break
    left = total - shown_count
    return _cut(one_line(text + (f" (+{left} more; {tail})" if left else f" ({tail})"), 10 * limit), limit)


def _group(name: str, parameters: list[str]) -> str:
    return f"{name}[{','.join(parameters)}]" if any(parameters) else name


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def drain(node: str, reason: str, say: Callable[[str], None]) -> bool:
    """`scontrol update nodename=NODE state=drain reason=...`: the node finishes its jobs and takes no
    new ones; an operator resumes it (`scontrol update nodename=NODE state=resume`), never this tool.
    Says what happened, one line; True where Slurm took the drain."""
    check_node_name(node, "the node name")  # every drain, whoever named the node
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        say(f"could not drain {node}: scontrol is not on PATH")
        return False
    command = [scontrol, "update", f"nodename={node}", "state=drain", f"reason={reason}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        say(f"could not drain {node}: scontrol did not answer within {SCONTROL_TIMEOUT_S} s")
        return False
    except OSError as error:
        say(f"could not drain {node}: scontrol could not start: {error.strerror or error}")
        return False
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        say(f"could not drain {node}: scontrol exited {done.returncode}: {shown(said[-1]) if said else 'no output'}")
        return False
    say(f"drained {node} in Slurm")
    return True
