"""report.html as a reader gets it: one self-contained file that works with no network, charts whose
measured values and floors are data (with hover values and zoom), text from results.json escaped,
results of older runs still rendered; and the per-GPU time-series chart the burn-in telemetry uses.
Read from real 4xH200 runs (examples/results/), healthy and with NCCL_P2P_DISABLE=1."""

from __future__ import annotations

import math
import re

import pytest

from gpuaccept.facts.measurements import Measurements
from gpuaccept.facts.run_record import RunRecord, load_results
from gpuaccept.facts.verdict import AtLeast, Verdict
from gpuaccept.report.charts import FAIL, PASS, SERIES, render_page, timeseries_chart
from gpuaccept.report.html import render_html
from tests import browser
from tests.helpers import ROOT, results_data, run_record, with_verdict, with_verdicts
from tests.report_page import PLOTLY_BANNER, Page, traces, values

RESULTS = ROOT / "examples" / "results"
HEALTHY = RESULTS / "h200x4.json"
NO_P2P = RESULTS / "h200x4-nccl-p2p-disabled.json"
NEWER_KEYS = ("criterion", "better", "marginal", "attempts", "transient", "final")


def verdicts_of(record: RunRecord, check: str) -> list[Verdict]:
    return [v for v in record.verdicts() if v.check == check]


def of_check(check: str):
    return lambda test: test.verdict is not None and test.verdict.check == check


def with_floors(record: RunRecord) -> RunRecord:
    """The run as results.json records it now: each busbw and DDP scaling criterion as data."""
    busbw = [t.id for t in record.tests if of_check("busbw")(t)]
    for index, test_id in enumerate(busbw):
        floor = AtLeast(300.0 + index, "GB/s").model_dump()
        record = with_verdict(record, test_id, criterion=floor, better="higher", marginal=False, attempts=[], transient=False, final=False)
    return with_verdicts(record, of_check("ddp_scaling"), criterion=AtLeast(0.8).model_dump())


# -- one file, nothing fetched -------------------------------------------------------------------------


@pytest.mark.parametrize("run", [HEALTHY, NO_P2P], ids=["healthy", "p2p-disabled"])
def test_the_page_is_one_self_contained_file(run):
    page = render_html(load_results(run))
    parsed = Page(page)
    # nothing is loaded from anywhere: no src or href at all, no stylesheet, frame or image
    assert not [(tag, attrs) for tag, attrs in parsed.found if {"src", "href"} & set(attrs)]
    assert not {"link", "iframe", "img", "object", "embed"} & {tag for tag, _ in parsed.found}
    assert parsed.plotly_bundles() == 1  # inlined once, however many charts
    assert len(parsed.charts()) == 5 + 1  # busbw per collective, DDP efficiency
    outside_plotly = "".join(text for _, text in parsed.scripts if PLOTLY_BANNER not in text[:200])
    outside_plotly += re.sub(r"<script>.*?</script>", "", page, flags=re.S)
    assert "http" not in outside_plotly and "url(" not in outside_plotly and "@import" not in outside_plotly
    assert all(figure["config"]["displaylogo"] is False for figure in parsed.charts().values())  # no link to plotly.com
    assert render_html(load_results(run)) == page  # the same run gives the same page


def test_a_page_without_charts_carries_no_javascript():
    document = load_results(HEALTHY)
    document = document.with_facts(document.facts.model_copy(update={"measurements": Measurements()}))  # recorded without --measure
    parsed = Page(render_html(document))
    assert parsed.scripts == [] and parsed.charts() == {}
    assert {"summary", "links", "tests"} <= parsed.ids() and not {"busbw", "pairs", "copies", "ddp"} & parsed.ids()


def test_text_from_results_json_is_escaped():
    data = results_data(NO_P2P)
    data["environment"]["host"] = "<script>alert('host')</script>"
    data["tests"][0]["message"] = "<img src=x onerror=alert(1)> & 'quoted'"
    page = render_html(run_record(data))
    parsed = Page(page)
    assert not [attrs for tag, attrs in parsed.found if tag == "img"]
    assert "&lt;script&gt;alert(&#39;host&#39;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; &#39;quoted&#39;" in page


