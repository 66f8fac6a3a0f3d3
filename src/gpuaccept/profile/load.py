"""Loading a profile: read strictly, resolve `extends`, validate, report every problem at once."""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, overload

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from gpuaccept.errors import KeyPath, Problem, ProfileError, excerpt, format_path
from gpuaccept.profile.model import Profile
from gpuaccept.profile.rules import semantic_problems
from gpuaccept.profile.source import Document, Location, parse_document, read_document
from gpuaccept.profile.spec import ProfileSpec
from gpuaccept.vocabulary.links import GPU_KEY_PATTERN


def load_profile(path: Path, search_dirs: Sequence[Path] = ()) -> Profile:
    """Load and validate one profile file.

    `search_dirs` are where `extends: NAME` looks when NAME is not a path next to the file.
    """
    path = Path(path)
    return _profile_of(_resolve(path, list(search_dirs), chain=()), path)


def load_profile_text(text: str, path: Path) -> Profile:
    """A profile from its text (one that extends no base), named as the file `path` it is or
    will be kept in: a derived profile is checked as it will be read back."""
    return _profile_of(parse_document(text, str(path)), Path(path))


def _profile_of(doc: Document, path: Path) -> Profile:
    spec = _validate(doc, base_only=False)
    digest = hashlib.sha256(json.dumps(doc.data, sort_keys=True, default=str).encode()).hexdigest()
    return Profile(
        name=spec.name or path.stem,
        path=path,
        spec=spec,
        provenance={format_path(key): text for key, text in doc.comments.items()},
        sha256=digest,
    )


def check_base_profile(path: Path, search_dirs: Sequence[Path] = ()) -> None:
    """Validate a base profile, which may leave required keys to the profiles extending it."""
    _validate(_resolve(Path(path), list(search_dirs), chain=()), base_only=True)


@overload
def _validate(doc: Document, base_only: Literal[False]) -> ProfileSpec: ...
@overload
def _validate(doc: Document, base_only: Literal[True]) -> ProfileSpec | None: ...
def _validate(doc: Document, base_only: bool) -> ProfileSpec | None:
    """The spec of a resolved document, or every problem at once; a base (`base_only`) may leave
    required keys to the profiles that extend it, and then has no spec of its own."""
    if doc.problems:
        raise ProfileError(doc.problems)
    try:
        spec = ProfileSpec.model_validate(doc.data)
    except ValidationError as exc:
        problems = [problem_from_pydantic(error, doc) for error in exc.errors()]
        if base_only:
            problems = [p for p in problems if p.message != REQUIRED_KEY_MISSING]
        if problems:
            raise ProfileError(problems) from None
        return None
    problems = []
    for key, message in semantic_problems(spec):
        location = doc.locate(key)
        problems.append(Problem(location.file, location.line, format_path(key), message))
    if problems:
        raise ProfileError(problems)
    return spec


# Bases of bases: a real profile extends two or three; a chain this long is generated, and each
# link is a frame of Python's recursion
MAX_EXTENDS = 32


def _resolve(path: Path, search_dirs: list[Path], chain: tuple[Path, ...]) -> Document:
    doc = read_document(path)
    if doc.problems or "extends" not in doc.data:
        return doc
    target = doc.data["extends"]
    where = doc.locate(("extends",))
    if len(chain) >= MAX_EXTENDS:
        doc.problems.append(Problem(where.file, where.line, "extends", f"more than {MAX_EXTENDS} profiles extend one another: "
                                    f"the chain starts at {chain[0]}"))
        return doc
    if not isinstance(target, str) or not target:
        doc.problems.append(Problem(where.file, where.line, "extends", "must name a base profile"))
        return doc
    base_path = find_base(target, path.parent, search_dirs)
    if base_path is None:
        looked = [str(path.parent)] + [str(d) for d in search_dirs]
        doc.problems.append(
            Problem(where.file, where.line, "extends", f"base profile {target!r} not found (looked in {', '.join(looked)})")
        )
        return doc
    resolved = base_path.resolve()
    if resolved in chain or resolved == path.resolve():
        cycle = " -> ".join(str(p) for p in (*chain, path.resolve(), resolved))
        doc.problems.append(Problem(where.file, where.line, "extends", f"circular extends: {cycle}"))
        return doc
    base = _resolve(base_path, search_dirs, chain + (path.resolve(),))
    if base.problems:
        doc.problems.extend(base.problems)
        return doc
    return _merge(base, doc)


def find_base(name: str, beside: Path, search_dirs: list[Path]) -> Path | None:
    candidates = [beside / name]
    candidates += [d / name for d in search_dirs]
    for candidate in candidates:
        for option in (candidate, candidate.with_name(candidate.name + ".yaml"), candidate.with_name(candidate.name + ".yml")):
            if option.is_file():
                return option
    return None


