"""The fleet page: one self-contained HTML file, hosts x test families as a heat map (failed,
outlier, not judged, transient, marginal, passed, and skipped where the profile asked nothing: a
family nothing judged is never painted as passed), sortable by any column, and a host's history
drawn when its row is clicked. It fits a 1400-px window with the ten families of a full run: the
family names stand upright, and the history panel goes below the table where it has no room beside it. The data is one JSON object inside the page, drawn by the script beside it: the
rows of 10,000 hosts are built by the browser, not written out as markup.
"""

from __future__ import annotations

import json
from typing import Any

STYLE = """
body { font: 13px system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; margin: 0 0 4px; }
.legend span { display: inline-block; padding: 2px 8px; margin-right: 4px; border-radius: 3px; }
table { border-collapse: collapse; margin-top: 8px; }
th { position: sticky; top: 0; background: #f4f4f4; cursor: pointer; padding: 4px 6px; text-align: left; border-bottom: 1px solid #ccc; }
th:hover { background: #e6e6e6; }
td { padding: 2px 6px; border-bottom: 1px solid #eee; white-space: nowrap; }
td.cell { width: 28px; text-align: center; }
tr.host { cursor: pointer; }
tr.host:hover td { outline: 1px solid #999; }
.failed { background: #d73027; color: #fff; } .outlier { background: #fc8d59; } .transient { background: #fee08b; }
.marginal { background: #d9ef8b; } .passed { background: #91cf60; } .none { background: #eee; }
.not_judged { background: #9e9ac8; color: #fff; } .skipped { background: repeating-linear-gradient(45deg, #f4f4f4 0 3px, #d4d4d4 3px 5px); }
th.family { writing-mode: vertical-rl; transform: rotate(180deg); vertical-align: bottom; padding: 6px 2px; white-space: nowrap; }
.split { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
#detail { position: sticky; top: 0; flex: 1 1 380px; max-width: 520px; min-width: 340px; padding: 8px; border: 1px solid #ccc; background: #fff; }
#detail .why { color: #a00; margin: 4px 0; white-space: normal; }
svg text { font-size: 10px; }
"""

