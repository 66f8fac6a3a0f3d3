"""One session's measurements: the stages a profile asks for, planned from it and run once each,
and a miss measured again before it fails. Above the checks (which it asks what missed) and the
measurements (which it runs), below the pytest plugin and the command line, which both drive it;
it never imports pytest, so `gpu-accept record --measure` runs without it."""
