"""Writers: results.json, the HTML report, fleet JUnit, baselines. They read results and facts and
never touch hardware."""
