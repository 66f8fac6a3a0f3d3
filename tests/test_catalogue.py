"""The catalogue and the profiles derived from it: read strictly; the shipped machines' floors come
back from what was measured on them; machines of other sizes and kinds (recorded NVML answers,
public command outputs) get the profile they should; a GPU missing is never a healthy smaller machine."""

import json
import re
import shutil
from pathlib import Path

import pytest

from gpuaccept.errors import ProfileError, ProfileNotFound
from gpuaccept.importers import import_files
from gpuaccept.probe.nvml import ReplayNvml
from gpuaccept.probe.pci import read_pci_functions
from gpuaccept.profile import ProfileCatalog
from gpuaccept.profile.catalogue import load_catalogue
from gpuaccept.profile.derive import derive_profile
from gpuaccept.profile.machine import UnknownMachine, installed_gpus
from tests.helpers import DATA, ROOT, checks_of_areas, example_facts, mutated, nvml_replay, probe_replay, write
from tests.test_checks import failures
from tests.verdicts import verdicts

CATALOGUE = load_catalogue()
CATALOG = ProfileCatalog.with_shipped()
# the checks examples/facts/*-measured.json cannot judge: those of a burn-in, which a standard run is not
BURN_IN_CHECKS = checks_of_areas("burn-in")
IMPORTS = DATA / "imports"


def recorded(name: str, change=None) -> ReplayNvml:
    """A recording of NVML answers (tests/data/nvml), with `change` applied to its answers."""
    answers = json.loads((DATA / "nvml" / f"{name}.json").read_text())["answers"]
    return ReplayNvml(change(answers) if change else answers)


def with_answer(answers, query, value, gpu=None):
    return [{**a, "value": value} if a["query"] == query and (gpu is None or a["args"][:1] == [gpu]) else a for a in answers]


# ---- the catalogue itself ----------------------------------------------------------------------------


def test_the_catalogue_covers_every_gpu_the_shipped_profiles_name_and_the_datacenter_generations():
    for profile in CATALOG.load_all():
        for name in profile.spec.gpus.model:
            assert CATALOGUE.gpu_named(name) is not None, f"{profile.name} names {name!r}, which the catalogue does not know"
    for name in ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA B200", "NVIDIA L40S",
                 "NVIDIA GH200 480GB", "NVIDIA RTX 6000 Ada Generation", "NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 4090"):
        assert CATALOGUE.gpu_named(name) is not None, name
    # every value says where it came from, and public figures name their address
    for key, gpu in CATALOGUE.gpu_models.items():
        assert gpu.bf16_tflops.kind in ("public", "measured"), key
    assert {record.kind for record in CATALOGUE.records.values()} == {"measured", "public"}


def copied_catalogue(tmp_path: Path) -> Path:
    """A copy of the shipped catalogue to break."""
    folder = tmp_path / "catalogue"
    shutil.copytree(ROOT / "profiles" / "catalogue", folder)
    return folder


def problems_after(folder: Path, name: str, *changes: tuple[str, str]) -> tuple[str, list[str]]:
    """The file `name` of the catalogue in `folder` with each (old, new) change made, and the lines
    the catalogue is then refused with."""
    text = (folder / name).read_text()
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new, 1)
    (folder / name).write_text(text)
    with pytest.raises(ProfileError) as error:
        load_catalogue(folder)
    return text, error.value.lines()


