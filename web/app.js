// The tiletune dashboard: pages drawn from the daemon's read routes (GET /v1/dashboard,
// /v1/dashboard/workload, /v1/jobs, /v1/models/{id}, /v1/best), or, in a report written by
// `tiletune report --html`, from the same answers embedded in the page (window.TT_REPORT).
// The token is kept in this tab's sessionStorage and sent as a header, never in a URL.
"use strict";

const report = window.TT_REPORT || null;
const view = document.getElementById("view");
const tt = (window.tt = { charts: {}, data: {}, errors: [] });
let timer = null;

function token() { return sessionStorage.getItem("tt-token") || ""; }

class Refused extends Error {}

async function get(path) {
  if (report) {
    if (path in report.answers) return report.answers[path];
    throw new Error("this report holds no answer for " + path);
  }
  const headers = token() ? { Authorization: "Bearer " + token() } : {};
  const res = await fetch(path, { headers });
  const body = await res.json().catch(() => ({}));
  if (res.status === 401 || res.status === 403) throw new Refused(body.error ? body.error.message : res.statusText);
  if (!res.ok) throw new Error(body.error ? body.error.message : res.status + " " + res.statusText);
  return body;
}

const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const ms = (s) => (s == null ? "–" : (s * 1e3).toPrecision(4));
const num = (x, d = 1) => (x == null ? "–" : Number(x).toFixed(d));
const sizes = (s) => (typeof s === "string" ? s : Object.entries(s || {}).map(([k, v]) => k + "=" + v).join(","));
const short = (k) => esc(String(k || "").slice(0, 10));
const key = (k) => esc(encodeURIComponent(String(k ?? "")));  // a key or id inside a link
const q = (o) => Object.entries(o).filter(([, v]) => v !== "" && v != null).map(([k, v]) => k + "=" + encodeURIComponent(v)).join("&");

function fail(e) {
  view.innerHTML = e instanceof Refused
    ? `<p class="refused">Refused: ${esc(e.message)}. Reads need a token here: enter it above.</p>`
    : `<p class="error">${esc(e.message)}</p>`;
}

// A colour from light to dark blue for a share in [0, 1].
function shade(share) {
  const s = Math.max(0, Math.min(1, share || 0));
  return `hsl(214, 70%, ${Math.round(96 - 56 * s)}%)`;
}
const ink = (share) => (share > 0.6 ? "#fff" : "#1d2330");

function fingerprint(fp) {
  if (!fp) return "";
  const text = (v) => (Array.isArray(v) ? v.join(" ") : v && typeof v === "object"
    ? Object.entries(v).map(([k, x]) => `${k} ${text(x)}`).join(", ") : String(v));
  return Object.entries(fp).filter(([k]) => k !== "flags").map(([k, v]) => `${esc(k)}: ${esc(text(v))}`).join(" · ");
}

