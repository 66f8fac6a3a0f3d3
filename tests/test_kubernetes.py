"""deploy/: the image definition, the Kubernetes manifests (read into the Kubernetes client's typed
models, which know every field of the API and refuse a missing required one), and the
node-problem-detector plugin against NPD's documented custom-plugin protocol
(kubernetes/node-problem-detector docs/custom_plugin_monitor.md: exit 0 OK, 1 NonOK, anything else
Unknown; stdout cut to max_output_length, 80 by default, as the condition's message)."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from kubernetes.client import ApiClient

from tests.helpers import write

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
NPD = KUBERNETES / "npd"
MANIFESTS = sorted(KUBERNETES.rglob("*.yaml"))
REPLAY = str(ROOT / "tests" / "data" / "nvml" / "h200x4.json")


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def validated(document: dict) -> dict:
    """The object as the Kubernetes client's model of its kind reads it, written back: a field the
    API does not know is lost on the way (and the comparison fails), a required one missing raises."""
    version = document["apiVersion"].rpartition("/")[2]
    model = f"{version[0].upper()}{version[1:]}{document['kind']}"
    api = ApiClient()
    return api.sanitize_for_serialization(api._ApiClient__deserialize(document, model))


def by_kind(kind: str) -> list[dict]:
    return [d for path in MANIFESTS for d in documents(path) if d["kind"] == kind]


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(KUBERNETES)))
def test_every_manifest_is_valid_kubernetes(path):
    for document in documents(path):
        assert validated(document) == document, f"{path.name}: {document['kind']} has fields the API does not know"
        assert document["metadata"]["name"]


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(KUBERNETES)))
def test_every_manifest_passes_kubernetes_validate_strict(path):
    """kubernetes-validate --strict: the API's OpenAPI schema, no field it does not know."""
    for document in documents(path):
        assert kubernetes_validate.validate(document, kubernetes_validate.latest_version(), strict=True)


def test_kubernetes_validate_refuses_an_unknown_field():
    job = copy.deepcopy(documents(KUBERNETES / "job-acceptance.yaml")[0])
    job["spec"]["template"]["spec"]["containers"][0]["resource"] = {}  # resources, misspelt
    with pytest.raises(kubernetes_validate.ValidationError, match="'resource' was unexpected"):
        kubernetes_validate.validate(job, kubernetes_validate.latest_version(), strict=True)


