"""The one way text reaches a page: Jinja2 templates (`templates/`) with autoescaping on.

Every page this package writes (report.html, the fleet page, the cluster view) is rendered here,
and none is built from strings: a host, profile, file, check or GPU name from a results.json that
anyone could have written is text on the page, never markup. The rule, written once:

- every `{{ value }}` is escaped for HTML (autoescape), and shown with `errors.visible`'s escapes
  (a bidirectional override, a zero-width character, a NUL or an escape sequence reads as what it
  is, not as another name);
- data for a page's script goes in as JSON through `|tojson`, which writes `<`, `>`, `&` and `'` as
  `\\u003c`...: nothing in it can end the script element or open a comment; the script then puts
  each string into the page as text (`textContent`, `setAttribute`), never as markup.
"""

from __future__ import annotations

import functools
from typing import Any

from gpuaccept.errors import visible


@functools.cache
def templates() -> Any:
    """The environment every page is rendered with (its globals set once, by each page's module)."""
    # imported here, not at module level: the plugin imports the report writers in every pytest run
    from jinja2 import Environment, PackageLoader, StrictUndefined

    environment = Environment(
        loader=PackageLoader("gpuaccept.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_shown_on_a_page,
    )
    # `|tojson` without spaces, in the data's own order: the fleet page of 10,000 hosts carries a few MB of it
    environment.policies["json.dumps_kwargs"] = {"separators": (",", ":")}
    return environment


def _shown_on_a_page(value: Any) -> Any:
    from markupsafe import Markup

    if value is None:
        return ""  # a field a record leaves empty shows as nothing
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value)
    return value  # markup from this package's own templates and chart helpers, numbers


_NUMBERS = frozenset((int, float, bool, type(None)))  # a page's data is mostly these: passed through as they are


def visible_data(value: Any) -> Any:
    """A page script's data with every string, keys included, as `visible` shows it: the script
    looks names up by the same keys it shows."""
    kind = type(value)
    if kind is str:
        return visible(value)
    if kind is dict:
        return {visible(key) if type(key) is str else key: item if type(item) in _NUMBERS else visible_data(item)
                for key, item in value.items()}
    if kind is list or kind is tuple:
        return [item if type(item) in _NUMBERS else visible_data(item) for item in value]
    return visible(value) if isinstance(value, str) else value
