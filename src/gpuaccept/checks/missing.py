"""What facts can lack that a check judges, and how facts come to hold it: the one list every check
names its missing facts from (`judge.missing(subject, PER_GPU_LOADS)`), so that the same want of
facts reads the same in every check, in the coverage by area and in every report.

Whether a verdict for want of facts is "could not judge" or "not applicable" is the outcome policy's
one rule (outcomes.py, `outcome_of_missing`): facts that lack what the profile asks for could not
judge it; a skip is only what the profile does not ask for.
"""

from __future__ import annotations

from dataclasses import dataclass

MEASURE = "record them with `gpu-accept record --measure --profile {profile}`"


@dataclass(frozen=True)
class Missing:
    """What the facts lack (`what`, as in "the facts hold no per-GPU loads") and how they come to
    hold it (`{profile}` is the profile's name)."""

    what: str
    how: str

    @property
    def reason(self) -> str:
        """The want of facts, as coverage by area shows it."""
        return f"the facts hold no {self.what}"

    def message(self, profile: str) -> str:
        return f"{self.reason} ({self.how.format(profile=profile)})"


NCCL_SWEEP = Missing("NCCL sweep", MEASURE)
PAIRWISE_SWEEP = Missing("pairwise sweep", MEASURE)
COPY_BANDWIDTH = Missing("copy bandwidth", MEASURE)
DDP_SWEEP = Missing("DDP sweep", MEASURE)
DDP_SWEEP_WITHOUT_P2P = Missing("DDP sweep without P2P", MEASURE)
PER_GPU_LOADS = Missing("per-GPU loads", "recorded without the compute stage; " + MEASURE)
HEALTH_READINGS = Missing("health readings", "recorded before health readings, or read from text: `gpu-accept record --measure` takes them")
LOAD_FOR_HEALTH = Missing(
    "health readings after a load", "only the start snapshot: no measurement stage ran; `gpu-accept record --measure` takes them"
)
KERNEL_LOG = Missing("kernel log reading", "recorded before the kernel log was read, or read from text")
XID_LISTENER = Missing("XID event listening", "recorded before NVML's events were listened for, or read from text")
TELEMETRY = Missing("telemetry", "it is sampled while a live run measures; `gpu-accept record --measure` records it")
SUSTAINED_LOAD = Missing("sustained load", "a burn-in of a profile with compute.gemm: `gpu-accept burn-in`")
BURNIN = Missing("burn-in", "run `gpu-accept burn-in --duration 30m`")
