"""report.html read back as a browser reads it: its elements, its scripts, and the Plotly figures
its charts hold as data (a `<script type="application/json" class="chart-figure">` beside each
chart's div)."""

from __future__ import annotations

import json
from html.parser import HTMLParser

PLOTLY_BANNER = "* plotly.js v"  # the first lines of the plotly.js bundle


class Page(HTMLParser):
    def __init__(self, text: str):
        super().__init__()
        self.found: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self._script: tuple[dict, list[str]] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.found.append((tag, attrs))
        if tag == "script":
            self._script = (attrs, [])

    def handle_data(self, data):
        if self._script is not None:
            self._script[1].append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            self.scripts.append((self._script[0], "".join(self._script[1])))
            self._script = None

    def count(self, tag, **attrs) -> int:
        return sum(1 for t, a in self.found if t == tag and all(a.get(k) == v for k, v in attrs.items()))

    def ids(self) -> set[str]:
        return {a["id"] for _, a in self.found if a.get("id")}

    def charts(self) -> dict[str, dict]:
        """Each chart's figure by the id of the div it is drawn in."""
        return {attrs["data-for"]: json.loads(text) for attrs, text in self.scripts if attrs.get("class") == "chart-figure"}

    def plotly_bundles(self) -> int:
        return sum(1 for _, text in self.scripts if PLOTLY_BANNER in text[:200])


def traces(figure: dict, meta: str) -> list[dict]:
    """The traces of one kind in a figure: measured, floor, peak, efficiency, limit."""
    return [trace for trace in figure["data"] if trace.get("meta") == meta]


def values(figure: dict, meta: str, axis: str = "y") -> list:
    return [value for trace in traces(figure, meta) for value in trace[axis]]