// ---- Overview: jobs with their progress, the measurement rate, failures, workloads, targets.
async function overview() {
  const d = await get("/v1/dashboard");
  tt.data.overview = d;
  const jobs = d.jobs || [];
  const failures = Object.entries(d.failures_by_class || {});
  view.innerHTML = `
    <h1>Overview</h1>
    <div class="cards">
      <div class="card"><b id="n-records">${d.records}</b>records</div>
      <div class="card"><b id="n-rate">${num(d.measurements_per_second ?? 0, 2)}</b>measurements / s</div>
      <div class="card"><b id="n-minute">${d.measurements_last_minute}</b>in the last minute</div>
      <div class="card"><b id="n-failures">${failures.reduce((a, [, n]) => a + n, 0)}</b>failed:
        ${failures.map(([c, n]) => `${esc(c)} ${n}`).join(", ") || "none"}</div>
    </div>
    <section><h2>Jobs</h2>
      <table id="jobs"><tr><th>job</th><th>op</th><th>state</th><th>progress</th><th class="num">best ms</th><th>owner</th></tr>
      ${jobs.map((j) => {
        const r = j.request || {};
        const model = Array.isArray(r.tasks);
        const what = model ? `model ${esc(r.model || "")} (${r.tasks.length} tasks)` : esc(r.op_name || r.op || "").slice(0, 40);
        const link = model ? `#/model/${key(j.id)}` : `#/w/${key(j.workload_key)}/${key(j.target_key)}`;
        const share = j.total ? j.done / j.total : 0;
        return `<tr data-job="${esc(j.id)}" data-state="${esc(j.state)}"><td><a href="${link}">${short(j.id)}</a></td><td>${what}</td>
          <td>${esc(j.state)}</td><td><span class="bar"><span style="width:${Math.round(share * 100)}%"></span></span>
          <span class="progress">${j.done}/${j.total}</span></td><td class="num">${j.best_ms == null ? "–" : num(j.best_ms, 4)}</td>
          <td class="muted">${esc(j.owner || "")}</td></tr>`;
      }).join("")}</table>
      ${jobs.length ? "" : '<p class="muted">no jobs</p>'}
    </section>
    <section><h2>Workloads</h2>
      <table id="workloads"><tr><th>op</th><th>sizes</th><th>target</th><th class="num">records</th><th class="num">failed</th>
        <th class="num">best ms</th><th class="num">GFLOP/s</th></tr>
      ${d.workloads.map((w) => `<tr><td><a href="#/w/${key(w.workload)}/${key(w.target)}">${esc(w.op_name)}</a></td><td>${esc(sizes(w.sizes))}</td>
        <td>${esc(w.backend)} ${short(w.target)}</td><td class="num">${w.records}</td><td class="num">${w.failures}</td>
        <td class="num">${ms(w.best_s)}</td><td class="num">${num(w.best_gflops)}</td></tr>`).join("")}</table>
    </section>
    ${crossTargets(d)}
    <section><h2>Targets</h2>
      <table id="targets"><tr><th>target</th><th>backend</th><th class="num">workloads</th><th class="num">records</th><th>fingerprint</th><th></th></tr>
      ${d.targets.map((t) => {
        const rows = d.workloads.filter((w) => w.target === t.key);
        return `<tr><td>${short(t.key)}</td><td>${esc(t.backend)}</td><td class="num">${rows.length}</td>
          <td class="num">${rows.reduce((a, w) => a + w.records, 0)}</td><td class="muted">${fingerprint(t.fingerprint)}</td>
          <td><a href="#/cm/${key(t.key)}">cost model</a></td></tr>`;
      }).join("")}</table>
    </section>`;
  if (!report && jobs.some((j) => j.state === "running" || j.state === "queued")) timer = setTimeout(route, 2000);
}

// Records across targets (a team's database): the best GFLOP/s of each op and sizes on each
// target, shaded per row; shown when more than one target has records.
function crossTargets(d) {
  const targets = d.targets.filter((t) => d.workloads.some((w) => w.target === t.key));
  if (targets.length < 2) return "";
  const rows = new Map();
  for (const w of d.workloads) {
    const what = w.op_name + " " + sizes(w.sizes);
    if (!rows.has(what)) rows.set(what, new Map());
    rows.get(what).set(w.target, w);
  }
  return `<section><h2>Across targets: best GFLOP/s</h2><table class="heat" id="across"><tr><th>op</th>
    ${targets.map((t) => `<th>${esc(t.backend)} ${short(t.key)}</th>`).join("")}</tr>
    ${[...rows].map(([what, by]) => {
      const top = Math.max(1e-9, ...[...by.values()].map((w) => w.best_gflops || 0));
      return `<tr><td>${esc(what)}</td>${targets.map((t) => {
        const w = by.get(t.key);
        if (!w) return `<td class="cell empty"></td>`;
        const s = (w.best_gflops || 0) / top;
        return `<td class="cell" style="background:${shade(s)};color:${ink(s)}"><a style="color:inherit" href="#/w/${key(w.workload)}/${key(w.target)}">${num(w.best_gflops)}</a></td>`;
      }).join("")}</tr>`;
    }).join("")}</table></section>`;
}

// ---- A workload: best so far against trials, every measurement, the top configs, the knobs.
function chart(name, el, opts, data) {
  const u = new uPlot(Object.assign({ width: Math.min(640, window.innerWidth - 60), height: 260 }, opts), data, el);
  tt.charts[name] = u;
  return u;
}

async function workload(wkey, tkey, params) {
  const filters = params.get("filter") || "";
  const path = "/v1/dashboard/workload?" + q({ workload: wkey, target: tkey, filter: filters, x: params.get("x") || "", y: params.get("y") || "" });
  const d = await get(path);
  tt.data.workload = d;
  const w = d.workload;
  const active = new Map(filters ? filters.split(";").map((f) => f.split("=", 2)) : []);
  const setParams = (change) => {
    const p = new URLSearchParams(params);
    change(p);
    location.hash = `#/w/${wkey}/${tkey}?` + p.toString();
  };
  view.innerHTML = `
    <h1>${esc(w.op_name)} <span class="muted">${esc(sizes(w.sizes))}</span></h1>
    <p class="muted">target ${esc(d.target.backend)} ${short(d.target.key)} · ${d.records} records, ${d.shown} shown
      ${active.size ? ` · filtered by ${[...active].map(([k, v]) => `<span class="chip on" data-unfilter="${esc(k)}">${esc(k)} = ${esc(v)} ✕</span>`).join("")}` : ""}
      · failures: ${Object.entries(d.failures_by_class).map(([c, n]) => `${esc(c)} ${n}`).join(", ") || "none"}</p>
    <div class="charts">
      <section><h2>Best so far</h2><div id="progress"></div></section>
      <section><h2>Every measurement</h2><div id="points"></div><div class="hover" id="hover">hover a point</div></section>
    </div>
    <section><h2>Knobs: best GFLOP/s over two of them</h2>
      <p>x <select id="hx"></select> y <select id="hy"></select></p>
      <div id="heatmap"></div></section>
    <section><h2>Which knobs matter</h2><p class="muted">log₂ of the best GFLOP/s at the knob's best value over that at its worst;
      click a value to keep only its records</p><table id="knobs"></table></section>
    <section><h2>Top configs</h2><table id="top"></table><h2>Source of the best</h2><pre id="source">…</pre></section>`;

  // One line per job (its strategy in the label) against its own trials, on shared x values;
  // without jobs, the progress over all trials.
  const lines = d.lines.length ? d.lines : [{ label: "best ms", points: d.progress }];
  const colours = ["#3a7bd5", "#d5703a", "#2e9e5b", "#8e44ad", "#c0392b", "#7f8c8d"];
  const xs = [...new Set(lines.flatMap((l) => l.points.map((p) => p[0])))].sort((a, b) => a - b);
  const ys = lines.map((l) => {
    const at = new Map(l.points.map((p) => [p[0], p[1] * 1e3]));
    return xs.map((x) => (at.has(x) ? at.get(x) : null));
  });
  chart("progress", document.getElementById("progress"), {
    scales: { x: { time: false }, y: { distr: 3 } },
    series: [{ label: "trial" }, ...lines.map((l, i) => ({ label: l.label, stroke: colours[i % colours.length], width: 2, spanGaps: true }))],
    axes: [{ label: d.lines.length ? "trials of the job" : "trial" }, { label: "ms" }],
  }, [xs, ...ys]);

  const pts = d.points;
  const worst = Math.max(1e-9, ...pts.median_s.filter((v) => v != null));
  chart("points", document.getElementById("points"), {
    scales: { x: { time: false }, y: { distr: 3 } },
    series: [
      { label: "trial" },
      { label: "ms", stroke: "#3a7bd5", paths: () => null, points: { show: true, size: 5, fill: "#3a7bd5" } },
      { label: "failed", stroke: "#b00020", paths: () => null, points: { show: true, size: 6, fill: "#b00020" } },
    ],
    axes: [{ label: "trial" }, { label: "ms" }],
    hooks: { setCursor: [(u) => {
      const i = u.cursor.idx;
      if (i == null) return;
      document.getElementById("hover").innerHTML = `trial ${pts.trial[i]} · ${pts.error[i] ? `<span class="error">${esc(pts.error[i])}</span>`
        : `${ms(pts.median_s[i])} ms, spread ${num(pts.spread[i] * 100)}%`} · config ${short(pts.config_key[i])}`;
    }] },
  }, [pts.trial, pts.median_s.map((v) => (v == null ? null : v * 1e3)), pts.error.map((e) => (e ? worst * 1.5e3 : null))]);

  // The heatmap: an HTML table whose cells are shaded by the best GFLOP/s of their records.
  const knobNames = d.knobs.map((k) => k.name);
  for (const [id, cur] of [["hx", d.heatmap.x], ["hy", d.heatmap.y]]) {
    const sel = document.getElementById(id);
    sel.innerHTML = knobNames.map((n) => `<option${n === cur ? " selected" : ""}>${esc(n)}</option>`).join("");
    // Changing one axis keeps the other where it is.
    sel.disabled = !!report;  // a report holds the views as tuned, not every pair of knobs
    sel.onchange = () => setParams((p) => {
      p.set("x", document.getElementById("hx").value);
      p.set("y", document.getElementById("hy").value);
    });
  }
  const h = d.heatmap;
  const top = Math.max(1e-9, ...h.cells.map((c) => c[2]));
  const at = new Map(h.cells.map((c) => [c[0] + "," + c[1], c]));
  document.getElementById("heatmap").innerHTML = h.xs.length && h.ys.length
    ? `<table class="heat"><tr><th>${esc(h.y)} \\ ${esc(h.x)}</th>${h.xs.map((x) => `<th>${esc(x)}</th>`).join("")}</tr>
      ${h.ys.map((y, yi) => `<tr><th>${esc(y)}</th>${h.xs.map((x, xi) => {
        const c = at.get(xi + "," + yi);
        if (!c) return `<td class="cell empty"></td>`;
        const s = c[2] / top;
        return `<td class="cell" data-x="${esc(x)}" data-y="${esc(y)}" title="${c[3]} records" style="background:${shade(s)};color:${ink(s)}">${num(c[2])}</td>`;
      }).join("")}</tr>`).join("")}</table>`
    : '<p class="muted">fewer than two knobs vary in these records</p>';

  document.getElementById("knobs").innerHTML = `<tr><th>knob</th><th class="num">matters</th><th>values (best GFLOP/s, records)</th></tr>` +
    d.knobs.filter((k) => k.values.length > 1).map((k) => `<tr><td>${esc(k.name)}</td><td class="num">${num(k.importance, 2)}</td><td>${
      k.values.map((v) => `<span class="chip${active.get(k.name) === v.value ? " on" : ""}" data-knob="${esc(k.name)}" data-value="${esc(v.value)}">${esc(v.value)}: ${num(v.best_gflops)} (${v.count})</span>`).join("")}</td></tr>`).join("");
  if (!report) view.querySelectorAll("[data-knob]").forEach((el) => (el.onclick = () => setParams((p) => {
    active.set(el.dataset.knob, el.dataset.value);
    p.set("filter", [...active].map(([k, v]) => k + "=" + v).join(";"));
  })));
  view.querySelectorAll("[data-unfilter]").forEach((el) => (el.onclick = () => setParams((p) => {
    active.delete(el.dataset.unfilter);
    if (active.size) p.set("filter", [...active].map(([k, v]) => k + "=" + v).join(";"));
    else p.delete("filter");
  })));

  document.getElementById("top").innerHTML = `<tr><th>#</th><th class="num">ms</th><th class="num">GFLOP/s</th><th class="num">spread</th><th class="num">trial</th><th>config</th></tr>` +
    d.top.map((t) => `<tr><td>${t.rank}</td><td class="num">${ms(t.median_s)}</td><td class="num">${num(t.gflops)}</td>
      <td class="num">${num(t.spread * 100)}%</td><td class="num">${t.trial}</td><td><code>${esc(JSON.stringify(t.config))}</code></td></tr>`).join("");
  get("/v1/best?" + q({ workload: wkey, target: tkey }))
    // The kernel itself: the helpers every kernel starts with (the prelude) are left out.
    .then((b) => {
      const src = b.source || "";
      const at = src.indexOf('extern "C"');
      const head = src.split("\n").filter((l) => l.startsWith("// ")).slice(0, 3).join("\n");
      document.getElementById("source").textContent = at < 0 ? src : head + "\n// (the prelude of helpers is left out)\n" + src.slice(at);
    })
    .catch((e) => (document.getElementById("source").textContent = e.message));
}

