"""Checks against real recorded facts, and against faults made from them: each fault fails exactly
the check it should, with a message naming the GPU or pair, the value and the expectation."""

import pytest

from gpuaccept.checks import inventory, p2p, topology
from gpuaccept.checks.verdict import AtLeast, InRange, Outcome
from gpuaccept.profile import ProfileCatalog
from tests.helpers import cuda_sees_only, example_facts, mutated, nvml_replay, probe_replay

CATALOG = ProfileCatalog.with_shipped()


def all_verdicts(profile, facts):
    n = profile.gpu_count
    verdicts = [inventory.gpu_count(profile, facts), inventory.driver_version(profile, facts), inventory.cuda_version(profile, facts)]
    for gpu in range(n):
        for check in (inventory.gpu_model, inventory.gpu_memory, inventory.ecc_mode, topology.pcie_generation,
                      topology.pcie_width, topology.nvlink_links, topology.nvlink_version, topology.fabric_state):
            verdicts.append(check(profile, facts, gpu))
    for pair in profile.gpu_pairs():
        verdicts.append(topology.link_type(profile, facts, pair))
    for pair in profile.ordered_gpu_pairs():
        verdicts.append(p2p.p2p_capability(profile, facts, pair))
        verdicts.append(p2p.p2p_cuda_agrees(profile, facts, pair))
    return verdicts


def failures(profile, facts):
    return {(v.check, v.subject): v for v in all_verdicts(profile, facts) if not v.ok}


@pytest.mark.parametrize("machine, profile_name", [("h200x4", "h200-4-nvswitch"), ("h200x1", "h200-1"), ("h100x1", "h100-1")])
def test_recorded_machine_passes_its_own_profile(machine, profile_name):
    profile = CATALOG.load(profile_name)
    verdicts = all_verdicts(profile, example_facts(machine))
    assert [v.message for v in verdicts if not v.ok] == []
    assert any(v.outcome is Outcome.PASSED for v in verdicts)


H200 = CATALOG.load("h200-4-nvswitch")


def without_gpu3(d):
    """What the probe records with CUDA_VISIBLE_DEVICES=0,1,2 on the 4-GPU machine."""
    d["gpus"].pop(3)
    d["links"] = [link for link in d["links"] if 3 not in link["gpus"]]
    d["p2p"] = [pair for pair in d["p2p"] if 3 not in pair["gpus"]]
    d["environment"]["CUDA_VISIBLE_DEVICES"] = "0,1,2"
    cuda_sees_only(d, 3)


def test_a_missing_gpu_fails_the_count_and_every_test_of_that_gpu():
    facts = mutated(example_facts("h200x4"), without_gpu3)
    failed = failures(H200, facts)
    assert failed[("gpu_count", "vm")].message.startswith(
        "vm: found 3 GPU(s), expected 4 (3 GPU(s) under test, CUDA_VISIBLE_DEVICES=0,1,2, 4 in the machine; "
        "hidden by CUDA_VISIBLE_DEVICES: NVML GPU 3 (NVIDIA H200, bus 00000000:00:09.0, GPU-"
    )
    assert ("gpu_model", "gpu3") in failed and "GPU not present" in failed[("gpu_model", "gpu3")].message
    assert ("link_type", "gpu2-gpu3") in failed and "gpu3 not present" in failed[("link_type", "gpu2-gpu3")].message
    assert all("3" in subject for (_, subject) in failed if subject != "vm")
    assert not any(subject in ("gpu0", "gpu0-gpu1") for (_, subject) in failed)


def test_one_pair_at_nv12_fails_only_that_pair():
    def nv12(d):
        for link in d["links"]:
            if link["gpus"] == [1, 3]:
                link["link_type"] = "NV12"
    failed = failures(H200, mutated(example_facts("h200x4"), nv12))
    assert list(failed) == [("link_type", "gpu1-gpu3")]
    assert failed[("link_type", "gpu1-gpu3")].message == "gpu1-gpu3: link type NV12, expected NV18 (via NVSwitch) (profile h200-4-nvswitch)"


