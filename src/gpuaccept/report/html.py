"""report.html: one self-contained page from a run record (results.json), rendered from Jinja2 templates.

Failures first; then the link matrix against the expected one, bus bandwidth against size per
collective with floors and the physical peak, the pairwise and peer-copy bandwidth matrices as
heat maps, DDP efficiency, exposed communication and the P2P A/B per world size and batch, and
every test with its numbers. Everything comes from data fields of the verdict records (outcome,
measured, criterion, marginal, attempts, transient, context) and the facts; no text is read back.
Each value drawn is joined to the verdict that judged it by the verdict's measure (which measured
value it judged, vocabulary/measures.py) and subject, never by the name of a check.
The page, its colours and its charts are report/charts.py's. The heat maps and tables stay HTML: a
cell's value is its tooltip, and zooming a 4x4 matrix adds nothing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from gpuaccept.facts import Facts
from gpuaccept.facts.measurements import GemmResult
from gpuaccept.facts.run_record import RunRecord, TestRecord
from gpuaccept.facts.verdict import Equals, Verdict
from gpuaccept.outcomes import EXIT_FAILED, EXIT_PASSED
from gpuaccept.report import cluster_view
from gpuaccept.report.charts import (
    ERROR,
    FAIL,
    LINE_MARKER,
    MARGINAL,
    OUTCOME_COLOURS,
    PASS,
    PASS_AT_FLOOR,
    PASS_AT_PEAK,
    PASS_UNSCALED,
    PEAK,
    SERIES,
    SKIP,
    UNJUDGED,
    chart_axis,
    chart_html,
    chart_layout,
    page_templates,
    render_page,
    timeseries_chart,
)
from gpuaccept.report.summary import banner, marginal_tests, transient_tests
from gpuaccept.vocabulary.copies import HOST_COPIES
from gpuaccept.vocabulary.display import show
from gpuaccept.vocabulary.drills import drills_in
from gpuaccept.vocabulary.links import gpu_key, pair_key
from gpuaccept.vocabulary.measures import COPY_MEASURES, Measure
from gpuaccept.vocabulary.sizes import format_size, human_size, parse_size

MARKS = (
    ("marginal", "passed within the profile's marginal band of its limit"),
    ("transient", "missed at first, passed when measured again"),
)


def _why(verdict: Verdict, mark: str, why: str) -> str:
    """A mark's title: where the marginal line was, for a marginal value whose criterion holds it."""
    return f"{why}: {verdict.marginal_line}" if mark == "marginal" and verdict.marginal_line else why


def render_html(record: RunRecord) -> str:
    tests = record.tests
    verdicts = record.verdicts()
    facts = record.facts
    body = page_templates().get_template("report.html.j2").render(
        header=_header(record),
        coverage=_coverage(record),
        causes=_causes(record),
        cluster=_cluster(record),
        links=_links(facts, verdicts),
        busbw=_busbw(facts, verdicts),
        pairs=_pairs(facts, verdicts),
        copies=_copies(facts, verdicts),
        ddp=_ddp(facts, verdicts),
        telemetry=_telemetry(facts, _steady_points(verdicts)),
        tests=_all_tests(tests),
        heat_legend=_heat_legend(),
    )
    title = f"gpu-accept: {record.environment.host} against {record.run.profile.name}"
    return render_page(title, body)


# -- sections -----------------------------------------------------------------------------------------


def _cluster(record: RunRecord) -> dict | None:
    """A cluster run's nodes x tests, its job's values and its localization (report/cluster_view.py), coloured."""
    found = cluster_view.section(record)
    if found is None:
        return None
    for row in found["rows"]:
        for cell in row["cells"]:
            cell["colour"] = OUTCOME_COLOURS.get(cell["state"], SKIP)
    for value in found["job"]:
        value["colour"] = OUTCOME_COLOURS.get(value["outcome"], SKIP)
    for trial in (found["localization"] or {}).get("trials", []):
        trial["colour"] = OUTCOME_COLOURS[trial["state"]]
    return {**found, "slow_colour": FAIL}


