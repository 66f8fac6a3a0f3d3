"""The stages are one table: the registry, the names of stages and the sweeps of `Measurements` agree, and each
stage's plans hold what a recorded run measured."""

from typing import get_args

from gpuaccept.checks.stages import STAGE_ORDER
from gpuaccept.facts.measurements import DdpSweep, Measurements
from gpuaccept.measure.drills import Drills
from gpuaccept.profile import ProfileCatalog
from gpuaccept.stages.registry import STAGES
from gpuaccept.stages.stage import StageRun
from gpuaccept.stages.sustained import SustainedLoad
from gpuaccept.vocabulary.steps import CollectiveKey, CopyKey, DdpKey, LoadKey, PairKey, StageName, parse_step_key
from tests.helpers import example_facts


def test_every_stage_name_has_one_stage_and_every_sweep_one_stage():
    assert list(STAGES) == list(get_args(StageName)) == ["copies", "compute", "ddp", "nccl"]
    assert {name: stage.sweeps for name, stage in STAGES.items()} == {
        "nccl": ("collectives", "pairwise"), "copies": ("copies",), "ddp": ("ddp", "ddp_without_p2p"), "compute": ("compute",),
    }
    every = [sweep for stage in STAGES.values() for sweep in stage.sweeps]
    assert sorted(every) == sorted(Measurements.sweep_names())  # each sweep belongs to exactly one stage
    assert {key.stage for key in (CollectiveKey, PairKey, CopyKey, DdpKey, LoadKey)} == set(STAGES)
    assert sorted(STAGE_ORDER) == sorted(STAGES)  # the burn-in lists every stage's values, a new stage's too


def test_a_per_gpu_stage_keeps_a_file_per_group_of_gpus_loaded_together_and_a_fabric_stage_one():
    assert [STAGES["nccl"].file(), STAGES["copies"].file(), STAGES["ddp"].file()] == ["nccl.json", "copies.json", "ddp.json"]
    compute = STAGES["compute"]
    assert compute.per_gpu and compute.file(3) == "compute-gpu3.json" and compute.file(0, 2, 3) == "compute-gpu0-gpu2-gpu3.json"
    assert [compute.gpus_of_file(name) for name in ("compute-gpu0-gpu2-gpu3.json", "compute-gpu3.json")] == [[0, 2, 3], [3]]
    assert [compute.gpus_of_file(name) for name in ("copies.json", "compute-gpux.json", "compute-gpu1.json.partial")] == [[], [], []]
    parts = {name: stage.in_burnin for name, stage in STAGES.items()}
    assert parts == {"copies": "fabric", "compute": "load", "ddp": None, "nccl": "fabric"}
    assert STAGES["compute"].sustain is SustainedLoad  # the one stage a burn-in asks for its sustained load


def test_each_stage_plans_what_the_recorded_run_measured(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)
    facts, profile = example_facts("h200x4-measured"), ProfileCatalog.with_shipped().load("h200-4-nvswitch")
    run = StageRun(facts=facts, gpus=[0, 1, 2, 3], scratch=tmp_path)

    def planned(name):
        return {str(key) for plan, _ in STAGES[name].plans(profile.spec, run) for step in plan.steps for key in step.keys}

    def recorded(name):
        sweeps = [getattr(facts.measurements, field) for field in STAGES[name].sweeps]
        return {str(sweep.key_of(r) if isinstance(sweep, DdpSweep) else r.key) for sweep in sweeps if sweep for r in sweep.results}

    assert planned("nccl") == recorded("nccl") and len(planned("nccl")) == 21  # every collective and size, every pair
    assert planned("copies") == recorded("copies") and len(planned("copies")) == 30
    # the recording swept batch 2 and 2 GPUs too; the profile asks for batch 8 on 1 and 4 GPUs, and its A/B arm on 4
    assert planned("ddp") == {"ddp/1gpu-bs8", "ddp/4gpu-bs8", "ddp_without_p2p/4gpu-bs8"} <= recorded("ddp")
    # each plan as its workers run it, environment included: what a set given it ahead sets up with
    (nccl, ranks), = STAGES["nccl"].plans(profile.spec, run)
    assert ranks == 4 and nccl.environment["NCCL_DEBUG_FILE"].startswith(str(tmp_path))  # NCCL's set-up lines in the run's folder
    assert [ranks for _, ranks in STAGES["copies"].plans(profile.spec, run)] == [1]  # one process that sees every GPU
    (scaling, scaling_ranks), (ab, ab_ranks) = STAGES["ddp"].plans(profile.spec, run)
    assert (scaling_ranks, ab_ranks) == (4, 4) and ab.environment == {"NCCL_P2P_DISABLE": "1"} and scaling.environment == {}
    per_gpu = STAGES["compute"].plans(profile.spec, run)
    assert [{key.gpu for step in plan.steps for key in step.keys} for plan, _ in per_gpu] == [{0}, {1}, {2}, {3}]  # a plan per GPU
    assert [plan.environment["CUDA_VISIBLE_DEVICES"] for plan, _ in per_gpu] == ["0", "1", "2", "3"]  # each sees its GPU alone
    assert {plan.backend for plan, _ in per_gpu} == {"nccl"}  # the facts say CUDA sees the GPUs: no load falls back to the CPU
    assert {plan.drills for plan, _ in per_gpu} == {run.drills} and {ranks for _, ranks in per_gpu} == {1}
    drills = Drills(dip="all_reduce 256 MiB").for_attempt(2)
    again = StageRun(facts=facts, gpus=[0, 1, 2, 3], only={parse_step_key("collective/all_reduce/256MiB")}, drills=drills, scratch=tmp_path)
    ((plan, _),) = STAGES["nccl"].plans(profile.spec, again)
    assert plan.drills == drills and [str(key) for step in plan.steps for key in step.keys] == ["collective/all_reduce/256MiB"]
