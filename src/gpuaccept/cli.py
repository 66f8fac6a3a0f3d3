"""The `gpu-accept` command line.

Exit codes: 0 every check passed; 1 a check failed; 2 the run could not judge the machine (bad
usage, a bad profile or facts file, no driver or GPU, a probe that hung).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import select
import sys
import tempfile
from pathlib import Path

from gpuaccept import __version__
from gpuaccept.errors import EXIT_OK, EXIT_USAGE, GpuAcceptError, OptionError, Problem, ProfileError, shown
from gpuaccept.facts import run_verdict, save_facts
from gpuaccept.facts.run_record import JOURNAL_SUFFIX, LiveMachine, RunRecord
from gpuaccept.files import write_atomically
from gpuaccept.outputs import check_output_file, check_output_folder, refuse_links, refuse_overlaps, reports_folder_lock
from gpuaccept.plugin.options import (
    COMMAND_FLAGS,
    DerivedProfile,
    GivenOptions,
    NamedProfile,
    RunOptions,
    add_command_options,
    command_defaults,
    passed_to_pytest,
    read_options,
)
from gpuaccept.process import Bounded
from gpuaccept.profile import Profile, ProfileCatalog, check_base_profile, load_profile
from gpuaccept.profile.catalog import BASES_FOLDER
from gpuaccept.profile.catalogue import CATALOGUE_FOLDER, load_catalogue
from gpuaccept.profile.catalogue import FILES as CATALOGUE_FILES
from gpuaccept.profile.render import render_yaml
from gpuaccept.profile.spec import PROFILE_NAME_MAX, PROFILE_NAME_PATTERN, ProfileSpec
from gpuaccept.resources import shipped_dir


def _path(text: str) -> Path:
    """A path option's value: an empty one is refused (as a Path it would be ".", the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the name is empty")
    return Path(text)


def main(argv: list[str] | None = None, probe: Bounded | None = None) -> int:
    """`probe`: the probe's child, where the command started it as it began (gpuaccept/entry.py):
    a run of this machine reads its facts from it."""
    parser = _parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["torchrun"] and not set(argv[1:2]) & {"-h", "--help"}:
        # torchrun's options are torchrun's to read: argparse would take them for ours
        args, extra = argparse.Namespace(command="torchrun", arguments=argv[1:], handler=_torchrun), []
    else:
        args, extra = parser.parse_known_args(argv)
    if extra and args.command not in ("run", "burn-in", "health-check"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if not args.command:
        parser.print_help()
        return EXIT_USAGE
    args.started_probe = probe
    try:
        if getattr(args, "output", None) is not None:  # every -o: a file to write at the end
            check_output_file(args.output, "-o")
        if getattr(args, "nvml_log", None) is not None:
            check_output_file(args.nvml_log, "--nvml-log")
        code = args.handler(args, extra)
        sys.stdout.flush()  # what is still buffered, here, where a reader that went away is told apart
        return code
    except GpuAcceptError as error:
        for line in error.lines():
            _print(f"gpu-accept: {line}", err=True)
        return error.exit_code
    except BrokenPipeError:
        if not _reader_gone():
            raise
        return EXIT_READER_GONE


# `gpu-accept profile list | head`: the reader of our output went away. SIGPIPE stays ignored, as Python
# sets it (its default action would end the whole process at a write to any pipe: a run's child that
# died would take the run, its reports unwritten, with it); the command ends quietly with the status a
# process ended by SIGPIPE has.
EXIT_READER_GONE = 128 + 13


def _reader_gone() -> bool:
    """Whether our standard output is a pipe with no reader left (poll says POLLERR of such a pipe's
    writing end); if so, what is still buffered goes nowhere, and the flush at exit finds no broken pipe."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        gone = any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):  # no descriptor to ask
        return False
    if gone:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return gone


def _print(text: str, *, err: bool = False) -> None:
    """A line for the terminal: what a machine or a file said in it is shown escaped, never acted on."""
    print(shown(text), file=sys.stderr if err else sys.stdout)


class _Parser(argparse.ArgumentParser):
    """A usage error is one line, as every other error of this command is."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gpu-accept", description="Hardware acceptance tests for multi-GPU servers.")
    parser.add_argument("--version", action="version", version=f"gpu-accept {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add_command in (
        _add_run, _add_burn_in, _add_health_check, _add_import, _add_record, _add_cluster, _add_torchrun, _add_profile,
        _add_baseline, _add_report,
    ):
        add_command(commands)
    return parser


def _add_run(commands) -> None:
    run = commands.add_parser(
        "run",
        allow_abbrev=False,  # pytest's own options (--co, --lf) must reach pytest, not match one of ours
        help="run the acceptance suites (extra arguments go to pytest)",
        description="Run the acceptance suites against a profile. Arguments this command does not know "
        "(-k, -x, -n 4, ...) are passed to pytest.",
    )
    # the plugin's options, as the plugin declares them (plugin/options.py): read and checked once, then passed on to pytest
    add_command_options(run, leave_out=("gpuaccept_facts",))
    source = run.add_mutually_exclusive_group()
    add_command_options(source, only=("gpuaccept_facts",))
    source.add_argument(
        "--import",
        dest="imports",
        nargs="+",
        metavar="FILE",
        help="evaluate command outputs instead of probing: nvidia-smi topo -m, topo -p2p, nvlink -s, nccl-tests logs "
        "(what they do not tell is reported as could not be established)",
    )
    run.add_argument(
        "--reports", default="reports", help="folder for junit.xml, results.json, report.html and facts.json (default: reports)"
    )
    _add_metrics_option(run)
    run.set_defaults(handler=_run)


def _add_burn_in(commands) -> None:
    burn = commands.add_parser(
        "burn-in",
        allow_abbrev=False,
        help="load the GPUs for a duration, telemetry sampled throughout (gpu-accept run --level burn-in)",
        description="Burn-in: the inventory, topology and P2P checks, then the load stages round after round for the "
        "duration (the per-GPU loads every round, the NCCL stage at the profile's burnin.fabric_interval), each value "
        "judged over every round (a miss in two rounds fails; one round alone is transient), and clocks, temperatures, "
        "power and clock event reasons "
        "sampled every burnin.telemetry_period_s. The terminal shows each round and the time left; Ctrl-C or SIGTERM "
        "ends the rounds, judges what ran and writes the reports (exit 1 where a check failed, else 2). Arguments this "
        "command does not know go to pytest.",
    )
    add_command_options(burn, only=("gpuaccept_burnin", "gpuaccept_profile", "gpuaccept_profile_dirs", "gpuaccept_expect_gpus"))
    duration = next(action for action in burn._actions if action.dest == "gpuaccept_burnin")
    duration.help = "how long to load the GPUs (90s, 30m, 2h; default the profile's burnin.duration)"  # burn-in takes no --level
    burn.add_argument("--reports", default="reports", help="folder for junit.xml, results.json, report.html and facts.json")
    _add_metrics_option(burn)
    burn.set_defaults(handler=_burn_in)


