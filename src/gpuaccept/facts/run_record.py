"""results.json as a typed record: one run's facts, every test with its verdict, the environment, the
timings; and its one reader, `load_results`.

Every reader of a run (the HTML report, fleet JUnit, baselines, profile init, the command line)
works from a `RunRecord`, never from the JSON by key. The record sits beside the facts it holds,
below the profiles (profile init reads runs) and the report writers (which write runs).

Files written before a key existed still read: each later key has the default that says "not
recorded" (a verdict without `criterion` has `NoCriterion`, without `better` has `better=None`,
without `attempts` none; a criterion without a marginal line has none). `summary` is derived from `tests` and recomputed when read,
and so are `coverage` (what was checked, by area) and `causes` (the tests that did not pass, root
causes first): facts/coverage.py.

A run being written keeps a journal beside results.json (report/results.py says why): test records
appended one JSON line at a time since results.json was last rewritten whole. `load_results` merges
the journal a killed run left, so a reader sees every test that finished. The JSON Schema of the
format is `schemas/results.schema.json` (`gpu-accept report schema` writes it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, PlainSerializer, TypeAdapter, ValidationError, WithJsonSchema

from gpuaccept.errors import InputFileError, Problem
from gpuaccept.facts.cluster import ClusterFacts
from gpuaccept.facts.cluster_record import CLUSTER_KIND, ClusterRecord
from gpuaccept.facts.coverage import AreaCoverage, CauseGroup, causes_first, coverage, root_causes, unchecked_lines
from gpuaccept.facts.io import validation_problems
from gpuaccept.facts.machine import SystemFacts
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Record, Unavailable, not_probed
from gpuaccept.facts.run_verdict import RESULT_OF_EXIT, NotJudged, RunVerdict, one_line
from gpuaccept.facts.verdict import Verdict
from gpuaccept.files import read_input_text
from gpuaccept.outcomes import TestOutcome, run_exit_code, stopped_by_pytest, test_outcome

RESULTS_FORMAT: Literal["gpu-accept-results"] = "gpu-accept-results"
RESULTS_VERSION: Literal[1] = 1
JOURNAL_SUFFIX = ".journal"  # results.json.journal: what finished since results.json was last written whole


# -- where the facts came from -----------------------------------------------------------------------

LIVE = "live"  # how results.json spells a live run (older files and this one); any other text is a file


class LiveMachine(Record):
    """The machine the run ran on: probed, and measured where the profile asks."""

    def __str__(self) -> str:
        return LIVE


class FactsFile(Record):
    """Facts recorded earlier (gpu-accept record, or read from command outputs) and judged here."""

    path: str

    def __str__(self) -> str:
        # a facts file named `live` is written so that it does not read as a live run
        return f"./{self.path}" if self.path == LIVE else self.path


def _source_from_text(value: object) -> object:
    if isinstance(value, str):
        return LiveMachine() if value == LIVE else FactsFile(path=value)
    return value


FactsSource = Annotated[
    LiveMachine | FactsFile,
    BeforeValidator(_source_from_text),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string", "description": "'live' where the machine was probed, else the facts file judged"}),
]
FACTS_SOURCE: TypeAdapter[LiveMachine | FactsFile] = TypeAdapter(FactsSource)


# -- verdicts: one record, facts/verdict.py's ------------------------------------------------------

class TestRecord(Record):
    """One test of the run: its outcome, and the verdict that decided it (None where the test
    ended without one: skipped by the profile, or an exception in the suite or a fixture)."""

    __test__: ClassVar[bool] = False  # not a test class, wherever pytest meets it

    id: str  # test_busbw[all_reduce-1GiB]
    nodeid: str  # test_nccl.py::test_busbw[all_reduce-1GiB]
    outcome: TestOutcome
    duration_s: float = 0.0
    message: str = ""
    verdict: Verdict | None = None

    @property
    def module(self) -> str:
        """The suite module the test is in, without `.py`: `test_nccl` (JUnit's classname)."""
        return self.nodeid.split("::")[0].replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".py")

    @property
    def did_not_pass(self) -> bool:
        return self.outcome in ("failed", "error")


class Summary(Record):
    """How many tests ended how: derived from the tests, recomputed whenever a record is read."""

    passed: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0
    total: int = 0


def summarize(tests: list[TestRecord]) -> Summary:
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    for test in tests:
        counts[test.outcome] += 1
    return Summary(**counts, total=len(tests))


# -- the run and its machine ------------------------------------------------------------------------


