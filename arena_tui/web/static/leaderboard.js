// The leaderboard page: boards from /api/boards (or the data a static snapshot embeds), filters
// on the client, entry and result details from /api/results/ID, and live updates from the
// server-sent events of /api/events. Plain JS and SVG: no framework, nothing from a CDN.
"use strict";
(() => {
  const KINDS = ["measured", "predicted", "cpu"];
  const NUMERIC = new Set(["time", "candidate", "baseline", "speedup", "SOL"]);
  const FILTERS = ["family", "device", "vendor"];
  const embedded = document.getElementById("arena-data");
  const SNAPSHOT = embedded ? JSON.parse(embedded.textContent) : null;
  const state = { data: null, filters: {}, entry: null, result: null, fresh: new Set(), version: 0, loading: false, again: false };

  // --- small helpers ---------------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (k === "dataset") Object.assign(node.dataset, v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) if (c !== null && c !== undefined) node.append(c);
    return node;
  }
  const put = (node, ...kids) => node.replaceChildren(...kids.filter((k) => k !== null && k !== undefined));
  const SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") node.textContent = v; else node.setAttribute(k, v);
    }
    for (const c of children.flat()) if (c) node.append(c);
    return node;
  }
  const ratio = (x) => (x === null || x === undefined ? "–" : `${x.toFixed(2)}×`);
  const pct = (x, digits = 0) => (x === null || x === undefined ? "–" : `${(x * 100).toFixed(digits)}%`);
  const us = (x) => (x === null || x === undefined ? "–" : x >= 1e6 ? `${(x / 1e6).toFixed(2)} s` : x >= 1000 ? `${(x / 1000).toFixed(2)} ms` : `${x.toFixed(1)} µs`);
  const short = (s, n) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
  // The cpu device runs Triton in its interpreter: its times are never a speedup, a fraction of
  // speed of light or a bar (arena_tui/figures.py says the same words).
  const INTERP = "interp.";
  const INTERPRETED = "interpreted: not a performance figure";
  const speedText = (kind, x) => (kind === "cpu" ? INTERP : ratio(x));
  const solText = (kind, x) => (kind === "cpu" ? INTERP : pct(x, 1));
  // beside a time: the spread of a measured one, the band of a predicted one, or "measured" for a
  // time a sim: result takes from a measurement (a baseline measured on the GPU itself)
  function band(side, kind) {
    if (!side) return "";
    if (kind === "predicted" && side.source === "measured") return " (measured)";
    if (typeof side.band === "number") return ` ±${(side.band * 100).toFixed(0)}%`;
    if (typeof side.spread === "number") return ` ±${(side.spread * 100).toFixed(1)}%`;
    return "";
  }
  const timeText = (side, kind) => (side ? `${us(side.median_us)}${band(side, kind)}` : "–");
  const clamp = (x, lo, hi) => Math.max(lo, Math.min(hi, x));

  // --- data ------------------------------------------------------------------------------
  async function load() {
    if (SNAPSHOT) {
      state.data = SNAPSHOT.boards;
      render();
      return;
    }
    if (state.loading) { state.again = true; return; }
    state.loading = true;
    try {
      const response = await fetch("api/boards", { headers: { Accept: "application/json" } });
      if (!response.ok) throw new Error(`api/boards answered ${response.status}`);
      state.data = await response.json();
      render();
    } catch (err) {
      setLive("reconnecting", `cannot load the boards (${err.message}); retrying`);
      setTimeout(load, 3000);
    } finally {
      state.loading = false;
      if (state.again) { state.again = false; load(); }
    }
  }

  async function resultData(jobId) {
    if (SNAPSHOT) return SNAPSHOT.results[String(jobId)] || null;
    const response = await fetch(`api/results/${jobId}`);
    return response.ok ? response.json() : null;
  }

  function allEntries() {
    const out = [];
    for (const kind of KINDS) {
      const b = state.data && state.data.boards[kind];
      if (b) for (const e of b.entries) out.push([kind, b, e]);
    }
    return out;
  }

  const matches = (e) => FILTERS.every((f) => !state.filters[f] || e[f] === state.filters[f]);

  // --- filters, in the address so a view can be linked -----------------------------------
  function readAddress(first = false) {
    // a snapshot opens on the filters it was written with, unless the address names some
    const q = new URLSearchParams(location.search);
    const given = first && !FILTERS.some((f) => q.has(f)) && SNAPSHOT ? SNAPSHOT.filters || {} : Object.fromEntries(q);
    for (const f of FILTERS) state.filters[f] = given[f] || "";
    const h = new URLSearchParams(location.hash.slice(1));
    state.entry = h.get("entry");
    state.result = h.get("result");
  }
  function writeAddress() {
    const q = new URLSearchParams();
    for (const f of FILTERS) if (state.filters[f]) q.set(f, state.filters[f]);
    const h = new URLSearchParams();
    if (state.entry) h.set("entry", state.entry);
    if (state.result) h.set("result", state.result);
    const search = q.toString(), hash = h.toString();
    history.replaceState(null, "", `${location.pathname}${search ? `?${search}` : ""}${hash ? `#${hash}` : ""}`);
  }

  function fillSelects() {
    for (const f of FILTERS) {
      const select = document.getElementById(`f-${f}`);
      const choices = new Set((state.data && state.data.choices[f]) || []);
      if (state.filters[f]) choices.add(state.filters[f]);
      const want = ["", ...[...choices].sort()];
      const have = [...select.options].map((o) => o.value);
      if (want.join("\n") !== have.join("\n")) {
        select.replaceChildren(...want.map((v) => el("option", { value: v, text: v || "all" })));
      }
      select.value = state.filters[f];
    }
  }

  // --- rendering -------------------------------------------------------------------------
  function speedBar(x) {
    // log2 scale, 1× in the middle, 1/8× and 8× at the ends
    const w = 64, mid = w / 2, v = clamp(Math.log2(x || 1), -3, 3) / 3 * mid;
    return svg("svg", { class: "speedbar", viewBox: `0 0 ${w} 8`, "aria-hidden": "true" },
      svg("rect", { x: 0, y: 3.5, width: w, height: 1, fill: "#dde1e5" }),
      svg("rect", { x: v >= 0 ? mid : mid + v, y: 0, width: Math.max(Math.abs(v), 1), height: 8, fill: v >= 0 ? "#2b8a3e" : "#c92a2a" }));
  }

  function boardTable(kind, b, entries) {
    const place = b.by === "vendor" ? "vendor" : "device";
    const head = el("tr", {},
      el("th", { class: "num", text: "rank" }), el("th", { text: "agent" }), el("th", { class: "col-model", text: "model" }),
      el("th", { class: "col-family", text: "family" }), el("th", { class: "col-device", text: place }), el("th", { class: "num", text: "speedup" }),
      b.ranked ? el("th", { class: "num col-fast", text: `fast_${b.p}` }) : null, el("th", { class: "num", text: "SOL" }),
      el("th", { class: "num col-gap", title: "mean share of the baseline-to-speed-of-light gap closed (a failure 0%)", text: "gap" }),
      el("th", { class: "num", text: "correct" }), el("th", { class: "num col-results", text: "results" }),
      el("th", { class: "num col-violations", text: "violations" }), el("th", { class: "num col-failures", text: "failures" }));
    const body = el("tbody");
    let group = null;
    for (const e of entries) {
      const g = `${e.family} · ${e.device}`;
      if (g !== group) {
        group = g;
        body.append(el("tr", { class: "group" }, el("td", { colspan: b.ranked ? 12 : 11, text: g })));
      }
      const fresh = e.result_list.some((r) => state.fresh.has(r.job_id));
      // no correct result: no speedup of its own and no rank (listed after the ranked entries)
      const scored = e.correct > 0;
      const unscored = (e.failed || 0) + (e.failures || 0);
      const row = el("tr", {
        class: `entry${fresh ? " fresh" : ""}${state.entry === e.id ? " selected" : ""}${scored ? "" : " unranked"}`, tabindex: 0,
        dataset: { entryId: e.id, agent: e.agent, kind },
        onclick: () => selectEntry(e.id), onkeydown: (ev) => { if (ev.key === "Enter") selectEntry(e.id); },
      },
        el("td", { class: "num", text: e.rank === null ? "–" : String(e.rank) }),
        el("td", e.violations ? { class: "bad", title: `${e.violations} result(s) with a proven integrity violation: ranked last`, text: `${e.agent} ⚠` } : { text: e.agent }),
        el("td", { class: "col-model", text: e.model || "–" }), el("td", { class: "col-family", text: e.family }), el("td", { class: "col-device", text: e.device }),
        kind === "cpu" || !scored ? el("td", { class: "num", text: scored ? INTERP : "–", title: scored ? INTERPRETED : "no correct result" })
          : el("td", { class: "num" }, ratio(e.speedup), speedBar(e.speedup)),
        b.ranked ? el("td", { class: "num col-fast", text: e.results ? pct(e.fast_p) : "–" }) : null,
        el("td", { class: "num", text: scored ? solText(kind, e.sol_fraction) : "–" }),
        el("td", { class: "num col-gap", text: scored && kind !== "cpu" ? pct(e.gap_closed) : "–" }),
        el("td", { class: "num", text: e.results ? pct(e.correct) : "–" }),
        el("td", { class: "num col-results", text: String(e.results) }),
        el("td", { class: `num col-violations${e.violations ? " bad" : ""}`, text: String(e.violations) }),
        el("td", { class: `num col-failures${unscored ? " bad" : ""}`, title: "failed results and attempts with nothing to score", text: String(unscored) }));
      body.append(row);
    }
    return el("div", { class: "wrap" }, el("table", { dataset: { kind } }, el("thead", {}, head), body));
  }

  function render() {
    fillSelects();
    const root = document.getElementById("boards");
    const sections = [];
    let shown = 0, results = 0;
    for (const kind of KINDS) {
      const b = state.data && state.data.boards[kind];
      if (!b) continue;
      const entries = b.entries.filter(matches);
      shown += entries.length;
      results += entries.reduce((n, e) => n + e.results, 0);
      const title = el("h2", {}, `${kind} `, el("span", { class: "board-label", text: b.label.includes(":") ? b.label.split(":").slice(1).join(":").trim() : "" }));
      const note = b.infrastructure_errors ? el("p", { class: "muted", text: `${b.infrastructure_errors} infrastructure errors left out` }) : null;
      sections.push(el("section", { class: "board", id: `board-${kind}`, dataset: { kind } }, title,
        entries.length ? boardTable(kind, b, entries) : el("p", { class: "muted", text: "no entry matches the filters" }), note));
    }
    root.replaceChildren(...sections);
    document.getElementById("empty").hidden = sections.length > 0;
    document.getElementById("count").textContent = sections.length ? `${shown} entries, ${results} results` : "";
    document.body.dataset.entries = String(shown);
    document.body.dataset.version = String(state.version);
    state.fresh.clear();
    renderDetail();
  }

  // --- details: an entry's plots and results, one result's verdicts ----------------------
  function selectEntry(id) {
    state.entry = state.entry === id ? null : id;
    state.result = null;
    writeAddress();
    render();
    if (state.entry) document.getElementById("detail").scrollIntoView({ behavior: "smooth", block: "nearest" });
  }

  function barChart(title, rows, value, scale) {
    // horizontal bars: one per task; `scale` maps a value to [-1, 1] (speedup) or [0, 1] (SOL)
    const labelW = 130, w = 380, rowH = 20, top = 8, h = top + rows.length * rowH + 18;
    const signed = scale.signed, x0 = signed ? labelW + (w - labelW - 40) / 2 : labelW, span = signed ? (w - labelW - 40) / 2 : w - labelW - 40;
    const kids = [svg("line", { class: "axis", x1: x0, y1: top - 4, x2: x0, y2: h - 14 })];
    rows.forEach((r, i) => {
      const y = top + i * rowH, v = value(r);
      kids.push(svg("text", { x: labelW - 6, y: y + 13, "text-anchor": "end", text: short(r.task_id, 20) }, svg("title", { text: r.task_id })));
      if (v === null || v === undefined) {
        kids.push(svg("text", { x: x0 + 4, y: y + 13, class: "muted", text: "–" }));
        return;
      }
      const s = scale.of(v) * span, x = s >= 0 ? x0 : x0 + s;
      kids.push(svg("rect", { x, y: y + 3, width: Math.max(Math.abs(s), 1.5), height: rowH - 7, class: signed ? (s >= 0 ? "bar-up" : "bar-down") : "bar-sol" },
        svg("title", { text: `${r.task_id}: ${scale.text(v)} over ${r.results} result(s)` })));
      kids.push(svg("text", { x: (s >= 0 ? x0 + s : x0) + 4, y: y + 13, text: scale.text(v) }));
    });
    kids.push(svg("text", { x: x0, y: h - 2, "text-anchor": signed ? "middle" : "start", class: "muted", text: scale.axis }));
    return el("figure", { class: "chart" }, el("h3", { text: title }), svg("svg", { viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": title }, kids));
  }

  function historyChart(history) {
    const w = 380, h = 150, left = 40, right = 12, top = 10, bottom = 26;
    const ys = history.map((p) => Math.log2(p.speedup));
    const lo = Math.min(-1, ...ys), hi = Math.max(1, ...ys);
    const X = (i) => left + (history.length === 1 ? (w - left - right) / 2 : (i * (w - left - right)) / (history.length - 1));
    const Y = (v) => top + ((hi - v) * (h - top - bottom)) / (hi - lo);
    const kids = [];
    for (let t = Math.ceil(lo); t <= Math.floor(hi); t++) {
      kids.push(svg("line", { class: t === 0 ? "axis" : "grid", x1: left, x2: w - right, y1: Y(t), y2: Y(t) }));
      kids.push(svg("text", { x: left - 4, y: Y(t) + 4, "text-anchor": "end", text: `${2 ** t >= 1 ? 2 ** t : `1/${2 ** -t}`}×` }));
    }
    kids.push(svg("polyline", { class: "line", points: history.map((p, i) => `${X(i)},${Y(ys[i])}`).join(" ") }));
    history.forEach((p, i) => {
      kids.push(svg("circle", { class: "dot", cx: X(i), cy: Y(ys[i]), r: 3.5 },
        svg("title", { text: `${p.name} ${p.run_id} (${(p.created_at || "").slice(0, 16)}): ${ratio(p.speedup)}, ${pct(p.correct)} correct, ${p.results} result(s)` })));
    });
    kids.push(svg("text", { x: left, y: h - 6, class: "muted", text: `${history.length} run(s), oldest first` }));
    return el("figure", { class: "chart" }, el("h3", { text: "speedup over runs" }), svg("svg", { viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": "speedup over runs" }, kids));
  }

  function renderDetail() {
    const box = document.getElementById("detail");
    const found = state.entry && allEntries().find(([, , e]) => e.id === state.entry);
    if (!found) { box.hidden = true; box.replaceChildren(); return; }
    const [kind, b, e] = found;
    const speed = { signed: true, of: (v) => clamp(Math.log2(v), -3, 3) / 3, text: ratio, axis: "1× (bars: ½ … 8×, log scale)" };
    const sol = { signed: false, of: (v) => clamp(v, 0, 1), text: (v) => pct(v, 1), axis: "0 — fraction of speed of light — 100%" };
    const passed = (r) => r.status === "passed" && !r.violation;  // a failed result has no speedup of its own
    const rows = e.result_list.map((r) => el("tr", { class: "result", dataset: { jobId: r.job_id } },
      el("td", {}, el("a", { href: `#entry=${encodeURIComponent(e.id)}&result=${r.job_id}`, text: `job ${r.job_id}`,
        onclick: (ev) => { ev.preventDefault(); state.result = String(r.job_id); writeAddress(); showResult(); } })),
      el("td", { text: r.task_id }), el("td", { class: r.violation ? "bad" : `status-${r.status}`, text: r.violation ? "integrity violation" : r.status }),
      el("td", { class: "num", text: passed(r) ? speedText(kind, r.speedup) : "–" }), el("td", { class: "num", text: passed(r) ? solText(kind, r.sol_fraction) : "–" }),
      el("td", { class: "muted", text: `${r.run_id} ${(r.created_at || "").slice(0, 19).replace("T", " ")}` })));
    put(box,
      el("button", { class: "close", type: "button", text: "close", onclick: () => selectEntry(e.id) }),
      el("h2", { text: `${e.agent}${e.model ? ` (${e.model})` : ""} — ${e.family} on ${e.device}` }),
      el("p", { class: "muted", text: `${kind} board${e.rank ? `, rank ${e.rank}` : b.ranked ? ", not ranked (no correct result)" : ""}: `
        + `speedup ${kind === "cpu" ? INTERPRETED : e.correct > 0 ? ratio(e.speedup) : "–"}, ${pct(e.correct)} correct over ${e.results} result(s) on ${e.tasks} task(s)` }),
      kind === "cpu" ? el("p", { class: "muted", text: `cpu timing (${INTERPRETED}): no speedup or speed-of-light chart` })
        : el("div", { class: "charts" }, barChart("speedup per task", e.per_task, (r) => r.speedup, speed),
          barChart("speed of light per task", e.per_task, (r) => r.sol_fraction, sol), historyChart(e.history)),
      el("h3", { text: "results" }),
      el("div", { class: "wrap" }, el("table", { class: "results" }, el("thead", {}, el("tr", {}, ...["result", "task", "status", "speedup", "SOL", "run"].map((t) => el("th", { class: NUMERIC.has(t) ? "num" : null, text: t })))),
        el("tbody", {}, rows))),
      el("div", { id: "result" }));
    box.hidden = false;
    if (state.result) showResult();
  }

  async function showResult() {
    const target = document.getElementById("result");
    if (!target || !state.result) return;
    const jobId = state.result;
    target.replaceChildren(el("p", { class: "muted", text: `loading job ${jobId}…` }));
    const d = await resultData(jobId);
    if (state.result !== jobId) return;
    if (!d) { target.replaceChildren(el("p", { class: "bad", text: `no result for job ${jobId}` })); return; }
    const res = d.result;
    const stages = res.stages.map((s) => el("tr", {}, el("td", { text: s.name }), el("td", { class: `status-${s.status}`, text: s.status }),
      el("td", { class: "num", text: s.seconds === null || s.seconds === undefined ? "–" : `${s.seconds.toFixed(2)} s` }), el("td", { class: "msg", text: s.message || "" })));
    const kind = res.timing_kind;
    // a speedup's band, as arena_tui/figures.py computes it: a prediction's own; for a measured
    // one the two sides' half interquartile spreads compounded; a mean's is its widest workload's
    const bandOf = (w) => (kind === "predicted" ? (typeof w.band === "number" ? w.band : null)
      : w.candidate && w.baseline && typeof w.candidate.spread === "number" && typeof w.baseline.spread === "number"
        ? (1 + w.candidate.spread / 2) * (1 + w.baseline.spread / 2) - 1 : null);
    const bandText = (b) => (b === null ? "" : ` ±${(b * 100).toFixed(kind === "predicted" ? 0 : 1)}%`);
    const speedBand = (w) => bandText(bandOf(w));
    const bands = res.workloads.map(bandOf);
    const meanBand = bands.length && bands.every((b) => b !== null) ? Math.max(...bands) : null;
    const work = res.workloads.map((w) => el("tr", {}, el("td", { text: w.label }), el("td", { text: w.mode || "" }),
      el("td", { class: "num", text: timeText(w.candidate, kind) }), el("td", { class: "num", text: timeText(w.baseline, kind) }),
      el("td", { class: "num", text: kind === "cpu" ? INTERP : `${ratio(w.speedup)}${speedBand(w)}` }), el("td", { class: "num", text: solText(kind, w.sol_fraction) })));
    const flags = [...d.integrity_flags.map((t) => el("li", { class: "bad", text: `integrity: ${t}` })),
      ...d.review_notes.map((t) => el("li", { text: `review: ${t}` })), ...d.infrastructure_marks.map((t) => el("li", { class: "muted", text: `marked infrastructure: ${t}` }))];
    const table = (head, body) => el("div", { class: "wrap" }, el("table", {}, el("thead", {}, el("tr", {}, ...head.map((t) => el("th", { class: NUMERIC.has(t) ? "num" : null, text: t })))), el("tbody", {}, body)));
    put(target,
      el("h3", { text: `job ${d.job_id}: ${d.task_id} — ${res.status}${res.failed_stage ? ` at ${res.failed_stage}` : ""}`
        + (kind === "cpu" ? `, ${INTERPRETED}` : res.status === "passed" ? `, speedup ${ratio(res.speedup)}${bandText(meanBand)} (${kind}), SOL ${pct(res.sol_fraction, 1)}` : ", speedup – (failed)") }),
      el("p", { class: "muted", text: `run ${d.run_id} · ${d.agent || "candidate"} · device ${(res.device && (res.device.model || res.device.id)) || "?"} · ${res.timing_kind} timing · ${d.created_at}` }),
      table(["stage", "verdict", "time", "message"], stages),
      work.length ? el("h3", { text: "workloads" }) : null, work.length ? table(["workload", "mode", "candidate", "baseline", "speedup", "SOL"], work) : null,
      flags.length ? el("ul", {}, flags) : null,
      el("h3", { text: "candidate" }),
      d.source === null ? el("p", { class: "muted", text: "the store does not keep this candidate's source" }) : el("pre", { class: "source", text: d.source }));
  }

  // --- live ------------------------------------------------------------------------------
  function setLive(kind, text) {
    const live = document.getElementById("live");
    live.dataset.state = kind;
    live.textContent = text;
  }

  function listen() {
    if (SNAPSHOT) {
      setLive("snapshot", `snapshot of ${SNAPSHOT.taken_at}`);
      return;
    }
    if (!window.EventSource) { setLive("reconnecting", "no live updates in this browser: reload to refresh"); return; }
    const source = new EventSource("api/events");
    source.addEventListener("hello", () => setLive("live", "live"));
    source.addEventListener("results", (ev) => {
      const d = JSON.parse(ev.data);
      state.version = d.version;
      for (const r of d.results) state.fresh.add(r.job_id);
      setLive("live", d.results.length ? `live · ${d.results.length} new result(s) at ${new Date().toLocaleTimeString()}` : "live");
      load();
    });
    source.onerror = () => setLive("reconnecting", "reconnecting…");  // EventSource reconnects by itself
  }

  document.getElementById("filters").addEventListener("change", (ev) => {
    state.filters[ev.target.name] = ev.target.value;
    writeAddress();
    render();
  });
  window.addEventListener("hashchange", () => { readAddress(); render(); });
  readAddress(true);
  listen();
  load();
})();
