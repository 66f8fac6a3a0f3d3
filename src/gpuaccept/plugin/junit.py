"""Suite-level JUnit properties (host, driver, GPU model, profile).

`record_testsuite_property` is lost under pytest-xdist (pytest#7767), so the controlling process
adds them to its own JUnit writer, which is the one that writes the file in both modes.
"""

from __future__ import annotations

import pytest
from _pytest.junitxml import xml_key

from gpuaccept import __version__
from gpuaccept.plugin.context import RunContext


def suite_properties(context: RunContext) -> list[tuple[str, str]]:
    facts = context.facts
    gpus = facts.gpus
    return [
        ("host", facts.system.hostname),
        ("driver", facts.system.driver_version),
        ("cuda_driver", str(facts.system.cuda_driver_version)),
        ("gpu_model", gpus[0].name if gpus else ""),
        ("gpu_count", str(len(gpus))),
        ("gpu_uuids", ",".join(g.uuid for g in gpus)),
        ("profile", context.profile.name),
        ("profile_sha256", context.profile.sha256),
        ("facts_source", context.facts_source),
        ("gpu_accept_version", __version__),
    ]


def add_suite_properties(config: pytest.Config, context: RunContext) -> None:
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return  # no --junitxml
    for name, value in suite_properties(context):
        xml.add_global_property(name, value)