class RunProfile(Record):
    name: str
    path: str
    sha256: str
    chosen_because: str = ""  # why --profile auto chose it; empty where it was named


class RunInfo(Record):
    started_at: str  # ISO 8601, UTC, to the microsecond (whole seconds in files written before)
    finished_at: str | None = None  # None until the run ends
    # the run's own id, given when it starts (a random UUID): two runs of one host started in the same
    # microsecond are still two runs, and every copy of a run's file names it; None in older files
    id: str | None = None
    tool_version: str
    command: list[str]
    facts_source: FactsSource
    profile: RunProfile
    # pytest's (an error counts as a failure there; for a cluster run, what pytest would give its tests), None
    # until the run ends; a run that the plugin's
    # record says was stopped (a signal, a burn-in cut short, nothing judged, a report not written)
    # where pytest would say 0 or 1 is 2 here, as pytest counts an interrupted run: a reader of this
    # key alone never takes it for a pass. The run's exit code is its verdict's (`verdict`).
    exit_status: int | None = None

    @property
    def live(self) -> bool:
        return isinstance(self.facts_source, LiveMachine)


class GpuIdentity(Record):
    index: int
    name: str | None
    uuid: str
    serial: str | None
    pci_bus_id: str


class Environment(Record):
    """The machine and software of a run, as reports and baselines name them; None where the facts
    could not tell."""

    host: str
    driver: str | None
    cuda_driver: str
    nccl: str | None
    torch: str | None
    gpu_model: str | None
    gpu_count: int
    gpus: list[GpuIdentity]

    @classmethod
    def of_cluster(cls, name: str, cluster: ClusterFacts) -> Environment:
        """A cluster run's: named as its user named the cluster (or by its nodes), its software as
        the job measured with it; no GPU is probed by `gpu-accept cluster` (each node's own run is)."""
        return cls(host=name, driver=None, cuda_driver=NOT_PROBED_BY_CLUSTER, nccl=cluster.nccl_version,
                   torch=cluster.torch_version or None, gpu_model=None, gpu_count=cluster.world, gpus=[])

    @classmethod
    def of(cls, facts: Facts) -> Environment:
        sweeps = [s for s in (facts.measurements.collectives, facts.measurements.ddp) if s is not None]
        nccl = next((s.nccl_version for s in sweeps if s.nccl_version), None)
        torch = next((s.torch_version for s in sweeps if s.torch_version), None)
        if torch is None and not isinstance(facts.cuda, Unavailable):
            torch = facts.cuda.torch_version or None  # "": the probe found no torch installed
        return cls(
            host=facts.system.hostname,
            driver=_text(facts.system.driver_version),
            cuda_driver=str(facts.system.cuda_driver_version),
            nccl=nccl,
            torch=torch,
            gpu_model=_text(facts.gpus[0].name) if facts.gpus else None,
            gpu_count=facts.gpu_count,
            gpus=[
                GpuIdentity(index=g.index, name=_text(g.name), uuid=g.uuid, serial=_text(g.serial), pci_bus_id=g.pci_bus_id)
                for g in facts.gpus
            ],
        )


NOT_PROBED_BY_CLUSTER = "not probed: gpu-accept cluster measures the job and reads each node's network, not its GPUs"


def _text(reading: object) -> str | None:
    """A reading as results.json holds it: the text, or None where the facts could not tell."""
    return reading if isinstance(reading, str) else None


