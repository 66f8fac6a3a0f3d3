"""Facts: what was found on a machine, frozen, with an exact JSON round trip.

Everything above this seam touches hardware; everything below reads only these records. A value
the hardware would not give is recorded as `Unavailable` with its reason, never as None or 0, so
a check can tell "not supported" from "zero" and say which it saw.

This module holds the whole (`Facts`); its parts live beside it: record.py the base of every record
and its readings, machine.py the inventory and topology, measurements.py what the stages measured,
telemetry.py what was sampled while the run went on and a burn-in's rounds, health.py the health
snapshots and XID events.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from gpuaccept.errors import excerpt
from gpuaccept.facts.health import HealthFacts
from gpuaccept.facts.machine import CudaFacts, GpuFacts, InstalledGpu, LinkFacts, P2PFacts, SystemFacts
from gpuaccept.facts.measurements import Measurements
from gpuaccept.facts.record import OmitsLaterDefaults, Record, Unavailable
from gpuaccept.facts.relations import check_relations
from gpuaccept.facts.telemetry import BurnIn, Telemetry

FACTS_VERSION: Literal[1] = 1


class TextSource(Record):
    """Facts read from command outputs instead of probed: which files, and what reading them found."""

    files: list[str]  # as given, in order
    kinds: dict[str, list[str]]  # file -> what it held: "nvidia-smi topo -m", "nccl-tests all_reduce_perf", ...
    notes: list[str] = Field(default_factory=list)  # damage found and what was still used, one line each


class Facts(OmitsLaterDefaults):
    facts_version: Literal[1] = FACTS_VERSION
    recorded_at: str  # ISO 8601, UTC
    tool_version: str
    system: SystemFacts
    cuda: CudaFacts | Unavailable
    gpus: list[GpuFacts]
    links: list[LinkFacts] = Field(default_factory=list)
    p2p: list[P2PFacts] = Field(default_factory=list)
    environment: dict[str, str] = Field(default_factory=dict)  # CUDA_*, NCCL_* ... as the probe saw them
    measurements: Measurements = Field(default_factory=Measurements)
    imported_from: TextSource | None = None  # set where the facts were read from command outputs
    telemetry: Telemetry | None = None  # sampled while the run went on (live runs)
    burnin: BurnIn | None = None  # the rounds of a burn-in
    health: HealthFacts = Field(default_factory=HealthFacts)  # snapshots and XID events, where probed

    later_fields: ClassVar[dict[str, Any]] = {
        "imported_from": None, "telemetry": None, "burnin": None, "health": HealthFacts().model_dump(),
    }

    @field_validator("gpus")
    @classmethod
    def _indexed_in_order(cls, gpus: list[GpuFacts]) -> list[GpuFacts]:
        # `gpu(i)` and every check read gpus[i] as gpuN: a list out of order would judge the wrong GPU
        rule = f"GPUs are listed by index, 0 to {len(gpus) - 1}, each once, in order"
        for position, gpu in enumerate(gpus):
            earlier = next((i for i, g in enumerate(gpus[:position]) if g.index == gpu.index), None)
            if earlier is not None:
                raise ValueError(f"index {excerpt(gpu.index)} is given twice (gpus[{earlier}] and gpus[{position}]): {rule}")
            if gpu.index != position:
                raise ValueError(f"gpus[{position}] has index {excerpt(gpu.index)}: {rule}")
        return gpus

    @model_validator(mode="after")
    def _consistent(self) -> Facts:
        # facts that contradict each other describe no machine: judged, they would give it a verdict
        check_relations(self)
        return self

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    def gpu(self, index: int) -> GpuFacts | None:
        return self.gpus[index] if 0 <= index < len(self.gpus) else None

    def link(self, a: int, b: int) -> LinkFacts | None:
        key = (min(a, b), max(a, b))
        return next((link for link in self.links if tuple(link.gpus) == key), None)

    def p2p_of(self, src: int, dst: int) -> P2PFacts | None:
        return next((p for p in self.p2p if tuple(p.gpus) == (src, dst)), None)

    def at_attempt(self, index: int) -> Facts:
        """These facts with confirmation round `index`'s measurements in place of the first ones."""
        return self.model_copy(update={"measurements": self.measurements.attempt(index)})

    def installed(self) -> tuple[str, int]:
        """(GPU model, GPU count) of the machine as installed: NVML's view, which
        CUDA_VISIBLE_DEVICES does not change; the GPUs under test where older facts lack it."""
        model = self.system.installed_model
        if model is not None:
            return model, self.system.nvml_gpu_count
        name = self.gpus[0].name if self.gpus else "no GPU"
        return (name if isinstance(name, str) else f"a GPU whose model is not known ({name})"), self.gpu_count

    @property
    def hidden_gpus(self) -> list[InstalledGpu]:
        """GPUs NVML sees that are not under test (hidden by CUDA_VISIBLE_DEVICES, or unusable by CUDA)."""
        tested = {gpu.uuid for gpu in self.gpus}
        return [gpu for gpu in self.system.installed_gpus if gpu.uuid not in tested]
