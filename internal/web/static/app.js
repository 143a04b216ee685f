// quarry serve page: plain JavaScript, no build step.
"use strict";
const $ = (id) => document.getElementById(id);
const SVGNS = "http://www.w3.org/2000/svg";

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

// ---- access: a bearer token kept in sessionStorage, asked for on a 401.
function authHeaders() {
  const t = sessionStorage.getItem("quarry-token");
  return t ? { Authorization: "Bearer " + t } : {};
}

async function api(path, opts) {
  const r = await fetch(path, Object.assign({ headers: authHeaders() }, opts || {}));
  if (r.status === 401) { $("auth").hidden = false; }
  return r;
}

$("auth").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem("quarry-token", $("token").value);
  $("auth").hidden = true;
  route();
});

// ---- highlighting: the text terms of a query (words, "phrases", a*b, /re/).
function highlighter(q) {
  const pats = [];
  const filter = q.split(/\s\|\s|^\|/)[0];
  const re = /"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|\/((?:[^\/\\]|\\.)+)\/|(\S+)/g;
  const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  let m, prev = "";
  while ((m = re.exec(filter)) !== null) {
    const negated = prev === "NOT" || prev.toUpperCase() === "NOT";
    prev = m[0];
    if (negated) continue;
    if (m[1] !== undefined || m[2] !== undefined) {
      const s = (m[1] ?? m[2]).replace(/\\(.)/g, "$1");
      if (s) pats.push(esc(s));
    } else if (m[3] !== undefined) {
      try { new RegExp(m[3]); pats.push(m[3].replace(/^\(\?i\)/, "")); } catch (e) { /* RE2 only */ }
    } else {
      let w = m[4].replace(/^\(+|\)+$/g, "");
      if (!w || w.startsWith("-") || /^(AND|OR|NOT)$/i.test(w)) continue;
      if (/^[A-Za-z_][A-Za-z0-9_.\-\[\]]*\s*(:|=|!=|<|>)/.test(w)) continue; // a field or parameter filter
      const parts = w.replace(/\\(.)/g, "$1").split("*").filter((p) => p);
      if (parts.length) pats.push(parts.map(esc).join(".*?"));
    }
  }
  if (!pats.length) return null;
  try { return new RegExp(pats.map((p) => "(?:" + p + ")").join("|"), "g"); } catch (e) { return null; }
}

function highlight(line, hre) {
  const out = document.createDocumentFragment();
  if (!hre) { out.append(line); return out; }
  let last = 0;
  hre.lastIndex = 0;
  let m;
  while ((m = hre.exec(line)) !== null) {
    if (m[0] === "") { hre.lastIndex++; continue; }
    out.append(line.slice(last, m.index), el("mark", {}, m[0]));
    last = m.index + m[0].length;
  }
  out.append(line.slice(last));
  return out;
}

// ---- search: NDJSON read as it streams in.
let searchCtl = null;

async function search(cursor) {
  const q = $("q").value, tenant = $("tenant").value.trim();
  if (!cursor) {
    $("results").textContent = "";
    $("rows").hidden = true;
    $("rows").tBodies[0].textContent = "";
    history.replaceState(null, "", "#search?q=" + encodeURIComponent(q));
  }
  $("error").hidden = true;
  $("more").hidden = true;
  if (searchCtl) searchCtl.abort();
  searchCtl = new AbortController();
  const p = new URLSearchParams({ q, limit: "200" });
  if (tenant) p.set("tenant", tenant);
  if (cursor) p.set("cursor", cursor);
  const t0 = performance.now();
  let r;
  try {
    r = await api("/api/search?" + p, { signal: searchCtl.signal });
  } catch (e) { if (e.name !== "AbortError") showError(String(e)); return; }
  if (!r.ok) {
    const e = await r.json().catch(() => ({ error: r.statusText }));
    showError(e.error, e.caret);
    return;
  }
  const hre = highlighter(q);
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = "", n = $("results").children.length;
  $("summary").textContent = "searching…";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const msg = JSON.parse(buf.slice(0, i));
      buf = buf.slice(i + 1);
      if (msg.type === "hit") { addHit(msg, hre); n++; }
      else if (msg.type === "columns") addColumns(msg.columns);
      else if (msg.type === "row") addRow(msg);
      else if (msg.type === "error") showError(msg.error);
      else if (msg.type === "end") {
        const ms = Math.round(performance.now() - t0);
        $("summary").textContent = (msg.more ? "first " : "") + (n || msg.count) + (n ? " lines" : " rows") + " in " + ms + " ms";
        if (msg.more) { $("more").hidden = false; $("more").dataset.cursor = msg.cursor; }
      }
    }
  }
}