def test_pcie_x8_fails_the_width_of_that_gpu_only():
    failed = failures(H200, mutated(example_facts("h200x4"), lambda d: d["gpus"][2]["pcie"].update(width_current=8)))
    assert list(failed) == [("pcie_width", "gpu2")]
    verdict = failed[("pcie_width", "gpu2")]
    assert verdict.message == "gpu2: PCIe width 8 lanes < 16 lanes (link max x16) (profile h200-4-nvswitch)"
    assert (verdict.measured, verdict.expected, verdict.unit) == (8, ">= 16 lanes", "lanes")


def test_p2p_not_supported_on_one_pair_fails_its_capability_and_the_cuda_cross_check():
    def no_p2p(d):
        for pair in d["p2p"]:
            if pair["gpus"] == [0, 2]:
                pair["nvml"].update(read="NOT_SUPPORTED", write="NOT_SUPPORTED")
    failed = failures(H200, mutated(example_facts("h200x4"), no_p2p))
    assert set(failed) == {("p2p_capability", "gpu0-gpu2"), ("p2p_cuda_agrees", "gpu0-gpu2")}
    assert "P2P read NOT_SUPPORTED, expected OK; write NOT_SUPPORTED, expected OK" in failed[("p2p_capability", "gpu0-gpu2")].message
    assert failed[("p2p_cuda_agrees", "gpu0-gpu2")].message.startswith("gpu0-gpu2: CUDA peer access yes, expected no")


def test_wrong_gpu_model_fails_the_model_of_every_gpu():
    facts = mutated(example_facts("h200x4"), lambda d: [g.update(name="NVIDIA H100 80GB HBM3") for g in d["gpus"]])
    failed = failures(H200, facts)
    assert set(failed) == {("gpu_model", f"gpu{i}") for i in range(4)}
    assert failed[("gpu_model", "gpu0")].message.startswith("gpu0: model 'NVIDIA H100 80GB HBM3', expected 'NVIDIA H200'")


def test_nvlink_not_supported_fails_the_nvlink_tests_of_that_gpu_naming_the_nvml_call():
    def unsupported(d):
        d["gpus"][1]["nvlinks"] = {"unavailable": "not_supported", "detail": "nvlink_state(1, 0): NOT_SUPPORTED Not Supported"}
    failed = failures(H200, mutated(example_facts("h200x4"), unsupported))
    assert set(failed) == {("nvlink_links", "gpu1"), ("nvlink_version", "gpu1")}
    verdict = failed[("nvlink_links", "gpu1")]
    assert verdict.outcome is Outcome.FAILED
    assert "gpu1: NVLink state not supported (nvlink_state(1, 0): NOT_SUPPORTED Not Supported), expected == 18 links" in verdict.message


def test_an_unreadable_fact_is_an_error_never_a_pass():
    def lost(d):
        d["gpus"][0]["pcie"]["width_current"] = {"unavailable": "gpu_is_lost", "detail": "pcie_width_current(0): GPU_IS_LOST"}
    failed = failures(H200, mutated(example_facts("h200x4"), lost))
    assert failed[("pcie_width", "gpu0")].outcome is Outcome.ERROR


def test_links_down_by_design_are_allowed_and_others_are_named():
    def two_down(d):
        for link in d["gpus"][3]["nvlinks"][16:]:
            link["active"] = False
    facts = mutated(example_facts("h200x4"), two_down)
    failed = failures(H200, facts)
    assert failed[("nvlink_links", "gpu3")].message.startswith("gpu3: 16 NVLinks active, expected 18 (down, not by design: link 16, 17)")


def test_profile_silent_on_a_subject_gives_not_applicable():
    profile = CATALOG.load("h200-1")
    assert inventory.ecc_mode(profile, example_facts("h200x1"), 0).outcome is Outcome.PASSED
    assert topology.nvlink_version(profile, example_facts("h200x1"), 0).outcome is Outcome.NOT_APPLICABLE


def test_pcie_judged_by_link_maximum_where_the_card_downshifts_when_idle():
    facts = mutated(example_facts("h200x4"), lambda d: [g["pcie"].update(generation_current=1, generation_max=4) for g in d["gpus"]])
    profile = CATALOG.load("rtx4090-4-pcie")
    verdict = topology.pcie_generation(profile, facts, 0)
    assert verdict.outcome is Outcome.PASSED and "current gen 1" in verdict.message


def test_criteria_check_themselves_and_print_their_rule():
    with pytest.raises(ValueError, match="minimum 5 cannot be greater than maximum 1"):
        InRange(5, 1)
    assert str(AtLeast(330, "GB/s")) == ">= 330 GB/s"
    assert AtLeast(330, "GB/s").violation(212.4) == "212.4 GB/s < 330 GB/s"


PAIR_QUERIES = ("p2p_status", "topology_common_ancestor")


def eight_gpu_replay():
    """An 8-GPU machine made from the 4xH200 recording (there is no 8-GPU machine to record from):
    GPUs 4-7 answer as GPUs 0-3 did, with their own UUIDs and bus ids; every pair answers as the
    recorded pairs did (NVSwitch: P2P OK, PCIe common ancestor the host bridge)."""
    import json

    from gpuaccept.probe.nvml import ReplayNvml
    from tests.helpers import DATA

    recorded = json.loads((DATA / "nvml" / "h200x4.json").read_text())["answers"]
    answers = []
    for answer in recorded:
        query, args = answer["query"], answer["args"]
        if query in PAIR_QUERIES:
            continue
        if not args:  # system-wide
            answers.append({**answer, "value": 8} if query == "device_count" else answer)
            continue
        for gpu in (args[0], args[0] + 4):  # per GPU: the first argument is the GPU
            copy = {**answer, "args": [gpu, *args[1:]]}
            if query == "uuid":
                copy["value"] = f"{answer['value'][:-4]}{gpu:04d}"
            elif query == "pci_bus_id":
                copy["value"] = f"00000000:00:{6 + gpu:02X}.0"
            answers.append(copy)
    for a in range(8):
        for b in range(8):
            if a != b:
                answers.append({"query": "topology_common_ancestor", "args": [a, b], "value": 30})
                answers += [{"query": "p2p_status", "args": [a, b, cap], "value": 0 if cap < 4 else 5} for cap in range(5)]
    return ReplayNvml(answers)


def test_the_8_gpu_profile_against_synthetic_8_gpu_facts():
    from tests.helpers import probe_replay

    profile = CATALOG.load("h200-8-nvswitch")
    facts = probe_replay(eight_gpu_replay())
    assert facts.gpu_count == 8 and len(facts.links) == 28 and len(facts.p2p) == 56
    assert {link.link_type for link in facts.links} == {"NV18"}
    assert [v.message for v in all_verdicts(profile, facts) if not v.ok] == []
    assert CATALOG.auto_select("NVIDIA H200", 8).profile.name == "h200-8-nvswitch"
    # and one GPU with 12 of its 18 links up fails its own tests and each of its 7 pairs
    replay = eight_gpu_replay()
    for link in range(12, 18):
        replay.answer("nvlink_state", 5, link, value=0)
    failed = failures(profile, probe_replay(replay))
    assert ("nvlink_links", "gpu5") in failed
    assert {subject for check, subject in failed if check == "link_type"} == {
        f"gpu{min(5, g)}-gpu{max(5, g)}" for g in range(8) if g != 5
    }


def test_a_gpu_hidden_by_cuda_visible_devices_is_judged_against_the_installed_machines_profile():
    # CUDA_VISIBLE_DEVICES=0 on the 2xH200 machine: NVML still sees both GPUs, so --profile auto
    # picks the 2-GPU profile (not h200-1), and the hidden GPU fails its tests by name
    facts = probe_replay(nvml_replay("h200x2"), [0], visible="0")
    selection = CATALOG.auto_select(*facts.installed())
    assert selection.profile.name == "h200-2-nvswitch"
    failed = failures(selection.profile, facts)
    count = failed[("gpu_count", facts.system.hostname)].message
    assert "found 1 GPU(s), expected 2" in count and "hidden by CUDA_VISIBLE_DEVICES: NVML GPU 1 (NVIDIA H200, bus " in count
    assert "GPU not present" in failed[("gpu_model", "gpu1")].message
    assert ("gpu_model", "gpu0") not in failed and ("nvlink_links", "gpu0") not in failed
