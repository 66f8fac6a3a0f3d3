"""Reading and writing facts files, with one-line errors that name the file and the key."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from gpuaccept.errors import FactsError, KeyPath, Problem, excerpt, format_path
from gpuaccept.facts.model import FACTS_VERSION, Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.facts.relations import Contradiction
from gpuaccept.files import read_input_text, write_atomically


def dump_facts(facts: Facts) -> str:
    return facts.model_dump_json(indent=1) + "\n"


def save_facts(facts: Facts, path: Path) -> None:
    write_atomically(path, dump_facts(facts))


# What other files of this tool say they are, under "format": each names the facts it came from.
_NOT_FACTS = {
    "gpu-accept-results": "a gpu-accept results file, not a facts file: pass the facts.json written beside it",
    "gpu-accept-baseline": "a gpu-accept baseline, not a facts file: pass it as --baseline",
}


def load_facts(path: Path) -> Facts:
    path = Path(path)
    try:
        text = read_input_text(path)
    except OSError as exc:
        raise FactsError([Problem(str(path), None, "", f"cannot read facts: {exc.strerror or exc}")]) from None
    except UnicodeDecodeError as exc:
        message = f"not a facts file: not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise FactsError([Problem(str(path), None, "", message)]) from None
    return parse_facts(text, str(path))


def parse_facts(text: str, name: str) -> Facts:
    if not text.strip():
        raise FactsError([Problem(name, None, "", "the file is empty: expected the facts JSON that gpu-accept record writes")])
    try:
        raw, too_long = _read_json(text)
    except json.JSONDecodeError as exc:
        raise FactsError([Problem(name, exc.lineno, "", f"invalid JSON: {exc.msg} (column {exc.colno})")]) from None
    except RecursionError:
        raise FactsError([Problem(name, None, "", "invalid JSON: nested too deeply to be facts")]) from None
    if not isinstance(raw, dict):
        raise FactsError([Problem(name, None, "", "expected a JSON object of facts")])
    if raw.get("format") in _NOT_FACTS:
        raise FactsError([Problem(name, None, "", _NOT_FACTS[raw["format"]])])
    if too_long is not None:
        raise FactsError([Problem(name, None, _key(too_long), "a number too long to be a fact")])
    version = raw.get("facts_version")
    if version != FACTS_VERSION:
        raise FactsError(
            [Problem(name, None, "facts_version", f"{excerpt(version)} is not a facts format this release reads ({FACTS_VERSION})")]
        )
    try:
        return Facts.model_validate_json(text)
    except ValidationError as exc:
        raise FactsError(validation_problems(exc, raw, name)) from None


def _read_json(text: str) -> tuple[object, KeyPath | None]:
    """The JSON, and where an integer of more digits than Python converts (4300) sits, if any: the
    text is read a second time, marking them, only where the first reading met one."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError:
        raise
    except ValueError:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raw = json.loads(text, parse_int=_int_or_too_long)
        return raw, _path_to(raw, lambda value: isinstance(value, _TooLong))


class _TooLong:
    """An integer of more digits than Python converts (4300): no count, size or reading has them."""


def _int_or_too_long(digits: str) -> int | _TooLong:
    try:
        return int(digits)
    except ValueError:
        return _TooLong()


