"""The results store: every run of a fleet in one DuckDB file, fed from results.json (never the
other way round), answering the fleet report, history and drift. docs/fleet.md documents its tables."""
