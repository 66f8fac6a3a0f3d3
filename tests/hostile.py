"""The hostile strings every sink is fed (tests/data/hostile/strings.json, by class), and what the
tests need to put them where a results file, a facts file or a command line would carry them.

A sink passes when each string comes back, read by the consumer's own parser, as the text it was
(shown with its invisible characters escaped: `errors.visible` on a page, `errors.shown` on a
terminal line) in the place it was put, and nothing else changed: no element, script, comment,
line or series added.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

CORPUS = Path(__file__).parent / "data" / "hostile" / "strings.json"


def _load() -> dict[str, list[str]]:
    classes = json.loads(CORPUS.read_text(encoding="utf-8"))
    classes.pop("_about")
    return classes


CLASSES: dict[str, list[str]] = _load()
STRINGS: list[str] = [text for texts in CLASSES.values() for text in texts]
# a name must be something: the store and the command line refuse an empty or blank one
NAMES: list[str] = [text for text in STRINGS if text.strip()]


def token(index: int) -> str:
    """A harmless stand-in for STRINGS[index]: a page rendered with these shows where each string goes."""
    return f"zq{index:04d}qz"


TOKEN = re.compile(r"zq(\d{4})qz")


def put_back(text: str, strings: list[str], shown) -> str:
    """`text` of the page rendered with tokens, each token replaced by its string as `shown` shows it."""
    return TOKEN.sub(lambda found: shown(strings[int(found.group(1))]), text) if "zq" in text else text


def placed(data, free_text, strings: list[str] = STRINGS, start: int = 0):
    """`data` (plain JSON) with a token in every string at a key path `free_text(path)` accepts, the
    tokens going round STRINGS so that each string lands in several places; and the next token's number."""
    counter = [start]

    def walk(value, path):
        if isinstance(value, dict):
            return {key: walk(item, (*path, key)) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item, (*path, "[]")) for item in value]
        if isinstance(value, str) and free_text(path):
            index = counter[0] % len(strings)
            counter[0] += 1
            return token(index)
        return value

    return walk(data, ()), counter[0]


def with_strings(value, strings: list[str] = STRINGS):
    """A record (pydantic models, lists, dicts) with each token replaced by its string, as a file could
    hold it: built without validation, so that a sink is tested on every string, whatever an input's
    reader would refuse."""
    from enum import Enum

    from pydantic import BaseModel

    if isinstance(value, Enum):
        return value
    if isinstance(value, str):
        return put_back(value, strings, lambda text: text)
    if isinstance(value, BaseModel):
        return value.model_copy(update={name: with_strings(getattr(value, name), strings) for name in type(value).model_fields})
    if isinstance(value, list):
        return [with_strings(item, strings) for item in value]
    if isinstance(value, tuple):
        return tuple(with_strings(item, strings) for item in value)
    if isinstance(value, dict):
        return {with_strings(key, strings): with_strings(item, strings) for key, item in value.items()}
    return value
