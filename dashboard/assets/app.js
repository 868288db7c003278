// The ART dashboard page: plain JavaScript, no libraries, talking to the
// JSON API beside it (api/runs, api/run, api/trajectories, api/trajectory)
// and listening to api/events for live updates.
"use strict";

const $ = (sel) => document.querySelector(sel);
const COLORS = ["#3a6fd8", "#e0663a", "#2a9d5c", "#9b59b6", "#c0392b", "#16a3b8", "#b8860b", "#555"];

const state = {
  runs: [],            // api/runs rows
  focus: "",           // PROJECT/NAME shown
  overlay: new Set(),  // other runs drawn on the charts
  details: new Map(),  // id → api/run answer
  openTables: new Set(), // metrics whose data table is open
  tab: "charts",
  t: { split: "", step: null, followLatest: true, sort: "-reward", min: "", max: "", q: "", offset: 0, limit: 50, index: null },
};

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function fmt(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(3) : v.toFixed(4).replace(/0+$/, "").replace(/\.$/, "");
}

// api fetches a JSON answer; an error answer becomes an Error with the
// server's message.
async function api(path, params) {
  const url = "api/" + path + (params ? "?" + new URLSearchParams(params) : "");
  let res;
  try {
    res = await fetch(url, { headers: { Accept: "application/json" } });
  } catch (e) {
    throw new Error("cannot reach the dashboard server: " + e.message);
  }
  let body;
  try {
    body = await res.json();
  } catch (e) {
    throw new Error(`${url}: HTTP ${res.status}, not JSON`);
  }
  if (!res.ok) throw new Error(body.error || `${url}: HTTP ${res.status}`);
  return body;
}

function banner(msg, warn) {
  const b = $("#banner");
  b.hidden = !msg;
  b.textContent = msg || "";
  b.className = warn ? "warn" : "";
}

// ---- URL hash: run, tab, split, step, index ----

function readHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  if (h.get("run")) state.focus = h.get("run");
  if (h.get("tab")) state.tab = h.get("tab");
  if (h.get("split")) state.t.split = h.get("split");
  if (h.get("step")) { state.t.step = Number(h.get("step")); state.t.followLatest = false; }
  if (h.get("index")) state.t.index = Number(h.get("index"));
  if (h.get("overlay")) state.overlay = new Set(h.get("overlay").split(",").filter(Boolean));
}

function writeHash() {
  const h = new URLSearchParams();
  if (state.focus) h.set("run", state.focus);
  h.set("tab", state.tab);
  if (state.overlay.size) h.set("overlay", [...state.overlay].join(","));
  if (state.tab === "trajectories" && state.t.split) {
    h.set("split", state.t.split);
    if (state.t.step !== null && !state.t.followLatest) h.set("step", state.t.step);
    if (state.t.index !== null) h.set("index", state.t.index);
  }
  history.replaceState(null, "", "#" + h.toString());
}

// ---- runs list ----

async function loadRuns() {
  try {
    const r = await api("runs");
    state.runs = r.runs;
    $("#root").textContent = r.root;
  } catch (e) {
    state.runs = [];
    $("#runs").innerHTML = `<p class="muted">No runs.</p>`;
    banner(e.message);
    return false;
  }
  renderRuns();
  return true;
}

function renderRuns() {
  const nav = $("#runs");
  if (!state.runs.length) {
    nav.innerHTML = `<p class="muted">No models under this folder yet.</p>`;
    return;
  }
  let html = "", project = null;
  for (const r of state.runs) {
    if (r.project !== project) {
      project = r.project;
      html += `<h2>${esc(project)}</h2>`;
    }
    const reward = r.val_reward !== undefined ? "val " + fmt(r.val_reward) : r.train_reward !== undefined ? "train " + fmt(r.train_reward) : "";
    html += `<div class="run${r.id === state.focus ? " active" : ""}" data-id="${esc(r.id)}">
      <input type="checkbox" title="overlay on the charts" ${state.overlay.has(r.id) ? "checked" : ""} ${r.id === state.focus ? "disabled" : ""}>
      <button type="button" class="name"${r.id === state.focus ? ` aria-current="true"` : ""}>${esc(r.name)}</button>
      <span class="meta">${r.step >= 0 ? "@" + r.step : ""} ${esc(reward)}</span>
      ${r.warning ? `<span class="warn" title="${esc(r.warning)}">⚠</span>` : ""}
    </div>`;
  }
  nav.innerHTML = html;
}

