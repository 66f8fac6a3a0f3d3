"""A pytest plugin for tests that need a gpu-accept run to last a while (`-p tests.slow_session`):
after each test, it waits GPUACCEPT_TEST_SLEEP seconds."""

import os
import time


def pytest_runtest_teardown(item):
    time.sleep(float(os.environ.get("GPUACCEPT_TEST_SLEEP", "0")))
