"""Health checks on NVML recordings of a healthy 2xH200 with faults injected through the NVML door:
each fault fails exactly the test of the GPU (or link) concerned, with the counter and the limit in
its message; the other GPU's same test passes; what NVML does not give skips with the reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuaccept.checks import health
from gpuaccept.checks.verdict import Outcome, Verdict
from gpuaccept.facts import load_facts, save_facts
from gpuaccept.facts.health import LINK_COUNTERS_NOT_AT_QUICK, HealthFacts, KernelLog
from gpuaccept.facts.record import Unavailable
from gpuaccept.probe.health import (
    AGGREGATE,
    EVENT_MASK,
    EVENT_RECOVERY_ACTION,
    EVENT_XID_CRITICAL,
    NVLINK_RECOVERY,
    NVLINK_REPLAY,
    SRAM,
    START_LABEL,
    UNCORRECTED,
    VOLATILE,
    Field,
    Target,
    health_reading,
    parse_kernel_xids,
    read_kernel_log,
)
from gpuaccept.probe.nvml import NvmlCallError, RecordingNvml, ReplayNvml
from gpuaccept.profile import ProfileCatalog, load_profile
from gpuaccept.resources import shipped_dir
from tests.health_data import healthy_h200x2, save_recording, with_health
from tests.helpers import example_facts, older_example, older_example_facts, probe_replay, write

PROFILE = ProfileCatalog.with_shipped().load("h200-2-nvswitch")


def judged(check, facts, subject) -> Verdict:
    return check(PROFILE, facts, subject)


def fails_only(check, facts, bad, good) -> Verdict:
    """The verdict on `bad`, which failed, after making sure `good`'s passed."""
    assert judged(check, facts, good).outcome is Outcome.PASSED, judged(check, facts, good).message
    verdict = judged(check, facts, bad)
    assert verdict.outcome is Outcome.FAILED, verdict.message
    return verdict


def xid(replay: ReplayNvml, gpu: int, number: int) -> None:
    replay.answer("event_wait", value={"nvml_index": gpu, "type": EVENT_XID_CRITICAL, "data": number})


def test_the_healthy_recording_passes_every_check_it_can_read():
    facts = with_health(healthy_h200x2(), healthy_h200x2())
    for check in health.STATE_CHECKS + health.RUN_CHECKS:
        for gpu in (0, 1):
            assert judged(check, facts, gpu).outcome in (Outcome.PASSED, Outcome.NOT_APPLICABLE), check.__name__
    for gpu_link in health.gpu_links(PROFILE):
        assert judged(health.nvlink_errors_during_run, facts, gpu_link).outcome is Outcome.PASSED
    assert judged(health.row_remapping, facts, 0).outcome is Outcome.PASSED
    assert judged(health.xid_during_run, facts, 0).outcome is Outcome.PASSED


def test_a_new_uncorrected_ecc_error_fails_its_gpu():
    after = healthy_h200x2()
    after.answer("total_ecc_errors", 1, UNCORRECTED, VOLATILE, value=2)
    verdict = fails_only(health.ecc_errors_during_run, with_health(healthy_h200x2(), after), 1, 0)
    assert "gpu1: new uncorrected ECC errors 2 errors > 0 errors" in verdict.message


@pytest.mark.parametrize(("rows", "words"), [([0, 0, 1, 0], "row remap pending at start"), ([0, 0, 0, 1], "row remap failure at start")])
def test_a_pending_or_failed_row_remap_fails_its_gpu(rows, words):
    start = healthy_h200x2()
    start.answer("remapped_rows", 0, value=rows)
    verdict = fails_only(health.row_remapping, with_health(start), 0, 1)
    assert words in verdict.message and "uncorrectable remaps <= 511" in verdict.message


def test_512_uncorrectable_remaps_fail_511_pass():
    start = healthy_h200x2()
    start.answer("remapped_rows", 1, value=[3, 512, 0, 0])
    start.answer("remapped_rows", 0, value=[3, 511, 0, 0])
    verdict = fails_only(health.row_remapping, with_health(start), 1, 0)
    assert "uncorrectable row remaps 512 rows > 511 rows" in verdict.message


@pytest.mark.parametrize("number", [79, 48])
def test_a_critical_xid_during_the_run_fails_its_gpu(number):
    after = healthy_h200x2()
    xid(after, 1, number)
    xid(after, 0, 13)  # not critical: reported, passes
    facts = with_health(healthy_h200x2(), after)
    verdict = fails_only(health.xid_during_run, facts, 1, 0)
    assert f"XID {number} (nvml event" in verdict.message and "1 critical events > 0 critical events" in verdict.message
    assert "others reported: XID 13" in judged(health.xid_during_run, facts, 0).message


def test_an_nvlink_replay_on_one_link_fails_that_link_only():
    after = healthy_h200x2()
    after.answer("nvlink_error_counter", 0, 5, NVLINK_REPLAY, value=3)
    facts = with_health(healthy_h200x2(), after)
    verdict = fails_only(health.nvlink_errors_during_run, facts, (0, 5), (1, 5))
    assert verdict.message.startswith("gpu0-link5: new NVLink replay errors 3 errors > 0 errors")
    failed = [link for link in health.gpu_links(PROFILE) if judged(health.nvlink_errors_during_run, facts, link).outcome is Outcome.FAILED]
    assert failed == [(0, 5)]