def test_a_broken_catalogue_is_refused_naming_file_line_and_key(tmp_path):
    folder = copied_catalogue(tmp_path)
    unsourced = '    power_w: {value: 72, public: "https://www.nvidia.com/en-us/data-center/l4/ (72 W)"}'
    gpus, lines = problems_after(folder, "gpus.yaml", (unsourced, "    power_w: {value: 72}\n    pci_width: 16"))
    line_of = {text: number for number, text in enumerate(gpus.splitlines(), start=1)}
    assert any(line.startswith(f"{folder}/gpus.yaml:{line_of['    power_w: {value: 72}']}: gpus.l4.power_w: give exactly one source")
               for line in lines), lines
    assert any(f"gpus.yaml:{line_of['    pci_width: 16']}: gpus.l4.pci_width: unknown key" in line for line in lines), lines
    shutil.copy(ROOT / "profiles" / "catalogue" / "gpus.yaml", folder / "gpus.yaml")
    reversed_range = ("[[vm/8ed058dc, 3, 54.51, 54.68]]", "[[vm/8ed058dc, 3, 54.68, 54.51]]")
    _, lines = problems_after(folder, "measured.yaml", reversed_range)
    wrong = "records.h100-1.values.copies.host_to_device_min.runs[0]: lowest 54.68 is above highest 54.51"
    assert any("measured.yaml" in line and wrong in line for line in lines), lines
    # a record of a GPU the catalogue does not know: found once each file reads
    unknown_gpu = ("    gpu: h100-sxm\n    fabric: none", "    gpu: h900-sxm\n    fabric: none")
    _, lines = problems_after(folder, "measured.yaml", reversed_range[::-1], unknown_gpu)
    assert len(lines) == 1 and re.search(r"measured.yaml:\d+: records.h100-1.gpu: 'h900-sxm' is no GPU of gpus.yaml", lines[0]), lines


def test_a_ceiling_rule_on_a_floor_and_a_floor_rule_on_a_ceiling_are_refused(tmp_path):
    folder = copied_catalogue(tmp_path)
    floor = "ddp.min_efficiency.4gpu-bs8: {rule: record_floor,"
    _, lines = problems_after(folder, "measured.yaml", (floor, floor.replace("record_floor", "record_ceiling")))
    assert any("ddp.min_efficiency.4gpu-bs8: rule record_ceiling is not a floor rule" in line for line in lines), lines
    shutil.copy(ROOT / "profiles" / "catalogue" / "measured.yaml", folder / "measured.yaml")
    ceiling = "ddp.max_exposed_comm.4gpu-bs8: {rule: record_ceiling,"
    _, lines = problems_after(folder, "measured.yaml", (ceiling, ceiling.replace("record_ceiling", "floor")))
    assert any("ddp.max_exposed_comm.4gpu-bs8: rule floor is not a ceiling rule" in line for line in lines), lines


def test_profile_validate_reads_a_catalogue_file_with_the_other_two(tmp_path, capsys):
    from gpuaccept.cli import main

    assert main(["profile", "validate", str(ROOT / "profiles" / "catalogue" / "measured.yaml")]) == 0
    assert "(the catalogue in " in capsys.readouterr().out
    folder = copied_catalogue(tmp_path)
    problems_after(folder, "gpus.yaml", ("    form: sxm\n", "    form: socket\n"))
    assert main(["profile", "validate", str(folder / "measured.yaml")]) == 2
    err = capsys.readouterr().err
    assert "gpus.yaml:" in err and "gpus.a100-sxm4-40gb.form: Input should be 'sxm', 'pcie' or 'superchip' (got 'socket')" in err


def test_a_public_figure_without_its_address_and_a_measurement_without_its_machine_are_refused(tmp_path):
    _, lines = problems_after(
        copied_catalogue(tmp_path), "fabric.yaml",
        ("other_gpu: {value: 0.9, derived:", "other_gpu: {value: 0.9, public:"),
        ("from 2 to 4 GPUs of the lent H200 boards", "from 2 to 4 GPUs of H200 boards"),
    )
    assert any("allowances.other_gpu: a public figure names its address" in line for line in lines), lines
    assert any("allowances.other_count_up: a measurement names the lent machine" in line for line in lines), lines


# ---- the machines measured here: their derived floors are their shipped floors ---------------------


@pytest.mark.parametrize("machine, shipped", [("h200x2", "h200-2-nvswitch"), ("h200x4", "h200-4-nvswitch"), ("h200x1", "h200-1"),
                                               ("h100x1", "h100-1")])
