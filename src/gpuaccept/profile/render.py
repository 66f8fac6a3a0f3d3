"""Writing a profile back out as YAML, each value with the comment that says where it came from."""

from __future__ import annotations

from typing import Any

import yaml

from gpuaccept.errors import KeyPath, format_path, shown
from gpuaccept.profile.source import BEFORE, ENDS


def render_yaml(data: dict[str, Any], comments: dict[str, str] | None = None, header: str = "") -> str:
    """`data` as block YAML; `comments` maps dotted key paths ('gpus.memory_min_gib') to a comment.
    A comment names machines, files and values a results file gave: each is one line, its line
    breaks and escape sequences shown escaped, so that it can neither end itself and become YAML
    nor act on the terminal it is printed to."""
    comments = comments or {}
    lines = [f"# {shown(line)}".rstrip() for line in header.splitlines()]
    _mapping(data, (), 0, comments, lines)
    return "\n".join(lines) + "\n"


def _mapping(data: dict[str, Any], path: KeyPath, indent: int, comments: dict[str, str], lines: list[str]) -> None:
    pad = " " * indent
    for key, value in data.items():
        here = path + (key,)
        _loose(comments.get(format_path(here + (BEFORE,)), ""), pad, lines)
        comment = shown(comments.get(format_path(here), ""))
        suffix = f"  # {comment}" if comment else ""
        if isinstance(value, dict) and value:
            lines.append(f"{pad}{key}:{suffix}")
            _mapping(value, here, indent + 2, comments, lines)
        elif isinstance(value, str) and "\n" in value:
            # a block whose first line starts with blanks (a pasted table) needs its indent stated
            indicator = "|2" if value[:1].isspace() else "|"
            lines.append(f"{pad}{key}: {indicator}{suffix}")
            lines.extend(f"{pad}  {line}".rstrip() for line in value.rstrip("\n").splitlines())
        elif isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
            lines.append(f"{pad}{key}:{suffix}")
            for item in value:
                text = yaml.safe_dump(item, default_flow_style=True, width=1 << 16).strip()
                lines.append(f"{pad}  - {text}")
        else:
            lines.append(f"{pad}{key}: {_scalar(value)}{suffix}")
    _loose(comments.get(format_path(path + (ENDS,)), "") if path else comments.get(ENDS, ""), pad, lines)


def _loose(text: str, pad: str, lines: list[str]) -> None:
    """Comment lines that explain no key (keys commented out, remarks), where they stood: split
    where the loader joined them, each shown escaped (a vertical tab in one must not start a line of
    YAML that is no comment)."""
    lines.extend(f"{pad}{shown(line)}" for line in text.split("\n") if line)


def _scalar(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 16).strip().removesuffix("\n...").removesuffix("...").strip()
