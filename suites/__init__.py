"""The acceptance suites users run: each test judges one expectation of the profile."""
