"""Strict YAML reading that remembers where every value came from.

PyYAML silently keeps the last of two equal keys and forgets line numbers. Profiles need both: a
duplicate key is an error, and every error names `file:line`. So the document is composed into
nodes and converted here, recording the line of each value under its key path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpuaccept.errors import Problem

KeyPath = tuple  # a tuple of str keys and int list indices


@dataclass(frozen=True)
class Location:
    file: str
    line: int  # 1-based


@dataclass
class Document:
    """A YAML mapping with the location of every value and any comment written beside it."""

    file: str
    data: dict
    locations: dict[KeyPath, Location] = field(default_factory=dict)
    comments: dict[KeyPath, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def locate(self, path: KeyPath) -> Location:
        """The location of `path`, or of its nearest ancestor when the key itself is missing."""
        for end in range(len(path), -1, -1):
            found = self.locations.get(tuple(path[:end]))
            if found:
                return found
        return Location(self.file, 1)


def format_path(path: KeyPath) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def read_document(path: Path, display_name: str | None = None) -> Document:
    name = display_name or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return Document(name, {}, problems=[Problem(name, None, "", f"cannot read: {exc.strerror or exc}")])
    except UnicodeDecodeError as exc:
        return Document(name, {}, problems=[Problem(name, None, "", f"not UTF-8 text: {exc.reason}")])
    return parse_document(text, name)


def parse_document(text: str, name: str) -> Document:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        doc = Document(name, {})
        if node is None:
            doc.problems.append(Problem(name, 1, "", "the file is empty: expected a mapping of profile keys"))
            return doc
        if not isinstance(node, yaml.MappingNode):
            doc.problems.append(Problem(name, node.start_mark.line + 1, "", "expected a mapping of profile keys at the top"))
            return doc
        doc.data = _convert(node, (), loader, doc)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        what = " ".join(part for part in (exc.context, exc.problem) if part)
        return Document(name, {}, problems=[Problem(name, line, "", f"invalid YAML: {what}")])
    except yaml.YAMLError as exc:
        return Document(name, {}, problems=[Problem(name, None, "", f"invalid YAML: {exc}")])
    finally:
        loader.dispose()
    doc.comments = _comments(text, doc.locations)
    return doc


def _convert(node: yaml.Node, path: KeyPath, loader: yaml.SafeLoader, doc: Document) -> Any:
    doc.locations[path] = Location(doc.file, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # resolves `<<: *anchor` merge keys
        out: dict = {}
        first_line: dict = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                doc.problems.append(Problem(doc.file, line, format_path(path), "a key must be a plain value"))
                continue
            key = loader.construct_object(key_node)
            if not isinstance(key, str):
                key = str(key) if isinstance(key, int) and not isinstance(key, bool) else key
            if not isinstance(key, (str, int)):
                doc.problems.append(Problem(doc.file, line, format_path(path), f"key {key!r} must be text"))
                continue
            if key in out:
                doc.problems.append(
                    Problem(doc.file, line, format_path(path + (key,)), f"duplicate key (first given on line {first_line[key]})")
                )
                continue
            first_line[key] = line
            out[key] = _convert(value_node, path + (key,), loader, doc)
            # the key's line reads better in messages than the value's (a block value starts below it)
            doc.locations[path + (key,)] = Location(doc.file, line)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, path + (i,), loader, doc) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


def _comments(text: str, locations: dict[KeyPath, Location]) -> dict[KeyPath, str]:
    """The comment that explains each value: on its own line, or in the block just above it."""
    lines = text.splitlines()
    found: dict[KeyPath, str] = {}
    for path, location in locations.items():
        if not path:
            continue
        index = location.line - 1
        if index >= len(lines):
            continue
        parts = []
        above = index - 1
        block = []
        while above >= 0 and lines[above].lstrip().startswith("#"):
            block.insert(0, lines[above].lstrip()[1:].strip())
            above -= 1
        if above >= 0:  # a block that starts the file is the file's header, not this key's note
            parts.extend(block)
        trailing = _trailing_comment(lines[index])
        if trailing:
            parts.append(trailing)
        if parts:
            found[path] = " ".join(p for p in parts if p)
    return found


def _trailing_comment(line: str) -> str:
    quote = None
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[i + 1 :].strip()
    return ""