class RunRecord(Record):
    """results.json."""

    format: Literal["gpu-accept-results"]
    version: Literal[1]
    complete: bool  # whether the run reached its end (a killed run's file says false)
    # a run of `gpu-accept cluster`: the job's facts, its nodes each with what it read of itself; None
    # for a run of one host. Written before the rest, so that a reader knows a cluster's file from
    # its first lines (report/fleet.py)
    cluster: ClusterFacts | None = None
    run: RunInfo
    environment: Environment
    facts: Facts  # as far as they were known: probed, and whatever the stages had measured
    tests: list[TestRecord]
    summary: Summary = Field(default_factory=Summary)
    verdict: RunVerdict | None = None  # the run's verdict (run_verdict.py), written at its end; None in older files
    # what the run left out by -k, -m or test ids: area -> tests; coverage counts them as not checked
    not_selected: dict[str, int] = Field(default_factory=dict)
    coverage: list[AreaCoverage] = Field(default_factory=list)  # derived from the tests and not_selected
    causes: list[CauseGroup] = Field(default_factory=list)  # derived from the tests

    @classmethod
    def started(cls, run: RunInfo, facts: Facts) -> RunRecord:
        """The record of a run that has begun and holds no test yet."""
        return cls(
            format=RESULTS_FORMAT, version=RESULTS_VERSION, complete=False, run=run, environment=Environment.of(facts),
            facts=facts, tests=[],
        )

    def with_tests(self, tests: list[TestRecord]) -> RunRecord:
        """The record with these tests, and what is derived from them."""
        return self.model_copy(update={
            "tests": list(tests), "summary": summarize(tests), "coverage": coverage(tests, self.not_selected),
            "causes": root_causes(tests),
        })

    def with_not_selected(self, not_selected: dict[str, int]) -> RunRecord:
        return self.model_copy(update={"not_selected": dict(not_selected)}).with_tests(self.tests)

    def unchecked(self) -> list[str]:
        """One line per area not wholly checked (`not checked: compute — the facts hold no per-GPU loads ...`)."""
        return unchecked_lines(self.coverage)

    def with_facts(self, facts: Facts) -> RunRecord:
        return self.model_copy(update={"facts": facts, "environment": Environment.of(facts)})

    def verdicts(self) -> list[Verdict]:
        return [test.verdict for test in self.tests if test.verdict is not None]

    def exit_code(self) -> int:
        """gpu-accept's exit code for this run: 0 passed, 1 a check failed, 2 could not judge (its
        recorded verdict's: `recorded_verdict`)."""
        return self.recorded_verdict().exit_code

    def recorded_verdict(self) -> RunVerdict:
        """The verdict the run recorded at its end, decided once there; for a run that recorded none
        (killed before its end, or written before runs recorded their verdict), the one its record gives."""
        return self.verdict if self.verdict is not None else self.judged()

    def not_a_pass(self, ordered: Callable[[list[TestRecord]], list[TestRecord]] = list) -> str:
        """Why this run is no picture of a healthy machine, '' where it is one: it did not finish, a
        test did not pass (named in the order `ordered` gives), or it ended with another exit status
        than a pass (interrupted, nothing judged). A baseline and a golden profile are made of such runs only."""
        if not self.complete:
            return "the run did not finish (complete: false)"
        bad = [test.id for test in ordered([test for test in self.tests if test.did_not_pass])]
        if bad:
            return f"{len(bad)} test(s) did not pass ({', '.join(bad[:3])}{f' and {len(bad) - 3} more' if len(bad) > 3 else ''})"
        if self.verdict is not None and self.verdict.exit_code != 0:
            return f"the run did not pass: {self.verdict.cause}"
        if self.run.exit_status not in (None, 0):
            return f"the run ended with exit status {self.run.exit_status}, not a pass"
        return ""

    def judged(self, stopped: Sequence[str] = ()) -> RunVerdict:
        """The run's verdict, decided from what it recorded: its tests, whether it reached its end,
        pytest's exit status, and `stopped`, what else kept it from judging all it set out to (a
        signal, a burn-in cut short, a collection error, nothing judged, a report not written). Its
        exit code by the outcome policy (outcomes.py), the tests that failed, those that could not be
        judged with their reasons, and the cause in one line. The plugin decides it once, at the
        end of the session, and records it (`verdict`); every consumer reads that."""
        status = self.run.exit_status
        reasons = list(stopped) or stopped_by_pytest(status)
        code = run_exit_code(status, self.complete, (test.outcome for test in self.tests), stopped=bool(reasons))
        ordered = causes_first(self.tests)  # a root cause (a GPU missing, someone else's load) first
        failed = [test for test in ordered if test.outcome == "failed"]
        errors = [test for test in ordered if test.outcome == "error"]
        if code == 0:
            cause = ""
        elif failed:
            first = failed[0]
            more = f" (+{len(failed) - 1} more failed)" if len(failed) > 1 else ""
            cause = f"{first.id}: {_reason(first)}{more}"
        elif reasons:
            cause = f"could not judge: {'; '.join(reasons)}"
        elif errors:
            first = errors[0]
            more = f" (+{len(errors) - 1} more not judged)" if len(errors) > 1 else ""
            cause = f"could not judge: {first.id}: {_reason(first)}{more}"
        elif not self.complete:
            cause = "could not judge: the run did not finish (killed or interrupted before its end)"
        elif status == 1:
            cause = "a test failed outside its verdict (pytest's exit status 1: an error in a fixture's teardown)"
        else:
            cause = "could not judge: the run recorded no exit status"
        return RunVerdict(
            exit_code=code, result=RESULT_OF_EXIT[code], cause=one_line(cause), failed=[test.id for test in failed],
            not_judged=[NotJudged(id=test.id, reason=one_line(_reason(test))) for test in errors],
            host=self.environment.host, profile=self.run.profile.name, started_at=self.run.started_at,
            finished_at=self.run.finished_at, not_checked=self.unchecked(), stopped=[one_line(line) for line in reasons],
        )

    def to_json(self) -> str:
        # json.dumps, not pydantic's own writer: it keeps a float that is not finite as NaN, not null
        return json.dumps(self.model_dump(mode="json"), indent=1) + "\n"