def test_a_pcie_replay_burst_fails_its_gpu():
    after = healthy_h200x2()
    after.answer("pcie_replay_counter", 1, value=5000)
    verdict = fails_only(health.pcie_replay_rate, with_health(healthy_h200x2(), after, seconds=60), 1, 0)
    # DCGM's rate for Gen5 x16: 16 lanes x 32 GT/s x 1e-12 x 60 = 30.72 a minute
    assert "PCIe replay rate 5000.0 replays/min > 30.72 replays/min (5000 replays in 60 s on Gen5 x16)" in verdict.message


def test_a_rolled_over_pcie_replay_counter_fails_its_gpu_whatever_the_count_reads():
    after = healthy_h200x2()
    after.answer("field_value", 1, Field.PCIE_REPLAY_ROLLOVER, 0, value=1)  # the count itself reads 0 again
    verdict = fails_only(health.pcie_replay_rate, with_health(healthy_h200x2(), after, seconds=60), 1, 0)
    assert verdict.message.startswith("gpu1: the PCIe replay counter rolled over 1 time(s) in 60 s on Gen5 x16")


def test_a_burst_of_pcie_correctable_errors_fails_its_gpu():
    after = healthy_h200x2()
    after.answer("field_value", 0, Field.PCIE_CORRECTABLE, 0, value=120)
    verdict = fails_only(health.pcie_correctable_rate, with_health(healthy_h200x2(), after, seconds=60), 0, 1)
    assert "PCIe correctable error rate 120 errors/min > 30.72 errors/min (120 errors in 60 s on Gen5 x16)" in verdict.message


def test_hardware_slowdown_time_fails_its_gpu():
    after = healthy_h200x2()
    after.answer("field_value", 0, Field.HW_THERMAL_NS, 0, value=3 * 10**9)  # 3 s of a 60 s run: 5%
    verdict = fails_only(health.clock_slowdown_during_run, with_health(healthy_h200x2(), after, seconds=60), 0, 1)
    assert "HW slowdown time (thermal + power brake) of the run 5 % > 1 %" in verdict.message and "hw thermal 3.00 s" in verdict.message


def test_a_slowdown_is_a_share_of_the_time_under_load_where_the_telemetry_tells():
    from gpuaccept.facts.telemetry import LoadWindow, Telemetry

    after = healthy_h200x2()
    after.answer("field_value", 0, Field.HW_THERMAL_NS, 0, value=int(0.4 * 10**9))  # 0.4 s of a 60 s run: 0.67%
    facts = with_health(healthy_h200x2(), after, seconds=60)
    assert judged(health.clock_slowdown_during_run, facts, 0).outcome is Outcome.PASSED  # no telemetry: a share of the run
    # stages loaded the GPUs for 20 s of the 60 (two overlapping windows count once): 0.4 s of them is 2%
    windows = [LoadWindow(stage="nccl", started_s=5.0, ended_s=15.0), LoadWindow(stage="compute", started_s=10.0, ended_s=25.0)]
    sampled = facts.model_copy(update={"telemetry": Telemetry(started_at="2026-11-23T08:00:00+00:00", period_s=1.0, loads=windows)})
    verdict = fails_only(health.clock_slowdown_during_run, sampled, 0, 1)
    assert verdict.measured == 2.0 and "HW slowdown time (thermal + power brake) of 20 s under load 2 % > 1 %" in verdict.message


def test_software_power_capping_is_normal():
    after = healthy_h200x2()
    after.answer("field_value", 0, Field.SW_POWER_CAP_NS, 0, value=30 * 10**9)
    assert judged(health.clock_slowdown_during_run, with_health(healthy_h200x2(), after), 0).outcome is Outcome.PASSED


def test_recovery_action_reset_fails_its_gpu():
    start = healthy_h200x2()
    start.answer("field_value", 1, Field.RECOVERY_ACTION, 0, value=1)
    verdict = fails_only(health.recovery_action, with_health(start), 1, 0)
    assert "recovery action (field 230) at start GPU reset, expected none (code 1)" in verdict.message
    after = healthy_h200x2()
    after.answer("field_value", 0, Field.RECOVERY_ACTION, 0, value=2)
    assert "node reboot" in fails_only(health.recovery_action_after_run, with_health(healthy_h200x2(), after), 0, 1).message


def test_another_compute_process_fails_its_gpu():
    start = healthy_h200x2()
    start.answer("compute_processes", 1, value=[{"pid": 4242, "used_memory": 2**30}])
    verdict = fails_only(health.other_processes, with_health(start), 1, 0)
    assert "other compute processes at start 1 processes > 0 processes (pid 4242" in verdict.message


def test_what_nvml_does_not_support_is_skipped_with_the_reason():
    facts = with_health(healthy_h200x2(), healthy_h200x2())
    # Hopper retires no pages (it remaps rows): the lent H200s answer Not Supported
    verdict = judged(health.retired_pages, facts, 0)
    assert verdict.outcome is Outcome.NOT_APPLICABLE and "not supported" in verdict.message
    start = healthy_h200x2()
    start.answer("field_value", 0, Field.RECOVERY_ACTION, 0, error="NOT_SUPPORTED")
    verdict = judged(health.recovery_action, with_health(start), 0)
    assert verdict.outcome is Outcome.NOT_APPLICABLE and "recovery action (field 230): not supported" in verdict.message
    # never read as 0: the reading keeps NVML's word
    assert with_health(start).health.snapshots[0].recovery_action.unavailable == "not_supported"