$("#runs").addEventListener("click", (ev) => {
  const row = ev.target.closest(".run");
  if (!row) return;
  const id = row.dataset.id;
  if (ev.target.matches("input[type=checkbox]")) {
    if (ev.target.checked) state.overlay.add(id); else state.overlay.delete(id);
    loadOverlay().then(() => { writeHash(); renderCharts(); });
    return;
  }
  if (id === state.focus) return;
  state.overlay.delete(id);
  state.focus = id;
  state.t = { ...state.t, split: "", step: null, followLatest: true, offset: 0, index: null };
  writeHash();
  renderRuns();
  showRun();
});

// ---- one run ----

async function loadDetail(id) {
  const d = await api("run", { run: id });
  state.details.set(id, d);
  return d;
}

async function loadOverlay() {
  for (const id of state.overlay) {
    if (!state.details.has(id)) {
      try { await loadDetail(id); } catch (e) { state.overlay.delete(id); banner(e.message); }
    }
  }
}

async function showRun() {
  banner("");
  if (!state.focus) {
    $("#runhead").innerHTML = state.runs.length ? `<p class="muted">Pick a model on the left.</p>` : "";
    $("#tabs").hidden = true;
    for (const s of document.querySelectorAll(".tab")) s.hidden = true;
    return;
  }
  let d;
  try {
    d = await loadDetail(state.focus);
  } catch (e) {
    hideRun(e.message);
    return;
  }
  await loadOverlay();
  if (d.warnings && d.warnings.length) banner("Warning: " + d.warnings.join("\n"), true);
  renderHead(d);
  $("#tabs").hidden = false;
  selectTab(state.tab);
}

// hideRun clears the shown model (it cannot be read, or is gone) and says
// why.
function hideRun(msg) {
  state.details.delete(state.focus);
  $("#runhead").innerHTML = "";
  $("#tabs").hidden = true;
  for (const s of document.querySelectorAll(".tab")) s.hidden = true;
  banner(msg);
}

function renderHead(d) {
  const model = d.model || {};
  const best = (d.checkpoints || []).find((c) => c.best);
  $("#runhead").innerHTML = `<h2>${esc(d.id)}</h2>
    <div class="muted">${model.base_model ? "base " + esc(model.base_model) + " · " : ""}${d.step >= 0 ? "step " + d.step : "no checkpoint yet"}
    ${best ? ` · best val/reward ${fmt(best.val_reward)} at step ${best.step}` : ""}
    ${d.updated ? " · updated " + esc(new Date(d.updated).toLocaleString()) : ""}</div>`;
}

function selectTab(tab) {
  if (!["charts", "trajectories", "checkpoints"].includes(tab)) tab = "charts";
  state.tab = tab;
  for (const b of document.querySelectorAll("#tabs button")) {
    b.classList.toggle("active", b.dataset.tab === tab);
    b.setAttribute("aria-selected", String(b.dataset.tab === tab));
  }
  for (const s of document.querySelectorAll(".tab")) s.hidden = s.id !== tab;
  writeHash();
  if (tab === "charts") renderCharts();
  if (tab === "checkpoints") renderCheckpoints();
  if (tab === "trajectories") renderTrajectoryControls(true);
}

$("#tabs").addEventListener("click", (ev) => {
  if (ev.target.dataset.tab) selectTab(ev.target.dataset.tab);
});

// ---- charts ----

// metricOrder puts rewards first, then train/ and val/ metrics, then the
// other sections (loss/, data/, time/, costs/ ...), each alphabetically.
function metricOrder(a, b) {
  const rank = (k) => (/(^|\/)reward$/.test(k) ? 0 : k.startsWith("train/") ? 1 : k.startsWith("val/") ? 2 : k.startsWith("loss/") ? 3 : 4);
  return rank(a) - rank(b) || a.localeCompare(b);
}