def _header(record: RunRecord) -> dict:
    run, environment, summary = record.run, record.environment, record.summary
    code, unchecked = record.exit_code(), record.unchecked()
    # green only where everything the profile asks for was judged and passed
    judged = code == EXIT_PASSED and record.complete and record.tests and not unchecked
    colour = FAIL if code == EXIT_FAILED else PASS if judged else ERROR
    software = {"driver": environment.driver, "cuda_driver": environment.cuda_driver, "nccl": environment.nccl, "torch": environment.torch}
    return {
        "host": environment.host,
        "gpus": _machine(record),
        "profile": run.profile.name,
        "profile_path": run.profile.path,
        "software": ", ".join(f"{k} {v}" for k, v in software.items() if v),
        "started": run.started_at,
        "finished": run.finished_at or "-",
        "tool_version": run.tool_version,
        "banner": banner(record) or "NOTHING JUDGED: the run holds no test",
        "colour": colour,
        "unchecked": unchecked,
        "counts": [("passed", summary.passed), ("failed", summary.failed), ("error", summary.error), ("skipped", summary.skipped)],
        "transient": len(transient_tests(record.tests)),
        "marginal": len(marginal_tests(record.tests)),
        # a run with fault drills on fails on purpose: said at the top, with the variables that asked for them
        "drills": ", ".join(f"{name}={value}" for name, value in drills_in(_environment(record)).items()),
    }


def _machine(record: RunRecord) -> str:
    cluster, environment = record.cluster, record.environment
    if cluster is not None:
        return f"{len(cluster.nodes)} nodes x {cluster.gpus_per_node} GPUs ({cluster.world} ranks)"
    return f"{environment.gpu_count}x {environment.gpu_model}"


def _environment(record: RunRecord) -> dict[str, str]:
    """The variables the run saw: a cluster's, every node's (a drill set on one node alone is said)."""
    if record.cluster is None:
        return record.facts.environment
    return {name: value for node in record.cluster.nodes for name, value in node.environment.items()}


COVERAGE_COLOURS = {"checked": PASS, "partly checked": ERROR, "not checked": ERROR, "not asked": SKIP}


def _coverage(record: RunRecord) -> list[dict]:
    """What the run checked, by area: its tests by outcome, and why those not judged were not."""
    return [
        {
            "area": area.area or "other tests", "state": area.state, "colour": COVERAGE_COLOURS[area.state], "passed": area.passed,
            "failed": area.failed, "not_judged": area.not_judged, "skipped": area.skipped, "not_selected": area.not_selected,
            "why": "; ".join(area.why),
        }
        for area in record.coverage
    ]


def _causes(record: RunRecord) -> list[dict]:
    """The tests that did not pass, a section per cause, root causes first (a missing GPU or someone
    else's load on a GPU before the links, collectives, copies and DDP settings it fails), the tests
    that follow from a root cause grouped under it."""
    tests = {t.id: t for t in record.tests}

    def row(test_id: str) -> dict:
        test = tests[test_id]
        return {"outcome": test.outcome, "colour": OUTCOME_COLOURS[test.outcome], "id": test.id, "message": test.message}

    return [
        {
            "root": row(group.root) if group.root is not None else None, "outcome": group.outcome,
            "colour": OUTCOME_COLOURS[group.outcome], "text": group.text,
            "tests": [row(test_id) for test_id in (group.followers if group.root is not None else group.tests)],
        }
        for group in record.causes
    ]


def _by_subject(verdicts: list[Verdict], measure: Measure) -> dict[str, Verdict]:
    """The verdicts that judged `measure`, by the subject of the value each judged."""
    return {v.subject: v for v in verdicts if v.measure_judged is measure}


def _links(facts: Facts, verdicts: list[Verdict]) -> dict | None:
    count = facts.gpu_count
    if count < 2:
        return None
    judged = _by_subject(verdicts, Measure.LINK_TYPE)
    measured = {tuple(link.gpus): link.link_type for link in facts.links}
    rows = []
    for i in range(count):
        cells = []
        for j in range(count):
            if i == j:
                cells.append(None)
                continue
            key = (min(i, j), max(i, j))
            value = measured.get(key, "?")
            verdict = judged.get(pair_key(*key))
            cells.append({
                "value": value if isinstance(value, str) else "n/a",
                "colour": OUTCOME_COLOURS.get(verdict.outcome, SKIP) if verdict else SKIP,
                "expected": _expected_value(verdict),
            })
        rows.append(cells)
    return {"count": count, "rows": rows}