def test_a_reading_nvml_refused_is_an_error_not_a_pass():
    start = healthy_h200x2()
    start.answer("remapped_rows", 0, error="NO_PERMISSION")
    assert judged(health.row_remapping, with_health(start), 0).outcome is Outcome.ERROR


NO_LOADS_PROFILE = """
    schema: 1
    extends: bases/hgx-h200
    description: 2xH200 asked for no load at all
    gpus: {count: 2}
    nccl: null
    pairwise: null
    copies: null
    ddp: null
    compute: null
"""


def test_with_only_the_start_snapshot_no_delta_is_judged(tmp_path):
    facts = with_health(healthy_h200x2())
    # the profile asks for loads and the facts hold none after the start: could not judge, never a skip
    for check in health.RUN_CHECKS:
        verdict = judged(check, facts, 0)
        if check is health.xid_during_run:  # what was heard over the run is judged, loads or none
            assert verdict.outcome is not Outcome.NOT_APPLICABLE
        elif check is health.ecc_corrected_during_run:  # the profile sets no limit on it
            assert verdict.outcome is Outcome.NOT_APPLICABLE and "sets no limit" in verdict.message
        else:
            assert verdict.outcome is Outcome.ERROR, check.__name__
            assert verdict.missing == "the facts hold no health readings after a load", check.__name__
    # a profile that asks for no load: there is no change over a load to judge, a skip with the reason
    bare = load_profile(write(tmp_path / "bare.yaml", NO_LOADS_PROFILE), [shipped_dir("profiles")])
    for check in health.RUN_CHECKS:
        if check is not health.xid_during_run:
            verdict = check(bare, facts, 0)
            assert verdict.outcome is Outcome.NOT_APPLICABLE, check.__name__


def start_only(facts):
    """The facts as if every snapshot after the load had failed (a GPU that stopped answering NVML),
    with the measurements of a real run: a load ran."""
    kept = [s for s in facts.health.snapshots if s.label == "start"]
    measured = example_facts("h200x2-measured").measurements
    return facts.model_copy(update={"health": facts.health.model_copy(update={"snapshots": kept}), "measurements": measured})


def test_a_critical_xid_fails_its_gpu_even_when_no_snapshot_after_the_load_was_taken():
    after = healthy_h200x2()
    xid(after, 1, 79)
    facts = start_only(with_health(healthy_h200x2(), after))
    verdict = judged(health.xid_during_run, facts, 1)
    assert verdict.outcome is Outcome.FAILED and "XID 79 (nvml event" in verdict.message
    # with no snapshot after the load nothing else of the run can be judged: never a pass, never a skip
    for check in health.RUN_CHECKS:
        if check is health.ecc_corrected_during_run:
            continue  # the profile sets no limit on it
        verdict = judged(check, facts, 0)
        assert verdict.outcome is Outcome.ERROR, check.__name__
        assert "no health snapshot after the load could be taken" in verdict.message


def test_an_xid_listener_nvml_refused_is_an_error_and_one_it_does_not_support_is_skipped():
    facts = with_health(healthy_h200x2(), healthy_h200x2())
    unread_log = KernelLog(readable=False, note="/dev/kmsg: permission denied")

    def listened(note: str):
        return facts.model_copy(update={"health": facts.health.model_copy(update={"listener": note, "kernel_log": unread_log})})

    refused = listened("no NVML event listener; not registered: gpu0: NO_PERMISSION No Permission; gpu1: NOT_SUPPORTED Not Supported")
    verdict = judged(health.xid_during_run, refused, 0)
    assert verdict.outcome is Outcome.ERROR and "nothing listened for XIDs on this GPU" in verdict.message
    assert judged(health.xid_during_run, refused, 1).outcome is Outcome.NOT_APPLICABLE
    one = listened("NVML events listened for on gpu1 from 10:00:00 to 10:01:00; not registered: gpu0: UNKNOWN Unknown Error")
    assert judged(health.xid_during_run, one, 0).outcome is Outcome.ERROR
    assert judged(health.xid_during_run, one, 1).outcome is Outcome.PASSED


def test_a_reading_nvml_does_not_give_does_not_hide_a_failing_one_under_the_same_test():
    start = healthy_h200x2()  # the recording has no SRAM ECC status: the threshold flag is not read
    start.answer("memory_error_counter", 0, UNCORRECTED, AGGREGATE, SRAM, value=7)
    verdict = judged(health.sram_ecc, with_health(start), 0)
    assert verdict.outcome is Outcome.FAILED and "SRAM uncorrected ECC errors (aggregate) 7 errors > 0 errors" in verdict.message
    after = healthy_h200x2()
    after.answer("nvlink_error_counter", 0, 3, NVLINK_REPLAY, error="NOT_SUPPORTED")
    after.answer("nvlink_error_counter", 0, 3, NVLINK_RECOVERY, value=5)
    verdict = judged(health.nvlink_errors_during_run, with_health(healthy_h200x2(), after), (0, 3))
    assert verdict.outcome is Outcome.FAILED and "new NVLink recovery errors 5 errors > 0 errors" in verdict.message