# -- charts: values and floors as data, hover values, zoom ---------------------------------------------


def test_busbw_charts_carry_measured_values_floors_and_peak_as_data():
    document = with_floors(load_results(HEALTHY))
    document = with_verdict(document, "test_busbw[all_reduce-1GiB]", outcome="failed", attempts=[301.2, 299.5, 298.0])
    charts = Page(render_html(document)).charts()
    sweep = document.facts.measurements.collectives.results
    figure = charts["busbw-all_reduce"]
    measured = sorted((r.size_bytes, r.busbw_GBps) for r in sweep if r.collective == "all_reduce")
    assert list(zip(values(figure, "measured", "x"), values(figure, "measured"), strict=True)) == measured  # exact, as measured
    busbw = verdicts_of(document, "busbw")
    floors = {v.context["size_bytes"]: v.limit for v in busbw if v.subject.startswith("all_reduce ")}
    assert dict(zip(values(figure, "floor", "x"), values(figure, "floor"), strict=True)) == floors
    assert values(figure, "peak") == [478.12, 478.12] and traces(figure, "peak")[0]["name"] == "peak 478.12 GB/s"
    # each point coloured by its verdict, its values on hover
    (line,) = traces(figure, "measured")
    assert line["marker"]["color"] == [PASS, FAIL, PASS]
    assert line["hoverinfo"] == "text" and line["hovertext"][1] == (
        f"all_reduce 1 GiB: busbw 353.3 GB/s<br>failed<br>floor {floors[1 << 30]:g} GB/s<br>74% of the 478.1 GB/s peak"
        "<br>attempts 301.2, 299.5, 298"
    )
    assert figure["layout"]["dragmode"] == "zoom" and figure["layout"]["hovermode"] == "closest"
    assert figure["layout"]["xaxis"]["type"] == "log" and figure["layout"]["xaxis"]["ticktext"] == ["256MiB", "1GiB", "4GiB"]


def test_ddp_chart_carries_efficiency_floors_and_verdicts_as_data():
    document = with_floors(load_results(NO_P2P))
    figure = Page(render_html(document)).charts()["ddp-efficiency"]
    measured = document.facts.measurements
    (bars,) = traces(figure, "efficiency")
    expected = {r.case: measured.ddp_efficiency(r.world, r.batch, r.accumulation) for r in measured.ddp.results}
    assert dict(zip(bars["x"], bars["y"], strict=True)) == expected
    outcome = {v.subject: v.outcome for v in verdicts_of(document, "ddp_scaling")}
    colours = {PASS: "passed", FAIL: "failed", SERIES[0]: None}
    assert [colours[colour] for colour in bars["marker"]["color"]] == [outcome.get(case) for case in bars["x"]]
    assert outcome["4gpu-bs8"] == "failed"
    hover = dict(zip(bars["x"], bars["hovertext"], strict=True))
    assert hover["4gpu-bs8"].startswith("4gpu-bs8: efficiency 0.498, failed<br>floor 0.8<br>70.8 samples/s per GPU, 142.1 on 1 GPU")
    assert values(figure, "floor", "x") == [case for case in bars["x"] if case in outcome] and set(values(figure, "floor")) == {0.8}