function addHit(h, hre) {
  const tpl = el("a", { class: "tpl", href: "#templates/" + h.template_id, "data-id": h.template_id },
    "template " + h.template_id + " v" + h.template_version + ": " + h.template);
  const li = el("li", { class: "hit" },
    el("span", { class: "meta" }, h.ts.replace("T", " ").replace(/\.\d+Z$|Z$/, "") + "  " + h.tenant),
    el("span", { class: "line" }, highlight(h.line, hre)), tpl);
  $("results").append(li);
}

function addColumns(cols) {
  const t = $("rows");
  t.hidden = false;
  t.tHead.textContent = "";
  t.tHead.append(el("tr", {}, ...cols.map((c) => el("th", {}, c))));
}

function addRow(r) {
  $("rows").tBodies[0].append(el("tr", {}, ...r.keys.map((k) => el("td", {}, k)), el("td", { class: "num" }, String(r.count))));
}

function showError(msg, caret) {
  $("error").hidden = false;
  $("error-msg").textContent = msg;
  $("error-caret").textContent = caret || "";
  $("summary").textContent = "";
}

$("search-form").addEventListener("submit", (ev) => { ev.preventDefault(); search(); });
$("more").addEventListener("click", () => search($("more").dataset.cursor));

// ---- plots: bars for a count series, lines for the pipeline.
function plotBars(node, series) {
  node.textContent = "";
  const W = +node.getAttribute("width"), H = +node.getAttribute("height"), pad = 24;
  const pts = (series && series.points) || [];
  node.append(svg("line", { class: "axis", x1: pad, y1: H - pad, x2: W - 4, y2: H - pad }));
  if (!pts.length) return;
  const step = series.step_ms, t0 = pts[0][0], t1 = pts[pts.length - 1][0] + step;
  const maxN = Math.max(...pts.map((p) => p[1]));
  const x = (t) => pad + (W - pad - 4) * (t - t0) / (t1 - t0);
  const bw = Math.max(1, x(t0 + step) - x(t0) - 1);
  for (const [t, n] of pts) {
    const h = (H - 2 * pad) * n / maxN;
    const r = svg("rect", { class: "bar pt", x: x(t), y: H - pad - h, width: bw, height: Math.max(h, 1), "data-count": n });
    r.append(svg("title", {}));
    r.lastChild.textContent = new Date(t).toISOString() + ": " + n;
    node.append(r);
  }
  const lbl = (s, xx, yy, anchor) => { const e = svg("text", { x: xx, y: yy, "text-anchor": anchor || "start" }); e.textContent = s; node.append(e); };
  lbl(String(maxN), 2, pad);
  lbl(new Date(t0).toISOString().slice(0, 16).replace("T", " "), pad, H - 8);
  lbl(new Date(t1).toISOString().slice(0, 16).replace("T", " "), W - 4, H - 8, "end");
}

const COLORS = { wal: "#8250df", miner: "#1f6feb", encoder: "#1a7f37", reports: "#bf8700", committer: "#cf222e" };

function plotLines(node, hist, key) {
  node.textContent = "";
  const W = +node.getAttribute("width"), H = +node.getAttribute("height"), pad = 24;
  node.append(svg("line", { class: "axis", x1: pad, y1: H - pad, x2: W - 4, y2: H - pad }));
  const names = Object.keys(COLORS).filter((n) => hist.some((h) => h[key][n] != null));
  let maxV = 1;
  for (const h of hist) for (const n of names) if (h[key][n] != null) maxV = Math.max(maxV, h[key][n]);
  const x = (i) => pad + (W - pad - 4) * (hist.length < 2 ? 0.5 : i / (HIST - 1));
  const y = (v) => H - pad - 2 - (H - 2 * pad - 2) * v / maxV; // 0 sits just above the axis
  for (const n of names) {
    const pts = hist.map((h, i) => h[key][n] == null ? null : x(i).toFixed(1) + "," + y(h[key][n]).toFixed(1)).filter((p) => p);
    node.append(svg("polyline", { points: pts.join(" "), fill: "none", stroke: COLORS[n], "stroke-width": 2, class: "series", "data-stage": n }));
  }
  const t = svg("text", { x: 2, y: pad }); t.textContent = String(Math.round(maxV)); node.append(t);
}

// ---- templates
async function loadTemplates() {
  const tenant = $("tenant").value.trim();
  const p = new URLSearchParams(tenant ? { tenant } : {});
  const [all, fresh] = await Promise.all([api("/api/templates?" + p), api("/api/templates/new?since=1h&" + p)]);
  if (all.ok) fillList($("tpl-list"), (await all.json()).templates, "records");
  if (fresh.ok) fillList($("tpl-new"), (await fresh.json()).templates, "in_window");
}

