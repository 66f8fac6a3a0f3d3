"""report.html: one self-contained page (inline CSS and SVG, no scripts, no network) from results.json.

Failures first; then the link matrix against the expected one, bus bandwidth against size per
collective with floors and the physical peak, the pairwise and peer-copy bandwidth matrices as
heat maps, DDP efficiency, exposed communication and the P2P A/B per world size and batch, and
every test with its numbers.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from typing import Any

from gpuaccept.facts.model import Measurements
from gpuaccept.report.summary import in_layer_order, marginal_tests, transient_tests
from gpuaccept.vocabulary.display import show
from gpuaccept.vocabulary.sizes import format_size

PASS, FAIL, ERROR, SKIP = "#1a7f37", "#cf222e", "#bc4c00", "#8c959f"
MARGINAL = "#d4a72c"
UNJUDGED = "#f6f8fa"
# passing heat map cells: from this green at the floor to PASS at the physical peak
PASS_AT_FLOOR = (209, 245, 220)
PASS_AT_PEAK = (26, 127, 55)
PASS_UNSCALED = 0.5  # where a pass has no floor or peak to place it between
OUTCOME_COLOURS = {"passed": PASS, "failed": FAIL, "error": ERROR, "skipped": SKIP, "not_applicable": SKIP}
SERIES = ["#0969da", "#8250df", "#bf3989", "#1a7f37", "#bc4c00", "#57606a"]

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
main{max-width:1180px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.meta{color:#59636e}.banner{border-radius:8px;padding:14px 18px;color:#fff;font-size:18px;font-weight:600;margin:16px 0}
.counts span{display:inline-block;margin-right:14px}
table{border-collapse:collapse;background:#fff;width:100%}th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eaeef2}td.num{text-align:right;font-variant-numeric:tabular-nums}
.outcome{font-weight:600}.card{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:12px;margin:10px 0}
.grid{display:flex;flex-wrap:wrap;gap:14px}.matrix td{text-align:center;min-width:54px}
.small{font-size:12px;color:#59636e}.mark{font-size:11px;font-weight:600;border-radius:4px;padding:0 4px;color:#fff}
.mark.marginal{background:#9a6700}.mark.transient{background:#8250df}svg text{font:11px system-ui,sans-serif;fill:#1f2328}
.legend{font-size:12px;color:#59636e;margin:6px 0}.legend span{display:inline-block;margin-right:12px}
.swatch{display:inline-block;width:22px;height:12px;border:1px solid #d0d7de;vertical-align:middle;margin-right:4px}
"""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def render_html(document: dict) -> str:
    tests = document.get("tests", [])
    verdicts = [t["verdict"] for t in tests if t.get("verdict")]
    facts = document.get("facts", {})
    parts = [_header(document), _failures(tests), _links(facts, verdicts), _busbw(facts, verdicts), _pairs(facts, verdicts),
             _copies(facts, verdicts), _ddp(facts, verdicts), _all_tests(tests)]
    title = f"gpu-accept: {document['environment'].get('host')} against {document['run']['profile']['name']}"
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{esc(title)}</title>"
        f"<style>{CSS}</style></head><body><main>{''.join(p for p in parts if p)}</main></body></html>\n"
    )


def _header(document: dict) -> str:
    run, environment, summary = document["run"], document["environment"], document.get("summary", {})
    failed = summary.get("failed", 0) + summary.get("error", 0)
    if not document.get("complete"):
        banner, colour = "INCOMPLETE: the run stopped before its end; what finished is below", ERROR
    elif failed:
        banner, colour = f"FAIL: {failed} test(s) did not pass", FAIL
    else:
        banner, colour = "PASS: every check passed", PASS
    gpus = f"{environment.get('gpu_count')}x {environment.get('gpu_model')}"
    software = ", ".join(f"{k} {environment[k]}" for k in ("driver", "cuda_driver", "nccl", "torch") if environment.get(k))
    counts = "".join(f"<span><b>{summary.get(k, 0)}</b> {k}</span>" for k in ("passed", "failed", "error", "skipped"))
    tests = document.get("tests", [])
    counts += (
        f"<span id='count-transient' title='missed at first, passed when measured again'><b>{len(transient_tests(tests))}</b> transient</span>"
        f"<span id='count-marginal' title=\"passed within the profile's marginal band of its limit\"><b>{len(marginal_tests(tests))}</b> marginal</span>"
    )
    return (
        f"<h1 id='summary'>{esc(environment.get('host'))}: {esc(gpus)}</h1>"
        f"<div class='meta'>profile <b>{esc(run['profile']['name'])}</b> ({esc(run['profile']['path'])}) &middot; {esc(software)}"
        f" &middot; started {esc(run.get('started_at'))}, finished {esc(run.get('finished_at') or '-')}"
        f" &middot; gpu-accept {esc(run.get('tool_version'))}</div>"
        f"<div class='banner' id='status' style='background:{colour}'>{esc(banner)}</div><div class='counts'>{counts}</div>"
    )