def _expected_value(verdict: Verdict | None) -> str:
    """What a state check expected: the criterion's value; an older record without a criterion
    has only the rule as text, shown as it is."""
    if verdict is None:
        return "not stated"
    if isinstance(verdict.criterion, Equals):
        return str(verdict.criterion.value)
    return verdict.expected or "not stated"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _peak_of(verdict: Verdict | None) -> float | None:
    peak = verdict.context.get("peak_GBps") if verdict is not None else None
    return float(peak) if isinstance(peak, int | float) and _is_number(peak) and peak > 0 else None


def _limit_of(verdict: Verdict | None) -> float | None:
    limit = verdict.limit if verdict is not None else None
    return limit if limit is not None and math.isfinite(limit) else None


def _busbw(facts: Facts, verdicts: list[Verdict]) -> dict | None:
    sweep = facts.measurements.collectives
    if not sweep or not sweep.results:
        return None
    judged = _by_subject(verdicts, Measure.COLLECTIVE_BUSBW)
    series: dict[str, list[tuple[int, float, Verdict | None]]] = defaultdict(list)
    for r in sweep.results:
        # the check names its subject from the size the profile asked for ("all_reduce 1 GiB"):
        # made here from the facts the same way, never split apart
        nominal = parse_size(r.nominal_size) if r.nominal_size else r.size_bytes
        series[r.collective].append((r.size_bytes, r.busbw_GBps, judged.get(f"{r.collective} {human_size(nominal)}")))
    charts = []
    for collective, points in series.items():
        points.sort(key=lambda point: point[0])
        charts.append({"title": collective, "html": chart_html(f"busbw-{collective}", _busbw_figure(collective, points))})
    return {
        "ranks": sweep.ranks,
        "backend": sweep.backend,
        "nccl_version": sweep.nccl_version,
        "failures": [f.message for f in sweep.failures],
        "charts": charts,
    }


def _busbw_figure(collective: str, points: list[tuple[int, float, Verdict | None]]):
    """Measured busbw against message size (log), each point coloured by its verdict; the floors
    (criterion limits) as red ticks at their sizes; the physical peak as a dashed line."""
    import plotly.graph_objects as go

    sizes = [size for size, _, _ in points]
    hover, colours, floors, peak = [], [], [], None
    for size, value, verdict in points:
        limit, point_peak = _limit_of(verdict), _peak_of(verdict)
        peak = point_peak or peak
        colours.append(OUTCOME_COLOURS.get(verdict.outcome, SERIES[0]) if verdict else SERIES[0])
        marks = [name for name, _ in MARKS if verdict is not None and getattr(verdict, name)]
        lines = [
            f"{collective} {human_size(size)}: busbw {show(float(value))} GB/s",
            ", ".join([verdict.outcome if verdict else "not judged"] + marks),
        ]
        if limit is not None:
            lines.append(f"floor {show(limit)} GB/s")
            floors.append((size, limit))
        if point_peak:
            lines.append(f"{100 * value / point_peak:.0f}% of the {show(point_peak)} GB/s peak")
        if verdict is not None and len(verdict.attempts) > 1:
            lines.append("attempts " + ", ".join("-" if a is None else show(a) for a in verdict.attempts))
        hover.append("<br>".join(lines))
    figure = go.Figure(layout=chart_layout(
        xaxis=chart_axis("message size", type="log", tickvals=sizes, ticktext=[format_size(s) for s in sizes]),
        yaxis=chart_axis("busbw (GB/s)", rangemode="tozero"),
    ))
    figure.add_trace(go.Scatter(
        name="measured", x=sizes, y=[value for _, value, _ in points], mode="lines+markers", meta="measured",
        line={"color": SERIES[0], "width": 2}, marker={"color": colours, "size": 9, "line": {"color": "#fff", "width": 1}},
        hovertext=hover, hoverinfo="text",
    ))
    if floors:
        figure.add_trace(go.Scatter(
            name="floor", x=[size for size, _ in floors], y=[limit for _, limit in floors], mode="markers", meta="floor",
            marker={"symbol": LINE_MARKER, "size": 22, "line": {"color": FAIL, "width": 3}},
            hovertext=[f"{collective} {human_size(size)}: floor {show(limit)} GB/s" for size, limit in floors], hoverinfo="text",
        ))
    if peak:
        label = f"peak {peak:g} GB/s"
        figure.add_trace(go.Scatter(
            name=label, x=[sizes[0], sizes[-1]], y=[peak, peak], mode="lines", meta="peak",
            line={"color": PEAK, "width": 1.5, "dash": "dash"}, hovertext=[label, label], hoverinfo="text",
        ))
    return figure


