"""Facts files: an exact JSON round trip, and a clear one-line error for each kind of broken file."""

import json

import pytest

from gpuaccept.errors import FactsError
from gpuaccept.facts import dump_facts, load_facts, parse_facts
from tests.helpers import DATA, EXAMPLES

EXAMPLE_FILES = sorted(EXAMPLES.glob("*.json"))


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=[p.stem for p in EXAMPLE_FILES])
def test_recorded_facts_round_trip_exactly(path):
    text = path.read_text()
    facts = parse_facts(text, str(path))
    again = dump_facts(facts)
    assert again == text
    assert parse_facts(again, "again") == facts


def _broken(tmp_path, change):
    data = json.loads((EXAMPLES / "h200x4.json").read_text())
    change(data)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda d: d["gpus"][2]["pcie"].update(width_current="16"), "gpus[2].pcie.width_current: Input should be a valid integer"),
        (lambda d: d["gpus"][0].pop("uuid"), "gpus[0].uuid: required key is missing"),
        (lambda d: d.update(facts_version=7), "facts_version: 7 is not a facts format this release reads"),
        (lambda d: d["system"].update(colour="green"), "system.colour: Extra inputs are not permitted"),
        (lambda d: d["gpus"][2].update(memory_total_bytes=-1), "gpus[2].memory_total_bytes: must not be negative (got -1)"),
        (lambda d: d["gpus"][1]["pcie"].update(width_max=-16), "gpus[1].pcie.width_max: must not be negative (got -16)"),
        (
            lambda d: d["gpus"][1].update(index=0),
            "gpus: index 0 is given twice (gpus[0] and gpus[1]): GPUs are listed by index, 0 to 3, each once, in order",
        ),
        (lambda d: d["gpus"].reverse(), "gpus: gpus[0] has index 3: GPUs are listed by index, 0 to 3, each once, in order"),
    ],
)
def test_broken_facts_name_the_file_and_key(tmp_path, change, expected):
    path = _broken(tmp_path, change)
    with pytest.raises(FactsError) as caught:
        load_facts(path)
    lines = str(caught.value).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{path}: ") and expected in lines[0], lines[0]


MEASURED = DATA / "facts" / "h200x2-health-measured.json"


@pytest.mark.parametrize(
    "section, field, value",
    [
        ("pairwise", "busbw_GBps", "NaN"),
        ("pairwise", "time_us", "Infinity"),
        ("copies", "GBps", "NaN"),
        ("compute", "tflops", "Infinity"),
        ("compute", "time_us", "NaN"),
    ],
)
def test_a_measured_value_that_is_not_a_number_is_damage(tmp_path, section, field, value):
    # NaN compares false with every floor: read as a value, it would pass any check
    text = MEASURED.read_text()
    data = json.loads(text)
    results = data["measurements"][section]["results"]
    index = next(i for i, result in enumerate(results) if field in result)
    results[index][field] = 123.0
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(data).replace("123.0", value, 1))
    with pytest.raises(FactsError) as caught:
        load_facts(path)
    message = str(caught.value)
    assert f"measurements.{section}.results[{index}]" in message and field in message and "finite number" in message, message


def test_a_gemm_whose_block_held_nan_keeps_its_facts_readable():
    from gpuaccept.facts.model import GemmResult

    fields = {"gpu": 0, "size": 8, "dtype": "bfloat16", "repeats": 1, "verify_repeats": 1, "time_us": 1.0, "tflops": 1.0}
    sick = GemmResult(**fields, mismatches=0, nonfinite=3, reference_wrong=2, reference_elements=4, reference_max_error=None)
    assert GemmResult.model_validate_json(sick.model_dump_json()) == sick


def test_truncated_json_gives_its_line(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text((EXAMPLES / "h200x4.json").read_text()[:500])
    with pytest.raises(FactsError, match=rf"{path}:\d+: invalid JSON"):
        load_facts(path)


def test_missing_file(tmp_path):
    with pytest.raises(FactsError, match="cannot read facts: No such file"):
        load_facts(tmp_path / "none.json")


@pytest.mark.parametrize(
    "content, expected",
    [
        (bytes(range(256)), "not a facts file: not UTF-8 text (invalid start byte at byte 128)"),
        (b"", "the file is empty: expected the facts JSON that gpu-accept record writes"),
        (b"\n  \n", "the file is empty: expected the facts JSON that gpu-accept record writes"),
        (b"[" * 100_000 + b"]" * 100_000, "invalid JSON: nested too deeply to be facts"),
        (
            (EXAMPLES.parent / "results" / "h200x4.json").read_bytes(),
            "a gpu-accept results file, not a facts file: pass the facts.json written beside it",
        ),
        (b'{"format": "gpu-accept-baseline", "version": 1}', "a gpu-accept baseline, not a facts file: pass it as --baseline"),
    ],
    ids=["binary", "empty", "blank", "nested", "results-file", "baseline-file"],
)
def test_a_file_that_is_not_facts_says_what_it_is_in_one_line(tmp_path, content, expected):
    path = tmp_path / "facts.json"
    path.write_bytes(content)
    with pytest.raises(FactsError) as caught:
        load_facts(path)
    assert str(caught.value) == f"{path}: {expected}"


def test_a_folder_is_not_a_facts_file(tmp_path):
    with pytest.raises(FactsError) as caught:
        load_facts(tmp_path)
    assert str(caught.value) == f"{tmp_path}: cannot read facts: Is a directory"