def test_a_machine_measured_here_gets_back_the_floors_it_shipped_with(machine, shipped):
    derived = derive_profile(example_facts(machine), CATALOGUE)
    profile = CATALOG.load(shipped)
    floors = _floors(profile.spec.model_dump(by_alias=True))
    compared = {key: (floors[key], value.value) for key, value in derived.values.items() if key in floors}
    assert len(compared) >= 6
    far = {key: pair for key, pair in compared.items() if abs(pair[1] / pair[0] - 1) > 0.002}
    assert far == {}, far
    assert all(value.origin == "measured" for value in derived.values.values()), derived.summary
    assert derived.profile is not None and derived.profile.gpu_count == profile.gpu_count
    # disjoint pairs share nothing on NVSwitch: copied in rounds, as the shipped profile copies them
    assert derived.profile.spec.copies.concurrent is profile.spec.copies.concurrent
    # on NVSwitch DDP trains on one GPU and on the whole machine, as the shipped profile does
    shipped_worlds = profile.spec.ddp.world_sizes if profile.spec.ddp is not None else None
    assert (derived.profile.spec.ddp.world_sizes if derived.profile.spec.ddp is not None else None) == shipped_worlds


def _floors(data, prefix=""):
    found = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            found.update(_floors(value, f"{path}."))
        elif isinstance(value, float) and (path.endswith("_min") or ".busbw." in path or path.startswith("ddp.") or "min_tflops" in path):
            found[path] = value
    return found


@pytest.mark.parametrize("measured", ["h200x2-measured", "h200x4-measured"])
def test_a_healthy_measured_run_passes_its_derived_profile(measured):
    facts = example_facts(measured)
    derived = derive_profile(facts, CATALOGUE)
    outcomes = verdicts(derived.profile, facts)
    assert [v for v in outcomes if v[2] == "failed"] == []
    # the facts of a standard run: what the derived profile asks of a burn-in could not be judged, and
    # that is all that was not
    lacking = [v for v in outcomes if v[2] == "error"]
    assert {check for check, *_ in lacking} <= BURN_IN_CHECKS, lacking
    assert sum(1 for v in outcomes if v[2] == "passed") > 60


def test_a_fault_fails_the_derived_profile_where_it_fails_the_shipped_one():
    # the recorded 4xH200 run with NCCL_P2P_DISABLE=1: every busbw far below its floor, by either profile
    from gpuaccept.facts.run_record import load_results

    record = load_results(ROOT / "examples" / "results" / "h200x4-nccl-p2p-disabled.json")
    derived = derive_profile(record.facts, CATALOGUE)
    shipped = {(v[0], v[1]) for v in verdicts(CATALOG.load("h200-4-nvswitch"), record.facts) if v[2] == "failed"}
    ours = {(v[0], v[1]) for v in verdicts(derived.profile, record.facts) if v[2] == "failed"}
    assert {check for check, _ in shipped} >= {"busbw"} and ours == shipped


# ---- other sizes and kinds --------------------------------------------------------------------------


def test_a_2xh100_gets_a_profile_of_its_own_not_an_8_gpu_board_missing_six():
    facts = probe_replay(recorded("h100x2"))  # NVML answers recorded on a lent 2xH100 (2026-11-27, vm/5a696190)
    selection = CATALOG.select(facts, derive_into=None)
    profile = selection.profile
    assert profile.name == "derived-2x-h100-sxm-nvswitch" and profile.gpu_count == 2
    assert "no profile matches 2x NVIDIA H100 80GB HBM3: derived from the catalogue" in selection.reason
    assert failures(profile, facts) == {}
    assert profile.expected_link(0, 1) == "NV18" and profile.spec.nccl is not None
    assert profile.spec.nccl.busbw["all_reduce"]["1GiB"] == pytest.approx(328.75 * (0.93 - (332.99 - 328.75) / 332.99), abs=0.1)