def test_a_counter_that_went_down_is_not_judged_as_a_negative_count():
    start, after = healthy_h200x2(), healthy_h200x2()
    start.answer("pcie_replay_counter", 0, value=65000)
    after.answer("pcie_replay_counter", 0, value=300)
    after.answer("field_value", 0, Field.PCIE_REPLAY_ROLLOVER, 0, error="NOT_SUPPORTED")  # nothing says it rolled over
    start.answer("field_value", 0, Field.PCIE_CORRECTABLE, 0, value=90000)
    after.answer("field_value", 0, Field.PCIE_CORRECTABLE, 0, value=500)
    facts = with_health(start, after)
    for check in (health.pcie_replay_rate, health.pcie_correctable_rate):
        verdict = judged(check, facts, 0)
        assert verdict.outcome is Outcome.ERROR, verdict.message
        assert "went down from" in verdict.message and "reset or rolled over" in verdict.message
        assert judged(check, facts, 1).outcome is Outcome.PASSED


def test_facts_without_health_readings_could_not_judge_any_health_check():
    facts = older_example_facts("h200x2-measured")
    for check in health.STATE_CHECKS + health.RUN_CHECKS:
        if check is health.vbios_consistent:
            continue  # read from the inventory facts
        verdict = judged(check, facts, 0)
        if "sets no limit" in verdict.message:
            continue  # the profile asks nothing of it
        assert verdict.outcome is Outcome.ERROR, check.__name__
        assert verdict.missing in ("the facts hold no health readings", "the facts hold no kernel log reading"), check.__name__


def test_a_vbios_apart_from_its_siblings_fails():
    start = healthy_h200x2()
    start.answer("vbios", 1, value="96.00.A5.00.FF")
    facts = with_health(start)
    verdicts = [judged(health.vbios_consistent, facts, gpu) for gpu in (0, 1)]
    # two GPUs disagreeing: the one apart from the most common (the first of equals) fails
    assert [v.outcome for v in verdicts] == [Outcome.PASSED, Outcome.FAILED]
    assert "VBIOS 96.00.A5.00.FF, expected 96.00.A5.00.1A (1 of 2 NVIDIA H200 GPUs run 96.00.A5.00.1A)" in verdicts[1].message


def test_health_facts_round_trip_and_older_facts_read_unchanged(tmp_path):
    facts = with_health(healthy_h200x2(), healthy_h200x2())
    save_facts(facts, tmp_path / "facts.json")
    assert load_facts(tmp_path / "facts.json") == facts
    older = older_example("h200x2-measured")
    assert "health" not in json.loads(older_example_facts("h200x2-measured").model_dump_json())
    assert json.loads(older_example_facts("h200x2-measured").model_dump_json()) == json.loads(older.read_text())


KERNEL_LOG = """\
[   12.345678] nvidia: module loaded
[ 4242.000001] NVRM: Xid (PCI:0000:00:07): 79, pid=1234, name=python, GPU has fallen off the bus.
[ 4243.5] NVRM: Xid (PCI:0000:00:06): 13, Graphics SM Warp Exception
[ 4244.5] NVRM: Xid (PCI:0000:9a:00): 48, a GPU not under test
"""


def test_kernel_log_xids_are_mapped_to_gpus_by_bus_id():
    facts = with_health(healthy_h200x2())
    events = parse_kernel_xids(KERNEL_LOG, {"00000000:00:06": 0, "00000000:00:07": 1})
    assert [(e.gpu, e.xid, e.time) for e in events] == [(1, 79, "boot+4242.000001s"), (0, 13, "boot+4243.5s")]
    found = [(t.gpu, t.pci_bus_id) for t in (Target.of(g) for g in facts.gpus)]
    assert found == [(0, "00000000:00:06.0"), (1, "00000000:00:07.0")]
    # read through the reader, as a file where dmesg is refused
    log = Path("/nonexistent-kern.log")

    def refused(command):
        raise PermissionError("dmesg: read kernel buffer failed: Operation not permitted")

    reading, none = read_kernel_log([Target.of(g) for g in facts.gpus], run=refused, files=(log,))
    assert not reading.readable and none == []
    assert "Operation not permitted" in reading.note and str(log) in reading.note


SYSLOG_XID = "Nov 23 07:{minute} gpu-17 kernel: [ {seconds}] NVRM: Xid (PCI:0000:00:07): 79, pid=1234, GPU has fallen off the bus."
BARE_XID = "NVRM: Xid (PCI:0000:00:07): 79, pid=1234, GPU has fallen off the bus."  # a log without timestamps