function renderCharts() {
  const d = state.details.get(state.focus);
  if (!d) return;
  const runs = [d, ...[...state.overlay].map((id) => state.details.get(id)).filter(Boolean)];
  const filter = $("#metric-filter").value.trim().toLowerCase();
  const keys = new Set();
  for (const r of runs) for (const k of Object.keys(r.metrics || {})) keys.add(k);
  const shown = [...keys].filter((k) => k !== "training_step" && (!filter || k.toLowerCase().includes(filter))).sort(metricOrder);
  $("#legend").innerHTML = runs.map((r, i) => `<span style="--c:${COLORS[i % COLORS.length]}">${esc(r.id)}</span>`).join("");
  if (!shown.length) {
    $("#chart-grid").innerHTML = `<p class="muted">${keys.size ? "No metric matches the filter." : "No metrics logged yet (history.jsonl is empty or missing)."}</p>`;
    return;
  }
  $("#chart-grid").innerHTML = shown.map((k) => chartHTML(k, runs)).join("");
}

const W = 400, H = 160, ML = 44, MR = 8, MT = 6, MB = 20;

function chartHTML(key, runs) {
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const r of runs) for (const [x, y] of (r.metrics[key] || [])) {
    x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
  }
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { const p = Math.abs(y0) * 0.1 || 1; y0 -= p; y1 += p; }
  const sx = (x) => ML + ((x - x0) / (x1 - x0)) * (W - ML - MR);
  const sy = (y) => MT + (1 - (y - y0) / (y1 - y0)) * (H - MT - MB);
  let lines = "";
  runs.forEach((r, i) => {
    const pts = r.metrics[key];
    if (!pts || !pts.length) return;
    const c = COLORS[i % COLORS.length];
    const attrs = `data-run="${esc(r.id)}" data-n="${pts.length}"`;
    if (pts.length === 1) {
      lines += `<circle class="series" ${attrs} cx="${sx(pts[0][0]).toFixed(1)}" cy="${sy(pts[0][1]).toFixed(1)}" r="3" fill="${c}"/>`;
    } else {
      const p = pts.map(([x, y]) => sx(x).toFixed(1) + "," + sy(y).toFixed(1)).join(" ");
      lines += `<polyline class="series" ${attrs} points="${p}" fill="none" stroke="${c}" stroke-width="1.5" vector-effect="non-scaling-stroke"/>`;
    }
  });
  const axis = `<line x1="${ML}" y1="${H - MB}" x2="${W - MR}" y2="${H - MB}" stroke="#ccd"/>
    <line x1="${ML}" y1="${MT}" x2="${ML}" y2="${H - MB}" stroke="#ccd"/>
    <text class="axis" x="${ML - 4}" y="${MT + 8}" text-anchor="end">${esc(fmt(y1))}</text>
    <text class="axis" x="${ML - 4}" y="${H - MB}" text-anchor="end">${esc(fmt(y0))}</text>
    <text class="axis" x="${ML}" y="${H - 6}">${fmt(x0)}</text>
    <text class="axis" x="${W - MR}" y="${H - 6}" text-anchor="end">step ${fmt(x1)}</text>`;
  const open = state.openTables.has(key);
  return `<div class="chart" data-metric="${esc(key)}" data-x0="${x0}" data-x1="${x1}"><h3>${esc(key)}</h3>
    <svg viewBox="0 0 ${W} ${H}" preserveAspectRatio="none" role="img" aria-label="${esc(chartSummary(key, runs))}">${axis}${lines}</svg>
    <details class="data"${open ? " open" : ""}><summary>table</summary>${open ? chartTable(key, runs) : ""}</details></div>`;
}

// chartSummary is a chart's text alternative: for each model, its points,
// steps, last value and range.
function chartSummary(key, runs) {
  return key + ": " + runs.map((r) => {
    const pts = r.metrics[key] || [];
    if (!pts.length) return `${r.id}: no points`;
    const [x, y] = pts[pts.length - 1];
    if (pts.length === 1) return `${r.id}: 1 point, ${fmt(y)} at step ${fmt(x)}`;
    let lo = Infinity, hi = -Infinity;
    for (const p of pts) { lo = Math.min(lo, p[1]); hi = Math.max(hi, p[1]); }
    return `${r.id}: ${pts.length} points, steps ${fmt(pts[0][0])} to ${fmt(x)}, last ${fmt(y)}, min ${fmt(lo)}, max ${fmt(hi)}`;
  }).join("; ");
}