def test_three_visible_h200s_of_a_four_gpu_partition_fail_naming_gpu3():
    # the recorded 4xH200 with NVML answering 3 devices: three GPUs joined through NVSwitch are no partition
    facts = probe_replay(recorded("h200x4", lambda answers: with_answer(answers, "device_count", 3)))
    assert facts.gpu_count == 3
    installed = installed_gpus(facts, CATALOGUE)
    assert installed.count == 4 and "a partition of 4" in installed.evidence[-1]
    for selection in (CATALOG.select(facts), CATALOG.select(facts, derived_only=True)):
        assert selection.profile.gpu_count == 4, selection.reason
        failed = failures(selection.profile, facts)
        assert ("gpu_count", facts.system.hostname) in failed
        assert {subject for _, subject in failed} - {facts.system.hostname} == {
            "gpu3", "gpu0-gpu3", "gpu1-gpu3", "gpu2-gpu3", "gpu3-gpu0", "gpu3-gpu1", "gpu3-gpu2"}
    assert CATALOG.select(facts).profile.name == "h200-4-nvswitch"  # a shipped profile still wins


def test_gpus_on_the_pci_bus_that_nvml_does_not_see_are_counted_and_named(tmp_path):
    replay = nvml_replay("h100x1")
    bus = replay.query("pci_bus_id", 0)
    for function, kind in ((bus, "0x030200"), ("0000:2a:00.0", "0x030200"), ("0000:2a:00.1", "0x040300"), ("0000:90:00.0", "0x068000")):
        folder = tmp_path / "sys/bus/pci/devices" / function.lower().removeprefix("0000")[-12:]
        write(folder / "vendor", "0x10de\n")
        write(folder / "class", kind + "\n")
    write(tmp_path / "sys/bus/pci/devices/0000:00:1f.0/vendor", "0x8086\n")
    given = tmp_path / "sys/bus/pci/devices/0000:c1:00.0"  # a GPU bound to vfio-pci: a VM's, not missing
    write(given / "vendor", "0x10de\n")
    write(given / "class", "0x030200\n")
    write(tmp_path / "sys/bus/pci/drivers/vfio-pci/bind", "")
    (given / "driver").symlink_to(tmp_path / "sys/bus/pci/drivers/vfio-pci")
    pci = read_pci_functions(tmp_path)
    assert pci == (["00000000:" + bus.split(":", 1)[1].upper() if bus.count(":") == 2 else bus, "00000000:2A:00.0"], ["00000000:90:00.0"])
    from gpuaccept.probe.collect import collect_facts
    from tests.helpers import cuda_seeing

    facts = collect_facts(replay, cuda_seeing(replay, [0]), {}, pci=pci)
    assert facts.system.unseen_pci_gpus == ["00000000:2A:00.0"]
    installed = installed_gpus(facts, CATALOGUE)
    assert installed.count == 2 and "bus 00000000:2A:00.0 on the PCI bus, not seen by the driver" in installed.missing
    selection = CATALOG.select(facts, derive_into=tmp_path)
    assert selection.profile.gpu_count == 2 and (tmp_path / f"{selection.profile.name}.yaml").is_file()
    failed = failures(selection.profile, facts)
    count = failed[("gpu_count", facts.system.hostname)].message
    assert "found 1 GPU(s), expected 2" in count and "on the PCI bus but not seen by the driver (NVML): bus 00000000:2A:00.0" in count
    assert ("gpu_model", "gpu1") in failed


def test_the_nvswitches_of_a_whole_board_on_the_pci_bus_make_it_an_8_gpu_machine():
    facts = mutated(example_facts("h200x4"), lambda d: d["system"].update(pci_nvswitches=[f"00000000:{n:02X}:00.0" for n in range(4)]))
    installed = installed_gpus(facts, CATALOGUE)
    assert installed.count == 8 and "4 NVSwitches on the PCI bus: a whole board of 8" in installed.evidence


def test_a_stated_count_wins_and_the_gpus_it_adds_fail():
    facts = example_facts("h200x1")
    derived = derive_profile(facts, CATALOGUE, stated_count=2)
    assert derived.profile.gpu_count == 2
    failed = failures(derived.profile, facts)
    assert ("gpu_count", facts.system.hostname) in failed and ("gpu_model", "gpu1") in failed


