"""Every page gpu-accept writes, fed the hostile strings (tests/data/hostile/strings.json) wherever a
results.json or a cluster-results.json carries text, and read back with an HTML5 parser (html5lib,
the WHATWG parsing rules browsers follow): each string is text in the element it was put in, and
the page has exactly the elements, attributes, scripts and comments it has with harmless names.

The fleet page, whose script builds its rows in the browser, is read back from headless Chromium
too (tests/test_store.py and below)."""

from __future__ import annotations

import json
import re

import html5lib
import pytest

from gpuaccept.errors import visible
from gpuaccept.facts.run_record import RunRecord
from gpuaccept.report import charts
from gpuaccept.report.charts import plotly_text, timeseries_chart
from gpuaccept.report.html import render_html
from tests.helpers import ROOT, results_data
from tests.hostile import CLASSES, NAMES, STRINGS, placed, put_back, token, with_strings

HEALTHY = ROOT / "examples" / "results" / "h200x4.json"

# where a results.json holds text that a page shows: names, versions, paths, ids, messages, criteria
RESULTS_TEXT = re.compile(
    r"environment\.(host|driver|cuda_driver|nccl|torch|gpu_model|gpus\.\[\]\.(name|serial))"
    r"|run\.(profile\.(name|path)|tool_version|command\.\[\])"
    r"|tests\.\[\]\.(id|nodeid|message|verdict\.(expected|unit|message|profile|measured|criterion\.value|attempts\.\[\]))"
    r"|facts\.environment\.GPUACCEPT_INJECT_HANG"
    r"|facts\.measurements\.\w+\.(backend|dtype|nccl_version|torch_version)"
)
# an empty text is left out: a page shows the next thing in its place (a test's message, else its verdict's)
SHOWN = [text for text in STRINGS if text]
STRUCTURE = re.compile(r"tests\.\[\]\.verdict\.(check|subject)")  # what the sections look verdicts up by


def parsed(page: str):
    return html5lib.parse(page, treebuilder="etree", namespaceHTMLElements=False)


def assert_same_page(with_tokens: str, with_strings_: str, shown_in_data=plotly_text) -> int:
    """The page rendered with hostile strings has the shape of the page rendered with tokens, and
    each token's place holds its string as `visible` shows it. Returns how many tokens were seen."""
    seen = set()

    def expected(text: str) -> str:
        seen.update(re.findall(r"zq(\d{4})qz", text))
        return put_back(text, SHOWN, visible)

    def walk(mine, theirs, where):
        assert theirs.tag == mine.tag, f"{where}: <{theirs.tag}> where the page has <{mine.tag}>"
        assert sorted(theirs.attrib) == sorted(mine.attrib), f"{where}: attributes {sorted(theirs.attrib)}"
        for name, value in mine.attrib.items():
            assert theirs.attrib[name] == expected(value), f"{where}@{name}"
        if mine.tag == "script":
            if mine.attrib.get("type") == "application/json":  # data for the page's script: JSON, each string in it
                assert json.loads(theirs.text) == json.loads(put_back(mine.text, SHOWN, lambda s: json.dumps(shown_in_data(s))[1:-1]))
                seen.update(re.findall(r"zq(\d{4})qz", mine.text))
            else:
                assert theirs.text == mine.text, f"{where}: the script's code changed"
        else:
            assert (theirs.text or "") == expected(mine.text or ""), f"{where}: text"
        assert (theirs.tail or "") == expected(mine.tail or ""), f"{where}: text after it"
        assert len(theirs) == len(mine), f"{where}: {len(theirs)} children where the page has {len(mine)}"
        for index, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            walk(a, b, f"{where}/{a.tag if isinstance(a.tag, str) else 'comment'}[{index}]")

    walk(parsed(with_tokens), parsed(with_strings_), "html")
    return len(seen)


@pytest.fixture
def no_plotly_bundle(monkeypatch):
    # the 4.8 MB bundle is the package's own, the same on every page: html5lib, pure Python, would
    # take half a minute to read it
    monkeypatch.setattr(charts, "_plotly_js", lambda: "/* plotly.js */")


