"""Strict YAML reading that remembers where every value came from.

PyYAML silently keeps the last of two equal keys and forgets line numbers. Profiles need both: a
duplicate key is an error, and every error names `file:line`. So the document is composed into
nodes and converted here, recording the line of each value under its key path.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpuaccept.errors import KeyPath, Problem, format_path
from gpuaccept.files import read_input_bytes


@dataclass(frozen=True)
class Location:
    file: str
    line: int  # 1-based


@dataclass
class Document:
    """A YAML mapping with the location of every value and any comment written beside it."""

    file: str
    data: dict[str, Any]
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


# Far beyond any real profile (the shipped ones are at most 4 KiB and a few hundred values), and
# small enough that reading one takes a few seconds at most, whatever it holds.
MAX_PROFILE_BYTES = 64 << 10
MAX_PROFILE_VALUES = 100_000  # keys and values, counted as if every alias and merge key were expanded
MAX_PROFILE_DEPTH = 100  # mappings and lists within each other


class _ProfileLoader(yaml.SafeLoader):
    """Stops composing at a nesting no profile has: deeper, PyYAML recurses past Python's limit,
    and its scanner slows quadratically on nested brackets (`[[[[...`)."""

    depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.depth >= MAX_PROFILE_DEPTH:
            where = self.peek_event().start_mark  # type: ignore[no-untyped-call]  # PyYAML's stubs leave it untyped
            too_deep = f"nested more than {MAX_PROFILE_DEPTH} levels deep: too deep to be a profile"
            raise yaml.composer.ComposerError(None, None, too_deep, where)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def read_document(path: Path, display_name: str | None = None) -> Document:
    name = display_name or str(path)

    def refused(message: str) -> Document:
        return Document(name, {}, problems=[Problem(name, None, "", message)])

    try:
        data = read_input_bytes(path, MAX_PROFILE_BYTES + 1)  # never more: the path may be /dev/zero
    except OSError as exc:
        return refused(f"cannot read: {exc.strerror or exc}")
    if len(data) > MAX_PROFILE_BYTES:
        return refused(f"larger than {MAX_PROFILE_BYTES >> 10} KiB: too large to be a profile")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return refused(f"not UTF-8 text: {exc.reason} at byte {exc.start}")
    return parse_document(text, name)


def parse_document(text: str, name: str) -> Document:
    # the same profiles are read again and again (a base under each profile, every catalog listing,
    # each xdist worker's context): pure-Python YAML is the slow part, so each text is parsed once
    # and every caller gets a copy of its own to change (locations and problems are never changed)
    parsed = _parsed(text, name)
    return Document(parsed.file, _copied(parsed.data), dict(parsed.locations), dict(parsed.comments), list(parsed.problems))


def _copied(value: Any) -> Any:
    """A copy of parsed YAML: its mappings and lists new, its scalars (immutable) shared."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    return value


@functools.lru_cache(maxsize=256)
def _parsed(text: str, name: str) -> Document:
    try:
        loader = _ProfileLoader(text)  # checks every character at once
    except yaml.reader.ReaderError as exc:
        return Document(name, {}, problems=[_unreadable_character(text, name, exc)])
    doc = Document(name, {})
    try:
        node = loader.get_single_node()
        if node is None:
            doc.problems.append(Problem(name, 1, "", "the file is empty: expected a mapping of profile keys"))
            return doc
        if not isinstance(node, yaml.MappingNode):
            doc.problems.append(Problem(name, node.start_mark.line + 1, "", "expected a mapping of profile keys at the top"))
            return doc
        too_large = _expansion_problem(node, name)
        if too_large:
            doc.problems.append(too_large)
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


_ESCAPE = "\x1b"


def _unreadable_character(text: str, name: str, exc: yaml.reader.ReaderError) -> Problem:
    """YAML admits no control characters; the usual one is ESC, from colour codes pasted out of a
    terminal along with `nvidia-smi topo -m`. The line is named, and the key when the rest reads."""
    line = text.count("\n", 0, exc.position) + 1
    if exc.character != ord(_ESCAPE):
        return Problem(name, line, "", f"invalid YAML: character {exc.character:#04x} is not allowed in YAML text")
    plain = parse_document(text.replace(_ESCAPE, "?"), name)  # the same lines and columns, without ESC
    keys = [path for path, where in plain.locations.items() if path and where.line <= line]
    key = max(keys, key=lambda path: (plain.locations[path].line, len(path)), default=())
    return Problem(
        name,
        line,
        format_path(key),
        "a terminal escape code (ESC, as in colour codes copied from a terminal) is not allowed: "
        "strip the colour codes, or paste plain text",
    )


class _Loop(Exception):
    def __init__(self, node: yaml.Node):
        self.node = node


