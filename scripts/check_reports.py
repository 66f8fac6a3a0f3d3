"""Checks that a run's reports are valid, as a killed burn-in must leave them:

    python3 scripts/check_reports.py REPORTS_FOLDER [--telemetry]

junit.xml parses; results.json validates against schemas/results.schema.json (with jsonschema where
installed; always through the typed record the schema is generated from, as every reader of
results does); report.html exists and, with --telemetry, holds the telemetry charts. One line per
file; exit 1 if any is not valid.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from gpuaccept.facts.run_record import RunRecord

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    folder = Path(argv[0])
    bad = 0
    try:
        root = ET.parse(folder / "junit.xml").getroot()
        print(f"junit.xml: parses, {len(root.findall('.//testcase'))} test cases")
    except (OSError, ET.ParseError) as error:
        print(f"junit.xml: NOT VALID: {error}")
        bad += 1
    try:
        text = (folder / "results.json").read_text(encoding="utf-8")
        record = RunRecord.model_validate_json(text)
        how = "the typed record"
        try:
            import jsonschema

            jsonschema.validate(json.loads(text), json.loads((ROOT / "schemas" / "results.schema.json").read_text()))
            how += " and schemas/results.schema.json"
        except ImportError:
            how += " (jsonschema not installed here)"
        burnin = record.facts.burnin
        rounds = f", burn-in {burnin.ended} after {len(burnin.rounds)} round(s)" if burnin else ""
        samples = len(record.facts.telemetry.samples) if record.facts.telemetry else 0
        print(f"results.json: valid against {how}; complete={record.complete}, exit {record.run.exit_status}, "
              f"{len(record.tests)} tests{rounds}, {samples} telemetry samples")
    except Exception as error:
        print(f"results.json: NOT VALID: {error}")
        bad += 1
    page = folder / "report.html"
    if not page.exists():
        print("report.html: MISSING")
        bad += 1
    elif "--telemetry" in argv and "id='telemetry'" not in page.read_text(encoding="utf-8"):
        print("report.html: no telemetry charts")
        bad += 1
    else:
        print(f"report.html: {page.stat().st_size} bytes")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