// ---- A model's assessment: its layers against their share of the model's time.
async function model(id) {
  const d = await get("/v1/models/" + id);
  tt.data.model = d;
  const rows = (d.report.tasks || []).slice();
  const total = d.report.estimated_latency_s;
  // Worth tuning next: a large share of the model's time at a low rate.
  rows.sort((a, b) => (b.share || 0) - (a.share || 0));
  const cols = [
    ["latency ms", (t) => (t.best_s == null ? null : t.best_s * t.weight * 1e3), (v) => Number(v).toPrecision(3)],
    ["share", (t) => t.share, (v) => num(v * 100) + "%"],
    ["GFLOP/s", (t) => t.gflops, (v) => num(v)],
    // Measured when the job finished: the layer's roof on this machine and the vendor's layer.
    ["% of roof", (t) => (t.roof_fraction == null ? null : t.roof_fraction * 100), (v) => num(v, 0) + "%"],
    ["× oneDNN", (t) => (t.x_vendor == null ? null : t.x_vendor), (v) => num(v, 2)],
    ["FLOP/byte", (t) => t.flops / Math.max(1, t.bytes), (v) => num(v)],
    ["trials", (t) => t.trials, (v) => String(v)],
    // Memory access of the best kernel, from its features: how much of its loop nest stays in each cache.
    ["fits L1", (t) => (t.memory ? t.memory.fit_l1 : null), (v) => num(v, 2)],
    ["fits L2", (t) => (t.memory ? t.memory.fit_l2 : null), (v) => num(v, 2)],
    ["fits L3", (t) => (t.memory ? t.memory.fit_l3 : null), (v) => num(v, 2)],
    ["FLOP/byte at L2", (t) => (t.memory ? t.memory.intensity_l2 : null), (v) => num(v)],
    ["touches MB", (t) => (t.memory ? t.memory.touched_bytes / 1e6 : null), (v) => num(v, 2)],
  ];
  const tops = cols.map(([, f]) => Math.max(1e-12, ...rows.map((t) => f(t) || 0)));
  view.innerHTML = `
    <h1>Model ${esc(d.report.model || "")} <span class="muted">job ${short(d.id)} · ${esc(d.state)} · ${d.done}/${d.total} trials</span></h1>
    <p>estimated latency ${total == null ? "–" : ms(total)} ms (Σ weight × best over ${rows.length} tasks)</p>
    <section><h2>Layers, by their share of the model's time</h2>
    <table class="heat" id="layers"><tr><th>op</th><th>sizes</th><th class="num">×</th>${cols.map(([n]) => `<th>${n}</th>`).join("")}</tr>
    ${rows.map((t) => `<tr><td>${esc(t.op)}</td><td>${esc(t.sizes)}</td><td class="num">${t.weight}</td>${cols.map(([, f, fmt], i) => {
      const v = f(t);
      if (v == null) return `<td class="cell empty">–</td>`;
      const s = v / tops[i];
      return `<td class="cell" style="background:${shade(s)};color:${ink(s)}">${fmt(v)}</td>`;
    }).join("")}</tr>`).join("")}</table></section>`;
  if (!report && (d.state === "running" || d.state === "queued")) timer = setTimeout(route, 3000);
}