def _reason(test: TestRecord) -> str:
    """Why a test did not pass, in its verdict's words (or the exception that ended it)."""
    message = test.verdict.message if test.verdict is not None and test.verdict.message else test.message
    return message.strip().splitlines()[0] if message.strip() else "no message"


class JournalEntry(Record):
    """One line of the journal: the run it belongs to (its first line), a test that finished, or the
    facts as they grew (a stage measured)."""

    run: RunInfo | None = None
    test: TestRecord | None = None
    facts: Facts | None = None

    def to_line(self) -> str:
        # the entry's parts that it has; within them, a None is a value (a verdict that measured nothing)
        parts = (("run", self.run), ("test", self.test), ("facts", self.facts))
        return json.dumps({name: part.model_dump(mode="json") for name, part in parts if part is not None}) + "\n"


def journal_of(results: Path) -> Path:
    return results.with_name(results.name + JOURNAL_SUFFIX)


def results_json_schema() -> dict[str, Any]:
    schema = RunRecord.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "gpu-accept results"
    return schema


# -- reading ---------------------------------------------------------------------------------------------


def load_results(path: Path | str) -> RunRecord:
    """A results file as its typed record, with the journal a killed run left merged in; one line per
    problem otherwise, naming the file and the key."""
    path = Path(path)
    if path.is_dir():
        inside = path / "results.json"
        hint = f": pass {inside}" if inside.is_file() else ": pass the results.json gpu-accept run wrote"
        raise _problem(path, "a folder, not a results file" + hint)
    record = _read_results(path)
    if record.complete:
        return record  # a run that reached its end wrote every test into the file: its journal is not read
    # the journal before the file again: a run rewrites the file, then empties the journal, so a
    # reader of a run in progress gets a file at least as new as the journal it read
    journal = journal_of(path)
    try:
        journal_text = read_input_text(journal) if journal.is_file() else ""
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise _problem(journal, f"cannot read the journal of a run that did not finish: {why}") from None
    record = _read_results(path)
    if not record.complete and journal_text:
        record = merge_journal(record, journal, journal_text)
    return record


