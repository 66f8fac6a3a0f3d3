"""The verdict of a run as every integration reads it: `verdict.json` in the reports folder, and the
same record as `verdict` in results.json.

The Slurm drain, the NHC module, node-problem-detector's status, the Prometheus metrics and any
script of a site read this record, never the summary a person reads on the terminal. It says the exit
code (0 passed, 1 a check failed, 2 could not judge: outcomes.py), the result in words, the cause in
one line (a run that could not judge always says why: `no NVIDIA driver found: ...`), the tests that
failed and those that could not be judged, each with its reason.

`gpu-accept run`, `burn-in` and `health-check` write verdict.json at the end of every run, also one
that ended before any test (no driver, no torch, a profile that does not load at run time), and
before they start one that says the run is in progress: a run killed before its end leaves "could
not judge", never the previous run's pass. Later fields (which areas were not checked) are added
with defaults, as results.json's are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from gpuaccept.errors import InputFileError, Problem, shown
from gpuaccept.facts.io import validation_problems
from gpuaccept.facts.record import Record
from gpuaccept.files import read_input_text
from gpuaccept.outcomes import EXIT_FAILED, EXIT_NOT_JUDGED, EXIT_PASSED

VERDICT_FORMAT: Literal["gpu-accept-verdict"] = "gpu-accept-verdict"
VERDICT_VERSION: Literal[1] = 1
VERDICT_FILE = "verdict.json"
CAUSE_MAX = 400  # characters: one line a log, a drain reason or a node condition can carry

Result = Literal["passed", "failed", "not_judged"]
RESULT_OF_EXIT: dict[int, Result] = {EXIT_PASSED: "passed", EXIT_FAILED: "failed", EXIT_NOT_JUDGED: "not_judged"}


class NotJudged(Record):
    """A test whose value could not be established, and why (its verdict's message)."""

    id: str
    reason: str


class RunVerdict(Record):
    """One run's verdict (verdict.json)."""

    format: Literal["gpu-accept-verdict"] = VERDICT_FORMAT
    version: Literal[1] = VERDICT_VERSION
    exit_code: int  # 0 passed, 1 a check failed, 2 could not judge
    result: Result
    cause: str  # one line, the most telling words first; empty where the run passed
    failed: list[str] = Field(default_factory=list)  # test ids
    not_judged: list[NotJudged] = Field(default_factory=list)
    host: str = ""
    profile: str = ""  # empty where no profile was loaded
    started_at: str | None = None  # ISO 8601, UTC
    finished_at: str | None = None  # None while the run is in progress (or where it was killed)
    # a line per area of the machine the run did not wholly check (facts/coverage.py): `not checked:
    # compute — the facts hold no per-GPU loads (24 test(s) not judged)`; none in older files
    not_checked: list[str] = Field(default_factory=list)
    # what, beside its tests, kept the run from judging all it set out to, each in one line: a signal,
    # a burn-in cut short, a collection error, nothing judged, a report not written; none in older files
    stopped: list[str] = Field(default_factory=list)

    @property
    def in_progress(self) -> bool:
        return self.finished_at is None

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=1) + "\n"


def one_line(text: str, limit: int = CAUSE_MAX) -> str:
    """`text` as one line of at most `limit` characters: control characters shown escaped (a file
    name or a device's answer may hold any), cut on a character boundary with '...'."""
    line = shown(" ".join(text.split("\n")), limit=10 * limit)
    return line if len(line) <= limit else line[: limit - 3] + "..."


def passed(host: str, profile: str, started_at: str | None, finished_at: str | None) -> RunVerdict:
    return RunVerdict(exit_code=EXIT_PASSED, result="passed", cause="", host=host, profile=profile, started_at=started_at,
                      finished_at=finished_at)


def could_not_judge(cause: str, *, host: str, profile: str = "", started_at: str | None = None,
                    finished_at: str | None = None) -> RunVerdict:
    """The verdict of a run that judged nothing: `cause` says why (no driver, no torch, killed)."""
    return RunVerdict(exit_code=EXIT_NOT_JUDGED, result="not_judged", cause=one_line(f"could not judge: {cause}"), host=host,
                      profile=profile, started_at=started_at, finished_at=finished_at)


def in_progress(*, host: str, profile: str, started_at: str) -> RunVerdict:
    """What verdict.json says while a run goes on: a kill leaves it, never the previous run's pass."""
    return could_not_judge(f"the run that began at {started_at} has not finished (in progress, or killed)", host=host,
                           profile=profile, started_at=started_at)


def load_verdict(path: Path | str) -> RunVerdict:
    """verdict.json as its record; one line per problem otherwise, naming the file and the key."""
    name = str(path)
    try:
        text = read_input_text(path)
    except OSError as exc:
        raise InputFileError([Problem(name, None, "", f"cannot read the verdict: {exc.strerror or exc}")]) from None
    except UnicodeDecodeError as exc:
        raise InputFileError([Problem(name, None, "", f"not a verdict file: not UTF-8 text ({exc.reason})")]) from None
    try:
        return RunVerdict.model_validate_json(text)
    except ValidationError as exc:
        try:
            raw = json.loads(text)
        except (ValueError, RecursionError):
            return _refused(name, "not a gpu-accept verdict file: not JSON")
        if not isinstance(raw, dict) or raw.get("format") != VERDICT_FORMAT:
            return _refused(name, f"not a gpu-accept verdict file (format {VERDICT_FORMAT!r} expected)")
        raise InputFileError(validation_problems(exc, raw, name)[:5]) from None


def _refused(name: str, message: str) -> RunVerdict:
    raise InputFileError([Problem(name, None, "", message)])