def _add_import(commands) -> None:
    imports = commands.add_parser(
        "import",
        help="read command outputs (nvidia-smi topo -m, topo -p2p, nvlink -s, nccl-tests logs) into a facts file",
        description="Read what nvidia-smi and nccl-tests printed, as kept in files, logs and tickets, into the facts "
        "`gpu-accept run --facts` judges. Prints what each file held and every damaged part, one line each.",
    )
    imports.add_argument("files", nargs="+", type=_path, metavar="FILE",
                         help="files holding command outputs, in any mix; they describe one machine (or one cluster's run)")
    imports.add_argument("-o", "--output", type=_path, help="facts file to write (default: only say what was read)")
    imports.set_defaults(handler=_import)


def _add_record(commands) -> None:
    record = commands.add_parser(
        "record", help="probe this machine and write its facts as JSON",
        description="Probe this machine (NVML, CUDA; with --measure also the measurement stages its profile asks for) "
        "and write what it found as a facts file, judged later, anywhere, with gpu-accept run --facts FILE. Exit 0 "
        "when the facts are written, 2 when the machine could not be probed (no driver, a probe that hung).",
    )
    record.add_argument("-o", "--output", required=True, help="facts file to write")
    record.add_argument("--nvml-log", help="also write every raw NVML answer (for replay in tests)")
    record.add_argument("--measure", action="store_true", help="also run the measurement stages the profile asks for")
    # with --measure: whose stages to run, and how often a miss is measured again, as `run` takes them
    add_command_options(record, only=("gpuaccept_profile", "gpuaccept_profile_dirs", "gpuaccept_confirm", "gpuaccept_expect_gpus"))
    record.set_defaults(handler=_record)


def _add_cluster(commands) -> None:
    cluster = commands.add_parser(
        "cluster",
        help="one rank of a multi-node acceptance job (run it under torchrun or srun)",
        description="Run by every rank of a multi-node job, started with torchrun (--nnodes N --nproc-per-node G) or srun "
        "(--nodes N --ntasks-per-node G): measures the profile's cluster: collectives over every GPU of every node, "
        "names a slow node, reads each node's RDMA network. Global rank 0 writes OUT/cluster-results.json (a results.json "
        "record, which store add takes), OUT/cluster-junit.xml and OUT/cluster-report.html; each node writes "
        "OUT/node<i>-<host>/node-results.json (docs/many-nodes.md).",
    )
    add_command_options(cluster, only=("gpuaccept_profile", "gpuaccept_profile_dirs"))  # the profile needs a cluster: section
    cluster.add_argument("--out", type=_path, default=Path("reports/cluster"), help="folder for the reports (default reports/cluster)")
    cluster.add_argument("--backend", choices=["auto", "nccl", "gloo"], default="auto", help="auto: NCCL where CUDA is, gloo elsewhere")
    cluster.add_argument("--sys-root", type=_path, default=Path("/"), help="where /sys is read from (a fake tree in tests)")
    cluster.add_argument("--name", help="the cluster's name, as its results and its history in a store name it "
                         "(default: its nodes' hosts as Slurm writes a node list, gpu[07-09,12])")
    _add_metrics_option(cluster)  # written by global rank 0
    cluster.set_defaults(handler=_cluster)


def _add_torchrun(commands) -> None:
    torchrun = commands.add_parser(
        "torchrun",
        help="torchrun running `gpu-accept cluster` on every rank, with honest exit codes",
        description="torchrun itself (torch.distributed.run, in this process) with `gpu-accept cluster CLUSTER-OPTIONS` as the "
        "program of every rank: the same command on every node. A node that never joins is one line and exit 2 (plain "
        "torchrun: a traceback and exit 1); the ranks' exit codes come through (1 a check failed, 2 could not judge); "
        "the rendezvous waits cluster.rendezvous_s unless --rdzv-conf join_timeout= is given.",
        usage="gpu-accept torchrun TORCHRUN-OPTIONS... -- CLUSTER-OPTIONS...",
        epilog="example: gpu-accept torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint head:29400 "
        "--rdzv-id accept-42 -- --profile cluster-h100-8-ndr --out reports/cluster",
    )
    torchrun.add_argument("arguments", nargs=argparse.REMAINDER, help="torchrun's options, then --, then gpu-accept cluster's")
    torchrun.set_defaults(handler=_torchrun)


def _add_profile(commands) -> None:
    profile = commands.add_parser(
        "profile", help="list, validate, show, write and derive profiles",
        description="Profiles say what a machine must be (docs/profiles.md): list the ones --profile can name, check "
        "files, show one with its extends applied, print the schema, make one from a golden machine, or derive one "
        "from the catalogue.",
    )
    profile_commands = profile.add_subparsers(dest="profile_command", metavar="ACTION", required=True)
    for add_action in (
        _add_profile_list, _add_profile_validate, _add_profile_show, _add_profile_schema, _add_profile_init, _add_profile_derive,
    ):
        add_action(profile_commands)


def _add_profile_list(profile_commands) -> None:
    listing = profile_commands.add_parser(
        "list", help="the profiles that --profile NAME can name",
        description="Every profile --profile NAME can name: the shipped ones and those in each --profile-dir, with its "
        "description and the GPUs --profile auto picks it for; a file that does not load is listed as INVALID.",
    )
    listing.add_argument("--profile-dir", action="append", default=[], metavar="DIR", help=_PROFILE_DIR)
    listing.set_defaults(handler=_profile_list)


def _add_profile_validate(profile_commands) -> None:
    validate = profile_commands.add_parser(
        "validate", help="check profile files; every problem, one line each",
        description="Check profile files as a run loads them (extends resolved, keys, types, ranges, keys that "
        "contradict each other): 'ok: FILE' for each good one, every problem of a bad one as FILE:LINE: KEY: what is "
        "wrong. Exit 0 when all are valid, 2 otherwise. A file in a bases/ folder is checked as a base.",
    )
    validate.add_argument("files", nargs="+", type=_path, metavar="FILE", help="profile YAML files")
    validate.add_argument("--profile-dir", action="append", default=[], metavar="DIR", help=_PROFILE_DIR)
    validate.set_defaults(handler=_profile_validate)


def _add_profile_show(profile_commands) -> None:
    show = profile_commands.add_parser(
        "show", help="a profile with its `extends` applied",
        description="Print a profile as a run uses it: its extends applied, every default filled in, each value with "
        "the comment its file gives it; lines commented out stay where they stood.",
    )
    show.add_argument("name", metavar="NAME|PATH", help="a profile's name (gpu-accept profile list) or a YAML path")
    show.add_argument("--profile-dir", action="append", default=[], metavar="DIR", help=_PROFILE_DIR)
    show.set_defaults(handler=_profile_show)


def _add_profile_schema(profile_commands) -> None:
    schema = profile_commands.add_parser(
        "schema", help="the JSON Schema of profiles, for editors",
        description="Print the JSON Schema of the profile format (profiles/profile.schema.json), for an editor's YAML "
        "language server.",
    )
    schema.set_defaults(handler=_profile_schema)