def _failures(tests: list[dict]) -> str:
    # root causes first: a missing GPU (inventory) before the links, copies and DDP settings it fails
    bad = in_layer_order([t for t in tests if t["outcome"] in ("failed", "error")])
    if not bad:
        return ""
    rows = "".join(
        f"<tr><td class='outcome' style='color:{OUTCOME_COLOURS[t['outcome']]}'>{esc(t['outcome'])}</td><td>{esc(t['id'])}</td>"
        f"<td>{esc(t.get('message'))}</td></tr>"
        for t in bad
    )
    return (
        "<h2 id='failures'>Failures</h2><div class='small'>in layer order: inventory, topology, P2P, NCCL, copies, DDP, baseline</div>"
        f"<table><tr><th>outcome</th><th>test</th><th>message</th></tr>{rows}</table>"
    )


def _by_check(verdicts: list[dict], check: str) -> dict[str, dict]:
    return {v["subject"]: v for v in verdicts if v["check"] == check}


def _links(facts: dict, verdicts: list[dict]) -> str:
    count = len(facts.get("gpus", []))
    if count < 2:
        return ""
    judged = _by_check(verdicts, "link_type")
    measured = {tuple(link["gpus"]): link["link_type"] for link in facts.get("links", [])}
    header = "".join(f"<th>GPU{j}</th>" for j in range(count))
    rows = []
    for i in range(count):
        cells = []
        for j in range(count):
            if i == j:
                cells.append("<td style='background:#eaeef2'>X</td>")
                continue
            key = (min(i, j), max(i, j))
            value = measured.get(key, "?")
            value = value if isinstance(value, str) else "n/a"
            verdict = judged.get(f"gpu{key[0]}-gpu{key[1]}")
            colour = OUTCOME_COLOURS.get(verdict["outcome"], SKIP) if verdict else SKIP
            expected = verdict["expected"].removeprefix("== ") if verdict and verdict["expected"] else "not stated"
            cells.append(
                f"<td style='background:{colour}22;border-color:{colour}' title='expected {esc(expected)}'>"
                f"<b>{esc(value)}</b><div class='small'>exp. {esc(expected)}</div></td>"
            )
        rows.append(f"<tr><th>GPU{i}</th>{''.join(cells)}</tr>")
    return (
        "<h2 id='links'>Link matrix</h2><div class='small'>as nvidia-smi topo -m shows it, against the profile; "
        f"green matches, red differs</div><table class='matrix' style='width:auto'><tr><th></th>{header}</tr>{''.join(rows)}</table>"
    )