@pytest.mark.parametrize("structure", [False, True], ids=["names-and-messages", "check-and-subject-too"])
def test_report_html_shows_every_hostile_string_as_text_where_it_was_put(structure, no_plotly_bundle):
    data = results_data(HEALTHY)
    for test in data["tests"][::7]:  # failures too: the page lists them first
        test["outcome"] = "failed"
    data["facts"]["environment"]["GPUACCEPT_INJECT_HANG"] = "all_reduce 1 GiB"  # a drill, named at the top
    rounds, start = [], 0
    while start < len(SHOWN) or not rounds:  # every string in every kind of place, round after round
        tokens, start = placed(data, lambda path: bool(RESULTS_TEXT.fullmatch(".".join(path)) or (
            structure and STRUCTURE.fullmatch(".".join(path)))), SHOWN, start)
        rounds.append(tokens)
    for tokens in rounds:
        record = RunRecord.model_validate_json(json.dumps(tokens))
        seen = assert_same_page(render_html(record), render_html(with_strings(record, SHOWN)))
        assert seen >= 60  # most of the strings in one page, each somewhere else in the next


def test_the_cluster_view_shows_every_hostile_string_as_text_where_it_was_put(tmp_path):
    from gpuaccept.profile import load_profile
    from tests.test_cluster_network import PROFILE, TREE, cluster_record, cluster_verdicts, node, three_nodes_one_slow

    (tmp_path / "two-rails.yaml").write_text(PROFILE, encoding="utf-8")
    profile = load_profile(tmp_path / "two-rails.yaml")
    facts = three_nodes_one_slow(profile, [node(TREE, index=i) for i in range(3)], slow=1)
    data = json.loads(cluster_record(facts, cluster_verdicts(profile, facts)).model_dump_json())
    text = re.compile(
        r"cluster\.(profile|nodes\.\[\]\.host|localization\.reason)|environment\.host|tests\.\[\]\.(message|verdict\.(message|expected|unit))"
    )
    start = 0
    while start < len(SHOWN):
        tokens, start = placed(data, lambda path: bool(text.fullmatch(".".join(path))), SHOWN, start)
        record = RunRecord.model_validate_json(json.dumps(tokens))
        assert assert_same_page(render_html(record), render_html(with_strings(record, SHOWN))) >= 5


def test_a_chart_label_from_a_record_is_text_to_plotly():
    """Plotly reads <b>, <br> and <a href> in a label as its own markup: a name is written with
    entities, which Plotly shows as the characters they stand for."""
    series = {text: [(0.0, 1.0), (5.0, 2.0)] for text in STRINGS}
    marked = [texts[-1] for texts in CLASSES.values()]  # one of each class: Plotly adds a mark in time that grows with the marks
    chart = timeseries_chart(series, title="t", unit="W", chart_id="c", marks=[(1.0 + i / 1000, text) for i, text in enumerate(marked)])
    figure = json.loads(re.search(r"<script type='application/json'[^>]*>(.*?)</script>", chart, re.S).group(1))
    traces = [trace for trace in figure["data"] if trace.get("meta") == "series"]
    assert [trace["name"] for trace in traces] == [plotly_text(text) for text in STRINGS]
    assert [trace["hovertemplate"].rsplit(": %{y", 1)[0] for trace in traces] == [plotly_text(text) for text in STRINGS]
    assert [mark["text"] for mark in figure["layout"]["annotations"]] == [plotly_text(text) for text in marked]
    assert not any(character in trace["name"] for trace in traces for character in "<>")


def test_the_tokens_stand_apart():
    assert len({token(i) for i in range(len(STRINGS))}) == len(STRINGS) and len(SHOWN) == len(STRINGS) - 1
    assert not any("zq" in text for text in STRINGS)


# -- the fleet page: its data is JSON in the page, its rows built by its script ----------------------------------


