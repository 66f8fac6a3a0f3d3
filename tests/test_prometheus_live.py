"""gpu-accept's metrics as the real programs read them: node_exporter's textfile collector (Debian's
prometheus-node-exporter, run on 127.0.0.1 with its own flags) scraped with the health check's and
the burn-in's files in one folder, and promtool (Debian's prometheus package) checking the metrics
and the shipped alert rules, and running the rules' own test cases."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuaccept.facts import run_verdict
from gpuaccept.facts.run_record import load_results
from gpuaccept.report.metrics import render_run_metrics
from tests.helpers import EXAMPLES
from tests.real_software import daemons, free_port, require, wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
REPLAY = str(ROOT / "tests" / "data" / "nvml" / "h200x4.json")
RULES = ROOT / "deploy" / "prometheus" / "gpu-accept-rules.yml"
RULE_CASES = ROOT / "tests" / "data" / "prometheus" / "gpu-accept-rules.test.yml"
HEALTHY_RUN = EXAMPLES.parent / "results" / "h200x4.json"


def health_check(tmp_path: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpuaccept", "health-check", "--reports", str(tmp_path / "reports"), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "GPUACCEPT_NVML_REPLAY": REPLAY, **env},
        start_new_session=True,
    )


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return str(answer.read().decode("utf-8"))


def served(text: str, name: str) -> dict[str, float]:
    """The samples of `name`, by their command label."""
    return {s.labels.get("command", ""): s.value for family in text_string_to_metric_families(text) for s in family.samples
            if s.name == name}


def node_exporter(running, folder: Path, log: Path) -> int:
    binary = require("prometheus-node-exporter")["prometheus-node-exporter"]
    port = free_port()
    running.start([binary, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults", "--collector.textfile",
                   f"--collector.textfile.directory={folder}"], log)

    def answers() -> bool:
        try:
            return "node_textfile_scrape_error" in scrape(port)
        except OSError:
            return False

    wait_for("node_exporter answering on 127.0.0.1", answers, 60, logs=(log,))
    return port


def test_node_exporter_serves_the_health_check_and_the_burn_in_from_one_folder(tmp_path):
    """The layout docs/metrics.md gives: both files in node_exporter's textfile folder. Each series
    is served; a copy of one file (the collision the command label prevents) is dropped by
    node_exporter with scrape_error still 0, which is why it must never happen."""
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    check = health_check(tmp_path, "--profile", "h200-8-nvswitch", "--metrics", str(textfile / "gpu-accept-health.prom"))
    out, err = check.communicate(timeout=300)
    assert check.returncode == 1, out + err  # four GPUs of eight: a check failed
    healthy = load_results(HEALTHY_RUN)
    (textfile / "gpu-accept-burnin.prom").write_text(render_run_metrics("burn-in", healthy.judged(), healthy))
    log = tmp_path / "node_exporter.log"
    with daemons() as running:
        port = node_exporter(running, textfile, log)
        text = scrape(port)
        assert served(text, "gpu_accept_run_exit_code") == {"health-check": 1, "burn-in": 0}, text
        assert served(text, "node_textfile_scrape_error") == {"": 0}
        assert "collected before" not in log.read_text()
        # the old layout: two files with one series (here a copy) -- node_exporter drops one silently
        (textfile / "copy.prom").write_text((textfile / "gpu-accept-health.prom").read_text())

        def dropped() -> bool:
            scrape(port)  # each scrape gathers the folder again, and logs what it dropped
            return "was collected before with the same name and label values" in log.read_text()

        wait_for("node_exporter saying it dropped the copy's series", dropped, 30, logs=(log,))
        assert served(scrape(port), "node_textfile_scrape_error") == {"": 0}


def test_a_check_killed_before_its_end_leaves_no_pass_to_serve(tmp_path):
    textfile = tmp_path / "textfile"
    target = textfile / "gpu-accept-health.prom"
    passing = health_check(tmp_path, "--profile", "h200-4-nvswitch", "--metrics", str(target), "-k", "not p2p_cuda_agrees")
    out, err = passing.communicate(timeout=300)
    assert passing.returncode == 0, out + err
    log = tmp_path / "node_exporter.log"
    with daemons() as running:
        port = node_exporter(running, textfile, log)
        assert served(scrape(port), "gpu_accept_run_passed") == {"health-check": 1}
        killed = health_check(tmp_path, "--profile", "h200-4-nvswitch", "--metrics", str(target))
        verdict = tmp_path / "reports" / "verdict.json"
        try:
            wait_for("the check's in-progress verdict", lambda: verdict.is_file() and run_verdict.load_verdict(verdict).in_progress,
                     120, every_s=0.05)
        finally:
            os.killpg(killed.pid, signal.SIGKILL)
            killed.communicate(timeout=60)
        text = scrape(port)
        assert served(text, "gpu_accept_run_passed") == {"health-check": 0}
        assert served(text, "gpu_accept_run_exit_code") == {"health-check": 2}
        assert served(text, "gpu_accept_run_in_progress") == {"health-check": 1}
    assert run_verdict.load_verdict(verdict).cause.startswith("could not judge: the run that began at ")


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    binary = require("promtool")["promtool"]
    return subprocess.run([binary, *args], input=stdin, capture_output=True, text=True, timeout=120)


def test_promtool_finds_nothing_to_say_of_any_metrics_file(tmp_path):
    """`promtool check metrics`, Prometheus' own parser and linter: the names, units, types and help of
    a failed run, a passed one, one in progress, one that judged nothing, one whose host and test ids
    would forge a series were they not escaped, and the fleet's export."""
    failed = load_results(EXAMPLES.parent / "results" / "h200x4-nccl-p2p-disabled.json")
    healthy = load_results(HEALTHY_RUN)
    texts = {
        "failed run": render_run_metrics("run", failed.judged(), failed),
        "passed burn-in": render_run_metrics("burn-in", healthy.judged(), healthy),
        "in progress": render_run_metrics(
            "health-check", run_verdict.in_progress(host="n1", profile="p", started_at="2026-11-27T10:00:00+00:00"), None),
        "no driver": render_run_metrics("health-check", run_verdict.could_not_judge("no NVIDIA driver found", host="n1"), None),
    }
    hostile = 'x"} 1\ngpu_accept_run_passed{host="other"} 1\n# \\ \x1b]0;t\x07 \u202e \ud800'
    odd = healthy.model_copy(update={"environment": healthy.environment.model_copy(update={"host": hostile})})
    odd = odd.with_tests([t.model_copy(update={"id": f"{t.id}{hostile}"}) for t in odd.tests])
    texts["hostile names"] = render_run_metrics("run", odd.judged(), odd)
    fleet = tmp_path / "fleet.prom"
    done = subprocess.run([sys.executable, "-m", "gpuaccept", "report", "metrics", str(HEALTHY_RUN), "-o", str(fleet)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    texts["fleet"] = fleet.read_text()
    for what, text in texts.items():
        checked = promtool("check", "metrics", stdin=text)
        assert checked.returncode == 0 and checked.stdout + checked.stderr == "", (what, checked.stdout + checked.stderr)
    lint = promtool("check", "metrics", stdin="# HELP x_total a\n# TYPE x_total gauge\nx_total 1\n")
    assert lint.returncode != 0 and "x_total" in lint.stdout + lint.stderr  # it does say what it finds


def test_the_shipped_alert_rules_are_a_rule_group_promtool_checks_and_their_cases_pass():
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0 and "SUCCESS: 5 rules found" in checked.stdout, checked.stdout + checked.stderr
    tested = promtool("test", "rules", str(RULE_CASES))
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_the_rule_cases_catch_a_wrong_rule(tmp_path):
    """The cases bite: the same rules with the failed alert on exit code 2 fail them."""
    wrong = tmp_path / "deploy" / "prometheus" / "gpu-accept-rules.yml"
    wrong.parent.mkdir(parents=True)
    wrong.write_text(RULES.read_text().replace("expr: gpu_accept_run_exit_code == 1", "expr: gpu_accept_run_exit_code == 2"))
    cases = tmp_path / "tests" / "data" / "prometheus" / RULE_CASES.name
    cases.parent.mkdir(parents=True)
    cases.write_text(RULE_CASES.read_text())
    tested = promtool("test", "rules", str(cases))
    assert tested.returncode != 0 and "GpuAcceptFailed" in tested.stdout + tested.stderr