def _add_profile_init(profile_commands) -> None:
    init = profile_commands.add_parser(
        "init", help="a profile from a golden machine's results.json, or its command outputs",
        description="Write a profile from golden machines: what they are becomes the expectations, their measured "
        "values times --margin the floors, each value with a comment saying where it came from (docs/baselines.md, "
        "docs/importing.md). A run that did not pass is refused; so are outputs that do not name the GPU model.",
    )
    origin = init.add_mutually_exclusive_group(required=True)
    origin.add_argument(
        "--from", dest="sources", type=_path, nargs="+",
        help="results.json of runs on the golden machine: floors come from the lowest run, widened by their spread",
    )
    origin.add_argument(
        "--from-text", dest="texts", type=_path, nargs="+", metavar="FILE",
        help="the golden machine's command outputs: nvidia-smi topo -m, topo -p2p, nvlink -s, nccl-tests logs",
    )
    init.add_argument("--margin", type=float, default=0.9, help="floors are measured values times this (default 0.9)")
    init.add_argument("--name", required=True, help="the profile's name (e.g. the SKU)")
    init.add_argument("-o", "--output", type=_path, help="file to write (default: print)")
    init.set_defaults(handler=_profile_init)


def _add_profile_derive(profile_commands) -> None:
    derive = profile_commands.add_parser(
        "derive",
        help="a profile derived from the catalogue: for this machine, recorded facts, or command outputs",
        description="The profile --profile auto derives where no profile matches: expectations from the catalogue "
        "(profiles/catalogue) keyed by the GPU model, how the GPUs are joined and how many the machine must have, each "
        "value with the comment that says where it came from. Probes this machine unless --facts or --from-text is given.",
    )
    derived_from = derive.add_mutually_exclusive_group()
    derived_from.add_argument("--facts", type=_path, metavar="FILE", help="facts recorded earlier (gpu-accept record)")
    derived_from.add_argument(
        "--from-text", dest="texts", type=_path, nargs="+", metavar="FILE",
        help="the machine's command outputs: nvidia-smi topo -m, topo -p2p, nvlink -s, nccl-tests logs",
    )
    derive.add_argument("--gpu-model", help="NVML's name of the GPU model, where the outputs do not name it (topo -m alone)")
    derive.add_argument("--gpus", type=int, metavar="N", help="the GPUs the machine must have (default: as installed)")
    derive.add_argument("--name", help="the profile's name (default: derived-<count>x-<model>-<fabric>)")
    derive.add_argument("-o", "--output", type=_path, help="file to write (default: print)")
    derive.set_defaults(handler=_profile_derive)


def _add_baseline(commands) -> None:
    baseline = commands.add_parser(
        "baseline", help="baselines from results.json files",
        description="A baseline keeps a healthy machine's measured values; gpu-accept run --baseline FILE then fails a "
        "value that dropped more than --max-regression (docs/baselines.md).",
    )
    baseline_commands = baseline.add_subparsers(dest="baseline_command", metavar="ACTION", required=True)
    save = baseline_commands.add_parser(
        "save", help="a baseline from one or more runs: the median of each value, and how much the runs varied",
        description="A baseline from results.json of passing runs of one profile: the median of each measured value "
        "and how much the runs varied. A run with a failed or error test, one that did not finish, or runs of different "
        "profiles, GPU models or counts are refused in one line (exit 2).",
    )
    save.add_argument("results", nargs="+", type=_path, help="results.json of passing runs")
    save.add_argument("-o", "--output", type=_path, required=True, help="the baseline file to write")
    save.set_defaults(handler=_baseline_save)


def _add_report(commands) -> None:
    report = commands.add_parser(
        "report", help="reports from results.json files (no hardware touched)",
        description="Reports written again from results.json files, on any machine: the HTML of a run, JUnit and fleet "
        "views of many hosts, a cluster run's view, metrics, the history of a results store (docs/reports.md).",
    )
    report_commands = report.add_subparsers(dest="report_command", metavar="KIND", required=True)
    _add_report_html(report_commands)
    _add_report_junit(report_commands)
    _store_commands(commands, report_commands, _add_report_fleet(report_commands))
    _add_report_cluster(report_commands)
    _add_report_metrics(report_commands)
    _add_report_verdict(report_commands)
    _add_report_schema(report_commands)


def _add_report_html(report_commands) -> None:
    html_report = report_commands.add_parser(
        "html", help="the self-contained HTML report of one run",
        description="The self-contained HTML report of one run (the report.html a run writes), from its results.json.",
    )
    html_report.add_argument("results", type=_path, help="the run's results.json")
    html_report.add_argument("-o", "--output", type=_path, required=True, help="the HTML file to write")
    html_report.set_defaults(handler=_report_html)


def _add_report_junit(report_commands) -> None:
    junit = report_commands.add_parser(
        "junit", help="one JUnit file, a testsuite per host, from many results files",
        description="One JUnit file of many runs: a testsuite per host, every test of its run as a test case, for a CI "
        "server's test view. A file named twice is read once.",
    )
    junit.add_argument("results", nargs="+", help="results.json of each host")
    junit.add_argument("-o", "--output", type=_path, required=True, help="the JUnit XML file to write")
    junit.set_defaults(handler=_report_junit)


def _add_report_fleet(report_commands) -> argparse.ArgumentParser:
    """The fleet report's parser: the results store adds its --db to it."""
    fleet = report_commands.add_parser(
        "fleet",
        help="hosts whose measured values sit far below the fleet's median",
        description="Each host's latest run, of the results.json given, of a store (--db), or of both, judged against its "
        "profile and against its profile's fleet median; a cluster-results.json among them (gpu-accept cluster) adds its "
        "nodes x tests view, the slow node marked, and its verdicts as a testsuite of the fleet JUnit (docs/fleet.md).",
    )
    fleet.add_argument("results", nargs="*", help="results.json of each run, and any cluster-results.json (or --db)")
    fleet.add_argument("--tolerance", default="10%", help="how far below the median is an outlier (default 10%%)")
    fleet.add_argument("-o", "--output", type=_path, help="also write fleet JUnit: a test case per host and per outlier")
    fleet.set_defaults(handler=_report_fleet)
    return fleet


def _add_report_cluster(report_commands) -> None:
    cluster_view = report_commands.add_parser(
        "cluster", help="a cluster run's nodes x tests, the slow node marked",
        description="A cluster run's nodes x tests (gpu-accept cluster's cluster-results.json), the slow node marked; "
        "exit 1 where a check failed, 2 where a value could not be established.",
    )
    cluster_view.add_argument("results", type=_path, help="cluster-results.json, as gpu-accept cluster writes it")
    cluster_view.add_argument("-o", "--output", type=_path, help="also write the run's HTML report, its cluster section this view")
    cluster_view.set_defaults(handler=_report_cluster)


def _add_report_schema(report_commands) -> None:
    results_schema = report_commands.add_parser(
        "schema", help="the JSON Schema of results.json, for tools that read it",
        description="Print the JSON Schema of results.json (schemas/results.schema.json), for tools that read runs.",
    )
    results_schema.set_defaults(handler=_report_schema)