def test_the_validation_refuses_an_unknown_field_and_a_missing_required_one():
    job = documents(KUBERNETES / "job-acceptance.yaml")[0]
    typo = copy.deepcopy(job)
    typo["spec"]["template"]["spec"]["containers"][0]["resource"] = {}  # resources, misspelt
    assert validated(typo) != typo
    nameless = copy.deepcopy(job)
    del nameless["spec"]["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(ValueError, match="name"):
        validated(nameless)


def test_the_job_accepts_one_whole_node_once():
    [job] = by_kind("Job")
    pod = job["spec"]["template"]["spec"]
    assert job["spec"]["backoffLimit"] == 0 and pod["restartPolicy"] == "Never"
    assert "kubernetes.io/hostname" in pod["nodeSelector"]
    [container] = pod["containers"]
    assert container["args"][0] == "run" and int(container["resources"]["limits"]["nvidia.com/gpu"]) == 8
    assert any(m["mountPath"] == "/dev/shm" for m in container["volumeMounts"])


def test_the_daemonset_holds_no_gpu_and_leaves_its_verdict_where_npd_and_node_exporter_read_it():
    daemonset = next(d for d in by_kind("DaemonSet") if d["metadata"]["name"] == "gpu-accept-health")
    [container] = daemonset["spec"]["template"]["spec"]["containers"]
    assert "nvidia.com/gpu" not in json.dumps(container.get("resources", {}))
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["GPU_ACCEPT_METRICS"].endswith(".prom")
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/var/lib/gpu-accept", "/textfile"} <= mounts


def test_no_manifest_or_image_sets_nccl():
    # NVLink SHARP and every other NCCL setting are the site's: nothing shipped here sets NCCL_*
    for path in [*MANIFESTS, DEPLOY / "Containerfile"]:
        assert not re.search(r"^\s*(-\s*name:\s*|ENV\s+)NCCL_", path.read_text(), re.MULTILINE), path


def test_the_image_builds_on_ngc_pytorch_and_keeps_its_torch():
    text = (DEPLOY / "Containerfile").read_text()
    assert re.search(r"^ARG BASE=nvcr\.io/nvidia/pytorch:\d\d\.\d\d-py3$", text, re.MULTILINE) and "FROM ${BASE}" in text
    install = next(line for line in text.splitlines() if "pip install" in line)
    assert "[torch]" not in install and "--force-reinstall" not in install
    for source in re.findall(r"^COPY (.+) \S+$", text, re.MULTILINE):
        for part in source.split():
            assert (ROOT / part).exists(), part  # every file the image copies is in the repository
    assert 'ENTRYPOINT ["gpu-accept"]' in text


# -- node-problem-detector ---------------------------------------------------------------------------

DURATION = re.compile(r"^\d+(ms|s|m|h)$")
PLUGIN_CONFIG_KEYS = {"invoke_interval", "timeout", "max_output_length", "concurrency", "enable_message_change_based_condition_update"}


def plugin_config() -> dict:
    return json.loads((NPD / "gpu-accept-plugin.json").read_text())


def test_the_plugin_config_follows_npds_custom_plugin_format():
    config = plugin_config()
    assert config["plugin"] == "custom" and config["source"]
    assert set(config["pluginConfig"]) <= PLUGIN_CONFIG_KEYS
    assert DURATION.match(config["pluginConfig"]["invoke_interval"]) and DURATION.match(config["pluginConfig"]["timeout"])
    assert config["pluginConfig"]["max_output_length"] == 80
    conditions = {c["type"] for c in config["conditions"]}
    assert all(set(c) == {"type", "reason", "message"} for c in config["conditions"])
    for rule in config["rules"]:
        assert rule["type"] in ("permanent", "temporary") and DURATION.match(rule["timeout"]) and rule["reason"]
        assert rule["type"] != "permanent" or rule["condition"] in conditions
        assert rule["path"] == "/config/gpu-accept/gpu-accept-status.sh"


def test_the_configmap_holds_the_plugin_files_as_they_are():
    [configmap] = by_kind("ConfigMap")
    for name, text in configmap["data"].items():
        assert text == (NPD / name).read_text(), name


def test_npd_loads_the_plugin_from_the_configmap_and_reads_the_status_the_daemonset_writes():
    npd = next(d for d in by_kind("DaemonSet") if d["metadata"]["name"] == "node-problem-detector")
    pod = npd["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert "--config.custom-plugin-monitor=/config/gpu-accept/gpu-accept-plugin.json" in container["command"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["plugin"]["mountPath"] == "/config/gpu-accept" and volumes["plugin"]["configMap"]["name"] == "gpu-accept-npd-plugin"
    assert volumes["plugin"]["configMap"]["defaultMode"] & 0o111  # the script is executable
    assert mounts["state"]["mountPath"] == "/var/lib/gpu-accept" and mounts["state"]["readOnly"] is True
    health = next(d for d in by_kind("DaemonSet") if d["metadata"]["name"] == "gpu-accept-health")
    paths = {v["hostPath"]["path"] for v in health["spec"]["template"]["spec"]["volumes"] if "hostPath" in v}
    assert volumes["state"]["hostPath"]["path"] in paths


def this_environment() -> dict[str, str]:
    """os.environ without the settings of the scripts under test: a host set up with them (its state or
    textfile folder) is never read or written by a test."""
    return {key: value for key, value in os.environ.items() if not key.startswith("GPU_ACCEPT")}


def plugin(status: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(NPD / "gpu-accept-status.sh")], capture_output=True, text=True, timeout=30,
                          env={**this_environment(), "GPU_ACCEPT_STATUS": str(status), **env})


LONG_FAIL = ("1 test_p2p_cuda_agrees[gpu0-gpu1,gpu0-gpu2,gpu0-gpu3,gpu1-gpu0] (+8 more; gpu-accept exit 1, profile "
             "h200-4-nvswitch)\n")


@pytest.mark.parametrize(
    "status, code, message",
    [
        (None, 2, "gpu-accept: no check has run on this node yet"),
        ("0 passed\n", 0, "gpu-accept: quick check passed"),
        (LONG_FAIL, 1, "test_p2p_cuda_agrees[gpu0-gpu1,gpu0-gpu2,gpu0-gpu3,gpu1-gpu0] (+8 more; gpu-acce"),
        ("2 could not judge: no NVIDIA driver found: NVML could not start (NVML Shared Library Not Found) (gpu-accept\n", 2,
         "could not judge: no NVIDIA driver found: NVML could not start (NVML Shared Libra"),
        ("2 could not judge: the run that began at 2026-11-27T10:00:00+00:00 has not finished\n", 2, "could not judge: the run"),
        ("\x1b]0;owned\x07 1 x\n", 2, "gpu-accept: "),
        ("1 \x1b[2Jtest_gpu_model[gpu3] \u00e9\u202e (gpu-accept exit 1)\n", 1, "[2Jtest_gpu_model[gpu3]  (gpu-accept exit 1)"),
    ],
    ids=["no-check-yet", "passed", "failed", "could-not-judge", "killed", "garbage", "escape-sequences"],
)
def test_the_plugin_speaks_npds_protocol(tmp_path, status, code, message):
    path = tmp_path / "status"
    if status is not None:
        path.write_text(status)
    done = plugin(path)
    assert done.returncode == code
    lines = done.stdout.splitlines()
    # one line of printable ASCII: NPD cuts the message at 80 bytes, which is then 80 whole characters
    assert len(lines) == 1 and len(lines[0]) <= 80 and lines[0].startswith(message), lines
    assert lines[0].isascii() and lines[0].isprintable()


def test_the_condition_is_neutral_until_a_check_has_run():
    """NPD shows the default condition (status False) from its start until the plugin's first answer,
    and keeps the default reason for an Unknown status: neither may say that a check passed."""
    [default] = plugin_config()["conditions"]
    words = f"{default['reason']} {default['message']}".lower()
    assert "pass" not in words and "healthy" not in words and "ok" not in words.split()


def test_a_check_that_stopped_running_is_unknown_not_ok(tmp_path):
    path = tmp_path / "status"
    path.write_text("0 gpu-accept health-check: PASS\n")
    an_hour_ago = time.time() - 3600
    os.utime(path, (an_hour_ago, an_hour_ago))
    done = plugin(path)
    assert done.returncode == 2 and "older than 900s" in done.stdout


@pytest.mark.slow
def test_a_failed_check_in_the_daemonset_becomes_the_nodes_condition(tmp_path):
    """The DaemonSet's loop once, on replayed 4xH200 answers judged against the 8xH200 profile (four
    GPUs missing: a check fails), then NPD's plugin reading what it left."""
    shim = write(tmp_path / "bin" / "gpu-accept", f'#!/bin/sh\nexec "{sys.executable}" -m gpuaccept "$@"\n')
    shim.chmod(0o755)
    env = {**this_environment(), "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}", "GPUACCEPT_NVML_REPLAY": REPLAY,
           "GPU_ACCEPT_STATE": str(tmp_path / "state"), "GPU_ACCEPT_ONCE": "1", "GPU_ACCEPT_PROFILE": "h200-8-nvswitch",
           "GPU_ACCEPT_METRICS": str(tmp_path / "textfile" / "gpu-accept.prom")}
    loop = subprocess.run(["sh", str(KUBERNETES / "periodic-health-check.sh")], capture_output=True, text=True, env=env, timeout=300)
    assert loop.returncode == 1, loop.stderr
    assert (tmp_path / "state" / "health" / "results.json").is_file() and (tmp_path / "textfile" / "gpu-accept.prom").is_file()
    done = plugin(tmp_path / "state" / "status")
    assert done.returncode == 1 and done.stdout == "test_gpu_count (+142 more; gpu-accept exit 1, profile h200-8-nvswitch)\n"


@pytest.mark.slow
def test_a_node_that_could_not_be_judged_is_unknown_to_npd(tmp_path):
    """The same loop against the 4xH200 profile: this machine has no CUDA driver, so CUDA's P2P
    answers cannot be established and nothing fails: the node could not be judged (exit 2), which NPD
    shows as Unknown, never as a healthy node."""
    shim = write(tmp_path / "bin" / "gpu-accept", f'#!/bin/sh\nexec "{sys.executable}" -m gpuaccept "$@"\n')
    shim.chmod(0o755)
    env = {**this_environment(), "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}", "GPUACCEPT_NVML_REPLAY": REPLAY,
           "GPU_ACCEPT_STATE": str(tmp_path / "state"), "GPU_ACCEPT_ONCE": "1", "GPU_ACCEPT_PROFILE": "h200-4-nvswitch"}
    loop = subprocess.run(["sh", str(KUBERNETES / "periodic-health-check.sh")], capture_output=True, text=True, env=env, timeout=300)
    assert loop.returncode == 2, loop.stderr
    done = plugin(tmp_path / "state" / "status")
    assert done.returncode == 2 and done.stdout.startswith("could not judge: test_p2p_cuda_agrees[gpu0-gpu1] (+11 more;"), done.stdout


@pytest.mark.slow
def test_a_check_that_could_not_start_is_unknown_with_its_cause(tmp_path):
    """A node without a driver: the check judges nothing (exit 2) and NPD's message says why."""
    from tests.test_cli import without_driver

    shim = write(tmp_path / "bin" / "gpu-accept", f'#!/bin/sh\nexec "{sys.executable}" -m gpuaccept "$@"\n')
    shim.chmod(0o755)
    bare = {key: value for key, value in without_driver(tmp_path).items() if not key.startswith("GPU_ACCEPT")}
    env = {**bare, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}",
           "GPU_ACCEPT_STATE": str(tmp_path / "state"), "GPU_ACCEPT_ONCE": "1"}
    loop = subprocess.run(["sh", str(KUBERNETES / "periodic-health-check.sh")], capture_output=True, text=True, env=env, timeout=300)
    assert loop.returncode == 2, loop.stderr
    done = plugin(tmp_path / "state" / "status")
    assert done.returncode == 2 and done.stdout.startswith("could not judge: no NVIDIA driver found: NVML could not start"), done.stdout


def test_the_scripts_parse():
    for script in (KUBERNETES / "periodic-health-check.sh", NPD / "gpu-accept-status.sh"):
        assert subprocess.run(["sh", "-n", str(script)]).returncode == 0, script