def test_a_results_json_of_an_older_run_still_renders():
    assert not any(set(NEWER_KEYS) & set(t.get("verdict") or {}) for t in results_data(NO_P2P)["tests"])  # as that run wrote it
    older = load_results(NO_P2P)
    newer = with_floors(older)
    stripped = newer.model_dump(mode="json")
    for test in stripped["tests"]:
        for key in NEWER_KEYS:
            (test.get("verdict") or {}).pop(key, None)
    for document in (older, run_record(stripped, "newer keys taken out")):
        page = render_html(document)
        parsed = Page(page)
        # that run measured no copies
        assert {"summary", "causes", "coverage", "links", "busbw", "pairs", "pair-matrix", "ddp", "tests"} <= parsed.ids()
        charts = parsed.charts()
        assert sum(len(values(figure, "measured")) for chart_id, figure in charts.items() if chart_id.startswith("busbw-")) == 15
        # no criterion recorded: each floor is read from the rule its verdict wrote as text (">= 315 GB/s")
        written = {float(t.verdict.expected.split()[1]) for t in older.tests if t.verdict is not None and t.verdict.check == "busbw"}
        drawn = {floor for chart_id, figure in charts.items() if chart_id.startswith("busbw-") for floor in values(figure, "floor")}
        assert drawn == written and len(drawn) > 1
        scaling = {float(t.verdict.expected.split()[1]) for t in older.tests if t.verdict is not None and t.verdict.check == "ddp_scaling"}
        assert set(values(charts["ddp-efficiency"], "floor")) == scaling
        assert "<b>0</b> transient</span>" in page and "FAIL: 25 test(s) failed<" in page
    assert sum(len(values(f, "floor")) for f in Page(render_html(newer)).charts().values()) == 15 + 4


# -- the per-GPU time series of the burn-in --------------------------------------------------------------


def synthetic_temperatures(gpus: int = 4, seconds: int = 3 * 3600) -> dict[str, list[tuple[float, float]]]:
    """1 Hz samples: each GPU warms from 40 C towards its own plateau, gpu3 past the limit."""
    return {
        f"gpu{g}": [(float(t), round(40 + (38 + 3 * g) * (1 - math.exp(-t / 600)), 2)) for t in range(seconds)]
        for g in range(gpus)
    }


def test_timeseries_chart_of_a_synthetic_series():
    series = synthetic_temperatures()
    chart = timeseries_chart(series, title="GPU temperature", unit="C", limit=85, limit_label="max", chart_id="temperature")
    page = render_page("burn-in", chart + timeseries_chart({"gpu0": [(0, 1.0), (60, 2.0)]}, title="other", unit="W", chart_id="other"))
    parsed = Page(page)
    assert parsed.plotly_bundles() == 1 and set(parsed.charts()) == {"temperature", "other"}
    figure = parsed.charts()["temperature"]
    lines = traces(figure, "series")
    assert [line["name"] for line in lines] == ["gpu0", "gpu1", "gpu2", "gpu3"]
    for line in lines:
        assert line["y"] == [value for _, value in series[line["name"]]]  # every sample, as given
        assert line["x"][0] == 0 and line["x"][-1] == round(10799 / 3600, 6)  # three hours read in hours
        assert line["hovertemplate"] == f"{line['name']}: %{{y:.4g}} C<extra></extra>"
    (limit,) = traces(figure, "limit")
    assert limit["y"] == [85, 85] and limit["name"] == "max 85 C" and limit["x"] == [0, round(10799 / 3600, 6)]
    layout = figure["layout"]
    assert layout["hovermode"] == "x unified" and layout["dragmode"] == "zoom"
    assert layout["xaxis"]["title"]["text"] == "time since start (h)" and layout["yaxis"]["title"]["text"] == "GPU temperature (C)"
    assert "<b>GPU temperature</b>" in page
    # a minute reads in seconds, without a limit there is no limit line
    chart = timeseries_chart({"gpu0": [(0, 1.0), (59, 2.0)]}, title="clock", unit="MHz", chart_id="clock")
    short = Page(render_page("short", chart)).charts()["clock"]
    assert short["layout"]["xaxis"]["title"]["text"] == "time since start (s)" and not traces(short, "limit")
    with pytest.raises(ValueError, match="chart id"):
        timeseries_chart(series, title="t", unit="C", chart_id="two words")


# -- in a browser ---------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.browser
def test_headless_chromium_draws_every_chart_from_file(tmp_path):
    report = tmp_path / "report.html"
    report.write_text(render_html(load_results(HEALTHY)), encoding="utf-8")
    dom = browser.dom(report, tmp_path)
    drawn = re.findall(r"<div class=\"chart js-plotly-plot\" id=\"([\w-]+)\"", dom)
    assert sorted(drawn) == sorted(Page(report.read_text()).charts())
    assert dom.count("class=\"main-svg\"") >= 2 * len(drawn)  # plotly drew each one
