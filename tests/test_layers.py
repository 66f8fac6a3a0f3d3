"""The layers of the package as pyproject.toml's import-linter contracts state them: the tree keeps
them, and one forbidden import breaks them, named."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """`lint-imports` on the tree under `root`: its own src/ first on the path, its own contracts."""
    environment = {**os.environ, "PYTHONPATH": str(root / "src")}
    command = [sys.executable, "-c", LINT_IMPORTS, "--no-cache", "--no-logo"]
    return subprocess.run(command, cwd=root, env=environment, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_the_tree_keeps_every_contract():
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 kept, 0 broken" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "module, line, contract, named",
    [
        ("checks/fabric.py", "import gpuaccept.probe", "Checks and report writers never import probe, measure, importers or pytest",
         "gpuaccept.checks.fabric -> gpuaccept.probe (l."),
        ("facts/model.py", "import gpuaccept.profile", "Each layer imports only the layers below it",
         "gpuaccept.facts.model -> gpuaccept.profile (l."),
        # the report reads verdicts as records (data), never through the checks that made them
        ("report/html.py", "import gpuaccept.checks.verdict", "Each layer imports only the layers below it",
         "gpuaccept.report.html -> gpuaccept.checks.verdict (l."),
        ("importers/assemble.py", "import gpuaccept.probe", "Each layer imports only the layers below it",
         "gpuaccept.importers.assemble -> gpuaccept.probe (l."),
        # the burn-in sits above the store in the layers, and still may not read it: only the command line does
        ("burnin/driver.py", "import gpuaccept.store.db", "Only the command line imports the results store",
         "gpuaccept.burnin.driver -> gpuaccept.store.db (l."),
    ],
    ids=["check-imports-probe", "facts-import-profile", "report-imports-checks", "importers-import-probe", "burnin-imports-store"],
)
def test_one_forbidden_import_breaks_its_contract_naming_it(tmp_path, module, line, contract, named):
    shutil.copytree(ROOT / "src" / "gpuaccept", tmp_path / "src" / "gpuaccept", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    source = tmp_path / "src" / "gpuaccept" / module
    source.write_text(source.read_text() + f"\n{line}  # the one import that breaks the layers\n")
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{contract} BROKEN" in done.stdout and "4 kept, 1 broken" in done.stdout
    assert named in done.stdout


@pytest.mark.slow
def test_recording_measurements_imports_no_pytest():
    # what `gpu-accept record --measure` runs: the command line, the probe and the stage store
    script = "import sys, gpuaccept.cli, gpuaccept.probe, gpuaccept.stages.store; print(sorted(m for m in sys.modules if 'pytest' in m))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr
