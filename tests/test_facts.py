"""Facts files: an exact JSON round trip, and a clear one-line error for each kind of broken file."""

import json
import re

import pytest

from gpuaccept.errors import FactsError
from gpuaccept.facts import dump_facts, load_facts, parse_facts
from tests.helpers import DATA, EXAMPLES

# the shipped examples and the real recordings the tests keep, older ones among them
EXAMPLE_FILES = [*sorted(EXAMPLES.glob("*.json")), *sorted((DATA / "facts").glob("*.json"))]


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=[p.stem for p in EXAMPLE_FILES])
def test_recorded_facts_round_trip_exactly(path):
    text = path.read_text()
    facts = parse_facts(text, str(path))
    again = dump_facts(facts)
    assert again == text
    assert parse_facts(again, "again") == facts


def _broken(tmp_path, change, source="h200x4.json"):
    data = json.loads((EXAMPLES / source).read_text())
    change(data)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    return path


def _one_line(path):
    """The load's refusal: exactly one line, naming the file."""
    with pytest.raises(FactsError) as caught:
        load_facts(path)
    lines = str(caught.value).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{path}"), lines[0]
    return lines[0]


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


def _at(*keys):
    """A change that sets the value at `keys` (the last item of `keys` is the value)."""
    *where, last, value = keys

    def change(data):
        for key in where:
            data = data[key]
        data[last] = value

    return change


@pytest.mark.parametrize(
    "change, expected",
    [
        # a value of the wrong kind where the key takes a value or the reason there is none: one
        # line, in the file's keys, saying both (not one line per branch, under internal class names)
        (_at("cuda", "cuda_runtime", None), 'cuda.cuda_runtime: Input should be a valid string or {"unavailable": "<reason>"} (got None)'),
        (_at("cuda", "peer_access", 0, 1, "x"), "cuda.peer_access[0][1]: Input should be a valid boolean (got 'x')"),
        (_at("gpus", 1, "nvlinks", 0, "version", "x"), "gpus[1].nvlinks[0].version: Input should be a valid integer or {"),
        (_at("gpus", 1, "fabric", "state", None), "gpus[1].fabric.state: Input should be a valid integer (got None)"),
        (_at("gpus", 0, "serial", {"unavailable": "lost"}), "gpus[0].serial.unavailable: Input should be 'not_supported'"),
        (_at("cuda", "device_count", -1), "cuda.device_count: Input should be greater than or equal to 0 (got -1)"),
    ],
)
def test_a_bad_value_in_a_union_is_one_line_in_the_files_keys(tmp_path, change, expected):
    line = _one_line(_broken(tmp_path, change))
    assert expected in line, line
    assert not any(name in line for name in ("CudaFacts", "Unavailable", "FabricFacts", "list[", ".int", ".str")), line