def _merge(base: Document, child: Document) -> Document:
    """`child` over `base`: mappings merge key by key, anything else is replaced; `null` removes."""
    merged = Document(child.file, {})
    merged.locations = dict(base.locations)
    merged.comments = dict(base.comments)

    def over(under: Any, above: Any, path: KeyPath) -> Any:
        if isinstance(under, dict) and isinstance(above, dict):
            out = dict(under)
            for key, value in above.items():
                if value is None:
                    out.pop(key, None)
                    _forget(merged, path + (key,))
                elif key in out:
                    out[key] = over(out[key], value, path + (key,))
                else:
                    out[key] = value
            return out
        _forget(merged, path)
        return above

    merged.data = over(base.data, child.data, ())
    merged.data.pop("extends", None)
    for key, location in child.locations.items():
        merged.locations[key] = location
    for key, text in child.comments.items():
        merged.comments[key] = text
    merged.locations[()] = Location(child.file, 1)
    return merged


def _forget(doc: Document, prefix: KeyPath) -> None:
    for table in (doc.locations, doc.comments):
        for key in [k for k in table if k[: len(prefix)] == prefix]:
            del table[key]


# ---- pydantic errors as one-line problems ---------------------------------------------------

REQUIRED_KEY_MISSING = "required key is missing"
_PATTERN_HINTS = {
    "pairs": "a GPU pair is written gpuN-gpuM, e.g. gpu0-gpu1",
    "inactive_by_design": "a GPU is written gpuN, e.g. gpu3",
}


def problem_from_pydantic(error: ErrorDetails, doc: Document, root: type[BaseModel] = ProfileSpec) -> Problem:
    """One pydantic error as a one-line problem at its file and line; `root` is the model validated
    (a profile's spec, or a file of the catalogue), whose keys an unknown one is compared with."""
    loc = tuple(error["loc"])
    key_error = bool(loc) and loc[-1] == "[key]"
    path = tuple(part for part in loc if part != "[key]")
    location = doc.locate(path)
    kind = error["type"]
    message = error["msg"]
    if kind == "extra_forbidden":
        known = _known_keys(loc[:-1], root)
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        message = "unknown key" + (f" (did you mean {close[0]!r}?)" if close else "")
        if known:
            message += f"; known keys here: {', '.join(known)}"
    elif kind == "missing":
        message = REQUIRED_KEY_MISSING
    elif kind == "string_pattern_mismatch" and key_error:
        parent = next((p for p in reversed(path) if p in _PATTERN_HINTS), None)
        if parent is None and (error.get("ctx") or {}).get("pattern") == GPU_KEY_PATTERN:
            parent = "inactive_by_design"  # any per-GPU setting: the same hint
        message = f"key {path[-1]!r} is not valid: " + (_PATTERN_HINTS[parent] if parent else message)
    elif kind == "value_error":
        message = message.removeprefix("Value error, ")
    else:
        got = error.get("input")
        if isinstance(got, (str, int, float, bool)) or got is None:
            message += f" (got {excerpt(got)})"
        number = _YAML_TEXT_NUMBER.fullmatch(got.strip()) if isinstance(got, str) else None
        if number and math.isfinite(float(number[0])):
            # YAML 1.1, which PyYAML reads, takes 6e2 for text: it wants a dot and a signed exponent
            sign, digits, fraction, e, exponent_sign, exponent = number.groups()
            written = f"{sign}{digits or ''}{fraction or '.0'}{e}{exponent_sign or '+'}{exponent}"
            message += f": YAML reads {number[0]} as text, write it as {written}"
    return Problem(location.file, location.line, format_path(path), message)


_YAML_TEXT_NUMBER = re.compile(r"([-+]?)(?=\.?\d)(\d*)(\.\d*)?([eE])([-+]?)(\d+)")  # a digit before the e


def _known_keys(loc: KeyPath, root: type[BaseModel]) -> list[str]:
    """The keys allowed at `loc`, found by walking the schema the same way pydantic did."""
    model: Any = root
    for part in loc:
        model = _step(model, part)
        if model is None:
            return []
    model = _unwrap(model)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return [field.alias or name for name, field in model.model_fields.items()]
    return []


def _step(annotation: Any, part: Any) -> Any:
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, field in annotation.model_fields.items():
            if part in (name, field.alias):
                return field.annotation
        return None
    origin = typing.get_origin(annotation)
    if origin in (dict, list):
        return typing.get_args(annotation)[-1]
    return None


def _unwrap(annotation: Any) -> Any:
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            options = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(options) != 1:
                return annotation
            annotation = options[0]
        else:
            return annotation
