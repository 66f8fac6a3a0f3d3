"""Every line gpu-accept prints, pytest's own included, fed the hostile strings of
tests/data/hostile/strings.json from a facts or results file: what a terminal would act on (escape
sequences, carriage returns, bells, bidirectional overrides) is shown as its escape, each line
stays one line, and the run's record keeps the text as it was."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from gpuaccept.cli import main
from gpuaccept.errors import shown
from gpuaccept.facts.run_record import load_results
from tests.helpers import EXAMPLES, ROOT
from tests.hostile import CLASSES

# what a terminal acts on: C0 controls but the line feed, DEL, C1 controls (U+009B is a CSI to an
# 8-bit terminal), and the characters that reorder or hide text
ACTED_ON = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
# one text holding every string a terminal or a line-based reader would act on
FORGED = "|".join(CLASSES["terminal"] + CLASSES["structure"])


def acted_on(text: str) -> list[str]:
    return sorted({repr(found) for found in ACTED_ON.findall(text.replace("\t", ""))})


@pytest.mark.slow
def test_a_run_on_hostile_facts_prints_every_line_escaped_and_records_the_text_as_it_was(tmp_path):
    """A driver version and a host name holding every hostile string: the check that fails on them
    says so in the progress, the failures, pytest's short summary and the gpu-accept summary."""
    recorded = json.loads((EXAMPLES / "h200x4.json").read_text(encoding="utf-8"))
    recorded["system"]["driver_version"] = f"1.0 {FORGED}"
    recorded["system"]["hostname"] = f"node7{FORGED}"
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(recorded), encoding="utf-8")
    reports = tmp_path / "reports"
    done = subprocess.run(
        [sys.executable, "-m", "gpuaccept", "run", "--profile", "h200-4-nvswitch", "--facts", str(facts), "--reports", str(reports),
         "-k", "driver_version or gpu_count", "-rA", "-v"],
        capture_output=True, text=True, timeout=300, env={"COLUMNS": "5000", "PATH": "/usr/bin:/bin"},
    )
    said = done.stdout + done.stderr
    assert done.returncode == 1, said[-3000:]
    assert acted_on(said) == []
    short = [line for line in done.stdout.splitlines() if line.lstrip().startswith("FAILED ") and "test_driver_version" in line]
    assert len(short) == 2, done.stdout  # pytest's short summary and the gpu-accept summary, each one line
    assert all(shown(f"driver 1.0 {FORGED}") in line for line in short)
    record = load_results(reports / "results.json")
    (failed,) = [test for test in record.tests if test.outcome == "failed"]
    assert f"driver 1.0 {FORGED}" in failed.message and failed.message == failed.verdict.message


def test_profile_init_writes_a_hostile_host_name_into_its_comments_as_one_line(tmp_path, capsys):
    results = json.loads((ROOT / "examples" / "results" / "h200x4.json").read_text(encoding="utf-8"))
    results["environment"]["host"] = results["facts"]["system"]["hostname"] = f"vm{FORGED}\nextends: h100-8-nvswitch"
    source = tmp_path / "results.json"
    source.write_text(json.dumps(results), encoding="utf-8")
    written = tmp_path / "golden.yaml"
    assert main(["profile", "init", "--from", str(source), "--name", "golden", "-o", str(written)]) == 0
    text = written.read_text(encoding="utf-8")
    assert acted_on(text) == [] and "\nextends:" not in text
    assert "extends" not in yaml.safe_load(text)  # the name stayed inside its comment
    assert shown(f"vm{FORGED}\nextends: h100-8-nvswitch") in text
    out, err = capsys.readouterr()
    assert acted_on(out + err) == []
    assert main(["profile", "validate", str(written)]) == 0


def test_an_error_that_quotes_a_hostile_name_is_one_line(tmp_path, capsys):
    """A name given on the command line comes back in the error that refuses it: one line, escaped."""
    for command in (["profile", "show", f"h200{FORGED}"], ["report", "fleet", "--db", str(tmp_path / f"f{FORGED}.db")],
                    ["report", "html", str(tmp_path / f"r{FORGED}.json"), "-o", str(tmp_path / "r.html")]):
        assert main(command) == 2, command
        out, err = capsys.readouterr()
        (line,) = err.splitlines()
        assert line.startswith("gpu-accept: ") and acted_on(out + err) == [], command


def test_the_cluster_views_text_is_a_line_a_node_whatever_its_hosts_are_called(tmp_path):
    from gpuaccept.facts.run_record import RunRecord
    from gpuaccept.profile import load_profile
    from gpuaccept.report.cluster_view import text
    from tests.hostile import with_strings
    from tests.test_cluster_network import PROFILE, TREE, cluster_record, cluster_verdicts, node, three_nodes_one_slow

    (tmp_path / "two-rails.yaml").write_text(PROFILE, encoding="utf-8")
    profile = load_profile(tmp_path / "two-rails.yaml")
    facts = three_nodes_one_slow(profile, [node(TREE, index=i) for i in range(3)], slow=1)
    record = cluster_record(facts, cluster_verdicts(profile, facts))
    plain = text(record).splitlines()
    hostile = RunRecord.model_validate_json(record.model_dump_json().replace('"host1"', '"zq0000qz"'))
    lines = text(with_strings(hostile, [FORGED])).splitlines()
    assert len(lines) == len(plain) and acted_on("\n".join(lines)) == []
    assert shown(FORGED) in lines[2]