_PROFILE_DIR = "another folder of profiles, searched before the shipped ones (repeatable)"


def _catalog(args) -> ProfileCatalog:
    # the folders as given: Path("") would be "."; the commands that run the suites keep them as the plugin names them
    folders = getattr(args, "profile_dir", None) or getattr(args, "gpuaccept_profile_dirs", None) or []
    return ProfileCatalog.with_shipped(list(folders))


def _run(args, extra: list[str]) -> int:
    """`gpu-accept run`: the suites judged, and the run's verdict written (verdict.json, metrics)."""
    return _judged_run(args, extra, "run")[0]


# pytest plugins installed beside gpu-accept that its runs leave unloaded: the suites use none of
# them, and each costs every run time (hypothesis's imports all of hypothesis at the session's end:
# 0.1-0.2 s on a 2-core machine). Every other installed plugin loads, as in any pytest run: a
# user's options for it (--timeout, ...) keep working.
NOT_LOADED = ("-p", "no:hypothesispytest")

REPORT_FILES = ("results.json", "results.json" + JOURNAL_SUFFIX, "junit.xml", "report.html", "facts.json", run_verdict.VERDICT_FILE,
                "health-check.log")


def _run_inputs(args) -> list[tuple[str, str | Path | None]]:
    """The files a run reads, by the options that name them: none may be one of its outputs."""
    profile = getattr(args, "gpuaccept_profile", None)
    return [
        ("--facts", getattr(args, "gpuaccept_facts", None)), ("--baseline", getattr(args, "gpuaccept_baseline", None)),
        ("--profile", profile if profile and os.path.isfile(profile) else None),
        *(("--import", path) for path in getattr(args, "imports", None) or []),
    ]


def _run_outputs(args, extra: list[str]) -> list[tuple[str, str | Path | None]]:
    """The files a run writes: its reports in --reports, and those other options name."""
    reports = Path(args.reports)
    written = [name for name in REPORT_FILES if name != "facts.json" or not getattr(args, "gpuaccept_facts", None)]
    return [
        *((f"--reports' {name}", reports / name) for name in written),
        ("--metrics", getattr(args, "metrics", None)), ("--save-baseline", getattr(args, "gpuaccept_save_baseline", None)),
        *(("--junitxml", path) for path in _junitxml_of(extra)),
    ]


def _junitxml_of(extra: list[str]) -> list[str]:
    """pytest's --junitxml FILE among the arguments passed on to it (the plugin writes that file too)."""
    found = []
    for index, word in enumerate(extra):
        for flag in ("--junitxml", "--junit-xml"):
            if word.startswith(flag + "="):
                found.append(word.split("=", 1)[1])
            elif word == flag and index + 1 < len(extra):
                found.append(extra[index + 1])
    return found


def _burn_in(args, extra: list[str]) -> int:
    """`gpu-accept run --level burn-in`, always on this machine."""
    return _judged_run(argparse.Namespace(**{**vars(args), "gpuaccept_level": "burn-in"}), extra, "burn-in")[0]


class _Prepared:
    """A run whose options (its own and those bound for pytest) were all read and checked: nothing
    was probed, measured or written yet."""

    def __init__(self, args, extra: list[str]):
        import pytest

        check_output_folder(args.reports, "--reports")  # the name as given: Path("") would be "."
        self.metrics = Path(args.metrics) if getattr(args, "metrics", None) is not None else None
        if self.metrics is not None:
            check_output_file(self.metrics, "--metrics")
        self.reports = Path(args.reports)
        refuse_overlaps(_run_inputs(args), _run_outputs(args, extra))  # no output is an input or another output
        refuse_links(self.reports, REPORT_FILES, "--reports")
        given = argparse.Namespace(**{**command_defaults(), **vars(args)})
        given.gpuaccept_junit, given.gpuaccept_results = str(self.reports / "junit.xml"), str(self.reports / "results.json")
        given.gpuaccept_html = str(self.reports / "report.html")
        self.imports = getattr(args, "imports", None)
        if self.imports:
            # read now: a file that cannot be read is bad input; written to the reports folder once the run begins
            self.imported = _read_imports(self.imports)
            if given.gpuaccept_profile == "auto" and not all(isinstance(gpu.name, str) for gpu in self.imported.facts.gpus):
                raise OptionError("--import: the outputs do not name the GPU model (nvidia-smi nvlink -s and nccl-tests logs "
                                  "do; topo -m does not), so --profile auto cannot choose: name the profile with --profile")
            given.gpuaccept_facts = str(self.reports / "facts.json")
        elif given.gpuaccept_facts is None:
            given.gpuaccept_facts_out = str(self.reports / "facts.json")
        self.options = read_options(given, COMMAND_FLAGS)
        assert self.options is not None  # --profile is always given: auto where not named
        for option, path in self.options.outputs.named():  # as the plugin checks them, before the verdict's first word
            check_output_file(path, option)
        suites = shipped_dir("suites")
        pytest_args = [str(suites), "-c", str(suites / "pytest.ini"), "--rootdir", str(suites), *NOT_LOADED, *passed_to_pytest(given)]
        self.pytest_args = pytest_args + (extra[1:] if extra[:1] == ["--"] else extra)
        # torch's check and the first workers begin now, while pytest checks its arguments and
        # configures the run: they import torch meanwhile (plugin/head_start.py)
        self.head_start = None
        if isinstance(self.options.source, LiveMachine) and self.options.level != "quick":
            from gpuaccept.plugin.head_start import HeadStart  # the measurement's launcher: not for the quick level

            self.head_start = HeadStart.of_command(self.options, self.pytest_args)
        try:
            _refuse_what_pytest_refuses(self.pytest_args)
        except BaseException:
            self.stop()
            raise
        self.outcome = _Outcome()
        probe = getattr(args, "started_probe", None) if isinstance(self.options.source, LiveMachine) else None
        self.plugins = [self.outcome, GivenOptions(self.options, probe, self.head_start)]
        self.exit_status = pytest.ExitCode.OK
        self.started_at = ""  # when the run began (ISO 8601, UTC)

    def stop(self) -> None:
        """What the run started ahead and did not take: ended (again, where the run ended it)."""
        if self.head_start is not None:
            self.head_start.stop()

    @property
    def profile_named(self) -> str:
        choice = self.options.profile
        return choice.name if isinstance(choice, NamedProfile) else "auto"

    def execute(self, log: Path | None = None) -> run_verdict.RunVerdict:
        """pytest with the plugin; its terminal output into `log` where given (a Slurm prolog's
        output lands in slurmd.log: it gets one line, the pytest progress goes to the reports folder).
        The run's verdict, as the plugin decided and recorded it at the end of the session; one of
        could not judge where no session began (no driver, a profile that does not load at run time)."""
        import pytest

        if self.imports:
            save_facts(self.imported.facts, self.reports / "facts.json")
        with _output_to(log):
            self.exit_status = int(pytest.main(self.pytest_args, plugins=self.plugins))
        record = self.outcome.record
        if record is None or record.verdict is None:
            why = self.outcome.not_started or f"the run ended before any test (pytest exit status {self.exit_status})"
            return run_verdict.could_not_judge(why, host=_host(), profile=self.profile_named, started_at=self.started_at,
                                               finished_at=_now())
        verdict = record.verdict
        # a run stopped with no test failed or not judged: a line says why (health-check's own line says it there)
        if log is None and verdict.stopped and not verdict.failed and not verdict.not_judged:
            for line in verdict.stopped:
                _print(f"gpu-accept: {line} (exit {verdict.exit_code})", err=True)
        return verdict


