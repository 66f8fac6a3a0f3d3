"""The CI templates in ci/ parse, and hand JUnit to their consumers the way each one reads it."""

import re
import subprocess
from pathlib import Path

import pytest
import yaml

CI = Path(__file__).resolve().parents[1] / "ci"


def test_github_actions_workflow():
    workflow = yaml.safe_load((CI / "github-actions.yml").read_text())
    job = workflow["jobs"]["acceptance"]
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    assert "NCCL_NVLS_ENABLE" not in job.get("env", {})  # NVLink SHARP is the site's setting, not the template's
    runs = " ".join(step.get("run", "") for step in job["steps"])
    assert "gpu-accept run --profile auto --reports reports" in runs and "--baseline" in runs
    publish = [s for s in job["steps"] if "junit" in s.get("uses", "")]
    assert publish and publish[0]["with"]["report_paths"] == "reports/junit.xml" and publish[0]["if"] == "always()"
    # `on` is YAML 1.1's true; GitHub reads it as the key "on"
    assert workflow.get("on", workflow.get(True))["workflow_dispatch"] is None


def test_gitlab_job_publishes_junit():
    job = yaml.safe_load((CI / "gitlab-ci.yml").read_text())["gpu-accept"]
    assert job["artifacts"]["reports"]["junit"] == "reports/junit.xml"
    assert job["artifacts"]["when"] == "always" and "gpu" in job["tags"]
    assert any("gpu-accept run" in line for line in job["script"])


def test_jenkins_pipeline_keeps_junit_properties():
    text = (CI / "Jenkinsfile").read_text()
    assert re.search(r"junit\s+testResults:\s*'reports/junit.xml',\s*keepProperties:\s*true", text)
    assert "post {" in text and "always {" in text and text.count("{") == text.count("}")


def test_slurm_burnin_script():
    script = CI / "slurm-burnin.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    assert "--exclusive" in text and "--nodelist" in text and "afterany" in text
    assert "gpu-accept report fleet" in text and "NCCL_NVLS_ENABLE=0," not in text and "--export=ALL \\" in text
    usage = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert usage.returncode != 0 and "usage" in usage.stderr


def test_slurm_burnin_script_runs_a_burn_in_that_slurm_ends_with_sigterm():
    text = (CI / "slurm-burnin.sh").read_text()
    # gpu-accept is the batch shell (exec), and gets SIGTERM before the limit: its reports are written
    assert 'exec gpu-accept burn-in --duration $duration' in text and "--signal=B:TERM@120" in text
    assert "$out/*/burnin/results.json" in text and 'duration=${3:-30m}' in text


@pytest.mark.slow
def test_slurm_burnin_scripts_last_job_fails_where_an_acceptance_run_failed_though_its_burn_in_passed(tmp_path):
    """A fleet report judges each node by its latest run: the burn-in comes after the acceptance run, so
    the two are reported apart, and the last job's shell (sh, as Slurm's --wrap writes it) exits 1 where
    either report found a failure. Run with the real gpu-accept on real results files."""
    import json
    import os
    import sys

    wrap = re.search(r'--wrap="(gpu-accept report fleet .*?)"\n', (CI / "slurm-burnin.sh").read_text(), re.S).group(1)
    command = wrap.replace("\\\n", "").replace("\\$", "$").replace("$out", str(tmp_path))
    healthy = json.loads((CI.parent / "examples" / "results" / "h200x4.json").read_text())
    failed = json.loads((CI.parent / "examples" / "results" / "h200x4-nccl-p2p-disabled.json").read_text())
    failed["run"]["started_at"] = "2026-11-20T06:55:46+00:00"  # a day before the burn-in
    for folder, document in ((tmp_path / "vm", failed), (tmp_path / "vm" / "burnin", healthy)):
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps(document))
    environment = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=environment, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (tmp_path / "fleet.xml").is_file() and (tmp_path / "burnin-fleet.xml").is_file()
    assert done.stdout.count("FAIL vm") == 1
    (tmp_path / "vm" / "results.json").write_text(json.dumps(healthy))
    again = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=environment, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr


def test_slurm_cluster_script():
    script = CI / "slurm-cluster.sbatch"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    lines = [line.removeprefix("#SBATCH ") for line in text.splitlines() if line.startswith("#SBATCH --")]
    directives = dict(line.split("=", 1) for line in lines if "=" in line)
    assert directives["--ntasks-per-node"] == directives["--gpus-per-node"]  # one task per GPU
    assert "--exclusive" in text and "\nexport NCCL_NVLS_ENABLE" not in text
    assert "gpu-accept cluster --profile" in text and "gpu-accept run --profile" in text
    assert "scontrol show hostnames" in text and "MASTER_PORT" in text
    assert 'gpu-accept report fleet "$out"/single/*/results.json "$out/cluster-results.json"' in text
    usage = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert usage.returncode != 0 and "usage" in usage.stderr


def test_no_template_forces_nvlink_sharp_off_but_the_lab_script_does():
    # NVLS is the site's setting: templates pass the environment through; only the lent machines' script sets it
    for template in CI.iterdir():
        settings = [line for line in template.read_text().splitlines()
                    if "NCCL_NVLS_ENABLE" in line and not line.lstrip().startswith(("#", "//"))]
        assert settings == [], (template.name, settings)
    lab = (Path(__file__).resolve().parents[1] / "scripts" / "gpu-session.sh").read_text()
    assert "export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1" in lab


def test_the_gpu_session_script_parses_and_ends_every_stage():
    script = Path(__file__).resolve().parents[1] / "scripts" / "gpu-session.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    stages = [line for line in text.splitlines() if line.startswith("  ") and line.rstrip().endswith(")") and line[2] != " "]
    # each stage of the case ends with ;; before the next begins (the catch-all `*) ... ;;` is one line)
    assert len(stages) >= 10 and text.count("\n    ;;\n") == len(stages)
