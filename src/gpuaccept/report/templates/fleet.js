// The fleet page's rows and a host's history, built from the data above. Every name in the data
// (hosts, profiles, test families, messages, drivers) is put into the page as text (textContent,
// setAttribute), never as markup: nothing a results.json holds can become an element or a script.
const data = JSON.parse(document.getElementById('fleet-data').textContent);
const RANK = new Map([['failed', 5], ['outlier', 4], ['not_judged', 3], ['transient', 2], ['marginal', 1], ['passed', 0], ['skipped', -1], ['', -2]]);
const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];
const SVG = 'http://www.w3.org/2000/svg';
let rows = data.hosts.slice();
let sortKey = 'worst', sortDown = true;

// an element with its attributes and children; a child that is a string becomes a text node
function element(tag, attributes, ...children) {
  return fill(document.createElement(tag), attributes, children);
}
function drawing(tag, attributes, ...children) {
  return fill(document.createElementNS(SVG, tag), attributes, children);
}
function fill(node, attributes, children) {
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, String(value));
  node.append(...children.map(child => typeof child === 'string' || typeof child === 'number' ? String(child) : child));
  return node;
}

function rank(state) { return RANK.has(state) ? RANK.get(state) : -2; }
function worst(h) { return Math.max(-2, ...h.states.map(rank)); }
function sortRows() {
  const key = sortKey;
  const value = key === 'host' || key === 'profile' ? h => h[key]
    : key === 'worst' ? h => worst(h) * 1e6 + h.failed * 1e3 + h.outliers
    : key.startsWith('family:') ? h => rank(h.states[+key.slice(7)]) : h => h[key];
  // ties by host name, always ascending, whichever way the column sorts
  rows.sort((a, b) => { const x = value(a), y = value(b); const c = x < y ? -1 : x > y ? 1 : 0; return c ? (sortDown ? -c : c) : a.host < b.host ? -1 : 1; });
}
function heading(key, text, title, kind) {
  const attributes = title === undefined ? {'data-key': key} : {'data-key': key, title: title};
  const th = element('th', kind ? {class: kind, ...attributes} : attributes, text);
  th.onclick = () => { sortDown = sortKey === key ? !sortDown : true; sortKey = key; draw(); };
  return th;
}
function draw() {
  sortRows();
  const head = element('tr', {}, heading('host', 'host'), heading('profile', 'profile'),
    ...data.families.map((f, i) => heading(`family:${i}`, f.replace(/^test_/, ''), f, 'family')),
    heading('failed', 'failed'), heading('outliers', 'outliers'), heading('transient', 'transient'), heading('marginal', 'marginal'));
  const body = rows.map(h => {
    const tr = element('tr', {class: 'host', 'data-n': data.hosts.indexOf(h)}, element('td', {}, h.host), element('td', {}, h.profile),
      ...h.states.map((s, i) => element('td', {class: `cell ${RANK.has(s) && s ? s : 'none'}`, title: `${data.families[i]}: ${(s || 'not run').replace('_', ' ')}`})),
      element('td', {}, h.failed), element('td', {}, h.outliers), element('td', {}, h.transient), element('td', {}, h.marginal));
    tr.onclick = () => show(h);
    return tr;
  });
  document.getElementById('hosts').replaceChildren(head, ...body);
}
function show(h) {
  const own = h.history || {runs: [], series: {}};
  const W = 490, H = 250, L = 44, B = 64;
  const families = Object.keys(own.series);
  const all = families.flatMap(f => own.series[f]).filter(v => v !== null);
  const lo = Math.min(0.8, ...all), hi = Math.max(1.1, ...all);
  const n = own.runs.length;
  const x = i => L + (n <= 1 ? (W - L) / 2 : i * (W - L - 50) / (n - 1));  // room on the right for the last date, slanted
  const y = v => 10 + (hi - v) * (H - B - 10) / (hi - lo);
  const colour = f => PALETTE[Math.max(0, data.families.indexOf(f)) % PALETTE.length];
  const svg = drawing('svg', {viewBox: `0 0 ${W} ${H}`, width: '100%', role: 'img', 'aria-label': `history of ${h.host}`});
  for (const v of [lo, 1 - data.tolerance, 1, hi]) {
    svg.append(drawing('line', {x1: L, x2: W, y1: y(v), y2: y(v), stroke: v === 1 ? '#555' : '#ddd', 'stroke-dasharray': v === 1 - data.tolerance ? '4 3' : ''}));
    svg.append(drawing('text', {x: 2, y: y(v) + 3}, `${(v * 100).toFixed(0)}%`));
  }
  own.runs.forEach((r, i) => {
    svg.append(drawing('text', {x: x(i) - 10, y: H - B + 14, transform: `rotate(30 ${x(i) - 10} ${H - B + 14})`}, r[0].slice(5)));
  });
  families.forEach(f => {
    const points = own.series[f].map((v, i) => v === null ? null : [x(i), y(v)]).filter(p => p);
    svg.append(drawing('polyline', {fill: 'none', stroke: colour(f), 'stroke-width': 2, points: points.map(p => p.join(',')).join(' ')}));
    points.forEach(p => svg.append(drawing('circle', {cx: p[0], cy: p[1], r: 3, fill: colour(f)})));
  });
  const legend = families.map(f => element('span', {style: `color:${colour(f)}`}, `\u25a0 ${f} `));
  const drivers = own.runs.map(r => r[1]).filter((d, i, a) => d && a.indexOf(d) === i).join(', ');
  document.getElementById('detail').replaceChildren(
    element('b', {}, h.host), ` (${h.profile})`,
    ...h.why.map(w => element('div', {class: 'why'}, w)),
    element('div', {}, `each family's worst value per run, relative to the fleet median today (dashed: the ${(data.tolerance * 100).toFixed(0)}% tolerance); drivers: ${drivers}`),
    svg, element('div', {}, ...legend));
}
draw();
// fleet.html#host=NAME opens on that host's history (a link from a ticket or a chat)
let wanted = '';
try { wanted = decodeURIComponent(location.hash.replace(/^#host=/, '')); } catch (malformed) { /* a link cut short: the first host */ }
if (rows.length) show(rows.find(h => h.host === wanted) || rows[0]);