def hostile_fleet(folder) -> list[str]:
    """A results.json per name: the name as the host; names as profile, driver, a failed test's id,
    suite module and message; every other host of one profile (the fleet median and its outliers)."""
    import random

    from bench.fleet import host_document

    paths = []
    for index, host in enumerate(NAMES):
        document = host_document(index, 2, random.Random(index))  # hosts 7 and 57: a slow pair, outliers of their profile
        document["environment"]["host"] = host
        document["environment"]["driver"] = NAMES[(index + 4) % len(NAMES)]
        if index % 2:
            document["run"]["profile"]["name"] = NAMES[(index + 1) % len(NAMES)]
        test = document["tests"][0]
        name = NAMES[(index + 5) % len(NAMES)]
        test.update(outcome="failed", message=NAMES[(index + 2) % len(NAMES)], id=name,
                    nodeid=f"{NAMES[(index + 3) % len(NAMES)]}.py::{name}")
        document["run"]["exit_status"] = 1
        path = folder / f"host{index}.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        paths.append(str(path))
    return paths


@pytest.fixture
def fleet_page(tmp_path):
    from gpuaccept.cli import main

    db, page = tmp_path / "fleet.db", tmp_path / "fleet.html"
    assert main(["store", "add", *hostile_fleet(tmp_path), "--db", str(db), "--workers", "1"]) == 0
    assert main(["report", "fleet", "--db", str(db), "--html", str(page)]) == 1
    return page


@pytest.mark.slow  # a hundred results files, read twice
def test_the_fleet_page_of_hostile_files_is_the_page_of_their_store(fleet_page, tmp_path, capsys):
    """Results files are reported by the store's engine: the page drawn from the files alone is the
    store's page, byte for byte, so every test of the store's page below holds for the files' too."""
    from gpuaccept.cli import main

    page = tmp_path / "from-files.html"
    assert main(["report", "fleet", *hostile_fleet(tmp_path), "--html", str(page)]) == 1
    assert page.read_bytes() == fleet_page.read_bytes()


def scripts_of(document) -> list:
    return [element for element in document.iter() if element.tag == "script"]


def fleet_data(page) -> dict:
    data, _ = scripts_of(parsed(page.read_text(encoding="utf-8")))
    return json.loads(data.text)


@pytest.mark.slow  # a hundred results files through the store
def test_the_fleet_pages_data_cannot_end_its_script_and_holds_every_name_as_text(fleet_page):
    from gpuaccept.report.templating import templates

    document = parsed(fleet_page.read_text(encoding="utf-8"))
    data, code = scripts_of(document)  # two scripts, as written: none ended early, none added
    assert data.attrib == {"type": "application/json", "id": "fleet-data"} and code.attrib == {}
    assert code.text.strip() == templates().loader.get_source(templates(), "fleet.js")[0].strip()
    assert not [element for element in document.iter() if not isinstance(element.tag, str)]  # no comment
    assert [element.tag for element in document.find("body")] == ["h1", "div", "div", "script", "script"]
    hosts = json.loads(data.text)["hosts"]
    assert sorted(row["host"] for row in hosts) == sorted(visible(name) for name in NAMES)
    profiles = {row["profile"] for row in hosts}
    assert {visible(NAMES[(index + 1) % len(NAMES)]) for index in range(1, len(NAMES), 2)} <= profiles
    whys = " ".join(line for row in hosts for line in row["why"])
    assert all(visible(NAMES[(index + 2) % len(NAMES)]) in whys for index in range(len(NAMES)))


DRIVE_EVERY_ROW = """<script>
// the test's own: keep what the page opened on, click every host's row, and keep a copy of what
// the detail panel showed for each
const openedOn = document.getElementById('detail').cloneNode(true);
openedOn.id = 'opened-on';
document.body.append(openedOn);
const shownFor = document.createElement('div');
shownFor.id = 'shown-for-test';
document.querySelectorAll('#hosts tr.host').forEach(tr => {
  tr.click();
  const copy = document.getElementById('detail').cloneNode(true);
  copy.removeAttribute('id');
  copy.setAttribute('data-n', tr.dataset.n);
  shownFor.append(copy);
});
document.body.append(shownFor);
</script>"""
SVG = "{http://www.w3.org/2000/svg}"
DRAWN = {"body", "h1", "div", "span", "table", "tbody", "tr", "th", "td", "b", "svg", "line", "text", "polyline", "circle", "script"}