@pytest.mark.parametrize(
    "sweep, keys, value, expected",
    [
        ("collectives", ("results", 0, "size_bytes"), -1, "greater than or equal to 0 (got -1)"),
        ("pairwise", ("results", 0, "size_bytes"), -1, "greater than or equal to 0 (got -1)"),
        ("copies", ("results", 0, "size_bytes"), -1, "greater than or equal to 0 (got -1)"),
        # a log without its header does not say it: the count may be {"unavailable": ...}, never below 1
        ("collectives", ("results", 0, "iterations"), -1, 'greater than or equal to 1 or {"unavailable": "<reason>"} (got -1)'),
        ("pairwise", ("results", 0, "iterations"), 0, "greater than or equal to 1 (got 0)"),
        ("copies", ("results", 0, "iterations"), -1, "greater than or equal to 1 (got -1)"),
        ("collectives", ("results", 0, "wrong"), -1, "must not be negative (got -1)"),
        ("ddp", ("steps",), -1, "greater than or equal to 1 (got -1)"),
        ("ddp", ("warmup_steps",), -1, "greater than or equal to 0 (got -1)"),
        ("ddp", ("model", "layers"), -1, "greater than or equal to 1 (got -1)"),
        ("ddp_without_p2p", ("model", "heads"), 0, "greater than or equal to 1 (got 0)"),
        ("ddp", ("results", 0, "world"), 0, "greater than or equal to 1 (got 0)"),
        ("collectives", ("wall_s",), float("nan"), "finite number (got nan)"),
        ("pairwise", ("wall_s",), float("inf"), "finite number (got inf)"),
        ("copies", ("wall_s",), float("nan"), "finite number (got nan)"),
        ("ddp", ("wall_s",), -1.0, "greater than or equal to 0 (got -1.0)"),
        ("ddp_without_p2p", ("wall_s",), float("nan"), "finite number (got nan)"),
        ("collectives", ("results", 0, "nominal_size"), "1GB", "'1GB' is not a size: write bytes with a binary unit"),
        ("pairwise", ("results", 0, "gpus", 0), -1, "greater than or equal to 0 (got -1)"),
        ("copies", ("results", 0, "gpus", 0), -2, "greater than or equal to 0 (got -2)"),
        ("copies", ("results", 0, "gpus"), [], "a copy is on one GPU or between two, not 0"),
        ("collectives", ("results", 0, "collective"), "<script>", "should match pattern"),
        ("collectives", ("results", 0, "nominal_size"), "0KiB", "'0KiB' is no bytes at all"),
    ],
)
def test_a_measurement_the_hardware_cannot_give_is_refused_at_load(tmp_path, sweep, keys, value, expected):
    # read as they are, these pass every check (a negative size, NaN seconds) or end the run with a
    # traceback where a check reads them ('1GB'): damage, refused naming the key
    path = _broken(tmp_path, _at("measurements", sweep, *keys, value), "h200x4-measured.json")
    key = "measurements." + sweep + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys)
    line = _one_line(path)
    assert f": {key}: " in line and expected in line, line


def test_a_sweep_that_took_no_time_still_loads():
    # a stage that could not run records wall_s 0.0 and no ranks: recorded files hold such sweeps
    data = json.loads((EXAMPLES / "h200x4-measured.json").read_text())
    data["measurements"]["collectives"].update(wall_s=0.0, ranks=0)
    assert parse_facts(json.dumps(data), "f").measurements.collectives.wall_s == 0.0


@pytest.mark.parametrize("where", [("gpus", 2, "memory_total_bytes"), ("environment", "X"), ("facts_version",)])
def test_a_number_too_long_for_python_is_refused_naming_its_key(tmp_path, where):
    # Python will not turn a string of over 4300 digits into an int: json.loads raised ValueError
    path = _broken(tmp_path, _at(*where, 918273645546372819))
    path.write_text(path.read_text().replace("918273645546372819", "9" * 5000))
    key = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in where).lstrip(".")
    assert _one_line(path) == f"{path}: {key}: a number too long to be a fact"


def _nested(depth):
    value = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "change",
    [
        _at("environment", "X", _nested(300)),  # json.loads reads it; pydantic's parser stops at its limit
        _at("environment", "X", _nested(900)),
        _at("gpus", 0, "pcie", "width_current", "7" * 100_000),
        _at("measurements", "collectives", "results", 0, "nominal_size", "G" * 100_000),
        _at("system", "k" * 100_000, 1),
        _at("gpus", 0, "index", 10**4000),
        _at("gpus", 0, "memory_total_bytes", -(10**4000)),
        _at("measurements", "compute", {"backend": "x", "torch_version": "", "gpus": [0], "wall_s": 1.0, "failures": [],
                                        "results": [{"load": "q" * 100_000}]}),
    ],
    ids=["nested-300", "nested-900", "long-string", "long-size", "long-key", "long-index", "long-negative", "long-tag"],
)
def test_no_message_quotes_more_than_an_excerpt_of_the_input(tmp_path, change):
    line = _one_line(_broken(tmp_path, change, "h200x4-measured.json"))
    assert len(line) < 400, line[:500]


def test_json_nested_past_pydantics_limit_says_so_with_its_line(tmp_path):
    path = _broken(tmp_path, _at("environment", "X", _nested(300)))
    text = json.dumps(json.loads(path.read_text()), indent=1)
    path.write_text(text)
    assert re.fullmatch(rf"{re.escape(str(path))}:\d+: invalid JSON: nested too deeply to be facts", _one_line(path))


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
    from gpuaccept.facts.measurements import GemmResult

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
