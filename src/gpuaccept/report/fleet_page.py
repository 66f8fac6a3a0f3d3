"""The fleet page: one self-contained HTML file, hosts x test families as a heat map (failed,
outlier, not judged, transient, marginal, passed, and skipped where the profile asked nothing: a
family nothing judged is never painted as passed), sortable by any column, and a host's history
drawn when its row is clicked. It fits a 1400-px window with the ten families of a full run: the
family names stand upright, and the history panel goes below the table where it has no room beside
it. The data is one JSON object inside the page, drawn by the script beside it (templates/fleet.js):
the rows of 10,000 hosts are built by the browser, not written out as markup.

The page is rendered by report/templating.py's one rule: the data goes in through `|tojson`, each
of its strings shown with its invisible characters escaped, and the script puts every string into
the page as text.
"""

from __future__ import annotations

from typing import Any

from gpuaccept.report.templating import templates, visible_data

STATES = ("failed", "outlier", "not_judged", "transient", "marginal", "passed", "skipped")


def render_fleet_page(data: dict[str, Any]) -> str:
    return templates().get_template("fleet.html.j2").render(summary=data["summary"], states=STATES, data=visible_data(data))