def _refuse_what_pytest_refuses(pytest_args: list[str]) -> None:
    """The arguments bound for pytest, read by pytest's own parser before anything runs: a typo
    (`--reprots x`) is bad usage in one line, never a run that could not judge (which drains)."""
    import pytest
    from _pytest.config import _prepareconfig  # pytest's parsing alone, without configuring a run

    try:
        config = _prepareconfig(list(pytest_args))
    except pytest.UsageError as error:
        said = [line for line in "\n".join(map(str, error.args)).splitlines() if " error: " in line]
        why = said[0].split(" error: ", 1)[1].strip() if said else "pytest refused the arguments"
        raise OptionError(f"{why} (arguments gpu-accept does not know go to pytest; see --help)") from None
    config._ensure_unconfigure()


@contextlib.contextmanager
def _output_to(log: Path | None):
    """This process's stdout and stderr, and its children's, into `log` (None: left as they are)."""
    if log is None:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        opened = open(log, "w", encoding="utf-8")  # noqa: SIM115 (closed below, after the descriptors are back)
    except OSError as exc:
        raise GpuAcceptError(f"{log}: cannot write it ({exc.strerror or exc})") from None
    saved = os.dup(1), os.dup(2)
    try:
        with opened as file:
            os.dup2(file.fileno(), 1)
            os.dup2(file.fileno(), 2)
            try:
                yield
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
    finally:
        os.close(saved[0])
        os.close(saved[1])


def _judged_run(args, extra: list[str], command: str, *, log: Path | None = None) -> tuple[int, run_verdict.RunVerdict]:
    """A run of the suites for `command` (run, burn-in, health-check) that leaves its verdict whatever
    happens: verdict.json in the reports folder (and --metrics) say "in progress" from its start, and
    its verdict at its end, also where it ended before any test (no driver, no torch). Bad options
    are refused before: they write nothing."""
    prepared = _Prepared(args, extra)
    try:
        with reports_folder_lock(prepared.reports, "--reports"):  # one run's reports at a time: a second run is refused here
            return _judged_locked(prepared, command, log)
    finally:
        prepared.stop()


def _judged_locked(prepared: _Prepared, command: str, log: Path | None) -> tuple[int, run_verdict.RunVerdict]:
    host = _host()
    prepared.started_at = _now()
    _write_verdict(prepared, command, run_verdict.in_progress(host=host, profile=prepared.profile_named,
                                                              started_at=prepared.started_at), None)
    try:
        verdict = prepared.execute(log)
    except GpuAcceptError as error:
        if log is None:  # health-check's one line carries the cause
            for line in error.lines():
                _print(f"gpu-accept: {line}", err=True)
        verdict = run_verdict.could_not_judge("; ".join(error.lines()), host=host, profile=prepared.profile_named,
                                              started_at=prepared.started_at, finished_at=_now())
    _write_verdict(prepared, command, verdict, prepared.outcome.record)
    return verdict.exit_code, verdict


def _write_verdict(prepared: _Prepared, command: str, verdict, record) -> None:
    """The metrics where asked, then verdict.json in the reports folder; a file that cannot be
    written is said in one line (the run's verdict, its exit code, stands). The metrics first: once
    verdict.json says a run began (or ended), what a scrape serves says so too, never the run before's."""
    from gpuaccept.report.metrics import render_run_metrics

    targets = [(prepared.metrics, render_run_metrics(command, verdict, record))] if prepared.metrics is not None else []
    targets.append((prepared.reports / run_verdict.VERDICT_FILE, verdict.to_json()))
    for path, text in targets:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, text)
        except (GpuAcceptError, OSError) as error:
            _print(f"gpu-accept: {path}: not written: {error}", err=True)


def _now() -> str:
    from gpuaccept.report.results import now

    return now()


def _host() -> str:
    import socket

    return socket.gethostname()


def _read_imports(files):
    """Every imported file read into facts; what each held and every damaged part said on stderr."""
    from gpuaccept.importers import import_files

    imported = import_files([Path(f) for f in files])
    for line in imported.lines():
        _print(f"gpu-accept: import: {line}", err=True)
    return imported


def _import(args, extra: list[str]) -> int:
    refuse_overlaps([("", path) for path in args.files], [("-o", args.output)])
    imported = _read_imports(args.files)
    if args.output is not None:
        save_facts(imported.facts, args.output)
        _print(f"wrote {args.output}: {imported.facts.gpu_count} GPU(s) from {len(args.files)} file(s); judge it with "
               f"gpu-accept run --facts {args.output} --profile NAME", err=True)
    return EXIT_OK


class _Outcome:
    """Brings the run's record out of the pytest session, with the verdict the plugin decided at
    its end; or the plugin's reason for a run that could not start (no driver, a profile that does
    not load)."""

    record: RunRecord | None = None
    not_started = ""

    def pytest_unconfigure(self, config) -> None:
        from gpuaccept.plugin.recording import NOT_STARTED_KEY, RECORD_KEY

        self.record = config.stash.get(RECORD_KEY, None)
        self.not_started = config.stash.get(NOT_STARTED_KEY, "")


def _record(args, extra: list[str]) -> int:
    from gpuaccept.facts import save_facts
    from gpuaccept.measure.drills import Drills
    from gpuaccept.probe import probe_machine

    refuse_overlaps([], [("-o", args.output), ("--nvml-log", args.nvml_log)])
    options = read_options(args, COMMAND_FLAGS)
    assert options is not None  # --profile is always given: auto where not named
    drills = Drills.from_environment(os.environ)  # read once, here: the stages' plans carry them
    facts = drills.recorded_in(probe_machine(nvml_log=args.nvml_log))
    if args.measure:
        facts = _measure(facts, options, drills)
    save_facts(facts, Path(args.output))
    gpus = facts.gpus
    _print(f"recorded {len(gpus)}x {gpus[0].name if gpus else 'no GPU'} on {facts.system.hostname} to {args.output}")
    return EXIT_OK