def _path_to(raw: object, wanted: Callable[[object], bool]) -> KeyPath | None:
    """Where in the JSON the first value `wanted` accepts sits. Not recursive: the JSON may be
    nested nearly as deep as Python's own recursion limit."""
    stack: list[tuple[KeyPath, object]] = [((), raw)]
    while stack:
        path, value = stack.pop()
        if wanted(value):
            return path
        if isinstance(value, dict):
            stack.extend((path + (key,), item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((path + (index,), item) for index, item in reversed(list(enumerate(value))))
    return None


def _key(path: KeyPath) -> str:
    # the keys are the file's too: a key of a megabyte is shown cut, like any other input
    return format_path(tuple(part if isinstance(part, int) or len(part) <= 60 else excerpt(part) for part in path))


# What a value that is not a reading's number may be instead: the reason the machine gave none
_OR_UNAVAILABLE = ' or {"unavailable": "<reason>"}'


def validation_problems(exc: ValidationError, raw: object, name: str) -> list[Problem]:
    """One line per key. Where a value fits no branch of a union (`int | Unavailable`,
    `CudaFacts | Unavailable`) pydantic gives every branch's errors, under paths with the branches'
    names in them: only the branch the value was meant as is kept (a JSON object with an
    "unavailable" key means Unavailable, anything else the value), under the file's own keys."""
    located = [(error, *_locate(error, raw)) for error in exc.errors()]
    unavailable = Unavailable.__name__
    with_unavailable = {site for _, _, branches in located for site, tag, _ in branches if tag == unavailable}
    problems: dict[str, Problem] = {}
    for error, keys, branches in located:
        if any(site in with_unavailable and (tag == unavailable) != _meant_unavailable(value) for site, tag, value in branches):
            continue  # the error of a branch the value was not meant as
        if error["type"] == "json_invalid":  # JSON that json.loads read but pydantic's parser would not
            problems.setdefault("", _invalid_json(error["msg"], name))
            continue
        message = error["msg"]
        got = error.get("input")
        contradiction = error.get("ctx", {}).get("error")
        if isinstance(contradiction, Contradiction):  # found by the record above the key it names
            keys = keys + contradiction.path
        if error["type"] == "missing":
            message = "required key is missing"
        elif error["type"] == "value_error":
            message = message.removeprefix("Value error, ")
        elif error["type"] == "union_tag_invalid":  # pydantic's message quotes the whole tag
            ctx = error.get("ctx", {})
            message = f"{ctx.get('discriminator')} should be {ctx.get('expected_tags')} (got {excerpt(ctx.get('tag'))})"
        else:
            if branches and branches[-1][0] == keys and keys in with_unavailable:
                message += _OR_UNAVAILABLE  # the value itself is of the wrong kind: say all it may be
            if isinstance(got, (str, int, float, bool)) or got is None:
                message += f" (got {excerpt(got)})"
        path = _key(keys)
        # should another of pydantic's messages quote the input, no line carries a whole file
        problems.setdefault(path, Problem(name, None, path, message if len(message) <= 300 else message[:297] + "..."))
    return list(problems.values())


def _locate(error: ErrorDetails, raw: object) -> tuple[KeyPath, list[tuple[KeyPath, str, object]]]:
    """The error's place as keys of the file, and the union branches pydantic tried on the way:
    (where the union sits, the branch's name, the value there). A name in the error's location that
    is not a key of the value it is under is a branch's name, unless it is the key found missing."""
    keys: list[str | int] = []
    branches: list[tuple[KeyPath, str, object]] = []
    value = raw
    loc = error["loc"]
    for position, part in enumerate(loc):
        missing = error["type"] == "missing" and position == len(loc) - 1
        if isinstance(part, int):
            keys.append(part)
            value = value[part] if isinstance(value, list) and 0 <= part < len(value) else None
        elif missing or (isinstance(value, dict) and part in value):
            keys.append(part)
            value = value.get(part) if isinstance(value, dict) else None
        else:
            branches.append((tuple(keys), part, value))
    return tuple(keys), branches


def _meant_unavailable(value: object) -> bool:
    return isinstance(value, dict) and "unavailable" in value


def _invalid_json(message: str, name: str) -> Problem:
    where = re.search(r"at line (\d+) column (\d+)", message)
    line = int(where.group(1)) if where else None
    if "recursion limit" in message:
        return Problem(name, line, "", "invalid JSON: nested too deeply to be facts")
    return Problem(name, line, "", f"invalid JSON: {message.removeprefix('Invalid JSON: ')[:200]}")