@pytest.mark.slow
@pytest.mark.browser
def test_headless_chromium_draws_every_hostile_name_of_the_fleet_page_as_text(fleet_page, tmp_path):
    from urllib.parse import quote

    from tests import browser

    data = fleet_data(fleet_page)
    driven = tmp_path / "driven.html"
    driven.write_text(fleet_page.read_text(encoding="utf-8").replace("</body>", DRIVE_EVERY_ROW + "</body>"), encoding="utf-8")
    linked = visible(CLASSES["script_end"][0])  # fleet.html#host=NAME: a link to one host's history
    document = parsed(browser.dom(driven, tmp_path, "#host=" + quote(linked, safe="")))
    body = document.find("body")
    assert body.find(".//div[@id='opened-on']/b").text == linked
    assert not [element for element in document.iter() if not isinstance(element.tag, str)], "a comment"
    assert {element.tag.removeprefix(SVG) for element in body.iter()} <= DRAWN
    assert not [(element.tag, name) for element in document.iter() for name in element.attrib if name.startswith("on")]
    assert "data-owned" not in body.attrib
    assert len(scripts_of(document)) == 3  # the data, the page's script and the test's
    assert json.loads(scripts_of(document)[0].text) == data  # nothing the script did touched its data

    families = data["families"]
    head, *rows = body.find(".//table[@id='hosts']").iter("tr")
    assert [(th.text or "", th.get("title")) for th in head][2:-4] == [(family.removeprefix("test_"), family) for family in families]
    assert len(rows) == len(NAMES)
    for row in rows:
        host = data["hosts"][int(row.get("data-n"))]
        cells = list(row)
        assert [cells[0].text or "", cells[1].text or ""] == [host["host"], host["profile"]]
        titles = [f"{family}: {state or 'not run'}" for family, state in zip(families, host["states"], strict=True)]
        assert [cell.get("title") for cell in cells[2:-4]] == titles
        assert all(cell.text is None and len(cell) == 0 for cell in cells[2:-4])

    panels = body.find(".//div[@id='shown-for-test']")
    assert len(panels) == len(NAMES)
    for panel in panels:
        host = data["hosts"][int(panel.get("data-n"))]
        name, *rest = list(panel)
        assert (name.tag, name.text, name.tail) == ("b", host["host"], f" ({host['profile']})")
        whys = [element.text for element in rest if element.get("class") == "why"]
        assert whys == host["why"]
        svg = panel.find(SVG + "svg")
        assert svg.get("aria-label") == f"history of {host['host']}"
        legend = [span.text for span in panel.iter("span")]
        assert legend == [f"\u25a0 {family} " for family in (host["history"] or {"series": {}})["series"]]


@pytest.mark.slow
@pytest.mark.browser
def test_a_link_cut_short_opens_the_page_on_its_first_host(fleet_page, tmp_path):
    from tests import browser

    data = fleet_data(fleet_page)
    document = parsed(browser.dom(fleet_page, tmp_path, "#host=%E0%A4%A"))  # not a whole UTF-8 character
    rows = document.find(".//table[@id='hosts']").findall(".//tr[@class='host']")
    assert len(rows) == len(data["hosts"])
    first = data["hosts"][int(rows[0].get("data-n"))]
    assert document.find(".//div[@id='detail']/b").text == first["host"]


def test_no_page_script_writes_markup_and_no_writer_builds_it_from_strings():
    """The one rule, kept: the pages' scripts put text into the page, never markup, and the page
    writers leave markup to the templates (report/templating.py)."""
    templates = ROOT / "src" / "gpuaccept" / "report" / "templates"
    writes_markup = re.compile(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|srcdoc|createContextualFragment|DOMParser")
    scripts = [*templates.glob("*.js"), *templates.glob("*.j2")]
    assert scripts
    assert [(path.name, line) for path in scripts for line in path.read_text().splitlines() if writes_markup.search(line)] == []
    # markup marked safe: only this package's own, rendered by its templates and chart helpers
    own_markup = ("page.html.j2", "card.html.j2", "report.html.j2")
    assert [path.name for path in templates.glob("*.j2") if "|safe" in path.read_text() and path.name not in own_markup] == []
    writers = ROOT / "src" / "gpuaccept" / "report"
    markup = re.compile(r"""f["'][^"']*<(td|tr|th|li|div|span|table|ul|h1|b|html|body|script)\b""")
    built = [(path.name, line.strip()) for path in writers.glob("*.py") for line in path.read_text().splitlines() if markup.search(line)]
    assert built == []