// chartTable is a chart's values as a table: a row per step, a column per
// model (the last value logged at that step).
function chartTable(key, runs) {
  const cols = runs.map((r) => new Map((r.metrics[key] || []).map(([x, y]) => [x, y])));
  const steps = [...new Set(cols.flatMap((c) => [...c.keys()]))].sort((a, b) => a - b);
  return `<table><thead><tr><th>step</th>${runs.map((r) => `<th>${esc(r.id)}</th>`).join("")}</tr></thead><tbody>${
    steps.map((s) => `<tr><td>${fmt(s)}</td>${cols.map((c) => `<td>${fmt(c.get(s))}</td>`).join("")}</tr>`).join("")}</tbody></table>`;
}

// A chart's table is drawn when opened (a long run has thousands of rows),
// and stays open across redraws.
$("#chart-grid").addEventListener("toggle", (ev) => {
  const det = ev.target;
  if (!det.matches || !det.matches("details.data")) return;
  const key = det.closest(".chart").dataset.metric;
  if (!det.open) { state.openTables.delete(key); det.querySelector("table")?.remove(); return; }
  state.openTables.add(key);
  if (det.querySelector("table")) return;
  const d = state.details.get(state.focus);
  const runs = [d, ...[...state.overlay].map((id) => state.details.get(id)).filter(Boolean)];
  det.insertAdjacentHTML("beforeend", chartTable(key, runs));
}, true);

$("#metric-filter").addEventListener("input", () => renderCharts());

// A tooltip with each run's value at the step under the pointer.
$("#chart-grid").addEventListener("mousemove", (ev) => {
  const chart = ev.target.closest(".chart");
  for (const t of document.querySelectorAll(".chart .tip")) if (!chart || t.parentNode !== chart) t.remove();
  if (!chart) return;
  const svg = chart.querySelector("svg");
  const box = svg.getBoundingClientRect();
  const fx = ((ev.clientX - box.left) / box.width) * W;
  const x0 = Number(chart.dataset.x0), x1 = Number(chart.dataset.x1);
  const step = x0 + ((fx - ML) / (W - ML - MR)) * (x1 - x0);
  const key = chart.dataset.metric;
  const runs = [state.focus, ...state.overlay];
  const parts = [];
  for (const id of runs) {
    const pts = (state.details.get(id) || { metrics: {} }).metrics[key];
    if (!pts || !pts.length) continue;
    let best = pts[0];
    for (const p of pts) if (Math.abs(p[0] - step) < Math.abs(best[0] - step)) best = p;
    parts.push(`${id.split("/")[1]} @${best[0]}: ${fmt(best[1])}`);
  }
  let tip = chart.querySelector(".tip");
  if (!tip) { tip = document.createElement("div"); tip.className = "tip"; chart.appendChild(tip); }
  tip.textContent = parts.join(" · ");
  tip.style.left = Math.min(ev.clientX - chart.getBoundingClientRect().left + 8, chart.clientWidth - 120) + "px";
  tip.style.top = "1.6em";
});
$("#chart-grid").addEventListener("mouseleave", () => { for (const t of document.querySelectorAll(".chart .tip")) t.remove(); });

// ---- checkpoints ----

function renderCheckpoints() {
  const d = state.details.get(state.focus);
  const body = $("#ckpt tbody");
  if (!d.checkpoints || !d.checkpoints.length) {
    body.innerHTML = `<tr><td colspan="4" class="muted">No checkpoints yet.</td></tr>`;
    return;
  }
  body.innerHTML = d.checkpoints.map((c) => `<tr data-step="${c.step}"><td>${c.step}</td><td>${fmt(c.val_reward)}</td><td>${fmt(c.train_reward)}</td>
    <td>${c.best ? `<span class="best">★ best val/reward</span>` : ""}</td></tr>`).join("");
}

// ---- trajectories ----

function renderTrajectoryControls(load) {
  const d = state.details.get(state.focus);
  const t = state.t;
  const splits = Object.keys(d.trajectories || {}).sort();
  if (!splits.length) {
    $("#t-split").innerHTML = "";
    $("#t-step").innerHTML = "";
    $("#t-list tbody").innerHTML = `<tr><td colspan="5" class="muted">No trajectories logged for this model.</td></tr>`;
    $("#t-detail").innerHTML = "";
    $("#t-stats").textContent = "";
    return;
  }
  if (!splits.includes(t.split)) t.split = splits.includes("train") ? "train" : splits[0];
  const steps = d.trajectories[t.split];
  if (t.followLatest || !steps.includes(t.step)) {
    if (!t.followLatest && t.step !== null) banner(`No ${t.split} trajectories at step ${t.step}; showing step ${steps[steps.length - 1]}.`, true);
    t.step = steps[steps.length - 1];
  }
  $("#t-split").innerHTML = splits.map((s) => `<option${s === t.split ? " selected" : ""}>${esc(s)}</option>`).join("");
  $("#t-step").innerHTML = [...steps].reverse().map((s) => `<option value="${s}"${s === t.step ? " selected" : ""}>${s}</option>`).join("");
  $("#t-sort").value = t.sort;
  if (load) loadTrajectories();
}

// Answers can arrive out of order (a filter typed quickly, a live update
// during a click): only the latest request of each kind may draw, or a stale
// list or trajectory would replace the one asked for last.
const latest = { list: 0, detail: 0 };

// loadTrajectories draws the list of the shown step (and the open
// trajectory). quiet (a live update) leaves the page alone when the list
// is unchanged, so that focus and the open trajectory stay as they are.
async function loadTrajectories({ quiet = false } = {}) {
  const t = state.t;
  const params = { run: state.focus, split: t.split, step: t.step, sort: t.sort, offset: t.offset, limit: t.limit };
  if (t.min !== "") params.min = t.min;
  if (t.max !== "") params.max = t.max;
  if (t.q) params.q = t.q;
  const seq = ++latest.list;
  let r;
  try {
    r = await api("trajectories", params);
  } catch (e) {
    if (seq !== latest.list || quiet) return;
    $("#t-list tbody").innerHTML = `<tr><td colspan="5">${esc(e.message)}</td></tr>`;
    banner(e.message);
    return;
  }
  if (seq !== latest.list) return;
  const drawn = JSON.stringify([params, r]);
  if (quiet && drawn === t.drawn) return;
  t.drawn = drawn;
  const rw = r.reward || {};
  $("#t-stats").textContent = `${r.total} trajectories at ${t.split} step ${t.step} (reward mean ${fmt(rw.mean)}, min ${fmt(rw.min)}, max ${fmt(rw.max)}); ${r.matched} match.`;
  $("#t-list tbody").innerHTML = r.items.length ? r.items.map((it) => `<tr tabindex="0" data-index="${it.index}"${it.index === t.index ? ` class="active"` : ""}>
    <td>${it.index}</td><td>${it.group}</td><td class="reward">${fmt(it.reward)}</td><td>${it.messages}</td><td class="preview">${esc(it.preview)}</td></tr>`).join("")
    : `<tr><td colspan="5" class="muted">No trajectory matches.</td></tr>`;
  $("#t-page").textContent = r.matched ? `${r.offset + 1}–${r.offset + r.items.length} of ${r.matched}` : "";
  $("#t-prev").disabled = r.offset === 0;
  $("#t-next").disabled = r.offset + r.items.length >= r.matched;
  writeHash();
  if (t.index !== null && t.index < r.total) loadTrajectory(t.index);
  else {
    latest.detail++; // a detail still loading belongs to another list
    $("#t-detail").innerHTML = `<p class="muted">Pick a trajectory.</p>`;
  }
}

function trajectoryFilterChanged() {
  const t = state.t;
  t.split = $("#t-split").value;
  t.sort = $("#t-sort").value;
  t.min = $("#t-min").value;
  t.max = $("#t-max").value;
  t.q = $("#t-q").value.trim();
  t.offset = 0;
  loadTrajectories();
}