def heat_cell(value: float, verdict: Verdict | None) -> tuple[str, str, str, str]:
    """(state, background, text colour, tooltip) of one heat map cell, from its verdict's outcome,
    criterion limit, marginal mark and the physical peak in its context. Each cell is coloured by
    its own verdict: red below the floor, amber within the marginal band, green from the floor
    (light) to the physical peak (dark); grey where no check judged it. Never relative to the
    machine itself: pairs that all run at 23 GB/s are all red."""
    if verdict is None or verdict.outcome not in ("passed", "failed", "error"):
        return "none", UNJUDGED, "#1f2328", f"{show(value)} GB/s, not judged"
    limit, peak = _limit_of(verdict), _peak_of(verdict)
    against = ", ".join(part for part in (f"floor {show(limit)}" if limit is not None else "", f"peak {show(peak)}" if peak else "") if part)
    explained = f"{show(value)} GB/s, {verdict.outcome}" + (f" ({against})" if against else "")
    if verdict.outcome != "passed":
        return "failed", FAIL, "#fff", explained
    if verdict.marginal:
        return "marginal", MARGINAL, "#1f2328", explained + f", {verdict.marginal_line or 'marginal'}"
    low = limit if limit is not None and verdict.better != "lower" else 0.0
    share = (value - low) / (peak - low) if peak and peak > low else PASS_UNSCALED
    share = min(max(share, 0.0), 1.0)
    red, green, blue = (round(a + (b - a) * share) for a, b in zip(PASS_AT_FLOOR, PASS_AT_PEAK))
    return "passed", f"rgb({red},{green},{blue})", "#fff" if share > 0.5 else "#1f2328", explained


def _heat_legend() -> list[tuple[str, str]]:
    floor_to_peak = ", ".join(f"rgb{colour}" for colour in (PASS_AT_FLOOR, PASS_AT_PEAK))
    return [
        (FAIL, "below the floor (failed)"),
        (MARGINAL, "passed within the marginal band"),
        (f"linear-gradient(90deg,{floor_to_peak})", "passed: from the floor (light) to the physical peak (dark)"),
        (UNJUDGED, "no verdict"),
    ]


def _heatmap(
    title: str, anchor: str, count: int, values: dict[tuple[int, int], float], judged: dict[tuple[int, int], Verdict], note: str
) -> dict | None:
    if not values:
        return None
    rows = []
    for i in range(count):
        cells = []
        for j in range(count):
            value = values.get((i, j))
            if value is None:
                cells.append(None)
                continue
            state, background, ink, explained = heat_cell(value, judged.get((i, j)))
            cells.append({"state": state, "background": background, "ink": ink, "title": explained, "figure": _figure(value)})
        rows.append(cells)
    return {"title": title, "anchor": anchor, "note": note, "count": count, "rows": rows}