def test_a_gpu_the_catalogue_does_not_know_is_one_line():
    facts = mutated(example_facts("h200x1"), lambda d: [g.update(name="NVIDIA H9000") for g in d["gpus"]]
                    + [g.update(name="NVIDIA H9000") for g in d["system"]["installed_gpus"]])
    with pytest.raises(UnknownMachine, match=r"the catalogue knows no GPU named 'NVIDIA H9000': known are NVIDIA A100"):
        derive_profile(facts, CATALOGUE)
    with pytest.raises(ProfileNotFound, match=r"no profile matches this machine \(1x NVIDIA H9000\).*the catalogue does not know"):
        CATALOG.select(facts)


def test_an_8_gpu_hgx_h200_takes_public_nvls_figures_where_nvls_is_on():
    from tests.test_checks import eight_gpu_replay

    facts = probe_replay(eight_gpu_replay())  # NCCL_NVLS_ENABLE unset: NCCL sets NVLS up on the board
    derived = derive_profile(facts, CATALOGUE)
    spec = derived.profile.spec
    assert spec.nccl.nvls is True and spec.nccl.busbw["all_reduce"]["4GiB"] == pytest.approx(475 * 0.9, abs=0.1)
    carried = derived.values["nccl.busbw.all_gather.256MiB"]
    assert carried.origin == "carried" and "h200-4-nvswitch" in carried.distance and "measured at fewer GPUs" in carried.distance
    # NVLS kept off: the public figure without it, of an 8xH100 on the same NVLink 4 x18
    off = derive_profile(mutated(facts, lambda d: d["environment"].update(NCCL_NVLS_ENABLE="0")), CATALOGUE)
    without = off.values["nccl.busbw.all_reduce.4GiB"]
    assert off.profile.spec.nccl.nvls is None and without.value == pytest.approx(370 * 0.9, abs=0.1)
    assert without.origin == "public" and "h100-sxm, another GPU model on the same link" in without.note


def imported(*names, model=None):
    return import_files([IMPORTS / name for name in names]).facts


def test_an_8xa100_nvswitch_board_from_its_public_topo_output():
    facts = imported("a100-8-nvswitch-topo-m.txt")  # stas00/ml-engineering network/README.md @744d01e5
    derived = derive_profile(facts, CATALOGUE, stated_model="NVIDIA A100-SXM4-80GB")
    spec = derived.profile.spec
    assert spec.gpus.count == 8 and spec.links.all == "NV12" and spec.nvlink.active_links == 12 and spec.fabric.state == "not_supported"
    # the public 8xA100 nccl-tests log is this kind of machine's figure; the rest carried from 4xH200 at NVLink 3's rate
    assert derived.values["nccl.busbw.all_reduce.4GiB"].origin == "public"
    assert spec.nccl.busbw["all_reduce"]["4GiB"] == pytest.approx(234.37 * 0.9, abs=0.1)
    # the public 8xH100 figure at NVLink 4's rate, scaled to NVLink 3's; the 256 MiB sizes carried from 4xH200
    reduce_scatter = derived.values["nccl.busbw.reduce_scatter.4GiB"]
    assert reduce_scatter.origin == "public" and "link rate 300 over 478.125 GB/s" in reduce_scatter.note
    small = derived.values["nccl.busbw.reduce_scatter.256MiB"]
    assert small.origin == "carried" and "measured at fewer GPUs" in small.note and "another link rate" in small.note
    assert [v for v in verdicts(derived.profile, facts) if v[0] == "link_type" and v[2] != "passed"] == []
    assert spec.compute.gemm.min_tflops == pytest.approx(271.2 * 660.1 / 794.5 * 0.9, abs=0.1)
    # its P2P speedup, carried from 4xH200 through two allowances, comes below 1.0x, which training
    # with P2P off reaches: no floor that could not fail, and the reason written where it would be
    assert "8gpu-bs8" in spec.ddp.min_efficiency and spec.ddp.nvlink_ab == {}
    assert "ddp.nvlink_ab.8gpu-bs8" not in derived.values
    assert "# nvlink_ab 8gpu-bs8 not derived: carried, it comes to 0.9871x, which a machine with P2P off reaches" in derived.text


