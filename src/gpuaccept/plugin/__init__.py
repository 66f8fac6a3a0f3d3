"""The pytest plugin of gpu-accept (entry point `pytest11`: gpuaccept = gpuaccept.plugin).

Wiring only: pytest registers the modules below with this one. `options` declares the options and
reads them into a typed record, `hooks` holds the hooks (a run configured, its tests named from the
profile, each recorded), `fixtures` what the suites ask for, `health` the XID listener and the
health fixtures. Loaded in every pytest run of the environment, it stays inert unless `--profile`
or `--facts` is given: no hardware is touched at import or for other projects' tests.
"""

pytest_plugins = ["gpuaccept.plugin.options", "gpuaccept.plugin.hooks", "gpuaccept.plugin.fixtures", "gpuaccept.plugin.health"]
