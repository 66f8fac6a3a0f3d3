"""The measurement stages: each stage one object (`stage.py`), the four of them in one registry
(`registry.py`), the plans of each (`fabric.py`, `compute.py`), and a session's store that runs each
stage once and keeps what it measured (`store.py`), with the locks that share the GPUs between
pytest-xdist workers, and the telemetry and health files kept beside the stages' files.

Above the checks (which the store asks what missed) and the measurements (which it runs), below the
pytest plugin, the burn-in and the command line, which drive it; it never imports pytest, so
`gpu-accept record --measure` runs without it."""
