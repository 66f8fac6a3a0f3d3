"""Writers: results.json with its journal, JUnit of a run and of a fleet, the HTML report, baselines,
the terminal summary. They read run records and facts and never touch hardware."""