def _expansion_problem(root: yaml.Node, name: str) -> Problem | None:
    """Aliases let a few lines stand for billions of values ("billion laughs", also through merge
    keys: `<<: [*a, *a]`), or for a nesting deeper than any document level. Measure what the node
    graph expands to, each shared node once, before anything is expanded."""
    measured: dict[int, tuple[int, int]] = {}  # id of a node -> (values, levels) once expanded
    open_nodes: set[int] = set()

    def measure(node: yaml.Node) -> tuple[int, int]:
        if id(node) in measured:
            return measured[id(node)]
        if id(node) in open_nodes:
            raise _Loop(node)
        open_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            children = []
        parts = [measure(child) for child in children]  # recursion as deep as the document: aliases point back
        measured[id(node)] = (1 + sum(values for values, _ in parts), 1 + max((levels for _, levels in parts), default=0))
        open_nodes.discard(id(node))
        return measured[id(node)]

    try:
        values, levels = measure(root)
    except _Loop as loop:
        return Problem(name, loop.node.start_mark.line + 1, "", "an alias refers to a value that contains it: it would never end")
    if values > MAX_PROFILE_VALUES:
        return Problem(
            name,
            None,
            "",
            f"its aliases (*name) and merge keys (<<) expand to {values:,} values, more than {MAX_PROFILE_VALUES:,}: "
            "too large to be a profile",
        )
    if levels > MAX_PROFILE_DEPTH:
        return Problem(
            name, None, "", f"its aliases (*name) nest values more than {MAX_PROFILE_DEPTH} levels deep: too deep to be a profile"
        )
    return None


def _convert(node: yaml.Node, path: KeyPath, loader: _ProfileLoader, doc: Document) -> Any:
    doc.locations[path] = Location(doc.file, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # resolves `<<: *anchor` merge keys
        out: dict[str | int, Any] = {}
        first_line: dict[str | int, int] = {}
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
    try:
        return loader.construct_object(node, deep=True)
    except ValueError as error:  # an integer of thousands of digits Python will not read, a date of month 13
        why = str(error).split(";")[0]
        doc.problems.append(Problem(doc.file, node.start_mark.line + 1, format_path(path), f"not a value this tool reads: {why}"))
        return None


# Where comment lines that explain no key are kept, under the key path of the key they stand
# before, or of the section they end: a key commented out (`# min_power_share: 0.9`), a remark about
# the lines above it. They are shown where they stood, never as another key's note.
BEFORE = "#before"
ENDS = "#ends"
# a commented-out key: `# key: value  # its note`, the value one word or a flow collection
_COMMENTED_OUT = re.compile(r"^#\s*[A-Za-z_][\w-]*:(\s+(\{[^#]*\}|\[[^#]*\]|[^\s#]+))?\s*(#.*)?$")


def _comments(text: str, locations: dict[KeyPath, Location]) -> dict[KeyPath, str]:
    """The comment that explains each value: on its own line, or in the block just above it at the
    key's own indentation; other comment lines under BEFORE or ENDS where they stood."""
    lines = text.splitlines()
    found: dict[KeyPath, str] = {}
    notes: dict[int, tuple[str, range]] = {}  # by line: a flow mapping puts many values on one line
    keys: dict[int, KeyPath] = {}  # the line of each key in block style -> its path (the shortest on the line)
    for path, location in locations.items():
        if not path:
            continue
        index = location.line - 1
        if index >= len(lines):
            continue
        if index not in keys or len(path) < len(keys[index]):
            keys[index] = path
        if index not in notes:
            notes[index] = _note(lines, index)
        if notes[index][0]:
            found[path] = notes[index][0]
    explained = {at for _, block in notes.values() for at in block}
    header = next((at for at, line in enumerate(lines) if not line.lstrip().startswith("#")), len(lines))
    for at, line in enumerate(lines):
        if at < header or at in explained or not line.lstrip().startswith("#"):
            continue
        where = _where_it_stands(lines, keys, at)
        found[where] = f"{found[where]}\n{line.strip()}" if where in found else line.strip()
    return found


def _note(lines: list[str], index: int) -> tuple[str, range]:
    """A key's note, and the lines above it that make it: the comment lines just above at the key's
    indentation, up to a commented-out key; and its trailing comment."""
    indent = _indent(lines[index])
    above = index - 1
    block: list[str] = []
    while (above >= 0 and lines[above].lstrip().startswith("#") and _indent(lines[above]) == indent
           and not _COMMENTED_OUT.match(lines[above].strip())):
        block.append(lines[above].lstrip()[1:].strip())
        above -= 1
    if not any(not line.lstrip().startswith("#") for line in lines[: above + 1]):
        block = []  # a block that starts the file is the file's header, not this key's note
    parts = list(reversed(block))
    trailing = _trailing_comment(lines[index])
    if trailing:
        parts.append(trailing)
    return " ".join(p for p in parts if p), range(index - len(block), index)


def _where_it_stands(lines: list[str], keys: dict[int, KeyPath], at: int) -> KeyPath:
    """The key a loose comment line stands before (at its indentation, in its section), else the
    section it ends."""
    indent = _indent(lines[at])
    for after in range(at + 1, len(lines)):
        if after in keys and _indent(lines[after]) <= indent:
            if _indent(lines[after]) == indent:
                return keys[after] + (BEFORE,)
            break
    for before in range(at - 1, -1, -1):
        if before in keys and _indent(lines[before]) < indent:
            return keys[before] + (ENDS,)
    return (ENDS,)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


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
