"""NVLink SHARP as users have it: NCCL's set-up lines read (public ones, with and without NVLS),
CUDA's multicast attribute read without ever failing a run, and a profile that expects NVLS failing
a board where NCCL did not use it, saying why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuaccept.checks import fabric
from gpuaccept.checks.verdict import Outcome
from gpuaccept.facts import parse_facts
from gpuaccept.facts.measurements import NcclNvls
from gpuaccept.facts.record import Unavailable
from gpuaccept.probe.nvls import parse_nccl_nvls, probe_multicast
from gpuaccept.profile import load_profile
from gpuaccept.resources import shipped_dir
from tests.helpers import EXAMPLES, write

NCCL_INFO = Path(__file__).parent / "data" / "nccl-info"


def recorded(name: str) -> NcclNvls | Unavailable:
    """A public log's lines, without the header that names its source."""
    lines = (NCCL_INFO / name).read_text().splitlines()
    assert lines[0].startswith("# ") and "https://github.com/" in lines[0]
    return parse_nccl_nvls(lines[1:])


def test_a_run_with_nvls_reads_as_used():
    used = recorded("nvls-used.log")
    assert isinstance(used, NcclNvls) and used.used and used.nvls_comms == 1


def test_multicast_offered_is_not_nvls_used():
    offered = recorded("nvls-available.log")
    assert isinstance(offered, NcclNvls)
    assert offered.available_on == [0, 2, 5, 6, 7] and offered.not_available_on == [] and not offered.used


def test_multicast_not_available_reads_per_device():
    missing = recorded("nvls-not-available.log")
    assert isinstance(missing, NcclNvls) and missing.not_available_on == [1, 2, 3, 5, 6, 7] and not missing.used


def test_zero_nvls_channels_is_not_used():
    zero = recorded("nvls-zero-channels.log")
    assert isinstance(zero, NcclNvls) and zero.nvls_channels == 0 and not zero.used


def test_no_nccl_lines_is_unknown_never_not_used():
    assert isinstance(parse_nccl_nvls(["plain output", ""]), Unavailable)


def test_the_environment_setting_is_read():
    # NCCL's ENV line as NCCL prints every setting it takes from the environment ("... set by environment to X.")
    nvls = parse_nccl_nvls(["host:1:1 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0."])
    assert isinstance(nvls, NcclNvls) and nvls.enable_setting == "0"


def test_the_multicast_attribute_without_a_driver_is_not_installed_never_false(tmp_path):
    reading = probe_multicast(8, library=str(tmp_path / "libcuda.so.1"))
    assert isinstance(reading, Unavailable) and reading.unavailable == "not_installed"


PROFILE = """
    schema: 1
    extends: bases/hgx-h200
    gpus: {count: 4}
    nccl:
      nvls: NVLS
      busbw:
        all_reduce: {1GiB: 300}
"""


def nvls_profile(tmp_path, expected: str):
    return load_profile(write(tmp_path / "p.yaml", PROFILE.replace("NVLS", expected)), [shipped_dir("profiles")])


def facts_with(nvls, multicast=None, ranks=None):
    """The 4xH200 measured facts with NCCL's NVLS reading (and CUDA's multicast readings) replaced."""
    facts = parse_facts((EXAMPLES / "h200x4-measured.json").read_text(), "h200x4-measured.json")
    sweep = facts.measurements.collectives
    assert sweep is not None
    sweep = sweep.model_copy(update={"nvls": nvls, **({"ranks": ranks} if ranks else {})})
    update = {"measurements": facts.measurements.model_copy(update={"collectives": sweep})}
    if multicast is not None:
        assert not isinstance(facts.cuda, Unavailable)
        update["cuda"] = facts.cuda.model_copy(update={"multicast": multicast})
    return facts.model_copy(update=update)


def test_a_board_where_nccl_used_nvls_passes(tmp_path):
    verdict = fabric.nvls(nvls_profile(tmp_path, "true"), facts_with(recorded("nvls-used.log")))
    assert verdict.outcome is Outcome.PASSED and verdict.measured == "used"