$("#t-split").addEventListener("change", () => { state.t.split = $("#t-split").value; state.t.followLatest = true; state.t.index = null; renderTrajectoryControls(true); });
$("#t-step").addEventListener("change", () => {
  const d = state.details.get(state.focus);
  const steps = d.trajectories[state.t.split];
  state.t.step = Number($("#t-step").value);
  state.t.followLatest = state.t.step === steps[steps.length - 1];
  state.t.offset = 0;
  state.t.index = null;
  loadTrajectories();
});
for (const id of ["#t-sort", "#t-min", "#t-max"]) $(id).addEventListener("change", trajectoryFilterChanged);
let qTimer;
$("#t-q").addEventListener("input", () => { clearTimeout(qTimer); qTimer = setTimeout(trajectoryFilterChanged, 250); });
$("#t-prev").addEventListener("click", () => { state.t.offset = Math.max(0, state.t.offset - state.t.limit); loadTrajectories(); });
$("#t-next").addEventListener("click", () => { state.t.offset += state.t.limit; loadTrajectories(); });
// A trajectory opens on a click, or on Enter or Space on its focused row
// (rows are in the Tab order).
$("#t-list").addEventListener("click", (ev) => openRow(ev.target.closest("tr[data-index]")));
$("#t-list").addEventListener("keydown", (ev) => {
  if (ev.key !== "Enter" && ev.key !== " ") return;
  const tr = ev.target.closest("tr[data-index]");
  if (!tr) return;
  ev.preventDefault();
  openRow(tr);
});
function openRow(tr) {
  if (!tr) return;
  for (const r of document.querySelectorAll("#t-list tr.active")) r.classList.remove("active");
  tr.classList.add("active");
  state.t.index = Number(tr.dataset.index);
  writeHash();
  loadTrajectory(state.t.index);
}

// tokenColor maps a token's probability to red (unlikely) → yellow → green
// (grey when NaN).
function tokenColor(p) {
  if (Number.isNaN(p)) return "#ddd";
  return `hsl(${(p * 120).toFixed(0)},${p > 0.5 ? 60 : 85}%,${p > 0.5 ? 85 : 80}%)`;
}
// tokenClass is a token's colour class: one of 41 (p0 … p40 by probability,
// pn for NaN) rather than a style each: a 30,000-token answer drew in
// 1.3-1.5 s instead of 2.0 (TestLongTrajectory, a loaded machine). A
// logprob may come as "-Infinity", "Infinity" or "NaN" (JSON has no such
// numbers).
function tokenClass(logprob) {
  const p = Math.exp(Number(logprob));
  return Number.isNaN(p) ? "pn" : "p" + Math.round(p * 40);
}
{
  const rules = [`.tok.pn{background:${tokenColor(NaN)}}`];
  for (let i = 0; i <= 40; i++) rules.push(`.tok.p${i}{background:${tokenColor(i / 40)}}`);
  const style = document.createElement("style");
  style.textContent = rules.join("\n");
  document.head.append(style);
}

