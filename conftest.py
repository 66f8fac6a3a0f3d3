"""Top-level pytest configuration of the source tree.

`pytester` drives the plugin end to end in the project's own tests; pytest allows plugins to be
requested only from the top-level conftest.
"""

pytest_plugins = ["pytester"]