@pytest.mark.parametrize(
    "log, multicast, why",
    [
        ("nvls-not-available.log", None, "NCCL: NVLS multicast support is not available on dev 1,2,3,5,6,7"),
        ("nvls-available.log", [True] * 4, "NCCL set up no NVLS communicator (no line on NVLS channels;"),
        ("nvls-zero-channels.log", [False, True, True, True],
         "CUDA reports no multicast on gpu0 (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED 0)"),
    ],
    ids=["multicast-not-available", "fabric-manager-down", "one-gpu-without-multicast"],
)
def test_a_board_that_lost_nvls_fails_naming_why(tmp_path, log, multicast, why):
    verdict = fabric.nvls(nvls_profile(tmp_path, "true"), facts_with(recorded(log), multicast))
    assert verdict.outcome is Outcome.FAILED and verdict.measured == "not used"
    assert verdict.message.startswith("NVLS: not used by NCCL, expected used: ") and why in verdict.message, verdict.message
    assert verdict.message.endswith("(profile p)")


def test_the_sites_setting_is_named_as_the_cause(tmp_path):
    off = parse_nccl_nvls(["h:1:1 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0."])
    verdict = fabric.nvls(nvls_profile(tmp_path, "true"), facts_with(off))
    assert verdict.outcome is Outcome.FAILED and "NCCL_NVLS_ENABLE=0 in the environment (the site's setting)" in verdict.message


def test_unknown_use_is_an_error_unless_cuda_already_says_no(tmp_path):
    profile = nvls_profile(tmp_path, "true")
    unknown = Unavailable(unavailable="not_found", detail="no NCCL INFO output to read")
    assert fabric.nvls(profile, facts_with(unknown)).outcome is Outcome.ERROR
    assert fabric.nvls(profile, facts_with(None)).outcome is Outcome.ERROR  # recorded before NVLS was read
    no_multicast = fabric.nvls(profile, facts_with(unknown, [False] * 4))
    assert no_multicast.outcome is Outcome.FAILED and "CUDA reports no multicast on gpu0, gpu1, gpu2, gpu3" in no_multicast.message


def test_a_profile_that_does_not_expect_nvls_does_not_judge_it(tmp_path):
    assert fabric.nvls(nvls_profile(tmp_path, "false"), facts_with(recorded("nvls-not-available.log"))).outcome is Outcome.NOT_APPLICABLE


def test_the_nccl_stage_asks_for_set_up_lines_without_taking_the_users_settings(tmp_path):
    from gpuaccept.stages.fabric import _nccl_set_up_lines

    ours, files = _nccl_set_up_lines({"PATH": "/bin"}, tmp_path)  # what the plan sets in its workers
    assert ours == {"NCCL_DEBUG_FILE": f"{tmp_path}/nccl.%h.%p.log", "NCCL_DEBUG": "INFO"}
    (tmp_path / "nccl.host.42.log").write_text("h:42:42 [0] NCCL INFO NVLS multicast support is available on dev 0\n")
    assert files is not None and [p.name for p in files()] == ["nccl.host.42.log"]
    # the user's own level is kept, and so is the user's own file (whose lines are then theirs: not read)
    ours, _ = _nccl_set_up_lines({"NCCL_DEBUG": "TRACE"}, tmp_path)
    assert ours == {"NCCL_DEBUG_FILE": f"{tmp_path}/nccl.%h.%p.log"}
    ours, files = _nccl_set_up_lines({"NCCL_DEBUG_FILE": "/var/log/nccl.%p"}, tmp_path)
    assert ours == {} and files is None


@pytest.mark.slow
def test_a_gloo_stage_records_nvls_as_not_supported_and_keeps_our_settings_out_of_the_users_environment():
    from gpuaccept.stages.fabric import run_nccl_stage
    from tests.test_measure_gloo import small_spec

    # the environment given, not this process's: another test's NCCL_DEBUG_FILE must not decide it
    env = {key: value for key, value in os.environ.items() if not key.startswith("NCCL_DEBUG")}
    collectives, _ = run_nccl_stage(small_spec(2), 2, backend="gloo", env=env)
    assert collectives is not None and isinstance(collectives.nvls, Unavailable) and collectives.nvls.unavailable == "not_supported"
    assert "NCCL_DEBUG_FILE" not in collectives.environment
