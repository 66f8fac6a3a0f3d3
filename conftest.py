"""Top-level pytest configuration of the source tree.

`pytester` drives the plugin end to end in the project's own tests; pytest allows plugins to be
requested only from the top-level conftest.
"""

import sys

import pytest

pytest_plugins = ["pytester"]

# pytest caches each test module with its asserts rewritten (in __pycache__, which git ignores), but
# not where PYTHONDONTWRITEBYTECODE is set, as on the CPU machines CI uses: rewriting the 1,800
# asserts of tests/ then costs every worker 2 s of every run. The project's own test runs keep that
# cache whatever the environment says.
sys.dont_write_bytecode = False


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: drives a headless Chromium (apt-get install chromium); run with -m browser")


def pytest_collection_modifyitems(config, items):
    """Browser tests run only when asked for (-m browser): the CPU machines CI runs on have no
    Chromium, and a test that skips there would hide whether it ever ran."""
    if "browser" in (config.getoption("markexpr") or ""):
        return
    kept = [item for item in items if item.get_closest_marker("browser") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


@pytest.fixture(autouse=True)
def _a_quick_test_imports_no_torch(request):
    """The quick loop (-m "not slow") imports no torch: a second in each worker. A test that does
    is marked slow; one that is not fails here, named."""
    had_torch = "torch" in sys.modules
    yield
    if not had_torch and "torch" in sys.modules and request.node.get_closest_marker("slow") is None:
        pytest.fail(f"{request.node.nodeid} imported torch: mark it @pytest.mark.slow (the quick loop imports none)")
