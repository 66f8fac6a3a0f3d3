"""Where a word of the vocabulary is also spelt elsewhere (a profile key, a schema pattern, a type),
the two agree."""

import re
import typing

import pytest

from gpuaccept.importers.p2p_grid import CAPABILITY_LETTERS
from gpuaccept.profile.spec import CopySpec
from gpuaccept.vocabulary.affinity import cpu_set, is_cpu_list
from gpuaccept.vocabulary.copies import COPY_KINDS, floor_key
from gpuaccept.vocabulary.gpt import PRESETS, GptPreset
from gpuaccept.vocabulary.links import GPU_KEY_PATTERN, PAIR_KEY_PATTERN, gpu_key, pair_key, parse_gpu_key, parse_pair_key
from gpuaccept.vocabulary.nvml_codes import P2P_STATUS_CODES, P2P_STATUS_NAMES, P2PCapability
from gpuaccept.vocabulary.steps import DDP_CASE_PATTERN, CollectiveKey, CopyKey, DdpKey, PairKey, ddp_case, parse_ddp_case, parse_step_key


def test_every_copy_kind_has_its_floor_in_the_profile_and_no_other_floor_is_there():
    floors = {name for name in CopySpec.model_fields if name.endswith("_min")}
    assert floors == {floor_key(kind) for kind in COPY_KINDS}


def test_every_gpt_preset_a_profile_may_name_has_dimensions():
    assert set(typing.get_args(GptPreset)) == set(PRESETS)


def test_keys_are_read_back_as_written_and_match_their_schema_patterns():
    assert re.match(GPU_KEY_PATTERN, gpu_key(12)) and parse_gpu_key(gpu_key(12)) == 12
    assert re.match(PAIR_KEY_PATTERN, pair_key(3, 10)) and parse_pair_key(pair_key(3, 10)) == (3, 10)
    for case in (ddp_case(4, 8), ddp_case(8, 2, 4)):
        assert re.match(DDP_CASE_PATTERN, case) and ddp_case(*parse_ddp_case(case)) == case


def test_each_step_key_belongs_to_the_stage_that_measures_it():
    stages = {"collective/all_reduce/1GiB": "nccl", "pair/gpu0-gpu1": "nccl", "copy/p2p/gpu0-gpu1": "copies",
              "ddp/4gpu-bs8": "ddp", "ddp_without_p2p/4gpu-bs8": "ddp"}
    assert {key: parse_step_key(key).stage for key in stages} == stages


def test_step_keys_are_typed_and_read_back_from_their_wire_form():
    keys = [CollectiveKey("all_reduce", 1 << 30), PairKey.between(3, 1), CopyKey("p2p", (1, 0)), CopyKey("local", (2,)),
            DdpKey(4, 2, 4), DdpKey(4, 8, without_p2p=True)]
    assert [str(key) for key in keys] == ["collective/all_reduce/1GiB", "pair/gpu1-gpu3", "copy/p2p/gpu1-gpu0", "copy/local/gpu2",
                                          "ddp/4gpu-bs2-acc4", "ddp_without_p2p/4gpu-bs8"]
    assert [parse_step_key(str(key)) for key in keys] == keys
    assert DdpKey.of_case("4gpu-bs2-acc4") == keys[4] and keys[4].case == "4gpu-bs2-acc4"
    assert PairKey(0, 1) != parse_step_key("copy/p2p_bidirectional/gpu0-gpu1") and PairKey(0, 1) != "pair/gpu0-gpu1"


@pytest.mark.parametrize("text", ["pair/gpu1-gpu0", "pair/gpu0", "collective/all_reduce/1GB", "copy/p2p/gpu0", "copy/local/gpu0-gpu1",
                                  "copy/p2p/gpu1-gpu1", "ddp/4gpus-bs8", "ddp/0gpu-bs8", "all_reduce 1 GiB", ""])
def test_what_is_not_a_step_key_is_refused_saying_why(text):
    with pytest.raises(ValueError, match="is not a step key"):
        parse_step_key(text)


def test_each_p2p_status_nvidia_smi_prints_is_one_nvml_names_and_every_capability_has_its_letter():
    assert sorted(P2P_STATUS_CODES.values()) == sorted(P2P_STATUS_NAMES.values())
    assert sorted(CAPABILITY_LETTERS.values()) == sorted(capability.name.lower() for capability in P2PCapability)


def test_an_affinity_list_reads_as_the_same_cpus_however_it_is_written():
    assert is_cpu_list("0-47,96-143") and not is_cpu_list("0-47,") and not is_cpu_list("N/A")
    assert cpu_set("0-2,8") == cpu_set("8,0,1,2") == {0, 1, 2, 8}
