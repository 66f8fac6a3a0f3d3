"""Suite-level JUnit properties (host, driver, GPU model, profile).

`record_testsuite_property` is lost under pytest-xdist (pytest#7767), so the controlling process
adds them to its own JUnit writer, which is the one that writes the file in both modes.
"""

from __future__ import annotations

import pytest
from _pytest.junitxml import xml_key

from gpuaccept import __version__
from gpuaccept.plugin.context import RunContext
from gpuaccept.report.results import environment_of, suite_properties


def add_suite_properties(config: pytest.Config, context: RunContext) -> None:
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return  # no --junitxml
    profile = {"name": context.profile.name, "sha256": context.profile.sha256}
    properties = suite_properties(environment_of(context.facts), profile)
    properties.update(facts_source=context.facts_source, gpu_accept_version=__version__)
    for name, value in properties.items():
        xml.add_global_property(name, value)