def _cluster(args, extra: list[str]) -> int:
    from gpuaccept.cluster.runner import run_cluster

    profile = _checked_cluster_options(args)
    code = run_cluster(profile, args.out, root=args.sys_root, backend=args.backend, name=args.name, metrics=args.metrics)
    # Every rank holds the verdict and the reports are written. An orderly exit would tear down the
    # process group, whose threads can abort the interpreter (SIGABRT: 1 three-node CPU run in 25),
    # and torchrun would then report a signal in place of this rank's verdict.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _checked_cluster_options(args) -> Profile:
    """`gpu-accept cluster`'s options checked, before any rank waits on another: its profile, and where
    its reports go."""
    from gpuaccept.cluster.reports import CLUSTER_HTML, CLUSTER_JUNIT, CLUSTER_RESULTS

    profile = _cluster_profile(args)
    check_output_folder(args.out, "--out")
    if args.name is not None and not args.name.strip():
        raise OptionError("--name: give the cluster a name that is not empty (or leave --name out: its nodes name it)")
    if args.metrics is not None:
        check_output_file(args.metrics, "--metrics")
        ours = [("--out", args.out / name) for name in (CLUSTER_RESULTS, CLUSTER_JUNIT, CLUSTER_HTML)]
        refuse_overlaps([], [*ours, ("--metrics", args.metrics)])
    return profile


def _cluster_profile(args) -> Profile:
    """The profile `gpu-accept cluster` was given, as `run` reads --profile and --profile-dir: named,
    with a cluster: section."""
    options = read_options(args, COMMAND_FLAGS)
    if options is None or not isinstance(options.profile, NamedProfile):
        raise OptionError("--profile: name the profile of the cluster (a name or a YAML path with a cluster: section); "
                          "auto picks by one node's GPUs and knows no cluster")
    profile = ProfileCatalog.with_shipped(list(options.profile_dirs)).load(options.profile.name)
    if profile.spec.cluster is None:
        raise ProfileError([Problem(str(profile.path), None, "cluster", f"profile {profile.name} has no cluster: section")])
    return profile


def _torchrun(args, extra: list[str]) -> int:
    from gpuaccept.measure.torchrun import run_torchrun, with_join_timeout

    arguments = list(args.arguments)
    if "--" not in arguments:
        raise OptionError("torchrun: give torchrun's options, then --, then gpu-accept cluster's (see gpu-accept torchrun --help)")
    split = arguments.index("--")
    torchrun_args, cluster_args = arguments[:split], arguments[split + 1 :]
    # the cluster's options are checked here, once, before any node waits on another
    cluster = _parser().parse_args(["cluster", *cluster_args])
    profile = _checked_cluster_options(cluster)
    assert profile.spec.cluster is not None
    torchrun_args = with_join_timeout(torchrun_args, profile.spec.cluster.rendezvous_s)
    return run_torchrun(torchrun_args, ["gpuaccept", "cluster", *cluster_args])


def _measure(facts, options: RunOptions, drills):
    """Every stage the profile asks for, run exactly as a pytest session runs them, with the health
    readings after each and the telemetry sampled meanwhile: facts that judge anywhere later what a
    standard run judges (facts without them could not judge those checks)."""
    from gpuaccept.stages.health import SessionListener, SnapshotAfterStage, with_health
    from gpuaccept.stages.registry import STAGES
    from gpuaccept.stages.store import MeasurementStore
    from gpuaccept.stages.telemetry import TelemetryLog, read_telemetry

    catalog = ProfileCatalog.with_shipped(list(options.profile_dirs))
    choice = options.profile
    with tempfile.TemporaryDirectory(prefix="gpuaccept-record-") as folder:
        if isinstance(choice, NamedProfile):
            profile = catalog.load(choice.name)
        else:  # a derived profile is kept only while its stages run: the facts are what is recorded
            selection = catalog.select(facts, options.expect_gpus, Path(folder), derived_only=isinstance(choice, DerivedProfile))
            _print(f"gpu-accept: profile {selection.profile.name}: {selection.reason}", err=True)
            profile = selection.profile
        say = lambda text: _print(text, err=True)  # noqa: E731
        snapshot = SnapshotAfterStage(Path(folder), say)
        store = MeasurementStore(Path(folder), live=True, say=say, confirm=options.confirm, after_stage=[snapshot], drills=drills)
        listener = SessionListener(facts, Path(folder))
        telemetry = TelemetryLog(Path(folder), facts, profile.spec.burnin.telemetry_period_s)
        listener.start()
        telemetry.start()
        try:
            store.expect(list(STAGES), facts, profile)  # each stage's workers start while the one before runs
            for stage in STAGES:
                facts = store.with_stage(stage, facts, profile)
        finally:
            store.close()
            telemetry.stop()
            listener.stop()
        facts = with_health(facts, Path(folder))
        sampled = read_telemetry(Path(folder))
        if sampled is not None:
            facts = facts.model_copy(update={"telemetry": sampled})
    return facts


def _profile_list(args, extra: list[str]) -> int:
    catalog = _catalog(args)
    for name, path in catalog.names():
        try:
            profile = load_profile(path, catalog.base_folders())
        except ProfileError as error:
            _print(f"{name:28} INVALID ({len(error.problems)} problem(s): gpu-accept profile validate {path})")
            continue
        rule = profile.spec.match
        matches = f"auto: {rule.gpu_count}x {' | '.join(rule.gpu_model)}" if rule else "auto: never"
        _print(f"{name:28} {shown(profile.spec.description or ''):60} {matches}")
    return EXIT_OK


def _profile_validate(args, extra: list[str]) -> int:
    catalog = _catalog(args)
    failed = False
    for path in args.files:
        try:
            if path.parent.name == BASES_FOLDER:
                check_base_profile(path, catalog.base_folders())
                _print(f"ok: {path} (base profile)")
            elif path.parent.name == CATALOGUE_FOLDER and path.name in CATALOGUE_FILES:
                # a file of the catalogue is read with the other two: a record names a GPU of gpus.yaml
                load_catalogue(path.parent)
                _print(f"ok: {path} (the catalogue in {path.parent})")
            else:
                profile = load_profile(path, catalog.base_folders())
                _print(f"ok: {path} ({profile.name})")
        except ProfileError as error:
            failed = True
            for line in error.lines():
                _print(line, err=True)
    return EXIT_USAGE if failed else EXIT_OK


def _profile_show(args, extra: list[str]) -> int:
    profile = _catalog(args).load(args.name)
    data = profile.spec.model_dump(by_alias=True, exclude_none=True, exclude_defaults=False)
    data.pop("extends", None)
    header = f"{profile.name}: {profile.path}, with extends applied (sha256 {profile.sha256[:12]})"
    sys.stdout.write(render_yaml(_drop_empty(data), profile.provenance, header=header))
    return EXIT_OK


def _drop_empty(value):
    if isinstance(value, dict):
        return {k: _drop_empty(v) for k, v in value.items() if v not in ({}, [], None)}
    return value