def _read_results(path: Path) -> RunRecord:
    try:
        text = read_input_text(path)
    except OSError as exc:
        raise _problem(path, f"cannot read results: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise _problem(path, f"not a gpu-accept results file: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse_results(text, str(path))


def parse_results(text: str, name: str) -> RunRecord:
    if not text.strip():
        raise _problem(Path(name), "the file is empty: expected the results.json that gpu-accept run writes")
    try:
        record = RunRecord.model_validate_json(text)
    except ValidationError as exc:
        if not _older_cluster_results(text):
            raise InputFileError(_why_not_results(text, name, exc)) from None
        try:
            record = of_older_cluster_record(ClusterRecord.model_validate_json(text))
        except ValidationError as cluster_exc:
            raise InputFileError(_why_not_results(text, name, cluster_exc)) from None
    return record.with_tests(record.tests)  # the summary, from the tests


def _older_cluster_results(text: str) -> bool:
    """Whether `text` is the cluster-results.json that `gpu-accept cluster` wrote before its runs were
    results.json records: an object of its `kind` (asked only of a text that is no results record)."""
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(raw, dict) and raw.get("kind") == CLUSTER_KIND


def cluster_test(verdict: Verdict) -> TestRecord:
    """A verdict of a cluster run as the test it is, named like a suite's (`test_rdma_ports[node1]`)."""
    test_id = f"test_{verdict.check}[{verdict.subject}]"
    outcome = test_outcome(verdict.outcome)
    return TestRecord(id=test_id, nodeid=f"{CLUSTER_SUITE}::{test_id}", outcome=outcome,
                      message="" if outcome == "passed" else verdict.message, verdict=verdict)


CLUSTER_SUITE = "cluster"  # a cluster run's tests' module, as JUnit's classname shows it


def of_older_cluster_record(older: ClusterRecord) -> RunRecord:
    """An earlier cluster-results.json as the run record it now is: its verdicts as tests, its facts
    as the cluster's. It recorded no time, command or profile file: those read as not recorded (an
    empty start, which the results store refuses to place in a history)."""
    facts = older.facts
    run = RunInfo(started_at="", tool_version="", command=[], facts_source=LiveMachine(),
                  profile=RunProfile(name=facts.profile, path="", sha256=""),
                  exit_status=1 if any(v.outcome in ("failed", "error") for v in older.verdicts) else 0)
    first = facts.nodes[0].host if facts.nodes else ""
    name = first if len({node.host for node in facts.nodes}) <= 1 else ",".join(dict.fromkeys(node.host for node in facts.nodes))
    record = RunRecord(
        format=RESULTS_FORMAT, version=RESULTS_VERSION, complete=True, cluster=facts, run=run,
        environment=Environment.of_cluster(name, facts), facts=facts_of_cluster_run(first, "", ""), tests=[],
    ).with_tests([cluster_test(verdict) for verdict in older.verdicts])
    return record.model_copy(update={"verdict": record.judged()})


def facts_of_cluster_run(host: str, recorded_at: str, tool_version: str) -> Facts:
    """The machine facts a cluster run holds beside its cluster's: the host of its global rank 0,
    nothing probed (`gpu-accept cluster` reads each node's network; each node's GPUs are judged by
    its own `gpu-accept run`)."""
    return Facts(
        recorded_at=recorded_at, tool_version=tool_version,
        system=SystemFacts(hostname=host, driver_version=not_probed(NOT_PROBED_BY_CLUSTER),
                           cuda_driver_version=not_probed(NOT_PROBED_BY_CLUSTER), nvml_version=not_probed(NOT_PROBED_BY_CLUSTER),
                           nvml_gpu_count=0),
        cuda=not_probed(NOT_PROBED_BY_CLUSTER), gpus=[],
    )


def _why_not_results(text: str, name: str, exc: ValidationError) -> list[Problem]:
    """What makes `text` no results file: not JSON, another file's format, another version, or the
    keys that do not fit, one line each."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        return [Problem(name, error.lineno, "", f"invalid JSON: {error.msg}")]
    except ValueError as error:  # an integer of thousands of digits, which Python will not read
        return [Problem(name, None, "", f"invalid JSON: {str(error).split(';')[0]}")]
    except RecursionError:
        return [Problem(name, None, "", "invalid JSON: nested too deeply to be results")]
    if isinstance(raw, dict) and raw.get("kind") == CLUSTER_KIND:
        return validation_problems(exc, raw, name)  # an earlier cluster-results.json that does not fit its own shape
    if not isinstance(raw, dict) or raw.get("format") != RESULTS_FORMAT:
        return [Problem(name, None, "format", f"not a gpu-accept results file (format {RESULTS_FORMAT!r} expected)")]
    if raw.get("version") != RESULTS_VERSION:
        return [Problem(name, None, "version", f"results version {raw.get('version')!r} is not {RESULTS_VERSION}")]
    return validation_problems(exc, raw, name)


def merge_journal(record: RunRecord, journal: Path, text: str) -> RunRecord:
    """`record` with what its journal (`text`) holds: tests it lacks, in the order they finished, and
    the facts as they last were. A last line without its newline was cut by the kill and is left out;
    a journal of another run (one that began in this folder and was killed at once) is left out."""
    lines = text.split("\n")
    tests = list(record.tests)
    seen = {test.nodeid for test in tests}
    facts = record.facts
    for number, line in enumerate(lines[:-1], start=1):  # lines[-1] follows the last newline: empty, or cut
        if not line.strip():
            continue
        try:
            entry = JournalEntry.model_validate_json(line)
        except ValidationError as exc:
            try:
                raw: object = json.loads(line)
            except (ValueError, RecursionError):  # not JSON at all: pydantic's own error says where
                raw = None
            first = validation_problems(exc, raw, str(journal))[:1]
            raise InputFileError([Problem(str(journal), number, p.path, p.message) for p in first]) from None
        if entry.run is not None and entry.run != record.run:
            return record
        if entry.test is not None and entry.test.nodeid not in seen:  # a rewrite may already hold it
            seen.add(entry.test.nodeid)
            tests.append(entry.test)
        if entry.facts is not None:
            facts = entry.facts
    merged = record if facts is record.facts else record.with_facts(facts)
    return merged.with_tests(tests)


def _problem(path: Path, message: str) -> InputFileError:
    return InputFileError([Problem(str(path), None, "", message)])