def test_a_bridged_rtx3090_pair_from_a_public_rig_report():
    facts = imported("rtx3090-2-nvlink-rig-report.txt")  # noonghunna/club-3090#441: nvlink -s names the cards
    derived = derive_profile(facts, CATALOGUE)
    spec = derived.profile.spec
    assert derived.name == "derived-2x-rtx-3090-nvlink"
    assert spec.links.all == "NV4" and spec.nvlink.active_links == 4 and spec.p2p.all.nvlink is True
    assert spec.gpus.ecc == "disabled" and spec.pcie.idle_downshift and spec.health.persistence_mode is False
    outcomes = verdicts(derived.profile, facts)
    assert [v for v in outcomes if v[0] in ("link_type", "nvlink_links", "gpu_model") and v[2] != "passed"] == []
    assert spec.ddp.model == "gpt2-small"


def test_eight_rtx4090s_on_two_sockets_from_their_public_topo_output():
    facts = imported("rtx4090-8-pcie-topo-m.txt")  # NVIDIA/go-gpuallocator#17
    with pytest.raises(UnknownMachine):  # topo -m names no model
        derive_profile(facts, CATALOGUE)
    derived = derive_profile(facts, CATALOGUE, stated_model="NVIDIA GeForce RTX 4090")
    spec = derived.profile.spec
    assert spec.links.all == "SYS" and spec.p2p.all.read is False and spec.nvlink.active_links == 0
    assert spec.pairwise.concurrent is False
    # without a switch, the smaller worlds cross other links than the whole machine (one socket's GPUs, then both)
    assert spec.ddp is not None and spec.ddp.world_sizes == [1, 2, 4, 8]
    assert spec.copies is None or spec.copies.concurrent is False  # pairs share PCIe uplinks: one copy at a time
    # the path through host memory measured on 4xH200's PCIe Gen5 x16, at the 4090's Gen4 x16, across the sockets
    all_reduce = derived.values["nccl.busbw.all_reduce.1GiB"]
    assert all_reduce.origin == "carried" and all_reduce.records == ("h200-4-host",)
    for why in ("x 0.5 (link rate 31.5072 over 63.016 GB/s)", "x 0.85 (another link rate)", "x 0.9 (measured at fewer GPUs)",
                "x 0.41 (across the sockets)"):
        assert why in all_reduce.note
    assert [v for v in verdicts(derived.profile, facts) if v[0] in ("link_type", "p2p_capability") and v[2] == "failed"] == []


def test_three_rtx_a6000s_two_of_them_bridged_from_a_public_output():
    facts = imported("rtxa6000-3-bridged-pair-topo-m-nvlink-s.txt")  # siboehm/bench gpu/nvlink/README.md @1f34a58c
    derived = derive_profile(facts, CATALOGUE)
    spec = derived.profile.spec
    assert spec.gpus.count == 3 and spec.nvlink.active_links == 4 and spec.nvlink.active_links_per_gpu == {"gpu2": 0}
    assert derived.profile.expected_link(0, 1) == "NV4" and derived.profile.expected_link(0, 2) != "NV4"
    assert spec.gpus.ecc is None  # a workstation card's ECC is the owner's choice
    assert [v for v in verdicts(derived.profile, facts) if v[0] in ("link_type", "nvlink_links") and v[2] == "failed"] == []