def _profile_init(args, extra: list[str]) -> int:
    from gpuaccept.facts.run_record import load_results
    from gpuaccept.profile.from_results import profile_from_results

    def warn(line: str) -> None:
        _print(f"gpu-accept: warning: {line}", err=True)

    refuse_overlaps([("--from", path) for path in args.sources or []] + [("--from-text", path) for path in args.texts or []],
                    [("-o", args.output)])
    if not re.fullmatch(PROFILE_NAME_PATTERN, args.name) or len(args.name) > PROFILE_NAME_MAX:
        raise OptionError(
            f"--name {args.name!r}: a profile's name is its file's name: letters, digits, '.', '_' and '-', beginning with a "
            f"letter or digit, at most {PROFILE_NAME_MAX} characters, without a folder (e.g. h200-4-nvswitch)"
        )
    try:
        if args.texts:
            golden = [_read_imports(args.texts).facts]
            sources = [" + ".join(str(t) for t in args.texts)]
        else:
            golden = [load_results(source) for source in args.sources]
            sources = [str(source) for source in args.sources]
        text = profile_from_results(golden, sources, args.name, args.margin, warn)
    except ValueError as error:
        raise GpuAcceptError(str(error)) from None
    with tempfile.TemporaryDirectory(prefix="gpuaccept-profile-init-") as folder:
        check = Path(folder) / f"{args.name}.yaml"
        check.write_text(text, encoding="utf-8")
        load_profile(check, ProfileCatalog.with_shipped().base_folders())  # what is written must load
    if args.output is None:
        sys.stdout.write(text)
    else:
        write_atomically(args.output, text)  # a full disk or an unwritable place is one line, not a traceback
        _print(f"wrote {args.output}: review it, then gpu-accept profile validate {args.output}", err=True)
    return EXIT_OK


def _profile_derive(args, extra: list[str]) -> int:
    from gpuaccept.facts import load_facts
    from gpuaccept.profile.catalogue import load_catalogue
    from gpuaccept.profile.derive import derive_profile
    from gpuaccept.profile.machine import UnknownMachine

    if args.name is not None and (not re.fullmatch(PROFILE_NAME_PATTERN, args.name) or len(args.name) > PROFILE_NAME_MAX):
        raise OptionError(f"--name {args.name!r}: a profile's name is its file's name: letters, digits, '.', '_' and '-'")
    if args.gpus is not None and not 1 <= args.gpus <= 1024:
        raise OptionError(f"--gpus {args.gpus}: the GPUs the machine must have, 1 to 1024")
    if args.output is not None:
        check_output_file(args.output, "--output")
    if args.texts:
        facts = _read_imports(args.texts).facts
    elif args.facts is not None:
        facts = load_facts(args.facts)
    else:
        from gpuaccept.probe import probe_machine

        facts = probe_machine()
    if args.gpu_model is None and not all(isinstance(gpu.name, str) for gpu in facts.gpus):
        raise OptionError("the outputs do not name the GPU model (nvidia-smi nvlink -s and nccl-tests logs do; topo -m does not): "
                          "give it with --gpu-model, as NVML names it (e.g. 'NVIDIA L40S')")
    try:
        derivation = derive_profile(facts, load_catalogue(), args.gpus, args.gpu_model, args.name, args.output)
    except UnknownMachine as error:
        raise GpuAcceptError(str(error)) from None
    _print(f"gpu-accept: {derivation.name}: {derivation.summary}", err=True)
    if args.output is None:
        sys.stdout.write(derivation.text)
    else:
        write_atomically(args.output, derivation.text)
        _print(f"wrote {args.output}: review it, then gpu-accept run --profile {args.output}", err=True)
    return EXIT_OK


def _baseline_save(args, extra: list[str]) -> int:
    from gpuaccept.facts.run_record import load_results
    from gpuaccept.report.baseline import baseline_runs, save_baseline

    refuse_overlaps([("", path) for path in args.results], [("-o", args.output)])
    sources = _each_once([str(path) for path in args.results])  # one run given twice would narrow its spread
    records = [load_results(path) for path in sources]
    runs = baseline_runs(records, sources)
    profile = records[0].run.profile.name
    saved = save_baseline(args.output, runs[0], profile, runs[1:], sources)
    _print(f"wrote {args.output}: {saved.values} values from {saved.runs} run(s) of profile {profile}")
    for note in saved.notes():
        _print(note)
    return EXIT_OK


def _report_html(args, extra: list[str]) -> int:
    from gpuaccept.facts.run_record import load_results
    from gpuaccept.report.html import render_html

    refuse_overlaps(_results_read(args.results), [("-o", args.output)])
    write_atomically(args.output, render_html(load_results(args.results)))
    _print(f"wrote {args.output}")
    return EXIT_OK


def _report_junit(args, extra: list[str]) -> int:
    from gpuaccept.report.fleet import read_suites, write_runs_junit

    refuse_overlaps([item for path in args.results for item in _results_read(path)], [("-o", args.output)])
    runs = read_suites(_each_once(args.results))
    cases = write_runs_junit(runs, args.output)
    _print(f"wrote {args.output}: {len({run.host for run in runs})} host(s), {len(runs)} run(s), {cases} test cases")
    return EXIT_OK


def _report_cluster(args, extra: list[str]) -> int:
    from gpuaccept.report.cluster_view import text
    from gpuaccept.report.fleet import read_cluster
    from gpuaccept.report.html import render_html

    refuse_overlaps([("", args.results)], [("-o", args.output)])
    cluster = read_cluster(str(args.results))  # judged by its recorded verdict, as the fleet report judges it
    try:
        view, html = text(cluster.record), render_html(cluster.record) if args.output else ""
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
        said = "nested too deeply" if isinstance(error, RecursionError) else f"{type(error).__name__}: {error}"
        raise GpuAcceptError(f"{args.results}: not a readable cluster-results.json ({said})") from None
    for line in view.splitlines():
        _print(line)
    if args.output:
        write_atomically(args.output, html)
    return cluster.exit_code  # the outcome policy's: a failure 1, else a value not established 2


def _results_read(path: str | Path) -> list[tuple[str, str | Path | None]]:
    """A results file as a command reads it: the file, and the journal a killed run left beside it."""
    return [("", path), ("", f"{path}{JOURNAL_SUFFIX}")]


def _each_once(paths: list[str]) -> list[str]:
    """The results files given, a file named twice (overlapping globs) read once: counted twice, one
    host would weigh double in a fleet's medians, one run in a baseline's spread."""
    kept: dict[str, str] = {}
    for path in paths:
        same = os.path.realpath(path)
        if same in kept:
            _print(f"gpu-accept: note: {path} is {kept[same]} again: read once", err=True)
        else:
            kept[same] = path
    return list(kept.values())


def _report_fleet(args, extra: list[str]) -> int:
    from gpuaccept.report.baseline import parse_percent
    from gpuaccept.store.commands import report_fleet

    try:
        tolerance = parse_percent(args.tolerance)
    except ValueError as error:
        raise OptionError(f"--tolerance {error}") from None
    read = [item for path in args.results for item in _results_read(path)] + [("--db", args.db)]
    refuse_overlaps(read, [("-o", args.output), ("--html", args.html)])
    return report_fleet(args, tolerance, _each_once(args.results))


def _store_commands(commands, report_commands, fleet) -> None:
    """The results store's commands and options (gpu-accept store ..., report fleet --db, report history)."""
    from gpuaccept.store.commands import add_commands

    add_commands(commands, report_commands, fleet, _path)