function kvTable(obj) {
  if (!obj || typeof obj !== "object" || !Object.keys(obj).length) return "";
  return `<table class="kv">${Object.entries(obj).map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(typeof v === "object" ? JSON.stringify(v) : fmt(v))}</td></tr>`).join("")}</table>`;
}

function messageHTML(m) {
  let body = "";
  if (m.tokens && m.tokens.length) {
    body = `<div class="content tokens">${m.tokens.map(([tok, lp]) =>
      `<span class="tok ${tokenClass(lp)}" title="logprob ${fmt(Number(lp))} (p=${fmt(Math.exp(Number(lp)))})">${esc(tok)}</span>`).join("")}</div>`;
  } else if (m.content) {
    body = `<div class="content">${esc(m.content)}</div>`;
  }
  // tool_calls is a JSON array of {id, function: {name, arguments}} as
  // written by ART; anything else in the file (one object, text that is not
  // JSON, other values) is shown as written rather than breaking the pane.
  const calls = m.tool_calls === undefined || m.tool_calls === null ? [] : Array.isArray(m.tool_calls) ? m.tool_calls : [m.tool_calls];
  for (const c of calls) {
    const f = c && typeof c === "object" && c.function && typeof c.function === "object" ? c.function : null;
    if (!f) {
      body += `<pre class="toolcall">→ ${esc(typeof c === "string" ? c : JSON.stringify(c))}</pre>`;
      continue;
    }
    let args = typeof f.arguments === "string" ? f.arguments : f.arguments === undefined ? "" : JSON.stringify(f.arguments);
    try { args = JSON.stringify(JSON.parse(args), null, 1); } catch (e) { /* shown as sent */ }
    body += `<pre class="toolcall">→ ${esc(f.name || "?")}(${esc(args)})${c.id ? "  [" + esc(c.id) + "]" : ""}</pre>`;
  }
  const label = m.role + (m.tool_call_id ? ` · result of ${m.tool_call_id}` : "") + (m.trainable ? " · sampled" : "");
  return `<div class="msg ${esc(m.role)}"><div class="role">${esc(label)}</div>${body}</div>`;
}

async function loadTrajectory(index) {
  const t = state.t;
  const seq = ++latest.detail;
  let tr;
  try {
    tr = await api("trajectory", { run: state.focus, split: t.split, step: t.step, index });
  } catch (e) {
    if (seq === latest.detail) $("#t-detail").innerHTML = `<p>${esc(e.message)}</p>`;
    return;
  }
  if (seq !== latest.detail) return;
  const logs = (tr.logs || []).map((l) => l.startsWith("RULER explanation:") ? `<div class="ruler">${esc(l)}</div>` : `<pre>${esc(l)}</pre>`).join("");
  const hasTokens = tr.messages.some((m) => m.tokens && m.tokens.length);
  $("#t-detail").innerHTML = `<h3>trajectory ${tr.index} · group ${tr.group} · reward <span class="reward">${fmt(tr.reward)}</span></h3>
    ${tr.warnings && tr.warnings.length ? `<p class="warn">⚠ ${esc(tr.warnings.join("; "))}</p>` : ""}
    ${kvTable(tr.metrics)}${logs}
    ${hasTokens ? `<div class="scale">sampled tokens by probability: 0 <i></i> 1</div>` : ""}
    <div class="messages">${tr.messages.map(messageHTML).join("") || `<p class="muted">No messages.</p>`}</div>
    ${tr.metadata ? "<h4>metadata</h4>" + kvTable(tr.metadata) : ""}
    ${tr.group_metrics ? "<h4>group metrics</h4>" + kvTable(tr.group_metrics) : ""}
    ${(tr.group_logs || []).length ? "<h4>group logs</h4>" + tr.group_logs.map((l) => `<pre>${esc(l)}</pre>`).join("") : ""}`;
}

// ---- live updates ----

function listen() {
  const live = $("#live");
  const es = new EventSource("api/events");
  es.onopen = () => { live.textContent = "● live"; live.className = "live on"; };
  es.onerror = () => { live.textContent = "● reconnecting"; live.className = "live off"; };
  es.addEventListener("change", async (ev) => {
    const changed = JSON.parse(ev.data).changed || [];
    await loadRuns();
    const visible = [state.focus, ...state.overlay].filter((id) => changed.includes(id));
    if (!visible.length) return;
    for (const id of visible) {
      try {
        await loadDetail(id);
      } catch (e) {
        if (id === state.focus) hideRun(e.message); // deleted, say
        else { state.overlay.delete(id); state.details.delete(id); banner(e.message); }
      }
    }
    if (changed.includes(state.focus) && state.details.has(state.focus)) {
      if ($("#tabs").hidden) { showRun(); return; } // it was gone, or unreadable, and is back
      renderHead(state.details.get(state.focus));
      if (state.tab === "charts") renderCharts();
      if (state.tab === "checkpoints") renderCheckpoints();
      if (state.tab === "trajectories") {
        const before = state.t.step;
        renderTrajectoryControls(false);
        if (state.t.step !== before) { state.t.index = null; loadTrajectories(); }
        else loadTrajectories({ quiet: true }); // the shown step's file may have grown
      }
    } else if (state.tab === "charts") {
      renderCharts();
    }
  });
}

// A link followed in this tab that changes only the hash (history.replaceState,
// which the page uses, fires no hashchange) shows what it names.
window.addEventListener("hashchange", () => {
  state.t = { ...state.t, split: "", step: null, followLatest: true, offset: 0, index: null };
  state.overlay = new Set();
  readHash();
  renderRuns();
  showRun();
});

async function start() {
  readHash();
  const ok = await loadRuns();
  if (ok && !state.focus && state.runs.length) state.focus = state.runs[0].id;
  renderRuns();
  await showRun();
  listen();
}

start();