@pytest.mark.parametrize(
    "name, memory_mib, generation, expected",
    [
        # nvidia-smi -a of an L40S, thamada/nvidia-smi nvsim/L40S_smi.py @c768aedc: 46068 MiB, PCIe Gen4 (Gen1 at idle)
        ("NVIDIA L40S", 46068, (1, 4, 4), "derived-1x-l40s"),
        # nvidia-smi of a GH200 480GB: 97871 MiB (the catalogue's gh200-96gb source)
        ("NVIDIA GH200 480GB", 97871, None, "derived-1x-gh200-96gb"),
        # nvidia-smi -a of an RTX 6000 Ada, thamada/nvidia-smi gls/RTX6000Ada_x8_smi.py @b09ef139: 49140 MiB, Gen4 (Gen1 idle)
        ("NVIDIA RTX 6000 Ada Generation", 49140, (1, 4, 4), "derived-1x-rtx-6000-ada"),
    ],
)
def test_a_single_gpu_of_another_model_from_recorded_answers_with_its_public_values(name, memory_mib, generation, expected):
    """The NVML answers recorded on a lent 1xH100, with the name, memory and PCIe link another model's
    public nvidia-smi output shows: a GPU of that model alone, as the probe would read it."""

    def as_that_gpu(answers):
        answers = with_answer(with_answer(answers, "name", name), "memory_total", memory_mib << 20)
        if generation is not None:
            for query, value in zip(("pcie_generation_current", "pcie_generation_max", "pcie_generation_gpu_max"), generation, strict=True):
                answers = with_answer(answers, query, value)
        return answers

    facts = probe_replay(recorded("h100x1", as_that_gpu))
    derived = derive_profile(facts, CATALOGUE)
    assert derived.name == expected and "from datasheets" in derived.summary
    failed = {(v[0], v[1]) for v in verdicts(derived.profile, facts) if v[2] == "failed"}
    assert not {check for check, _ in failed} & {"gpu_model", "gpu_memory", "pcie_generation", "pcie_width", "nvlink_links", "gpu_count"}
    gemm = derived.values["compute.gemm.min_tflops"]
    assert gemm.origin in ("datasheet", "public") and " = " in gemm.note


def test_what_profile_derive_writes_validates_and_loads(tmp_path):
    derived = derive_profile(example_facts("h200x4"), CATALOGUE)
    path = write(tmp_path / f"{derived.name}.yaml", derived.text)
    profile = ProfileCatalog.with_shipped().load(str(path))
    assert profile.spec == derived.profile.spec
    assert profile.where("nccl.busbw.all_reduce.1GiB").startswith("h200-4-nvswitch: 10 runs on 2 machines")
    assert (profile.spec.copies.size, profile.spec.copies.host_size) == ("1GiB", "256MiB")  # host copies have floors here
    assert derived.text.startswith(f"# {derived.name}: derived by gpu-accept from its catalogue for 4x NVIDIA H200")


def test_every_gpu_of_the_catalogue_derives_a_profile_that_loads_at_every_board_size():
    from tests.test_checks import eight_gpu_replay

    eight = probe_replay(eight_gpu_replay())
    for key, gpu in CATALOGUE.gpu_models.items():
        for count in (1, 2, 8):
            facts = mutated(eight, lambda d, name=gpu.names[0]: [g.update(name=name) for g in d["gpus"]]
                            + [g.update(name=name) for g in d["system"]["installed_gpus"]])
            derived = derive_profile(facts, CATALOGUE, stated_count=count)
            assert derived.profile is not None and derived.profile.gpu_count == count, (key, count)
            assert Path(f"{derived.name}.yaml").name.startswith(f"derived-{count}x-{key}")


# ---- the command line -------------------------------------------------------------------------------