def _busbw(facts: dict, verdicts: list[dict]) -> str:
    sweep = (facts.get("measurements") or {}).get("collectives")
    if not sweep or not sweep.get("results"):
        return ""
    judged = [v for v in verdicts if v["check"] == "busbw"]
    floors: dict[str, dict[int, float]] = defaultdict(dict)
    peak = None
    for v in judged:
        collective = v["subject"].split()[0]
        size = v["context"].get("size_bytes")
        floor = limit_of(v)
        if size and floor is not None:
            floors[collective][size] = floor
        peak = v["context"].get("peak_GBps", peak)
    outcomes = {(v["subject"].split()[0], v["context"].get("size_bytes")): v["outcome"] for v in judged}
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for r in sweep["results"]:
        series[r["collective"]].append((r["size_bytes"], r["busbw_GBps"]))
    charts = []
    for collective, points in series.items():
        points.sort()
        charts.append(
            "<div class='card'><div><b>" + esc(collective) + "</b></div>"
            + _line_chart(points, floors.get(collective, {}), peak, {p[0]: outcomes.get((collective, p[0])) for p in points})
            + "</div>"
        )
    failures = "".join(f"<li>{esc(f['message'])}</li>" for f in sweep.get("failures", []))
    return (
        f"<h2 id='busbw'>NCCL bus bandwidth</h2><div class='small'>{sweep['ranks']} ranks, backend {esc(sweep['backend'])}"
        f"{', NCCL ' + esc(sweep['nccl_version']) if sweep.get('nccl_version') else ''}; points are measured busbw (nccl-tests definition), red ticks the profile's "
        f"floors, the dashed line the physical peak</div>"
        + (f"<ul style='color:{FAIL}'>{failures}</ul>" if failures else "")
        + f"<div class='grid'>{''.join(charts)}</div>"
    )


def limit_of(verdict: dict) -> float | None:
    """The number a verdict's criterion compares against (a floor or a ceiling), where it has one."""
    limit = (verdict.get("criterion") or {}).get("limit")
    return float(limit) if isinstance(limit, (int, float)) and not isinstance(limit, bool) else None


def _line_chart(points, floors: dict[int, float], peak: float | None, outcomes: dict, width=340, height=220) -> str:
    left, right, top, bottom = 46, 12, 12, 34
    sizes = sorted({p[0] for p in points} | set(floors))
    top_value = max([v for _, v in points] + list(floors.values()) + ([peak] if peak else []) + [1.0]) * 1.08
    low, high = math.log2(sizes[0]), math.log2(sizes[-1])
    span = (high - low) or 1.0

    def x(size):
        return left + (math.log2(size) - low) / span * (width - left - right) if len(sizes) > 1 else (left + width - right) / 2

    def y(value):
        return top + (1 - value / top_value) * (height - top - bottom)

    out = [f"<svg width='{width}' height='{height}' role='img'>"]
    for tick in _ticks(top_value):
        out.append(f"<line x1='{left}' x2='{width - right}' y1='{y(tick):.1f}' y2='{y(tick):.1f}' stroke='#eaeef2'/>")
        out.append(f"<text x='{left - 4}' y='{y(tick) + 4:.1f}' text-anchor='end'>{tick:g}</text>")
    for size in sizes:
        out.append(f"<text x='{x(size):.1f}' y='{height - bottom + 14}' text-anchor='middle'>{format_size(size)}</text>")
    out.append(f"<text x='{left}' y='{height - 4}'>GB/s against message size</text>")
    if peak:
        out.append(f"<line class='peak' x1='{left}' x2='{width - right}' y1='{y(peak):.1f}' y2='{y(peak):.1f}' stroke='#57606a' stroke-dasharray='5 4'/>")
        out.append(f"<text x='{width - right}' y='{y(peak) - 4:.1f}' text-anchor='end'>peak {peak:g}</text>")
    for size, floor in floors.items():
        out.append(f"<line class='floor' x1='{x(size) - 12:.1f}' x2='{x(size) + 12:.1f}' y1='{y(floor):.1f}' y2='{y(floor):.1f}' stroke='{FAIL}' stroke-width='2'/>")
    path = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in points)
    out.append(f"<polyline points='{path}' fill='none' stroke='{SERIES[0]}' stroke-width='2'/>")
    for size, value in points:
        colour = OUTCOME_COLOURS.get(outcomes.get(size) or "", SERIES[0])
        out.append(f"<circle class='point' cx='{x(size):.1f}' cy='{y(value):.1f}' r='4' fill='{colour}'><title>{format_size(size)}: {value:.1f} GB/s</title></circle>")
    out.append("</svg>")
    return "".join(out)


def _ticks(top: float) -> list[float]:
    step = 10 ** math.floor(math.log10(top / 4)) if top > 0 else 1
    for factor in (1, 2, 5, 10):
        if top / (step * factor) <= 6:
            step *= factor
            break
    return [step * i for i in range(int(top / step) + 1)]


