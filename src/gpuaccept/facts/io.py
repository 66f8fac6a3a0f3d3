"""Reading and writing facts files, with one-line errors that name the file and the key."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from gpuaccept.errors import FactsError, Problem, format_path
from gpuaccept.facts.model import FACTS_VERSION, Facts
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
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FactsError([Problem(name, exc.lineno, "", f"invalid JSON: {exc.msg} (column {exc.colno})")]) from None
    except RecursionError:
        raise FactsError([Problem(name, None, "", "invalid JSON: nested too deeply to be facts")]) from None
    if not isinstance(raw, dict):
        raise FactsError([Problem(name, None, "", "expected a JSON object of facts")])
    if raw.get("format") in _NOT_FACTS:
        raise FactsError([Problem(name, None, "", _NOT_FACTS[raw["format"]])])
    version = raw.get("facts_version")
    if version != FACTS_VERSION:
        raise FactsError(
            [Problem(name, None, "facts_version", f"{version!r} is not a facts format this release reads ({FACTS_VERSION})")]
        )
    try:
        return Facts.model_validate_json(text)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            message = error["msg"]
            got = error.get("input")
            if error["type"] == "missing":
                message = "required key is missing"
            elif error["type"] == "value_error":
                message = message.removeprefix("Value error, ")
            elif isinstance(got, (str, int, float, bool)) or got is None:
                message += f" (got {got!r})"
            problems.append(Problem(name, None, format_path(tuple(error["loc"])), message))
        raise FactsError(_first_per_key(problems)) from None


def _first_per_key(problems: list[Problem]) -> list[Problem]:
    """A value that fits no branch of a union yields one error per branch: keep the first per key."""
    seen: dict[str, Problem] = {}
    for problem in problems:
        key = problem.path.rsplit(".", 1)[0] if problem.path.endswith((".int", ".str", ".bool", ".Unavailable")) else problem.path
        seen.setdefault(key, Problem(problem.file, problem.line, key, problem.message))
    return list(seen.values())
