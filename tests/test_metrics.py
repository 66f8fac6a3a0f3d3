"""Prometheus metrics of a run (`--metrics FILE`, `render_metrics`): parsed with prometheus_client's
own parser, as node_exporter's textfile collector and Prometheus read them."""

from __future__ import annotations

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuaccept.cli import main
from gpuaccept.facts import run_verdict
from gpuaccept.facts.run_record import load_results
from gpuaccept.report.metrics import render_metrics, render_run_metrics, subject_labels
from tests.helpers import EXAMPLES, with_verdict

RESULTS = EXAMPLES.parent / "results"
NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


def parsed(text: str) -> dict[str, list]:
    """Each family's samples, by family name (the parser refuses text Prometheus would refuse)."""
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def sample(families: dict[str, list], name: str, **labels: str):
    found = [s for s in families[name] if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def test_a_failed_run_reads_as_failed_with_each_value_in_its_base_unit_beside_its_floor():
    record = load_results(RESULTS / "h200x4-nccl-p2p-disabled.json")
    families = parsed(render_metrics([record]))
    run = {"host": record.environment.host, "profile": "h200-4-calibrated"}
    assert sample(families, "gpu_accept_run_exit_code", **run).value == 1 == record.exit_code()
    assert sample(families, "gpu_accept_run_passed", **run).value == 0
    assert sample(families, "gpu_accept_tests", outcome="failed", **run).value == record.summary.failed > 0
    busbw = next(t for t in record.tests if t.id == "test_busbw[all_reduce-1GiB]").verdict
    assert busbw is not None and busbw.numeric is not None and busbw.expected.startswith(">= ")  # written before `criterion`
    value = sample(families, "gpu_accept_busbw_bytes_per_second", collective="all_reduce", size="1GiB")
    assert value.value == pytest.approx(busbw.numeric * 1e9)
    floor = sample(families, "gpu_accept_busbw_limit_bytes_per_second", collective="all_reduce", size="1GiB")
    assert floor.value == pytest.approx(float(busbw.expected.split()[1]) * 1e9) and floor.value > value.value  # failed: below
    assert sample(families, "gpu_accept_test_passed", test="test_busbw[all_reduce-1GiB]").value == 0
    assert sample(families, "gpu_accept_pair_busbw_bytes_per_second", pair="gpu0-gpu1").value > 0
    assert 0 < sample(families, "gpu_accept_ddp_scaling_ratio", setting="4gpu-bs8").value < 1


def test_names_follow_prometheus_conventions():
    record = load_results(RESULTS / "h200x4.json")
    text = render_metrics([record])
    families = parsed(text)
    assert families and all(NAME.match(name) and name.startswith("gpu_accept_") for name in families)
    assert not any(name.endswith("_total") for name in families)  # no counters: a run's values are gauges
    assert all(line.startswith("# TYPE") and line.endswith(" gauge") for line in text.splitlines() if line.startswith("# TYPE"))
    # units are base units in the name, never the report's GB/s
    assert not any("gb" in name.lower().split("_") for name in families)
    # no sample carries a timestamp: node_exporter's textfile collector refuses them
    assert all(s.timestamp is None for samples in families.values() for s in samples)


def test_the_fleet_gets_one_series_per_host_the_latest_run_standing():
    first = load_results(RESULTS / "h200x4.json")
    failed = load_results(RESULTS / "h200x4-nccl-p2p-disabled.json")
    other = first.model_copy(update={"environment": first.environment.model_copy(update={"host": "rack2-07"})})
    families = parsed(render_metrics([first, other, failed]))  # failed: the same host as first, later
    codes = {s.labels["host"]: s.value for s in families["gpu_accept_run_exit_code"]}
    assert codes == {first.environment.host: 1, "rack2-07": 0}


def test_a_test_that_could_not_be_established_is_not_a_pass():
    record = load_results(RESULTS / "h200x4.json")
    errored = with_verdict(record, "test_busbw[all_reduce-1GiB]", outcome="error", measured=None)
    errored = errored.with_tests([t.model_copy(update={"outcome": "error"}) if t.id == "test_busbw[all_reduce-1GiB]" else t
                                  for t in errored.tests])
    families = parsed(render_metrics([errored]))
    assert sample(families, "gpu_accept_test_passed", test="test_busbw[all_reduce-1GiB]").value == 0
    assert not [s for s in families["gpu_accept_busbw_bytes_per_second"] if s.labels["size"] == "1GiB"
                and s.labels["collective"] == "all_reduce"]


def test_label_values_are_escaped():
    record = load_results(RESULTS / "h200x4.json")
    odd = record.model_copy(update={"environment": record.environment.model_copy(update={"host": 'a"b\\c\nd'})})
    families = parsed(render_metrics([odd]))
    assert sample(families, "gpu_accept_run_exit_code").labels["host"] == 'a"b\\c\nd'


@pytest.mark.parametrize(
    "test_id, labels",
    [
        ("test_gpu_count", {}),
        ("test_gpu_model[gpu3]", {"gpu": "gpu3"}),
        ("test_link_type[gpu0-gpu1]", {"pair": "gpu0-gpu1"}),
        ("test_nvlink_errors_during_run[gpu2-link17]", {"gpu": "gpu2", "link": "17"}),
        ("test_busbw[reduce_scatter-256MiB]", {"collective": "reduce_scatter", "size": "256MiB"}),
        ("test_ddp_scaling[8gpu-bs8]", {"setting": "8gpu-bs8"}),
        ("test_gpu_nic_affinity[node1-gpu3]", {"node": "node1", "gpu": "gpu3"}),
    ],
)
def test_labels_come_from_the_test_id(test_id, labels):
    assert subject_labels(test_id) == labels


def test_a_run_that_left_no_results_says_it_could_not_judge():
    verdict = run_verdict.could_not_judge("no NVIDIA driver found", host="node7", started_at="2026-11-27T10:00:00+00:00",
                                          finished_at="2026-11-27T10:00:01+00:00")
    families = parsed(render_run_metrics("health-check", verdict, None))
    assert sample(families, "gpu_accept_run_exit_code", host="node7", command="health-check").value == 2
    assert sample(families, "gpu_accept_run_passed", host="node7").value == 0
    assert sample(families, "gpu_accept_run_in_progress", host="node7").value == 0
    assert sample(families, "gpu_accept_run_timestamp_seconds", host="node7").value == 1795773601


def test_a_run_in_progress_is_no_pass_and_says_it_is_in_progress():
    """Written at the start of every run: a run killed before its end leaves this, never the last pass."""
    verdict = run_verdict.in_progress(host="node7", profile="h200-4-nvswitch", started_at="2026-11-27T10:00:00+00:00")
    families = parsed(render_run_metrics("run", verdict, None))
    assert sample(families, "gpu_accept_run_exit_code", command="run").value == 2
    assert sample(families, "gpu_accept_run_in_progress", command="run").value == 1
    assert sample(families, "gpu_accept_run_passed", command="run").value == 0
    assert "gpu_accept_run_timestamp_seconds" not in families  # it has not ended


def test_the_same_run_of_two_commands_makes_distinct_series():
    """node_exporter merges every file of its folder: the health check's and the burn-in's series
    differ by their command label, so neither is dropped as a duplicate."""
    record = load_results(RESULTS / "h200x4.json")
    verdict = record.judged()
    merged = render_run_metrics("health-check", verdict, record) + render_run_metrics("burn-in", verdict, record)
    series = [(family.name, tuple(sorted(s.labels.items()))) for family in text_string_to_metric_families(merged)
              for s in family.samples]
    assert len(series) == len(set(series)) and len(series) > 100


HOSTILE = [
    'x"} 1\ngpu_accept_run_passed{host="other"} 1\n#',  # a newline and a quote: a forged series of another host
    "a\\b\\",  # backslashes, one at the end
    "\x1b]0;title\x07\u202egpu0",  # a terminal escape, a bidirectional override
    "\ud800 lone surrogate",  # no UTF-8 can carry it
    "n\u00e9ud \u2603 \U0001f600",  # plain UTF-8
    "",
]


@pytest.mark.parametrize("hostile", HOSTILE, ids=["forged-series", "backslashes", "escapes", "surrogate", "utf-8", "empty"])
def test_hostile_names_from_a_results_file_stay_label_values(hostile):
    """A results.json may say anything: its host, profile, test ids and check names reach the text
    only as label values, which prometheus_client's own parser reads back unchanged; a check name
    never becomes part of a metric's name."""
    record = load_results(RESULTS / "h200x4.json")
    busbw = next(t for t in record.tests if t.id == "test_busbw[all_reduce-1GiB]")
    assert busbw.verdict is not None
    forged_check = busbw.model_copy(update={
        "id": f"test_busbw[{hostile}]",
        "verdict": busbw.verdict.model_copy(update={"check": f"busbw_bytes_per_second{{host=\"x\"}} 1\n{hostile}"}),
    })
    odd = record.model_copy(update={
        "environment": record.environment.model_copy(update={"host": hostile}),
        "run": record.run.model_copy(update={"profile": record.run.profile.model_copy(update={"name": hostile})}),
    }).with_tests([*record.tests, forged_check])
    text = render_metrics([odd])
    families = parsed(text)  # the parser refuses a broken file
    expected = hostile.encode("utf-8", "backslashreplace").decode("utf-8")
    hosts = {s.labels["host"] for samples in families.values() for s in samples}
    assert hosts == {expected}
    assert all(NAME.match(name) for name in families)
    assert not [name for name in families if "{" in name or name.startswith("gpu_accept_busbw_bytes_per_second_")]
    [passed] = [s for s in families["gpu_accept_test_passed"] if s.labels["test"] == f"test_busbw[{expected}]"]
    assert passed.value == 1


def test_only_names_of_the_vocabulary_become_metrics():
    record = load_results(RESULTS / "h200x4.json")
    busbw = next(t for t in record.tests if t.id == "test_busbw[all_reduce-1GiB]")
    assert busbw.verdict is not None
    # a verdict that says it is a metric, of a check nobody declared
    claimed = busbw.verdict.model_copy(update={"check": "new_thing", "metric": True})
    unknown = busbw.model_copy(update={"id": "test_new_thing", "verdict": claimed})
    families = parsed(render_metrics([record.with_tests([unknown])]))
    assert not [name for name in families if "new_thing" in name]
    assert sample(families, "gpu_accept_test_passed", test="test_new_thing").value == 1


def test_an_unwritable_metrics_file_is_refused_before_anything_runs(tmp_path, capsys):
    facts = str(EXAMPLES / "h200x4-measured.json")
    code = main(["run", "--profile", "h200-4-nvswitch", "--facts", facts, "--reports", str(tmp_path), "--metrics", "/sys/gpu.prom"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.startswith("gpu-accept: --metrics /sys/gpu.prom: cannot write in /sys ("), err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_run_writes_the_metrics_file_whole(tmp_path):
    from tests.test_cli import gpu_accept

    target = tmp_path / "textfile" / "gpu-accept.prom"
    done = gpu_accept("run", "--profile", "h200-4-nvswitch", "--facts", str(EXAMPLES / "h200x4-measured.json"),
                      "--reports", str(tmp_path / "r"), "--metrics", str(target), "-q", "-k", "not test_compute.py")
    assert done.returncode == 0, done.stderr
    families = parsed(target.read_text())
    assert sample(families, "gpu_accept_run_exit_code").value == 0
    # the areas left out (-k) are not checked: never healthy, whatever else passed
    assert sample(families, "gpu_accept_area_checked", area="compute").value == 0
    assert sample(families, "gpu_accept_area_checked", area="nccl").value == 1
    assert sample(families, "gpu_accept_busbw_bytes_per_second", collective="all_reduce", size="1GiB").value > 300e9
    assert [p.name for p in target.parent.iterdir()] == ["gpu-accept.prom"]  # no temporary file left beside it


def test_report_metrics_serves_each_hosts_latest_run(tmp_path, capsys):
    healthy = RESULTS / "h200x4.json"
    failed = RESULTS / "h200x4-nccl-p2p-disabled.json"
    assert load_results(healthy).environment.host == load_results(failed).environment.host
    later = max((healthy, failed), key=lambda path: load_results(path).run.started_at)
    target = tmp_path / "fleet.prom"
    assert main(["report", "metrics", str(failed), str(healthy), "-o", str(target)]) == 0
    assert capsys.readouterr().out == f"wrote {target}: 1 host(s) from 2 run(s)\n"
    [code] = parsed(target.read_text())["gpu_accept_run_exit_code"]
    assert code.value == load_results(later).exit_code()


def test_report_metrics_refuses_an_output_it_cannot_write_before_reading(capsys):
    assert main(["report", "metrics", str(RESULTS / "h200x4.json"), "-o", "/sys/fleet.prom"]) == 2
    assert capsys.readouterr().err.startswith("gpu-accept: -o /sys/fleet.prom: cannot write in /sys (")


def test_the_docs_name_the_shipped_alert_rules():
    docs = (EXAMPLES.parents[1] / "docs" / "metrics.md").read_text()
    assert "deploy/prometheus/gpu-accept-rules.yml" in docs and "report metrics --db" not in docs
