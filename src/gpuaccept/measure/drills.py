"""Fault drills: faults injected on purpose, so that a run can be seen failing as it should
(docs/drills.md lists them).

A drill is asked for with an environment variable (GPUACCEPT_INJECT_*). The variables are read
once, where a run begins (the pytest plugin, `gpu-accept record --measure`, each rank of
`gpu-accept cluster`), into one record, `Drills`. The record travels in every measurement plan to
the workers, which act on it, and is kept in the facts' environment beside the NCCL settings, so
that results.json and the report say a drill was on.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from gpuaccept.errors import GpuAcceptError
from gpuaccept.facts import Facts
from gpuaccept.vocabulary.drills import CORRUPT_GEMM, DIP, HANG, MEMTEST_FLIP, SLOW, SLOW_GEMM, WRONG
from gpuaccept.vocabulary.links import gpu_key

SLOW_GEMM_S = 0.2  # how long a GPU of SLOW_GEMM idles after each timed product


class Drills(BaseModel):
    """The drills a run was asked for; the default asks for none."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hang: str | None = None  # the last rank never joins this step: its peers block in a real collective
    wrong: str | None = None  # one element of the last rank's result of this collective step is off
    dip: str | None = None  # the first measurement of this collective step is a third slower (not a repeat)
    slow_s: float | None = None  # each timed collective operation takes this much longer (one node's ranks)
    slow_gemm: tuple[str, ...] = ()  # these GPUs idle SLOW_GEMM_S after each timed product
    corrupt_gemm: tuple[str, ...] = ()  # one element of one verification product of these GPUs is off
    memtest_flip: tuple[str, ...] = ()  # one memory bit of these GPUs flips after the first pattern

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Drills:
        """The drills the variables in `environ` ask for. Raises GpuAcceptError for a value that
        cannot be used, naming the variable."""
        slow = environ.get(SLOW) or None
        try:
            slow_s = float(slow) if slow is not None else None
        except ValueError:
            raise GpuAcceptError(f"{SLOW}={slow!r}: not a number of seconds") from None
        return cls(
            hang=environ.get(HANG) or None,
            wrong=environ.get(WRONG) or None,
            dip=environ.get(DIP) or None,
            slow_s=slow_s,
            slow_gemm=_gpus(environ.get(SLOW_GEMM, "")),
            corrupt_gemm=_gpus(environ.get(CORRUPT_GEMM, "")),
            memtest_flip=_gpus(environ.get(MEMTEST_FLIP, "")),
        )

    def for_attempt(self, attempt: int) -> Drills:
        """The drills of one attempt at a stage (0 the first, N the Nth measured again): a dip is a
        one-off, so the measurements that confirm a miss see none."""
        return self if attempt == 0 else self.model_copy(update={"dip": None})

    def environment(self) -> dict[str, str]:
        """The variables of the drills asked for, as a run's environment records them."""
        given = {
            HANG: self.hang,
            WRONG: self.wrong,
            DIP: self.dip,
            SLOW: None if self.slow_s is None else f"{self.slow_s:g}",
            SLOW_GEMM: ",".join(self.slow_gemm) or None,
            CORRUPT_GEMM: ",".join(self.corrupt_gemm) or None,
            MEMTEST_FLIP: ",".join(self.memtest_flip) or None,
        }
        return {name: value for name, value in given.items() if value is not None}

    def recorded_in(self, facts: Facts) -> Facts:
        """`facts` with these drills in their environment."""
        asked = self.environment()
        if not asked:
            return facts
        return facts.model_copy(update={"environment": dict(sorted({**facts.environment, **asked}.items()))})


def names_gpu(gpus: tuple[str, ...], gpu: int) -> bool:
    """Whether a drill's list of GPUs names `gpu`."""
    return gpu_key(gpu) in gpus


def _gpus(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


NO_DRILLS = Drills()