def test_an_xid_during_the_run_is_new_even_where_the_same_xid_came_before(tmp_path):
    from gpuaccept.stages.health import with_health as session_health

    buses = {"00000000:00:06": 0, "00000000:00:07": 1}
    before = [SYSLOG_XID.format(minute="00:01", seconds="61.250000"), BARE_XID]
    after = [*before, SYSLOG_XID.format(minute="30:00", seconds="1860.000000"), BARE_XID]
    start_events = parse_kernel_xids("\n".join(before), buses)
    assert [e.time for e in start_events] == ["boot+61.250000s", "since boot"]  # the kernel's time after syslog's prefix
    facts = with_health(healthy_h200x2(), healthy_h200x2())  # a load ran, and no NVML event was heard
    facts = facts.model_copy(update={"health": facts.health.model_copy(update={"events": start_events})})
    log = KernelLog(readable=True, note="kern.log")
    reading = HealthFacts(snapshots=[], events=parse_kernel_xids("\n".join(after), buses), kernel_log=log)
    for number in range(2):  # every reading holds the whole log again: a line is new once
        (tmp_path / f"health-{number:03d}.json").write_text(reading.model_dump_json(), encoding="utf-8")
    # a third reading from dmesg (no syslog prefix): the same lines, by the kernel's time
    dmesg = [line.split("kernel: ", 1)[-1] for line in after]
    again = HealthFacts(snapshots=[], events=parse_kernel_xids("\n".join(dmesg), buses), kernel_log=KernelLog(readable=True, note="dmesg"))
    (tmp_path / "health-002.json").write_text(again.model_dump_json(), encoding="utf-8")
    merged = session_health(facts, tmp_path).health.events
    assert [(e.time, e.during_run) for e in merged] == [
        ("boot+61.250000s", False), ("since boot", False), ("boot+1860.000000s", True), ("since boot", True)
    ]
    during = facts.model_copy(update={"health": facts.health.model_copy(update={"events": merged})})
    verdict = fails_only(health.xid_during_run, during, 1, 0)
    assert "2 critical events > 0 critical events" in verdict.message, verdict.message



def test_readings_that_workers_wrote_out_of_order_are_merged_in_the_order_taken(tmp_path):
    # two xdist workers each snapshot every GPU after their part of the compute stage: the later
    # reading's file can come first; the facts hold snapshots in the order taken, or refuse them
    from gpuaccept.facts import parse_facts
    from gpuaccept.stages.health import with_health as session_health

    facts = with_health(healthy_h200x2(), healthy_h200x2())
    start = [s for s in facts.health.snapshots if s.label == "start"]
    base = facts.model_copy(update={"health": facts.health.model_copy(update={"snapshots": start, "events": []})})

    def reading(label: str, taken_at: str) -> HealthFacts:
        return HealthFacts(snapshots=[s.model_copy(update={"label": label, "taken_at": taken_at}) for s in start])

    later, earlier = reading("after compute", "2099-01-01T00:00:02.000+00:00"), reading("after compute", "2099-01-01T00:00:01.000+00:00")
    (tmp_path / "health-1-a.json").write_text(later.model_dump_json(), encoding="utf-8")  # written first, taken last
    (tmp_path / "health-2-b.json").write_text(earlier.model_dump_json(), encoding="utf-8")
    merged = session_health(base, tmp_path)
    assert [(s.gpu, s.taken_at[-15:]) for s in merged.health.snapshots[len(start):]] == [
        (0, "00:01.000+00:00"), (1, "00:01.000+00:00"), (0, "00:02.000+00:00"), (1, "00:02.000+00:00"),
    ]
    assert parse_facts(merged.model_dump_json(), "merged") == merged  # the order the facts require

def test_a_critical_xid_since_boot_fails_its_gpu_or_is_reported():
    facts = with_health(healthy_h200x2())
    events = parse_kernel_xids(KERNEL_LOG, {"00000000:00:06": 0, "00000000:00:07": 1})
    facts = facts.model_copy(update={"health": facts.health.model_copy(update={"events": events})})
    verdict = fails_only(health.xid_since_boot, facts, 1, 0)
    assert "1 critical XIDs > 0 critical XIDs" in verdict.message and "XID 79 (kernel log, boot+4242.000001s)" in verdict.message
    unreadable = facts.model_copy(
        update={"health": HealthFacts(snapshots=facts.health.snapshots, kernel_log=KernelLog(readable=False, note="dmesg: not permitted"))}
    )
    skipped = judged(health.xid_since_boot, unreadable, 1)
    assert skipped.outcome is Outcome.NOT_APPLICABLE and "dmesg: not permitted" in skipped.message


def test_event_waits_are_recorded_in_order_and_replayed_in_order(tmp_path):
    source = healthy_h200x2()
    xid(source, 0, 79)
    xid(source, 1, 48)
    recorder = RecordingNvml(source)
    answers = [recorder.query("event_wait", 500), recorder.query("event_wait", 500)]
    with pytest.raises(NvmlCallError) as quiet:
        recorder.query("event_wait", 500)  # nothing left: a quiet GPU
    assert quiet.value.code == "TIMEOUT"
    recorder.save(tmp_path / "nvml.json")
    saved = json.loads((tmp_path / "nvml.json").read_text())["answers"]
    assert [a["value"]["data"] for a in saved if a["query"] == "event_wait"] == [79, 48]  # the quiet wait is not kept
    replay = ReplayNvml.from_file(tmp_path / "nvml.json")
    assert [replay.query("event_wait", 500), replay.query("event_wait", 500)] == answers