function fillList(ol, ts, countKey) {
  ol.textContent = "";
  if (!ts.length) { ol.append(el("li", { class: "dim" }, "none")); return; }
  for (const t of ts) {
    const spark = svg("svg", { width: 80, height: 18, class: "spark" });
    const pts = (t.series && t.series.points) || [];
    const maxN = Math.max(1, ...pts.map((p) => p[1]));
    if (pts.length) {
      const t0 = pts[0][0], t1 = Math.max(t0 + 1, pts[pts.length - 1][0]);
      spark.append(svg("polyline", { fill: "none", stroke: "#1f6feb", points: pts.map((p) => (2 + 76 * (p[0] - t0) / (t1 - t0)).toFixed(1) + "," + (16 - 14 * p[1] / maxN).toFixed(1)).join(" ") }));
    }
    const li = el("li", { "data-id": t.id }, el("span", { class: "dim" }, "#" + t.id), el("code", {}, t.text), spark, el("span", { class: "dim" }, String(t[countKey])));
    li.addEventListener("click", () => { location.hash = "#templates/" + t.id; });
    ol.append(li);
  }
}

async function openTemplate(id) {
  const r = await api("/api/templates/" + encodeURIComponent(id));
  const d = $("tpl-detail");
  d.hidden = false;
  if (!r.ok) { $("tpl-title").textContent = "template " + id + ": " + ((await r.json().catch(() => ({}))).error || r.statusText); return; }
  const t = await r.json();
  $("tpl-title").textContent = "Template " + t.id + " · " + t.tenant + " · " + t.records + " records" + (t.merged_into ? " · merged into " + t.merged_into : "");
  $("tpl-text").textContent = t.text;
  $("tpl-step").textContent = t.series ? "(per " + t.series.step + ")" : "";
  plotBars($("tpl-plot"), t.series);
  const vb = $("tpl-versions").tBodies[0];
  vb.textContent = "";
  for (const v of t.versions) vb.append(el("tr", {}, el("td", {}, String(v.version)), el("td", {}, v.kind), el("td", { class: "num" }, String(v.records)), el("td", {}, el("code", {}, v.text))));
  const ol = $("tpl-samples");
  ol.textContent = "";
  for (const h of t.samples) ol.append(el("li", {}, h.line));
}

// ---- pipeline
const HIST = 90;
const hist = [];
let pollTimer = null;

async function pollStatus() {
  const r = await api("/api/status");
  if (!r.ok) return;
  const s = await r.json();
  const rates = {}, lags = {};
  if (s.wal_rate != null) rates.wal = s.wal_rate;
  for (const st of s.stages) { lags[st.name] = st.lag; if (st.rate != null) rates[st.name] = st.rate; }
  hist.push({ rates, lags });
  while (hist.length > HIST) hist.shift();
  const f = $("pipe-facts");
  f.textContent = "";
  const fact = (k, v) => f.append(el("div", {}, el("b", {}, String(v)), k));
  fact("high-water", s.high_water || s.lake_high_water);
  fact("newest Delta version", s.lake_version);
  if (s.nats) fact("WAL last seq", s.wal_last_seq);
  if (s.nats) fact("dead letters", s.dlq_msgs);
  for (const st of s.stages) fact(st.name + " lag (" + st.unit + ")", st.lag);
  if (!s.nats) fact("pipeline", "no --nats: lake only");
  plotLines($("plot-rate"), hist, "rates");
  plotLines($("plot-lag"), hist, "lags");
  $("legend").textContent = "";
  for (const [n, c] of Object.entries(COLORS)) $("legend").append(el("span", {}, el("i", { style: "background:" + c }), n));
  const tb = $("sources").tBodies[0];
  tb.textContent = "";
  for (const src of s.sources) tb.append(el("tr", {}, el("td", {}, src.source), el("td", {}, src.kind), el("td", { class: "num" }, String(src.rows)), el("td", { class: "num" }, String(src.frames)), el("td", {}, src.finalized_until), el("td", {}, src.behind || "")));
  $("pipe-errors").hidden = !(s.errors && s.errors.length);
  $("pipe-errors").textContent = (s.errors || []).join("\n");
}

// ---- routing by hash: #search?q=..., #templates, #templates/ID, #pipeline;
// any other hash (#q=..., a stale link) is the search view
const views = ["search", "templates", "pipeline"];
function route() {
  const h = location.hash.slice(1) || "search";
  let [view, arg] = h.split(/[\/?](.*)/s);
  if (!views.includes(view)) [view, arg] = ["search", h.startsWith("q=") ? h : ""];
  for (const v of views) {
    $("view-" + v).hidden = v !== view;
    document.querySelector('nav a[data-view="' + v + '"]').classList.toggle("active", v === view);
  }
  clearInterval(pollTimer);
  if (view === "templates") {
    loadTemplates();
    if (arg) openTemplate(arg);
  } else if (view === "pipeline") {
    pollStatus();
    pollTimer = setInterval(pollStatus, 2000);
  } else if (view === "search" && arg && arg.startsWith("q=")) {
    // a link to a query runs it, also when another query is in the box
    const q = decodeURIComponent(arg.slice(2));
    if (q !== $("q").value) {
      $("q").value = q;
      search();
    }
  }
}
window.addEventListener("hashchange", route);
route();
