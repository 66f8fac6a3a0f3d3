"""The verdicts on every example facts and results file are the ones recorded in tests/data/verdicts.json
(see tests/verdicts.py): a change of any verdict shows here, named."""

import json

from tests.verdicts import EXPECTED, judged_sets


def test_every_example_is_judged_as_recorded():
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    found = json.loads(json.dumps(judged_sets()))  # tuples as lists, as the file holds them
    assert list(found) == list(expected)
    for name, verdicts in expected.items():
        changed = [(before, after) for before, after in zip(verdicts, found[name], strict=False) if before != after]
        assert not changed, f"{name}: {len(changed)} verdict(s) changed, the first: {changed[0][0]} -> {changed[0][1]}"
        assert len(found[name]) == len(verdicts), name