def gpu_accept(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuaccept", *args], capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.slow
def test_replayed_facts_with_one_fault_exit_1_naming_the_gpu(tmp_path):
    after = healthy_h200x2()
    xid(after, 1, 79)
    save_facts(with_health(healthy_h200x2(), after), tmp_path / "faulty.json")
    save_facts(with_health(healthy_h200x2(), healthy_h200x2()), tmp_path / "healthy.json")
    common = ("run", "--profile", "h200-2-nvswitch", "-k", "test_health")
    healthy = gpu_accept(*common, "--facts", str(tmp_path / "healthy.json"), "--reports", str(tmp_path / "healthy"))
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    done = gpu_accept(*common, "--facts", str(tmp_path / "faulty.json"), "--reports", str(tmp_path / "faulty"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "gpu1: critical XID / ECC events during the run 1 critical events > 0 critical events (XID 79" in done.stdout
    results = json.loads((tmp_path / "faulty" / "results.json").read_text())
    failed = [t["id"] for t in results["tests"] if t["outcome"] == "failed"]
    assert failed == ["test_xid_during_run[gpu1]"]


CPU_2GPU_PROFILE = """
    schema: 1
    extends: bases/hgx-h200
    description: the 2xH200 recording, with a floor a CPU can meet
    gpus: {count: 2}
    # the NCCL stage is the load whose snapshot this run takes: the others would load the CPU for minutes
    copies: null
    ddp: null
    compute: null
    nccl:
      dtype: float32
      warmup: 1
      iterations: 2
      timeout_s: 30
      busbw:
        all_reduce: {64KiB: 0.0001}
"""


@pytest.mark.slow
def test_a_live_run_hears_an_xid_and_snapshots_after_each_stage(tmp_path):
    pytest.importorskip("torch")
    after = healthy_h200x2()
    xid(after, 1, 48)  # heard by the listener of the run, through the NVML door
    recording = save_recording(after, tmp_path / "nvml.json")
    profile = write(tmp_path / "cpu2.yaml", CPU_2GPU_PROFILE)
    env = {**os.environ, "GPUACCEPT_NVML_REPLAY": str(recording), "GPUACCEPT_KERNEL_LOG": str(write(tmp_path / "kern.log", "quiet\n"))}
    done = gpu_accept(
        "run", "--profile", str(profile), "--profile-dir", str(shipped_dir("profiles")), "--reports", str(tmp_path / "reports"),
        "-k", "test_health or test_busbw", env=env,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    results = json.loads((tmp_path / "reports" / "results.json").read_text())
    failed = [t["id"] for t in results["tests"] if t["outcome"] == "failed"]
    assert failed == ["test_xid_during_run[gpu1]"], done.stdout
    health = results["facts"]["health"]
    labels = [(s["gpu"], s["label"]) for s in health["snapshots"]]
    assert labels[:2] == [(0, "start"), (1, "start")] and (1, "after nccl") in labels
    assert [(e["gpu"], e["xid"], e["source"]) for e in health["events"]] == [(1, 48, "nvml_event")]
    assert health["kernel_log"]["note"].startswith(str(tmp_path / "kern.log"))
    passed = {t["id"] for t in results["tests"] if t["outcome"] == "passed"}
    assert {"test_pcie_replay_rate[gpu0]", "test_ecc_errors_during_run[gpu1]", "test_row_remapping[gpu1]"} <= passed


@pytest.mark.slow
def test_the_snapshots_after_stages_come_from_one_child_kept_for_the_session_and_one_that_dies_is_replaced(tmp_path, monkeypatch):
    import signal

    from gpuaccept.stages.health import SnapshotAfterStage

    monkeypatch.setenv("GPUACCEPT_NVML_REPLAY", str(save_recording(healthy_h200x2(), tmp_path / "nvml.json")))
    monkeypatch.setenv("GPUACCEPT_KERNEL_LOG", str(write(tmp_path / "kern.log", "quiet\n")))
    facts = with_health(healthy_h200x2())
    said: list[str] = []
    snapshots = SnapshotAfterStage(tmp_path, said.append)
    try:
        snapshots.start(facts)
        child = snapshots._server
        snapshots("copies", facts)
        snapshots("nccl", facts)
        assert snapshots._server is child and child.poll() is None  # one child took both readings
        os.kill(child.pid, signal.SIGKILL)  # as a driver call that took the child down would
        snapshots("ddp", facts)
        assert said == ["gpu-accept: health snapshot after ddp not taken: no message"] and snapshots._server is None
        snapshots("compute", facts)  # a new child for the next reading
        replaced = snapshots._server
        assert replaced is not None and replaced is not child
    finally:
        snapshots.close()
    assert replaced.poll() is not None  # ended with the session
    readings = [HealthFacts.model_validate_json(path.read_text()) for path in sorted(tmp_path.glob("health-*.json"))]
    assert [sorted({s.label for s in reading.snapshots}) for reading in readings] == [["after copies"], ["after nccl"], ["after compute"]]
    assert all(len(reading.snapshots) == 2 for reading in readings)  # every GPU of the facts


def test_a_gpu_without_recovery_action_events_still_listens_for_xids():
    after = healthy_h200x2()
    after.answer("event_register", 0, EVENT_MASK, error="NOT_SUPPORTED")
    after.answer("event_register", 0, EVENT_MASK & ~EVENT_RECOVERY_ACTION, value=True)
    xid(after, 0, 79)
    facts = with_health(healthy_h200x2(), after)
    assert "gpu0 (XID and ECC events only: recovery-action events not supported), gpu1 from" in facts.health.listener
    assert "XID 79" in fails_only(health.xid_during_run, facts, 0, 1).message


# -- facts recorded on a lent 2xH200 (`gpu-accept record --measure`, 2026-11-23) --------------------------


RECORDED = Path(__file__).parent / "data" / "facts" / "h200x2-health-measured.json"


@pytest.mark.slow
def test_a_healthy_recorded_machine_passes_and_its_one_remap_pending_fails_only_that_gpu(tmp_path):
    def run(facts: Path) -> tuple[subprocess.CompletedProcess, dict]:
        reports = tmp_path / facts.stem
        done = gpu_accept("run", "--facts", str(facts), "--profile", "h200-2-nvswitch", "--reports", str(reports), "-k", "test_health")
        return done, json.loads((reports / "results.json").read_text())

    done, results = run(RECORDED)
    assert done.returncode == 0, done.stdout + done.stderr
    skipped = {t["message"].split(": ", 1)[1] for t in results["tests"] if t["outcome"] == "skipped"}
    # what this VM's NVML does not answer, and limits the shipped profile leaves open: nothing else
    assert all("not supported" in reason or "sets no limit" in reason for reason in skipped), skipped
    labels = {s["label"] for s in results["facts"]["health"]["snapshots"]}
    assert labels == {"start", "after nccl", "after copies", "after ddp", "after compute"}

    recorded = json.loads(RECORDED.read_text())
    start_of_gpu1 = next(s for s in recorded["health"]["snapshots"] if s["gpu"] == 1 and s["label"] == "start")
    start_of_gpu1["remap_pending"] = True
    faulty = write(tmp_path / "remap-pending.json", json.dumps(recorded))
    done, results = run(faulty)
    assert done.returncode == 1
    failed = {t["id"]: t["message"] for t in results["tests"] if t["outcome"] == "failed"}
    assert list(failed) == ["test_row_remapping[gpu1]"], failed
    assert "pending" in failed["test_row_remapping[gpu1]"]


def test_the_start_snapshot_read_again_from_the_lent_machines_nvml_answers_is_the_one_recorded():
    # tests/data/nvml/h200x2-health.json: what NVML answered to that record's probe, start snapshot included
    from gpuaccept.probe.health import Target, take_snapshot

    facts = load_facts(RECORDED)
    replay = ReplayNvml.from_file(Path(__file__).parent / "data" / "nvml" / "h200x2-health.json")
    for gpu in facts.gpus:
        recorded = next(s for s in facts.health.snapshots if s.gpu == gpu.index and s.label == "start")
        again = take_snapshot(replay, Target.of(gpu), "start")
        # the record was probed when retired pages were asked for with causes 1 and 2 (NVML's are 0,
        # single-bit, and 1, double-bit): its answer to cause 1 is now the double-bit count's
        retired = {"retired_pages_sbe", "retired_pages_dbe"}
        assert again.model_copy(update={"taken_at": recorded.taken_at, **{k: getattr(recorded, k) for k in retired}}) == recorded
        assert again.retired_pages_dbe.unavailable == "not_supported" and "retired_pages(" in again.retired_pages_dbe.detail
        assert again.retired_pages_sbe.unavailable == "not_probed"  # cause 0 was never asked of that machine
        assert len(again.nvlink_errors) == 18  # every active link of an H200 read


def test_the_inforom_is_validated_in_the_start_reading_only_and_judged_there(monkeypatch):
    # validating it takes about 70 ms a GPU: a reading after each stage paid it again, unjudged
    from gpuaccept.probe.health import Target, take_snapshot

    replay = healthy_h200x2()
    asked: list[str] = []
    answer = replay.query
    monkeypatch.setattr(replay, "query", lambda name, *args: (asked.append(name), answer(name, *args))[1])
    gpu = probe_replay(replay).gpus[1]
    asked.clear()
    after = take_snapshot(replay, Target.of(gpu), "after nccl")
    assert "inforom_valid" not in asked and after.inforom_valid.unavailable == "not_probed"
    start = take_snapshot(replay, Target.of(gpu), "start")
    assert "inforom_valid" in asked and start.inforom_valid is True
    # a corrupted InfoROM at the start fails its GPU's test, whatever the later readings say
    facts = with_health(healthy_h200x2(), healthy_h200x2())
    snapshots = [s.model_copy(update={"inforom_valid": False}) if (s.gpu, s.label) == (1, "start") else s for s in facts.health.snapshots]
    sick = facts.model_copy(update={"health": facts.health.model_copy(update={"snapshots": snapshots})})
    assert [s.inforom_valid for s in sick.health.snapshots if s.gpu == 1][1].unavailable == "not_probed"
    verdict = judged(health.inforom, sick, 1)
    assert verdict.outcome is Outcome.FAILED and verdict.measured == "corrupted", verdict.message
    assert judged(health.inforom, facts, 1).outcome is Outcome.PASSED


def test_pcie_errors_are_allowed_at_the_rate_of_the_generation_the_link_runs_at_under_load():
    after = healthy_h200x2()
    after.answer("pcie_replay_counter", 0, value=10)  # 10 replays in 60 s
    facts = with_health(healthy_h200x2(), after, seconds=60)
    # a card that idles at Gen1 (read so at the start) and runs at Gen4: 16 x 16 GT/s x 1e-12 x 60 = 15.36 a minute
    idling = facts.gpus[0].pcie.model_copy(update={"generation_current": 1, "generation_max": 4})
    gpus = [facts.gpus[0].model_copy(update={"pcie": idling}), *facts.gpus[1:]]
    verdict = judged(health.pcie_replay_rate, facts.model_copy(update={"gpus": gpus}), 0)
    assert verdict.outcome is Outcome.PASSED and verdict.expected == "<= 15.36 replays/min", verdict.message


@pytest.mark.parametrize("missing", ["retired_pending", "retired_pages_sbe"])
def test_a_reading_nvml_does_not_give_hides_none_of_the_others(missing):
    # 73 retired pages (limit 62) on gpu1: a pending flag (or a page count) NVML does not give must not turn it into a pass
    facts = with_health(healthy_h200x2())
    sick = {"retired_pages_sbe": 40, "retired_pages_dbe": 33, "retired_pending": False,
            missing: Unavailable(unavailable="not_supported", detail=f"NVML does not give {missing}")}
    if missing == "retired_pages_sbe":
        sick["retired_pages_dbe"] = 73
    healthy = {**sick, **{key: 0 for key in ("retired_pages_sbe", "retired_pages_dbe") if key != missing}}
    snapshots = [s.model_copy(update=sick if s.gpu == 1 else healthy) for s in facts.health.snapshots]
    facts = facts.model_copy(update={"health": facts.health.model_copy(update={"snapshots": snapshots})})
    verdict = judged(health.retired_pages, facts, 1)
    assert verdict.outcome is Outcome.FAILED and verdict.measured == 73 and "73 pages > 62 pages" in verdict.message, verdict.message
    # the healthy GPU with the same reading missing is not passed either: what is not read is not judged good
    assert judged(health.retired_pages, facts, 0).outcome is not Outcome.PASSED
    # and a row remap failure is not hidden by a pending flag NVML refused
    remaps = [s.model_copy(update={"remap_failure": True, "remap_pending": Unavailable(unavailable="no_permission")})
              if s.gpu == 1 else s for s in facts.health.snapshots]
    remapped = facts.model_copy(update={"health": facts.health.model_copy(update={"snapshots": remaps})})
    assert judged(health.row_remapping, remapped, 1).outcome is Outcome.FAILED


def test_snapshots_taken_at_one_instant_are_no_rate():
    # counters that rose between two snapshots of one instant: judged over an invented second, 100
    # CRC errors would read as 100/s; over no time there is no rate to judge
    after = healthy_h200x2()
    after.answer("pcie_replay_counter", 0, value=5)
    facts = with_health(healthy_h200x2(), after, seconds=0.0)
    for check, subject in ((health.pcie_replay_rate, 0), (health.clock_slowdown_during_run, 0)):
        verdict = judged(check, facts, subject)
        assert verdict.outcome is Outcome.ERROR and "taken at the same instant" in verdict.message, verdict.message


def test_the_quick_levels_reading_asks_no_nvlink_error_counter_and_says_why():
    asked: list[str] = []

    class Counting(ReplayNvml):
        def query(self, name, *args):
            asked.append(name)
            return super().query(name, *args)

    replay = healthy_h200x2()
    counting = Counting([])
    counting.__dict__.update(replay.__dict__)
    facts = probe_replay(replay)
    targets = [Target.of(gpu) for gpu in facts.gpus]
    quick = health_reading(counting, targets, START_LABEL, link_counters=False)
    assert "nvlink_error_counter" not in asked and "inforom_valid" in asked
    links = [counters for snapshot in quick.snapshots for counters in snapshot.nvlink_errors]
    assert len(links) == 36  # every active link of both GPUs, each counter saying why it was not read
    assert {counters.replay.detail for counters in links} == {LINK_COUNTERS_NOT_AT_QUICK.detail}
    assert {(c.replay, c.recovery, c.crc_flit, c.crc_data) == (LINK_COUNTERS_NOT_AT_QUICK,) * 4 for c in links} == {True}
    full = health_reading(counting, targets, START_LABEL)
    assert {type(counters.crc_data) for snapshot in full.snapshots for counters in snapshot.nvlink_errors} == {int}


def test_nvlink_errors_are_not_judged_from_a_start_reading_made_for_the_quick_level():
    # facts of the quick level's probe with a load's reading after them: could not judge, never "not applicable"
    start, after = healthy_h200x2(), healthy_h200x2()
    facts = with_health(start, after)
    quick_start = [
        snapshot.model_copy(update={"nvlink_errors": [
            counters.model_copy(update=dict.fromkeys(("replay", "recovery", "crc_flit", "crc_data"), LINK_COUNTERS_NOT_AT_QUICK))
            for counters in snapshot.nvlink_errors
        ]}) if snapshot.label == START_LABEL else snapshot
        for snapshot in facts.health.snapshots
    ]
    facts = facts.model_copy(update={"health": facts.health.model_copy(update={"snapshots": quick_start})})
    verdict = judged(health.nvlink_errors_during_run, facts, (1, 4))
    assert verdict.outcome is Outcome.ERROR and "error counters not read at 'start'" in verdict.message, verdict.message