SCRIPT = r"""
const data = JSON.parse(document.getElementById('fleet-data').textContent);
const RANK = {failed: 5, outlier: 4, not_judged: 3, transient: 2, marginal: 1, passed: 0, skipped: -1, '': -2};
const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];
let rows = data.hosts.slice();
let sortKey = 'worst', sortDown = true;
function worst(h) { return Math.max(...h.states.map(s => RANK[s])); }
function sortRows() {
  const key = sortKey;
  const value = key === 'host' || key === 'profile' ? h => h[key]
    : key === 'worst' ? h => worst(h) * 1e6 + h.failed * 1e3 + h.outliers
    : key.startsWith('family:') ? h => RANK[h.states[+key.slice(7)]] : h => h[key];
  // ties by host name, always ascending, whichever way the column sorts
  rows.sort((a, b) => { const x = value(a), y = value(b); const c = x < y ? -1 : x > y ? 1 : 0; return c ? (sortDown ? -c : c) : a.host < b.host ? -1 : 1; });
}
function draw() {
  sortRows();
  const head = ['<tr><th data-key="host">host</th><th data-key="profile">profile</th>']
    .concat(data.families.map((f, i) => `<th class="family" data-key="family:${i}" title="${f}">${f.replace(/^test_/, '')}</th>`))
    .concat(['<th data-key="failed">failed</th><th data-key="outliers">outliers</th><th data-key="transient">transient</th><th data-key="marginal">marginal</th></tr>']);
  const body = rows.map((h, n) => `<tr class="host" data-n="${data.hosts.indexOf(h)}"><td>${h.host}</td><td>${h.profile}</td>`
    + h.states.map((s, i) => `<td class="cell ${s || 'none'}" title="${data.families[i]}: ${(s || 'not run').replace('_', ' ')}"></td>`).join('')
    + `<td>${h.failed}</td><td>${h.outliers}</td><td>${h.transient}</td><td>${h.marginal}</td></tr>`);
  document.getElementById('hosts').innerHTML = head.join('') + body.join('');
  document.querySelectorAll('#hosts th').forEach(th => th.onclick = () => {
    sortDown = sortKey === th.dataset.key ? !sortDown : true; sortKey = th.dataset.key; draw();
  });
  document.querySelectorAll('#hosts tr.host').forEach(tr => tr.onclick = () => show(data.hosts[+tr.dataset.n]));
}
function esc(text) { const d = document.createElement('div'); d.textContent = text; return d.innerHTML; }
function show(h) {
  const own = data.history[h.host] || {runs: [], series: {}};
  const W = 490, H = 250, L = 44, B = 64;
  const families = Object.keys(own.series);
  const all = families.flatMap(f => own.series[f]).filter(v => v !== null);
  const lo = Math.min(0.8, ...all), hi = Math.max(1.1, ...all);
  const n = own.runs.length;
  const x = i => L + (n <= 1 ? (W - L) / 2 : i * (W - L - 50) / (n - 1));  // room on the right for the last date, slanted
  const y = v => 10 + (hi - v) * (H - B - 10) / (hi - lo);
  let svg = `<svg viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-label="history of ${esc(h.host)}">`;
  for (const v of [lo, 1 - data.tolerance, 1, hi]) {
    svg += `<line x1="${L}" x2="${W}" y1="${y(v)}" y2="${y(v)}" stroke="${v === 1 ? '#555' : '#ddd'}" stroke-dasharray="${v === 1 - data.tolerance ? '4 3' : ''}"/>`;
    svg += `<text x="2" y="${y(v) + 3}">${(v * 100).toFixed(0)}%</text>`;
  }
  own.runs.forEach((r, i) => { svg += `<text x="${x(i) - 10}" y="${H - B + 14}" transform="rotate(30 ${x(i) - 10} ${H - B + 14})">${esc(r[0].slice(5))}</text>`; });
  families.forEach((f, k) => {
    const points = own.series[f].map((v, i) => v === null ? null : [x(i), y(v)]).filter(p => p);
    const colour = PALETTE[data.families.indexOf(f) % PALETTE.length];
    svg += `<polyline fill="none" stroke="${colour}" stroke-width="2" points="${points.map(p => p.join(',')).join(' ')}"/>`;
    points.forEach(p => { svg += `<circle cx="${p[0]}" cy="${p[1]}" r="3" fill="${colour}"/>`; });
  });
  svg += '</svg>';
  const legend = families.map(f => `<span style="color:${PALETTE[data.families.indexOf(f) % PALETTE.length]}">&#9632; ${esc(f)}</span>`).join(' ');
  const drivers = own.runs.map(r => r[1]).filter((d, i, a) => d && a.indexOf(d) === i).join(', ');
  document.getElementById('detail').innerHTML = `<b>${esc(h.host)}</b> (${esc(h.profile)})`
    + h.why.map(w => `<div class="why">${esc(w)}</div>`).join('')
    + `<div>each family's worst value per run, relative to the fleet median today (dashed: the ${(data.tolerance * 100).toFixed(0)}% tolerance); drivers: ${esc(drivers)}</div>`
    + svg + `<div>${legend}</div>`;
}
draw();
// fleet.html#host=NAME opens on that host's history (a link from a ticket or a chat)
const wanted = decodeURIComponent(location.hash.replace(/^#host=/, ''));
if (rows.length) show(rows.find(h => h.host === wanted) || rows[0]);
"""


def render_fleet_page(data: dict[str, Any]) -> str:
    summary = data["summary"]
    states = ("failed", "outlier", "not_judged", "transient", "marginal", "passed", "skipped")
    legend = "".join(f'<span class="{state}">{state.replace("_", " ")}</span>' for state in states)
    # `</` inside the JSON would end the script element early
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>gpu-accept fleet</title>'
        f"<style>{STYLE}</style></head><body>"
        f"<h1>gpu-accept fleet: {summary['hosts']} host(s), {summary['failed']} did not pass their profile, "
        f"{summary['outliers']} outlier value(s)</h1>"
        f'<div class="legend">{legend} each host\'s latest run; click a column to sort, a host for its history</div>'
        '<div class="split"><table id="hosts"></table><div id="detail"></div></div>'
        f'<script type="application/json" id="fleet-data">{payload}</script>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )
