"""The fault drills' environment variables, as users and docs name them (docs/drills.md): read at a
run's door into measure/drills.Drills, and recognised by the reports in the facts' environment."""

DRILL_PREFIX = "GPUACCEPT_INJECT_"
# a step's label or key ("all_reduce 1 GiB", "collective/all_reduce/1GiB")
HANG = "GPUACCEPT_INJECT_HANG"
WRONG = "GPUACCEPT_INJECT_WRONG"
DIP = "GPUACCEPT_INJECT_DIP"
# seconds
SLOW = "GPUACCEPT_INJECT_SLOW"
# GPUs as test ids name them, comma-separated ("gpu1,gpu3")
SLOW_GEMM = "GPUACCEPT_INJECT_SLOW_GEMM"
CORRUPT_GEMM = "GPUACCEPT_INJECT_CORRUPT_GEMM"
MEMTEST_FLIP = "GPUACCEPT_INJECT_MEMTEST_FLIP"


def drills_in(environment: dict[str, str]) -> dict[str, str]:
    """The drill variables of a run's recorded environment: a run with any was a drill, not a verdict."""
    return {name: value for name, value in environment.items() if name.startswith(DRILL_PREFIX)}
