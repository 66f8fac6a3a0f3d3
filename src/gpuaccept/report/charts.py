"""The page every report is drawn on, its colours and its charts (report.html's, and any page of
Plotly charts: render_page).

The pages are rendered from Jinja2 templates (`templates/`, autoescaping on). Charts are Plotly
figures, built here with plotly.py and drawn in the browser by plotly.js. Plotly was chosen for
what the burn-in telemetry needs: hover values, zoom and pan, and hours of 1 Hz samples per GPU,
from a library that is kept by others, with the JS bundle that matches the Python side shipped
in the same wheel (nothing vendored here to keep in step). Its cost is size: plotly.min.js is
about 4.8 MB, inlined once per page (no CDN, no network: the page works from file:// on a machine
with no network), so the report of a full 4xH200 run grows from 86 KB to about 4.9 MB. A page
without charts (facts with no measurements) carries no JS at all. The plotly.js "basic" partial
bundle of the same version (1.2 MB, scatter, bar and pie only) would save 3.6 MB a page, but
would have to be vendored here and upgraded in step with plotly.py, and has no WebGL traces to
fall back on should telemetry outgrow SVG lines (8 GPUs x 12 h at 1 Hz still draw in seconds).

Each chart is a `<div>` and a `<script type="application/json" class="chart-figure">` holding the
figure (its data traces with the measured values, the floors and the peak); a few lines of script
at the end of the page hand each figure to Plotly. The figures are data a test can read.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Mapping, Sequence

from gpuaccept.errors import visible
from gpuaccept.report.templating import templates

PASS, FAIL, ERROR, SKIP = "#1a7f37", "#cf222e", "#bc4c00", "#8c959f"
MARGINAL = "#d4a72c"
UNJUDGED = "#f6f8fa"
# passing heat map cells: from this green at the floor to PASS at the physical peak
PASS_AT_FLOOR = (209, 245, 220)
PASS_AT_PEAK = (26, 127, 55)
PASS_UNSCALED = 0.5  # where a pass has no floor or peak to place it between
OUTCOME_COLOURS = {"passed": PASS, "failed": FAIL, "error": ERROR, "skipped": SKIP, "not_applicable": SKIP}
SERIES = ["#0969da", "#8250df", "#bf3989", "#1a7f37", "#bc4c00", "#57606a", "#0a7b83", "#953800"]
PEAK = "#57606a"
GPU_SERIES = ["#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#7f7f7f", "#e377c2", "#bcbd22", "#8c564b"]  # no red: red is the limit
CHART_CLASS = "chart-figure"  # the script element that holds a figure; a page with one carries plotly.js
# no plotly.com logo link; no lasso or box select, which these charts have no use for
CHART_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}
LINE_MARKER = "line-ew"  # a short horizontal tick: a floor at one size or one DDP setting


def page_templates():
    environment = templates()  # report/templating.py: autoescaped, each value shown with its invisible characters escaped
    environment.globals.update(chart_class=CHART_CLASS, colours={"fail": FAIL})
    return environment


@functools.cache
def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def ready_to_draw(template: str) -> None:
    """What a page's first drawing costs besides its data, paid now (by a thread while a run
    measures: a second or more at a run's end otherwise): jinja and plotly imported, the page's
    templates compiled, plotly.js read."""
    import plotly.graph_objects as go

    for kind in ("Figure", "Scatter", "Bar"):
        getattr(go, kind)  # plotly imports each class's module as it is first asked for
    environment = page_templates()
    for name in (template, "page.html.j2"):
        environment.get_template(name)
    _plotly_js()


def render_page(title: str, body: str) -> str:
    """A whole page around `body` (HTML from this module's templates and chart helpers): the
    report's style, and plotly.js inlined once where the body holds a chart."""
    has_charts = f"class='{CHART_CLASS}'" in body
    return page_templates().get_template("page.html.j2").render(title=title, body=body, plotly_js=_plotly_js() if has_charts else None)


# -- charts ---------------------------------------------------------------------------------------------


def chart_html(chart_id: str, figure, *, height: int = 260) -> str:
    """The HTML of one Plotly figure: its div and its figure as JSON, for a page from render_page."""
    if not re.fullmatch(r"[A-Za-z][\w-]*", chart_id):
        raise ValueError(f"chart id {chart_id!r}: letters, digits, '_' and '-' only, starting with a letter")
    spec = {**figure.to_dict(), "config": CHART_CONFIG}
    return page_templates().get_template("chart.html.j2").render(chart_id=chart_id, figure=spec, height=height)


def chart_layout(**settings) -> dict:
    layout = {
        "template": "none",
        "font": {"family": "system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif", "size": 11, "color": "#1f2328"},
        "margin": {"l": 56, "r": 12, "t": 30, "b": 44},  # the top margin holds the zoom buttons
        "paper_bgcolor": "#fff",
        "plot_bgcolor": "#fff",
        "hovermode": "closest",
        "hoverlabel": {"align": "left"},
        "dragmode": "zoom",
        "showlegend": True,
        "legend": {"orientation": "h", "x": 0, "y": -0.28, "font": {"size": 10}},
    }
    layout.update(settings)
    return layout


def chart_axis(title: str, **settings) -> dict:
    return {"title": {"text": title, "font": {"size": 11}}, "gridcolor": "#eaeef2", "zeroline": False, "linecolor": "#d0d7de", **settings}


def timeseries_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    *,
    title: str,
    unit: str,
    limit: float | None = None,
    limit_label: str = "limit",
    chart_id: str = "timeseries",
    note: str = "",
    height: int = 320,
    span_s: float | None = None,
    markers: bool = False,
    marks: Sequence[tuple[float, str]] = (),
) -> str:
    """A per-GPU time series (telemetry: clocks, temperature, power over a burn-in), one line per
    GPU, with a dashed limit line, the values of every GPU at the cursor's time on hover, and zoom.

    `series` is {gpu: [(t, value), ...]}, t in seconds since the start; the time axis reads in s,
    min or h by the span (`span_s` where charts of one run must read alike, else the data's own).
    `markers` draws each point: a series of rounds may hold a single one, which a line alone would
    not show. `marks` are moments drawn as dotted vertical lines with their labels (where the
    sustained load began and ended, where each GPU reached thermal steady state). Returns the chart's
    HTML (a card with its title), for a page from render_page, which inlines plotly.js once however
    many charts the page holds."""
    import plotly.graph_objects as go

    times = [t for points in series.values() for t, _ in points]
    span = span_s if span_s is not None else (max(times) - min(times)) if times else 0.0
    scale, time_unit, digits = (3600.0, "h", 4) if span >= 2 * 3600 else (60.0, "min", 2) if span >= 120 else (1.0, "s", 1)

    def at(t: float) -> float:
        return round(t / scale, 6) if scale != 1.0 else t  # 6 decimals of an hour are 3.6 ms: exact enough, and short

    figure = go.Figure(layout=chart_layout(
        # with `span_s`, every chart of a run spans the same time (a single round still sits where it ran)
        xaxis=chart_axis(f"time since start ({time_unit})", hoverformat=f".{digits}f", **({"range": [0, at(span)]} if span_s else {})),
        yaxis=chart_axis(f"{title} ({unit})" if unit else title),
        legend={"orientation": "h", "x": 0, "y": -0.3, "font": {"size": 10}},
        margin={"l": 56, "r": 12, "t": 30, "b": 60},  # room for the time axis's title above the legend
        hovermode="x unified",
    ))
    for index, (gpu, points) in enumerate(series.items()):
        ordered = sorted(points)
        name = plotly_text(str(gpu))
        figure.add_trace(go.Scatter(
            name=name, x=[at(t) for t, _ in ordered], y=[value for _, value in ordered],
            mode="lines+markers" if markers else "lines", meta="series",
            line={"color": GPU_SERIES[index % len(GPU_SERIES)], "width": 1},
            hovertemplate=f"{name}: %{{y:.4g}} {unit}<extra></extra>",
        ))
    if limit is not None and times:
        label = f"{limit_label} {limit:g} {unit}".rstrip()
        figure.add_trace(go.Scatter(  # last, so that it is drawn over the lines it bounds
            name=label, x=[at(min(times)), at(max(times))], y=[limit, limit], mode="lines", meta="limit",
            line={"color": FAIL, "width": 2.5, "dash": "dash"}, hovertemplate=f"{label}<extra></extra>",
        ))
    for height_step, (t, label) in enumerate(sorted(marks)):
        figure.add_vline(
            x=at(t), line={"color": "#57606a", "width": 1, "dash": "dot"},
            annotation={"text": plotly_text(label), "font": {"size": 9}, "yshift": -12 * (height_step % 3)},
            # a mark near the end is labelled on its left, inside the chart
            annotation_position="top left" if span and t - min(times, default=0.0) > 0.9 * span else "top right",
        )
    return page_templates().get_template("card.html.j2").render(title=title, note=note, content=chart_html(chart_id, figure, height=height))


def plotly_text(text: str) -> str:
    """Text for a chart's label: Plotly reads `<b>`, `<br>` and `<a href>` in labels as markup of
    its own and turns `&lt;` back into `<`, so a name from a record is written with its markup
    characters as entities: it is shown as the text it is."""
    return html.escape(visible(text), quote=False)