// ---- The cost model of a target: predicted against measured, held-out metrics per retrain.
async function costModel(tkey, params) {
  const d = await get("/v1/dashboard/model?" + q({ target: tkey, kind: params.get("kind") || "", workload: params.get("workload") || "" }));
  tt.data.model = d;
  const splits = ["held-out sizes", "held-out ops"];
  view.innerHTML = `
    <h1>Cost model <span class="muted">${esc(d.kind || "none")} · target ${esc(d.target.backend)} ${short(d.target.key)}</span></h1>
    ${d.model == null ? `<p class="muted" id="no-model">No model is stored for this target: <code>tiletune model train --db …</code> trains one.</p>`
      : d.model.unusable ? `<p class="error">The stored model cannot be used: ${esc(d.model.unusable)}</p>`
      : `<p>trained on ${d.model.records} records</p>`}
    <div class="charts">
      <section><h2>Predicted against measured${d.workload ? `: ${esc(d.workload.op_name)} ${esc(sizes(d.workload.sizes))}` : ""}</h2>
        <div id="predicted"></div>
        <p id="ranking">${d.ranking ? `on these ${d.ranking.samples} records: pairwise accuracy ${num(d.ranking.pairwise_accuracy, 3)},
          Spearman ${num(d.ranking.spearman, 3)}, top-1 ${num(d.ranking.top1, 3)}` : ""}</p></section>
      <section><h2>Held-out metrics after each retrain</h2><div id="history-chart"></div>
        ${d.history.some((h) => splits.some((s) => (h.metrics || {})[s])) ? "" : `<p class="muted" id="no-held-out">no held-out metrics yet:
          they need records of several sizes of an op (held-out sizes) or of several ops (held-out ops)</p>`}</section>
    </div>
    <section><h2>Retrains</h2><table id="history"><tr><th>#</th><th>kind</th><th class="num">records</th>
      ${splits.map((s) => `<th class="num">${s}: pairwise</th><th class="num">Spearman</th>`).join("")}</tr>
      ${d.history.map((h, i) => `<tr><td>${i + 1}</td><td>${esc(h.kind)}</td><td class="num">${h.records}</td>${splits.map((s) => {
        const m = (h.metrics || {})[s] || {};
        return `<td class="num">${num(m.pairwise_accuracy, 3)}</td><td class="num">${num(m.spearman, 3)}</td>`;
      }).join("")}</tr>`).join("")}</table></section>`;
  if (d.points && d.points.score.length) {
    // uPlot wants x ascending: the points sorted by score.
    const order = d.points.score.map((_, i) => i).sort((a, b) => d.points.score[a] - d.points.score[b]);
    chart("predicted", document.getElementById("predicted"), {
      scales: { x: { time: false } },
      series: [{ label: "score" }, { label: "GFLOP/s", stroke: "#3a7bd5", paths: () => null, points: { show: true, size: 5, fill: "#3a7bd5" } }],
      axes: [{ label: "model's score" }, { label: "measured GFLOP/s" }],
    }, [order.map((i) => d.points.score[i]), order.map((i) => d.points.gflops[i])]);
  }
  const mine = d.history.filter((h) => h.kind === d.kind);
  if (mine.length) {
    chart("history", document.getElementById("history-chart"), {
      scales: { x: { time: false } },
      series: [{ label: "retrain" },
        ...splits.map((s, i) => ({ label: s, stroke: i ? "#d5703a" : "#3a7bd5", width: 2, points: { show: true } }))],
      axes: [{ label: "retrain" }, { label: "pairwise accuracy" }],
    }, [mine.map((_, i) => i + 1), ...splits.map((s) => mine.map((h) => ((h.metrics || {})[s] || {}).pairwise_accuracy ?? null))]);
  }
}

async function route() {
  clearTimeout(timer);
  tt.charts = {};
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean);
  const params = new URLSearchParams(query || "");
  try {
    if (parts[0] === "w" && parts.length === 3) await workload(parts[1], parts[2], params);
    else if (parts[0] === "model" && parts.length === 2) await model(parts[1]);
    else if (parts[0] === "cm" && parts.length === 2) await costModel(parts[1], params);
    else await overview();
    tt.ready = location.hash;
  } catch (e) {
    fail(e);
    tt.ready = location.hash;
  }
}

document.getElementById("token").value = token();
document.getElementById("token-form").onsubmit = (e) => {
  e.preventDefault();
  sessionStorage.setItem("tt-token", document.getElementById("token").value);
  route();
};
if (report) document.getElementById("token-form").hidden = true;
window.addEventListener("hashchange", route);
route();
