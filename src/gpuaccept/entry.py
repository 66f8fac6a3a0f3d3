"""The `gpu-accept` command's first moments. Where the command probes this machine (`run`,
`health-check` and `burn-in` without --facts or --import), the probe's child process starts here,
before the command line's modules (pytest, the profiles, the facts' models) are imported: the probe
takes as long as that import and pytest's start together, and runs beside them.

No answer of the machine is used before the options are checked: a run refused for bad input
ends the probe's child unread (its one line names the input, never the machine).
"""

from __future__ import annotations

import gc
import sys

PROBING_COMMANDS = ("run", "health-check", "burn-in")
# options after which the run reads no machine, and help, which runs nothing
NOT_PROBING = ("--facts", "--import", "-h", "--help")
PROBE_END_GRACE_S = 10.0  # a probe whose facts were read, given this long to end on its own


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    probe = None
    if _probes(argv):
        from gpuaccept.probe import start_probe, warm

        probe = start_probe(quick=_quick(argv))
        warm.begin_nvml()  # for the XID listener this process opens as its session starts
    try:
        from gpuaccept.cli import main as command_line

        return command_line(argv, probe=probe)
    finally:
        if probe is not None:
            # read by the run (it closed its output then, and has ended since, or ends now), or not
            # wanted after all (a run refused for bad input: ended unread)
            probe.stop(grace_s=PROBE_END_GRACE_S if probe.output_read else 0.0)
        # the process ends next, its reports written: Python's collection as it exits need not go
        # through every object the command made
        gc.freeze()


def _quick(argv: list[str]) -> bool:
    """Whether these arguments ask for the quick level, as far as they can tell unparsed: the run
    checks the guess once its options are read (a probe for another level is then started again)."""
    mine = _own(argv)
    if mine[:1] == ["health-check"]:
        return True
    levels = [after for word, after in zip(mine, [*mine[1:], ""], strict=True) if word == "--level"]
    levels += [word.removeprefix("--level=") for word in mine if word.startswith("--level=")]
    return len(levels) == 1 and levels[0] == "quick"


def _probes(argv: list[str]) -> bool:
    """Whether these arguments run the suites on this machine, as far as they can tell unparsed:
    a wrong guess costs a probe that is ended unread."""
    mine = _own(argv)
    if not mine or mine[0] not in PROBING_COMMANDS:
        return False
    return not any(word == option or word.startswith(option + "=") for word in mine for option in NOT_PROBING)


def _own(argv: list[str]) -> list[str]:
    """The command's own arguments: those before "--", after which pytest's come."""
    return argv[: argv.index("--")] if "--" in argv else argv