def _profile_schema(args, extra: list[str]) -> int:
    print(json.dumps(profile_json_schema(), indent=2))
    return EXIT_OK


def _report_schema(args, extra: list[str]) -> int:
    from gpuaccept.facts.run_record import results_json_schema

    print(json.dumps(results_json_schema(), indent=2))
    return EXIT_OK


def profile_json_schema() -> dict:
    schema = ProfileSpec.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "gpu-accept profile"
    return schema


if __name__ == "__main__":
    raise SystemExit(main())


# -- where fleets act: metrics for node_exporter, a Slurm health check that drains ---------------------


def _add_metrics_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics", type=_path, metavar="FILE",
        help="also write the verdict, the tests and key values as Prometheus text for node_exporter's textfile collector "
        "(FILE ending in .prom, written atomically; 'in progress' from the start, so a killed run never leaves an old pass)",
    )


def _add_health_check(commands) -> None:
    health = commands.add_parser(
        "health-check",
        allow_abbrev=False,
        help="the quick level as a Slurm HealthCheckProgram, prolog or epilog: no load, the exit code is the verdict",
        description="Run the quick level (health readings, inventory, topology, P2P capability; no load, no torch: "
        "seconds) and print one line: PASS, FAIL and the failing test ids, or COULD NOT JUDGE and why; pytest's own output "
        "goes to health-check.log in the reports folder, the verdict to verdict.json. Exit 0 passed, 1 a check failed, 2 "
        "could not judge. With --on-fail drain a node where a check failed or a value could not be established is drained "
        "in Slurm (scontrol update ... state=drain reason=\"<test ids> (gpu-accept exit 1, ...)\"); nothing is ever "
        "resumed. Options, also those bound for pytest, are checked before anything runs: a bad one never drains. "
        "Arguments this command does not know go to pytest.",
    )
    add_command_options(health, only=("gpuaccept_profile", "gpuaccept_profile_dirs"))
    health.add_argument("--reports", default="reports", help="folder for junit.xml, results.json, report.html, verdict.json and "
                        "health-check.log")
    _add_metrics_option(health)
    health.add_argument(
        "--on-fail", choices=["none", "drain"], default="none",
        help="drain: where a check failed (exit 1) or its checks ran and a value could not be established (exit 2), drain "
        "this node in Slurm with those test ids as the reason",
    )
    health.add_argument(
        "--on-error", choices=["none", "drain"], default="none",
        help="drain: also drain where the node could not be judged at all (exit 2: no driver, a probe that hung), the "
        "cause as the reason; bad options are refused before anything runs and never drain",
    )
    health.add_argument(
        "--node", help="the Slurm node name to drain, one plain name (default: $SLURMD_NODENAME, else this host's short name)"
    )
    health.set_defaults(handler=_health_check)


HEALTH_WORDS = {"passed": "PASS", "failed": "FAIL", "not_judged": "COULD NOT JUDGE"}


def _health_check(args, extra: list[str]) -> int:
    from gpuaccept.report.slurm import drain, drain_asked, drain_reason, node_to_drain

    # bad usage is refused before anything runs: it must never drain a node
    draining = "drain" in (args.on_fail, args.on_error)
    node = node_to_drain(args.node, _host()) if args.node is not None or draining else ""
    catalog = _catalog(args)  # a profile (or folder of them) that does not load is the operator's to fix, not the node's
    if args.gpuaccept_profile != "auto":
        catalog.load(args.gpuaccept_profile)
    quick = argparse.Namespace(
        gpuaccept_profile=args.gpuaccept_profile, gpuaccept_profile_dirs=args.gpuaccept_profile_dirs, reports=args.reports,
        gpuaccept_level="quick", metrics=args.metrics, started_probe=args.started_probe,  # the probe started as the command began
    )
    code, verdict = _judged_run(quick, extra, "health-check", log=Path(args.reports) / "health-check.log")
    if code == EXIT_OK:
        _print("gpu-accept health-check: PASS")
        return code
    reason = drain_reason(verdict)
    done = ""
    if drain_asked(verdict, args.on_fail, args.on_error):
        said: list[str] = []
        drain(node, reason, said.append)
        done = f" [{said[-1]}]" if said else ""
    _print(f"gpu-accept health-check: {HEALTH_WORDS[verdict.result]}: {reason}{done}")
    return code


def _add_report_metrics(report_commands) -> None:
    metrics = report_commands.add_parser(
        "metrics",
        help="Prometheus text of runs: each host's latest results.json, for node_exporter's textfile collector",
        description="The verdicts and measured values of runs in the Prometheus text format (docs/metrics.md): of each "
        "host, its latest run (by start time) among the files given, every series labelled command=\"fleet\".",
    )
    metrics.add_argument("results", nargs="+", type=_path, help="results.json files")
    metrics.add_argument("-o", "--output", type=_path, required=True, help="the .prom file to write (atomically)")
    metrics.set_defaults(handler=_report_metrics)


def _add_report_verdict(report_commands) -> None:
    verdict = report_commands.add_parser(
        "verdict",
        help="one line of a run's verdict.json, for scripts: its exit code, then the cause (what a Slurm drain says)",
        description="Prints `EXIT REASON` on one line of printable ASCII (anything else escaped): the verdict's exit code (0 "
        "passed, 1 a check failed, 2 could not judge, also for a run in progress or killed), then the failing tests or the "
        "cause, most telling words first, at most --width characters. Exit 0 where the file was read, 2 where not.",
    )
    verdict.add_argument("verdict", type=_path, help="verdict.json (or the reports folder that holds it)")
    verdict.add_argument("--width", type=int, default=200, help="the reason's most characters (default 200)")
    verdict.set_defaults(handler=_report_verdict)


def _report_metrics(args, extra: list[str]) -> int:
    from gpuaccept.facts.run_record import load_results
    from gpuaccept.report.metrics import render_metrics

    refuse_overlaps([item for path in args.results for item in _results_read(path)], [("-o", args.output)])
    records = sorted((load_results(path) for path in args.results), key=lambda record: record.run.started_at)
    write_atomically(args.output, render_metrics(records))
    hosts = len({record.environment.host for record in records})
    _print(f"wrote {args.output}: {hosts} host(s) from {len(records)} run(s)")
    return EXIT_OK


def _report_verdict(args, extra: list[str]) -> int:
    from gpuaccept.report.slurm import drain_reason

    if args.width < 20:
        raise OptionError(f"--width {args.width}: at least 20 characters")
    path = args.verdict / run_verdict.VERDICT_FILE if args.verdict.is_dir() else args.verdict
    verdict = run_verdict.load_verdict(path)
    reason = "passed" if verdict.exit_code == EXIT_OK else drain_reason(verdict, limit=args.width)  # what the drain says
    reason = reason.encode("ascii", "backslashreplace").decode("ascii")  # cut anywhere, it stays whole characters
    print(f"{verdict.exit_code} {reason if len(reason) <= args.width else reason[: args.width - 3] + '...'}")
    return EXIT_OK