def _heatmap(title: str, anchor: str, count: int, values: dict[tuple[int, int], float], judged: dict[tuple[int, int], dict], note: str) -> str:
    """A GPU x GPU matrix, each cell coloured by its own verdict: red below the floor, amber within
    the marginal band, green from the floor (light) to the physical peak (dark); grey where no check
    judged it. Never relative to the machine itself: pairs that all run at 23 GB/s are all red."""
    if not values:
        return ""
    header = "".join(f"<th>GPU{j}</th>" for j in range(count))
    rows = []
    for i in range(count):
        cells = []
        for j in range(count):
            value = values.get((i, j))
            if value is None:
                cells.append("<td style='background:#eaeef2'>-</td>")
                continue
            state, background, ink, explained = heat_cell(value, judged.get((i, j)))
            cells.append(
                f"<td class='heat' data-verdict='{state}' style='background:{background};color:{ink}' title='{esc(explained)}'>{_figure(value)}</td>"
            )
        rows.append(f"<tr><th>GPU{i}</th>{''.join(cells)}</tr>")
    return (
        f"<div class='card'><b>{esc(title)}</b><div class='small'>{esc(note)}</div>"
        f"<table class='matrix' id='{anchor}' style='width:auto'><tr><th></th>{header}</tr>{''.join(rows)}</table></div>"
    )


def heat_cell(value: float, verdict: dict | None) -> tuple[str, str, str, str]:
    """(state, background, text colour, tooltip) of one heat map cell, from its verdict's outcome,
    criterion limit, marginal mark and the physical peak in its context."""
    if not verdict or verdict.get("outcome") not in ("passed", "failed", "error"):
        return "none", UNJUDGED, "#1f2328", f"{show(value)} GB/s, not judged"
    limit = limit_of(verdict)
    peak = (verdict.get("context") or {}).get("peak_GBps")
    peak = float(peak) if isinstance(peak, (int, float)) and not isinstance(peak, bool) and peak > 0 else None
    against = ", ".join(part for part in (f"floor {show(limit)}" if limit is not None else "", f"peak {show(peak)}" if peak else "") if part)
    explained = f"{show(value)} GB/s, {verdict['outcome']}" + (f" ({against})" if against else "")
    if verdict["outcome"] != "passed":
        return "failed", FAIL, "#fff", explained
    if verdict.get("marginal") is True:
        return "marginal", MARGINAL, "#1f2328", explained + ", marginal"
    low = limit if limit is not None and verdict.get("better") != "lower" else 0.0
    share = (value - low) / (peak - low) if peak and peak > low else PASS_UNSCALED
    share = min(max(share, 0.0), 1.0)
    red, green, blue = (round(a + (b - a) * share) for a, b in zip(PASS_AT_FLOOR, PASS_AT_PEAK))
    return "passed", f"rgb({red},{green},{blue})", "#fff" if share > 0.5 else "#1f2328", explained


def _heat_legend() -> str:
    floor_to_peak = ", ".join(f"rgb{colour}" for colour in (PASS_AT_FLOOR, PASS_AT_PEAK))
    swatches = (
        (FAIL, "below the floor (failed)"),
        (MARGINAL, "passed within the marginal band"),
        (f"linear-gradient(90deg,{floor_to_peak})", "passed: from the floor (light) to the physical peak (dark)"),
        (UNJUDGED, "no verdict"),
    )
    items = "".join(f"<span><i class='swatch' style='background:{colour}'></i>{esc(text)}</span>" for colour, text in swatches)
    return f"<div class='legend heat-legend'>{items}</div>"


