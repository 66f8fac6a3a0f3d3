"""The tests a derived profile failed beside those the shipped profile failed, on the same facts:
one line per drill, and the tests only one of them failed.

    python scripts/derived_compare.py NAME DERIVED/results.json SHIPPED/results.json
"""

from __future__ import annotations

import sys

from gpuaccept.facts.run_record import load_results


def failed(path: str) -> tuple[str, set[str]]:
    record = load_results(path)
    return record.run.profile.name, {test.id for test in record.tests if test.outcome in ("failed", "error")}


def main(argv: list[str]) -> int:
    name, derived_path, shipped_path = argv
    derived_name, derived = failed(derived_path)
    shipped_name, shipped = failed(shipped_path)
    same = "the same tests" if derived == shipped else "NOT the same tests"
    print(f"{name}: {derived_name} failed {len(derived)}, {shipped_name} failed {len(shipped)}: {same}")
    for label, only in ((f"only {derived_name}", derived - shipped), (f"only {shipped_name}", shipped - derived)):
        if only:
            print(f"  {label}: {', '.join(sorted(only))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
