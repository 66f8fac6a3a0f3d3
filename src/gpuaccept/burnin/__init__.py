"""A burn-in: the GPUs held under a sustained load for a duration, the fabric stages run beside it,
judged in rounds (driver.py runs it; the compute stage's `sustain`, stages/sustained.py, keeps every GPU
loaded). It drives the stages' store (gpuaccept.stages); the plugin starts it before the tests at --level burn-in."""