def _figure(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def _judged_pairs(verdicts: list[dict], check: str, symmetric: bool) -> dict[tuple[int, int], dict]:
    found = {}
    for v in verdicts:
        if v["check"] == check:
            a, b = (int(g[3:]) for g in v["subject"].split("-"))
            found[(a, b)] = v
            if symmetric:
                found[(b, a)] = v
    return found


def _pairs(facts: dict, verdicts: list[dict]) -> str:
    sweep = (facts.get("measurements") or {}).get("pairwise")
    if not sweep or not sweep.get("results"):
        return ""
    values = {}
    for r in sweep["results"]:
        a, b = r["gpus"]
        values[(a, b)] = values[(b, a)] = r["busbw_GBps"]
    how = "disjoint pairs at once" if sweep["concurrent"] else "one pair at a time"
    return "<h2 id='pairs'>Pairwise NCCL bandwidth</h2>" + _heat_legend() + _heatmap(
        "send/receive GB/s each way", "pair-matrix", len(facts.get("gpus", [])), values, _judged_pairs(verdicts, "pair_busbw", True), how
    )


def _copies(facts: dict, verdicts: list[dict]) -> str:
    sweep = (facts.get("measurements") or {}).get("copies")
    if not sweep or not sweep.get("results"):
        return ""
    count = len(facts.get("gpus", []))
    peer = {tuple(r["gpus"]): r["GBps"] for r in sweep["results"] if r["what"] == "p2p"}
    for r in sweep["results"]:
        if r["what"] == "local":
            peer[(r["gpus"][0], r["gpus"][0])] = r["GBps"]
    judged = _judged_pairs(verdicts, "p2p_copy", False)
    for v in verdicts:
        if v["check"] == "local_copy" and v["subject"].startswith("gpu") and v["subject"][3:].isdigit():
            judged[(int(v["subject"][3:]),) * 2] = v
    parts = [_heatmap("peer copy GB/s, row to column (diagonal: within the GPU)", "p2p-matrix", count, peer, judged, "copy engine, one direction")]
    host = [r for r in sweep["results"] if r["what"] in ("host_to_device", "device_to_host")]
    if host:
        judged = {(v["check"], v["subject"]): v for v in verdicts if v["check"] in ("host_to_device", "device_to_host")}
        rows = []
        for r in host:
            gpu = f"gpu{r['gpus'][0]}"
            expected = judged.get((r["what"], gpu), {}).get("expected", "")
            rows.append(
                f"<tr><td>{esc(r['what'].replace('_', ' '))}</td><td>{gpu}</td><td class='num'>{r['GBps']:.1f}</td><td>{esc(expected)}</td></tr>"
            )
        rows = "".join(rows)
        parts.append(f"<div class='card'><b>pinned host copies</b><table><tr><th>direction</th><th>GPU</th><th>GB/s</th><th>expected</th></tr>{rows}</table></div>")
    return "<h2 id='copies'>Copy bandwidth</h2>" + _heat_legend() + "<div class='grid'>" + "".join(parts) + "</div>"


def _ddp(facts: dict, verdicts: list[dict]) -> str:
    recorded = facts.get("measurements") or {}
    # only the DDP sweeps: this section does not depend on the others; lenient, as JSON gave them
    measured = Measurements.model_validate({arm: recorded.get(arm) for arm in ("ddp", "ddp_without_p2p")}, strict=False)
    sweep = measured.ddp
    if sweep is None or not sweep.results:
        return ""
    judged = {(v["check"], v["subject"]): v for v in verdicts if v["check"].startswith("ddp_")}
    rows, bars = [], []
    settings = sorted({(r.batch, r.accumulation) for r in sweep.results})
    worlds = sorted({r.world for r in sweep.results})
    width, height, left, bottom = 60 + 70 * len(worlds) * max(1, len(settings)), 220, 40, 30
    for w_index, world in enumerate(worlds):
        for s_index, (batch, accumulation) in enumerate(settings):
            result = sweep.result(world, batch, accumulation)
            efficiency = measured.ddp_efficiency(world, batch, accumulation)
            if result is None or efficiency is None:
                continue
            case = result.case
            scaling = judged.get(("ddp_scaling", case), {})
            x = left + (w_index * len(settings) + s_index) * 70 + 10
            bar = min(efficiency, 1.2) / 1.2 * (height - bottom - 10)
            colour = OUTCOME_COLOURS.get(scaling.get("outcome") or "", SERIES[s_index % len(SERIES)])
            bars.append(f"<rect class='bar' x='{x}' y='{height - bottom - bar:.1f}' width='50' height='{bar:.1f}' fill='{colour}'><title>{case}: {efficiency:.3f}</title></rect>")
            bars.append(f"<text x='{x + 25}' y='{height - bottom + 14}' text-anchor='middle'>{case}</text>")
            bars.append(f"<text x='{x + 25}' y='{height - bottom - bar - 4:.1f}' text-anchor='middle'>{efficiency:.2f}</text>")
            floor = limit_of(scaling)
            if floor:
                level = height - bottom - min(floor, 1.2) / 1.2 * (height - bottom - 10)
                bars.append(f"<line class='floor' x1='{x - 4}' x2='{x + 54}' y1='{level:.1f}' y2='{level:.1f}' stroke='{FAIL}' stroke-width='2'/>")
            without = measured.ddp_without_p2p.result(world, batch, accumulation) if measured.ddp_without_p2p else None
            one = sweep.result(1, batch, accumulation)
            rows.append(
                f"<tr><td>{case}</td><td class='num'>{result.samples_per_s_per_gpu:.1f}</td><td class='num'>{one.samples_per_s_per_gpu:.1f}</td>"
                + _judged_cell(efficiency, scaling)
                + _judged_cell(result.exposed_share, judged.get(("ddp_exposed_comm", case), {}))
                + f"<td class='num'>{f'{without.samples_per_s_per_gpu:.1f}' if without else ''}</td>"
                + _judged_cell(measured.ddp_speedup(world, batch, accumulation), judged.get(("ddp_nvlink_speedup", case), {}), "x")
                + "</tr>"
            )
    svg = f"<svg width='{width}' height='{height}' role='img'>{''.join(bars)}</svg>"
    table = (
        "<table><tr><th>setting</th><th>samples/s per GPU</th><th>on 1 GPU</th><th>efficiency</th><th>exposed communication</th>"
        "<th>samples/s per GPU without P2P</th><th>P2P speedup</th></tr>" + "".join(rows) + "</table>"
    )
    return (
        f"<h2 id='ddp'>DDP scaling</h2><div class='small'>{_parameters(sweep.parameters)}-parameter GPT, {esc(sweep.dtype)}; "
        "efficiency = throughput(N) / (N x throughput(1)); exposed communication = the share of a step that gradient "
        "synchronization adds; P2P speedup = throughput over the same run with NCCL_P2P_DISABLE=1; red ticks are the "
        f"profile's floors</div><div class='card'>{svg}{table}</div>"
    )


def _judged_cell(value: float | None, verdict: dict, unit: str = "") -> str:
    """A measured number, and where a check judged it, its expectation, coloured by the outcome."""
    if value is None:
        return "<td></td>"
    expected = f" <span class='small'>({esc(verdict['expected'])})</span>" if verdict.get("expected") else ""
    colour = f" style='color:{OUTCOME_COLOURS[verdict['outcome']]}'" if verdict.get("outcome") in ("failed", "error") else ""
    return f"<td class='num'{colour}>{value:.3f}{unit}{expected}</td>"


def _parameters(count: int) -> str:
    return f"{count / 1e6:.0f}M" if count >= 1e6 else f"{count / 1e3:.0f}K"


def _all_tests(tests: list[dict]) -> str:
    order = {"failed": 0, "error": 1, "passed": 2, "skipped": 3}
    rows = []
    for test in sorted(tests, key=lambda t: order.get(t["outcome"], 4)):
        verdict = test.get("verdict") or {}
        measured = verdict.get("measured")
        shown = "" if measured is None else show(measured)
        if len(verdict.get("attempts") or []) > 1:
            shown += "<div class='small'>attempts: " + esc(", ".join("-" if a is None else show(a) for a in verdict["attempts"])) + "</div>"
        marks = "".join(
            f" <span class='mark {name}' title='{esc(why)}'>{name}</span>"
            for name, why in (("marginal", "passed within the profile's marginal band of its limit"),
                              ("transient", "missed at first, passed when measured again"))
            if verdict.get(name)
        )
        rows.append(
            f"<tr><td class='outcome' style='color:{OUTCOME_COLOURS.get(test['outcome'], SKIP)}'>{esc(test['outcome'])}{marks}</td>"
            f"<td>{esc(test['id'])}</td><td class='num'>{shown}</td>"
            f"<td>{esc(verdict.get('expected'))}</td><td>{esc(verdict.get('unit'))}</td><td class='small'>{esc(test.get('message') or verdict.get('message'))}</td></tr>"
        )
    return (
        "<h2 id='tests'>Every test</h2><table><tr><th>outcome</th><th>test</th><th>measured</th><th>expected</th><th>unit</th>"
        f"<th>message</th></tr>{''.join(rows)}</table>"
    )