def _figure(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def _pairs(facts: Facts, verdicts: list[Verdict]) -> dict | None:
    sweep = facts.measurements.pairwise
    if not sweep or not sweep.results:
        return None
    values = {}
    for r in sweep.results:
        a, b = r.gpus
        values[(a, b)] = values[(b, a)] = r.busbw_GBps
    judged = _by_subject(verdicts, Measure.PAIR_BUSBW)
    by_cell = {}
    for a, b in values:
        verdict = judged.get(pair_key(min(a, b), max(a, b)))  # one verdict per pair, both directions
        if verdict:
            by_cell[(a, b)] = verdict
    how = "disjoint pairs at once" if sweep.concurrent else "one pair at a time"
    return _heatmap("send/receive GB/s each way", "pair-matrix", facts.gpu_count, values, by_cell, how)


def _copies(facts: Facts, verdicts: list[Verdict]) -> dict | None:
    sweep = facts.measurements.copies
    if not sweep or not sweep.results:
        return None
    peer: dict[tuple[int, int], float] = {(r.gpus[0], r.gpus[1]): r.GBps for r in sweep.results if r.what == "p2p"}
    for r in sweep.results:
        if r.what == "local":
            peer[(r.gpus[0], r.gpus[0])] = r.GBps
    p2p, local = _by_subject(verdicts, COPY_MEASURES["p2p"]), _by_subject(verdicts, COPY_MEASURES["local"])
    judged = {}
    for a, b in peer:
        verdict = local.get(gpu_key(a)) if a == b else p2p.get(pair_key(a, b))
        if verdict:
            judged[(a, b)] = verdict
    heatmap = _heatmap(
        "peer copy GB/s, row to column (diagonal: within the GPU)", "p2p-matrix", facts.gpu_count, peer, judged, "copy engine, one direction"
    )
    host_judged = {what: _by_subject(verdicts, COPY_MEASURES[what]) for what in HOST_COPIES}
    host = []
    for r in sweep.results:
        if r.what in host_judged:
            verdict = host_judged[r.what].get(gpu_key(r.gpus[0]))
            host.append({
                "direction": r.what.replace("_", " "),
                "gpu": gpu_key(r.gpus[0]),
                "GBps": f"{r.GBps:.1f}",
                "expected": verdict.expected if verdict else "",
            })
    return {"heatmap": heatmap, "host": host}


def _ddp(facts: Facts, verdicts: list[Verdict]) -> dict | None:
    measured = facts.measurements
    sweep = measured.ddp
    if sweep is None or not sweep.results:
        return None
    efficiency_judged = _by_subject(verdicts, Measure.DDP_EFFICIENCY)
    exposed_judged = _by_subject(verdicts, Measure.DDP_EXPOSED_COMMUNICATION)
    speedup_judged = _by_subject(verdicts, Measure.DDP_NVLINK_SPEEDUP)
    settings = sorted({(r.batch, r.accumulation) for r in sweep.results})
    rows, bars = [], []
    for world in sorted({r.world for r in sweep.results}):
        for batch, accumulation in settings:
            result = sweep.result(world, batch, accumulation)
            efficiency = measured.ddp_efficiency(world, batch, accumulation)
            one = sweep.result(1, batch, accumulation)
            if result is None or efficiency is None or one is None:
                continue
            case = result.case
            scaling = efficiency_judged.get(case)
            without = measured.ddp_without_p2p.result(world, batch, accumulation) if measured.ddp_without_p2p else None
            bars.append({"case": case, "efficiency": efficiency, "verdict": scaling, "per_gpu": result.samples_per_s_per_gpu, "on_one": one.samples_per_s_per_gpu})
            rows.append({
                "case": case,
                "per_gpu": f"{result.samples_per_s_per_gpu:.1f}",
                "on_one": f"{one.samples_per_s_per_gpu:.1f}",
                "efficiency": _judged_cell(efficiency, scaling),
                "exposed": _judged_cell(result.exposed_share, exposed_judged.get(case)),
                "without": f"{without.samples_per_s_per_gpu:.1f}" if without else "",
                "speedup": _judged_cell(measured.ddp_speedup(world, batch, accumulation), speedup_judged.get(case), "x"),
            })
    return {
        "parameters": _parameters(sweep.parameters),
        "dtype": sweep.dtype,
        "chart": chart_html("ddp-efficiency", _ddp_figure(bars), height=280),
        "rows": rows,
    }


def _ddp_figure(bars: list[dict]):
    import plotly.graph_objects as go

    cases = [bar["case"] for bar in bars]
    hover, floors = [], []
    for bar in bars:
        verdict = bar["verdict"]
        limit = _limit_of(verdict)
        text = f"{bar['case']}: efficiency {bar['efficiency']:.3f}, {verdict.outcome if verdict else 'not judged'}"
        if limit is not None:
            text += f"<br>floor {show(limit)}"
            floors.append((bar["case"], limit))
        hover.append(text + f"<br>{bar['per_gpu']:.1f} samples/s per GPU, {bar['on_one']:.1f} on 1 GPU")
    top = max([1.0] + [bar["efficiency"] for bar in bars] + [limit for _, limit in floors]) * 1.12
    figure = go.Figure(layout=chart_layout(
        xaxis=chart_axis("world size and batch per GPU", type="category"),
        yaxis=chart_axis("scaling efficiency", range=[0, top]),
        bargap=0.45,
    ))
    figure.add_trace(go.Bar(
        name="efficiency", x=cases, y=[bar["efficiency"] for bar in bars], meta="efficiency",
        marker={"color": [OUTCOME_COLOURS.get(bar["verdict"].outcome, SERIES[0]) if bar["verdict"] else SERIES[0] for bar in bars]},
        text=[f"{bar['efficiency']:.2f}" for bar in bars], textposition="outside", cliponaxis=False,
        hovertext=hover, hoverinfo="text", showlegend=False,  # its colours are the verdicts, as in the tables
    ))
    if floors:
        figure.add_trace(go.Scatter(
            name="floor", x=[case for case, _ in floors], y=[limit for _, limit in floors], mode="markers", meta="floor",
            marker={"symbol": LINE_MARKER, "size": 40, "line": {"color": FAIL, "width": 3}},
            hovertext=[f"{case}: floor {show(limit)}" for case, limit in floors], hoverinfo="text",
        ))
    return figure


def _steady_points(verdicts: Sequence[Verdict]) -> list[tuple[float, str]]:
    """Where each GPU reached thermal steady state, as its verdict recorded it in its evidence (telemetry time)."""
    points = []
    for verdict in verdicts:
        at = verdict.context.get("steady_at_s")
        if isinstance(at, (int, float)):
            points.append((float(at), f"{verdict.subject} steady"))
    return points


def _telemetry(facts: Facts, steady: Sequence[tuple[float, str]] = ()) -> dict | None:
    """Per-GPU telemetry over time (SM clock, temperature, power) with NVML's limits, and where a
    burn-in ran, each burn-in value per round; None where nothing was sampled or burned in. The
    power and temperature charts mark the sustained load and each GPU's thermal steady state."""
    telemetry, burnin = facts.telemetry, facts.burnin
    charts = []
    # the burn-in's rounds on the telemetry's time line, where both were recorded
    offset = burnin.offset_on(telemetry) if telemetry is not None and burnin is not None else 0.0
    load_marks: list[tuple[float, str]] = []
    if burnin is not None and burnin.load_started_s is not None and burnin.load_ended_s is not None:
        load_marks = [(offset + burnin.load_started_s, "sustained load"), (offset + burnin.load_ended_s, "load ends")]
    # one time unit for every chart of the run: the longer of the sampling and the burn-in
    sampled = [sample.t_s for sample in telemetry.samples] if telemetry is not None else []
    span_s = max([0.0, *sampled, *([offset + burnin.elapsed_s] if burnin is not None else [])])
    if telemetry is not None and telemetry.samples:
        def series(field: str) -> dict[str, list[tuple[float, float]]]:
            found: dict[str, list[tuple[float, float]]] = {}
            for sample in telemetry.samples:
                value = getattr(sample, field)
                if _is_number(value):
                    found.setdefault(f"gpu{sample.gpu}", []).append((sample.t_s, float(value)))
            return found

        def lowest_limit(field: str) -> float | None:
            values = [getattr(limit, field) for limit in telemetry.limits if _is_number(getattr(limit, field))]
            return float(min(values)) if values else None

        shown = [
            ("sm_clock_mhz", "SM clock", "MHz", None, ""),
            ("temperature_c", "GPU temperature", "°C", lowest_limit("slowdown_temperature_c"), "NVML slowdown"),
            ("memory_temperature_c", "HBM temperature", "°C", None, ""),
            ("power_w", "power", "W", lowest_limit("power_limit_w"), "power limit"),
            ("memory_clock_mhz", "memory clock", "MHz", None, ""),
        ]
        for field, title, unit, limit, label in shown:
            points = series(field)
            if points:
                chart_id = "telemetry-" + field.replace("_", "-")
                marks = [*load_marks, *steady] if field in ("temperature_c", "power_w") else []
                charts.append(timeseries_chart(
                    points, title=title, unit=unit, limit=limit, limit_label=label, chart_id=chart_id, span_s=span_s, marks=marks,
                ))
    if burnin is not None:
        per_round: dict[str, dict[str, list[tuple[float, float]]]] = {}
        units = {"GEMM per round": "TFLOP/s"}  # GB/s otherwise
        for burn_round in burnin.rounds:
            measured = burn_round.measurements
            at = offset + burn_round.started_s
            for load in measured.compute.results if measured.compute else []:
                if isinstance(load, GemmResult):
                    per_round.setdefault("GEMM per round", {}).setdefault(f"gpu{load.gpu}", []).append((at, load.tflops))
            for result in measured.collectives.results if measured.collectives else []:
                label = f"{result.collective} {human_size(result.size_bytes)}"
                per_round.setdefault("busbw per round", {}).setdefault(label, []).append((at, result.busbw_GBps))
            for copy in measured.copies.results if measured.copies else []:
                if copy.what == "local":
                    per_round.setdefault("local copy per round", {}).setdefault(f"gpu{copy.gpus[0]}", []).append((at, copy.GBps))
        for index, (title, points) in enumerate(per_round.items()):
            charts.append(timeseries_chart(
                points, title=title, unit=units.get(title, "GB/s"), chart_id=f"burnin-round-{index}", span_s=span_s, markers=True,
            ))
    if not charts:
        return None
    note = ""
    if telemetry is not None:
        note = f"sampled every {telemetry.period_s:g} s from {telemetry.started_at}; {len(telemetry.loads)} load stage(s) ran"
    if burnin is not None:
        note += f"{'; ' if note else ''}burn-in: {len(burnin.rounds)} round(s) in {burnin.elapsed_s:.0f} s of {burnin.duration_s:.0f} s ({burnin.ended})"
    return {"charts": charts, "note": note}


def _judged_cell(value: float | None, verdict: Verdict | None, unit: str = "") -> dict | None:
    """A measured number, and where a check judged it, its expectation, coloured by the outcome."""
    if value is None:
        return None
    colour = OUTCOME_COLOURS[verdict.outcome] if verdict is not None and verdict.outcome in ("failed", "error") else None
    return {"text": f"{value:.3f}{unit}", "expected": verdict.expected if verdict else "", "colour": colour}


def _parameters(count: int) -> str:
    return f"{count / 1e6:.0f}M" if count >= 1e6 else f"{count / 1e3:.0f}K"


def _all_tests(tests: list[TestRecord]) -> list[dict]:
    order = {"failed": 0, "error": 1, "passed": 2, "skipped": 3}
    rows = []
    for test in sorted(tests, key=lambda t: order.get(t.outcome, 4)):
        verdict = test.verdict
        measured = verdict.measured if verdict else None
        attempts = verdict.attempts if verdict else []
        rows.append({
            "outcome": test.outcome,
            "colour": OUTCOME_COLOURS.get(test.outcome, SKIP),
            "marks": [(name, _why(verdict, name, why)) for name, why in MARKS if verdict is not None and getattr(verdict, name)],
            "id": test.id,
            "measured": "" if measured is None else show(measured),
            "attempts": ", ".join("-" if a is None else show(a) for a in attempts) if len(attempts) > 1 else "",
            # the criterion, and where its marginal line was: ">= 330 GB/s (marginal below 346.5 GB/s)"
            "expected": (f"{verdict.expected} ({verdict.marginal_line})" if verdict.marginal_line else verdict.expected) if verdict else None,
            "unit": verdict.unit if verdict else None,
            "message": test.message or (verdict.message if verdict else None),
        })
    return rows
