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
    config.addinivalue_line(
        "markers", "browser: drives headless Chromium (Debian's chromium, installed where missing: tests/browser.py); also slow"
    )


@pytest.fixture(autouse=True)
def _a_quick_test_imports_no_torch(request):
    """The quick loop (-m "not slow") imports no torch: a second in each worker. A test that does
    is marked slow; one that is not fails here, named."""
    had_torch = "torch" in sys.modules
    yield
    if not had_torch and "torch" in sys.modules and request.node.get_closest_marker("slow") is None:
        pytest.fail(f"{request.node.nodeid} imported torch: mark it @pytest.mark.slow (the quick loop imports none)")
