"""docs/checks.md, "What is checked", written from the checks' own declarations (checks/declare.py):
`python -m gpuaccept.checks.catalog > docs/checks.md`; and what every writer needs of each check, as
data below the checks: `python -m gpuaccept.checks.catalog meanings > src/gpuaccept/vocabulary/checks.json`.
A test holds both files to what this writes."""

from __future__ import annotations

import importlib
import json
import sys

from gpuaccept.checks.declare import CHECK_MODULES, Declaration, declared_checks
from gpuaccept.vocabulary.areas import ROOT_CAUSES

HEADER = """# What is checked

Every check the suites run, as the checks declare themselves (`@check(...)` in
`src/gpuaccept/checks/`). Written by `python -m gpuaccept.checks.catalog > docs/checks.md`; a test fails
when this file is not what the declarations say.

- **test id**: how the test reads in a run (one subject shown), one test per subject the profile asks for.
- **area**: the area of the machine it judges, as coverage by area counts it in every report (a root
  cause marks the checks whose failure is the cause of others: a GPU missing, someone else's load on
  a GPU); **headline**: its value is shown beside its limit in the terminal's summary when it passes.
- **fleet**: a fleet compares its value across hosts (`report fleet`) and over a host's runs (`report
  history`), higher or lower better as it says; **metric**: its value is a Prometheus series of its own
  ([metrics.md](metrics.md)); a ratio where it is a share of something.
- **stage**: the measurement stage whose value it judges (none: it reads what the probe found).
- **marginal**: its value is judged with the profile's marginal band (`judging.marginal_band`): a
  value that passes between the limit and the marginal line is marked marginal, and the criterion
  in results.json, JUnit and the reports says where the line was.
- **again**: a miss is measured again before it fails (`--confirm`); **burn-in**: a burn-in judges
  it over its rounds.
- What a verdict's outcome means for the test, JUnit and the exit code: [outcomes.md](outcomes.md).

To add a check: write it in the module of its layer, declared once, its `Judge` given to it:

```python
@check(subjects=GPU, marginal=True, stage="compute", asked=_asked, key_of=_load("gemm"), attempts=_keys("gemm"))
def gemm_throughput(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    \"\"\"Sustained GEMM throughput of the GPU is at least the profile's `compute.gemm.min_tflops`.\"\"\"
```

then the suite's test that calls it (`test_<name>`, asking for its subjects' fixture: `gpu`), and
write this file again. The plugin's test ids, the stage's values (measured again, judged over a
burn-in's rounds), the health families and the golden verdicts of the tests follow from the
declaration; a test fails where a declared check has no suite test, or a suite test no check. The
checks of a cluster are declared alike (`runner="cluster"`) and judged by `gpu-accept cluster`.
"""


def _mark(flag: bool) -> str:
    return "yes" if flag else ""


def _row(declaration: Declaration) -> str:
    subject = declaration.subjects
    test_id = f"`{declaration.test_name}[{subject.example}]`" if subject.example else f"`{declaration.test_name}`"
    staged = declaration.stage is not None
    cells = [
        test_id,
        f"`{declaration.name}`",
        subject.described,
        declaration.area + (f" (the root cause of {ROOT_CAUSES[declaration.root]})" if declaration.root else ""),
        declaration.stage or "",
        _mark(declaration.marginal),
        _mark(staged and declaration.measured_again),
        _mark(staged and declaration.in_burnin),
        _mark(declaration.headline),
        f"{declaration.better.value} better" if declaration.fleet and declaration.better else "",
        ("ratio" if declaration.share else "yes") if declaration.metric else "",
        declaration.summary.replace("|", "\\|"),
    ]
    return "| " + " | ".join(cells) + " |"


def checks_markdown() -> str:
    """The page, one section per module of checks, in the suites' layer order."""
    declared = [found.declaration for found in declared_checks(runner=None)]
    lines = [HEADER]
    for module in dict.fromkeys(listed.split(".")[0] for listed in CHECK_MODULES):  # a package's rooms are one module
        mine = [declaration for declaration in declared if declaration.module == module]
        if not mine:
            continue
        about = (importlib.import_module(f"gpuaccept.checks.{module}").__doc__ or "").strip().split("\n\n")[0]
        lines += [f"## {module}", "", " ".join(about.split()), ""]
        if mine[0].runner == "cluster":
            lines += ["Judged by `gpu-accept cluster` over every node of one job ([many-nodes.md](many-nodes.md)), "
                      "its JUnit cases named like the suites' tests.", ""]
        lines += [
            "| test id | check | subjects | area | stage | marginal | again | burn-in | headline | fleet | metric | what |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [_row(declaration) for declaration in mine]
        lines.append("")
    lines.append(f"{len(declared)} checks.")
    return "\n".join(lines) + "\n"


def meanings_json() -> str:
    """vocabulary/checks.json: each declared check's meaning for writers, by its name."""
    meanings = {found.declaration.name: found.declaration.meaning.as_data() for found in declared_checks(runner=None)}
    return json.dumps(meanings, indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":
    sys.stdout.write(meanings_json() if sys.argv[1:] == ["meanings"] else checks_markdown())