def test_profile_derive_writes_a_profile_that_validates(tmp_path, capsys):
    from gpuaccept.cli import main

    out = tmp_path / "mine.yaml"
    assert main(["profile", "derive", "--facts", str(ROOT / "examples" / "facts" / "h200x4.json"), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("gpu-accept: derived-4x-h200-sxm-nvswitch: ") and f"wrote {out}" in err
    assert main(["profile", "validate", str(out)]) == 0
    assert "ok: " in capsys.readouterr().out
    # from public command outputs, the model stated where they do not name it
    topo = str(IMPORTS / "h100-8-nvswitch-topo-m.txt")
    assert main(["profile", "derive", "--from-text", topo, "--gpu-model", "NVIDIA H100 80GB HBM3"]) == 0
    text = capsys.readouterr().out
    assert "name: derived-8x-h100-sxm-nvswitch" in text and "all: NV18" in text


@pytest.mark.parametrize(
    "arguments, said",
    [
        (["--from-text", str(IMPORTS / "h100-8-nvswitch-topo-m.txt")], "gpu-accept: the outputs do not name the GPU model"),
        (["--facts", str(ROOT / "examples" / "facts" / "h200x1.json"), "--gpus", "0"],
         "gpu-accept: --gpus 0: the GPUs the machine must have"),
        (["--facts", str(ROOT / "examples" / "facts" / "h200x1.json"), "--gpu-model", "NVIDIA H9000"],
         "gpu-accept: the catalogue knows no GPU named 'NVIDIA H9000'"),
    ],
    ids=["no-model", "no-gpus", "unknown-model"],
)
def test_profile_derive_refuses_what_it_cannot_derive_in_one_line(capsys, arguments, said):
    from gpuaccept.cli import main

    assert main(["profile", "derive", *arguments]) == 2
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("gpu-accept: import: ")]
    assert len(err) == 1 and err[0].startswith(said), err


@pytest.mark.slow
def test_run_with_a_derived_profile_says_how_it_was_made_and_judges(tmp_path):
    from tests.test_cli import gpu_accept

    done = gpu_accept("run", "--profile", "derived", "--facts", str(ROOT / "examples" / "facts" / "h200x2-measured.json"),
                      "--reports", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    header = next(line for line in done.stdout.splitlines() if line.startswith("gpu-accept: profile derived-2x-h200-sxm-nvswitch"))
    assert "derived from the catalogue (--profile derived) (2x NVIDIA H200 as installed: 2 under test)" in header
    assert ("catalogue entries h200-sxm (nvswitch, 18 x 26.5625 GB/s NVLink 4.0 through NVSwitch); 27 floors: 27 measured on this kind "
            "of machine; measured on: h200-1, h200-2-nvswitch") in header
    assert (tmp_path / "derived-2x-h200-sxm-nvswitch.yaml").is_file() and "failed" not in done.stdout
    from gpuaccept.facts.run_record import load_results

    record = load_results(tmp_path / "results.json")
    assert record.run.profile.name == "derived-2x-h200-sxm-nvswitch" and "27 floors" in record.run.profile.chosen_because
    # a count stated for a named profile is refused: the profile states its own
    refused = gpu_accept("run", "--profile", "h200-2-nvswitch", "--expect-gpus", "2", "--facts",
                         str(ROOT / "examples" / "facts" / "h200x2-measured.json"), "--reports", str(tmp_path / "again"))
    assert refused.returncode == 2 and "--expect-gpus 2: a named profile states its GPU count" in refused.stderr


def test_the_bench_table_of_derived_floors_is_what_the_catalogue_derives(tmp_path, capsys):
    from bench.derived_floors import main

    assert main(["--markdown", str(tmp_path / "floors.md")]) == 0
    assert (tmp_path / "floors.md").read_text() == (ROOT / "bench" / "derived-floors.md").read_text(), (
        "bench/derived-floors.md is stale: python bench/derived_floors.py --markdown bench/derived-floors.md"
    )
    summary = capsys.readouterr().out.strip()
    assert summary in (ROOT / "bench" / "README.md").read_text(), "the summary in bench/README.md is stale"


def test_the_line_names_the_conditions_the_measurements_were_taken_under_where_this_machine_differs():
    def older(d):
        d["system"]["driver_version"] = "550.54.15"
        d["measurements"]["collectives"]["nccl_version"] = "2.21.5"

    assert "measured with" not in derive_profile(example_facts("h200x2-measured"), CATALOGUE).summary
    summary = derive_profile(mutated(example_facts("h200x2-measured"), older), CATALOGUE).summary
    assert summary.endswith("; measured with driver 580, this machine runs 550; measured with nccl 2.28, this machine runs 2.21")
