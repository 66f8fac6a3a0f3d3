"""The stages are one table: the registry, the names of stages and the sweeps of `Measurements` agree."""

from typing import get_args

from gpuaccept.facts.model import Measurements
from gpuaccept.stages.registry import STAGES
from gpuaccept.vocabulary.steps import CollectiveKey, CopyKey, DdpKey, LoadKey, PairKey, StageName


def test_every_stage_name_has_one_stage_and_every_sweep_one_stage():
    assert list(STAGES) == list(get_args(StageName)) == ["nccl", "copies", "ddp", "compute"]
    assert {name: stage.sweeps for name, stage in STAGES.items()} == {
        "nccl": ("collectives", "pairwise"), "copies": ("copies",), "ddp": ("ddp", "ddp_without_p2p"), "compute": ("compute",),
    }
    every = [sweep for stage in STAGES.values() for sweep in stage.sweeps]
    assert sorted(every) == sorted(Measurements.sweep_names())  # each sweep belongs to exactly one stage
    assert {key.stage for key in (CollectiveKey, PairKey, CopyKey, DdpKey, LoadKey)} == set(STAGES)


def test_a_per_gpu_stage_keeps_a_file_per_gpu_and_a_fabric_stage_one():
    assert [STAGES["nccl"].file(), STAGES["copies"].file(), STAGES["ddp"].file()] == ["nccl.json", "copies.json", "ddp.json"]
    assert STAGES["compute"].per_gpu and STAGES["compute"].file(3) == "compute-gpu3.json"
    assert {name for name, stage in STAGES.items() if stage.in_burnin} == {"nccl", "copies", "compute"}
