// Draws the model of a trace (embedded as JSON by `turnstile-sim view`) as plain SVG.
// No library and no network: the page is one file. What is drawn comes from the model, which
// the simulator built by replaying the trace through the core; `window.turnstileView` says
// what was drawn, so a test can hold the picture against `replay`'s report.
"use strict";
(function () {
  const model = JSON.parse(document.getElementById("trace-data").textContent);
  const NS = "http://www.w3.org/2000/svg";
  const ROW = 18, LANE_PAD = 10, LEFT = 170, TOP = 24, WIDTH_PER_LINE = 6;
  let selected = null;

  const el = (name, attrs, parent) => {
    const e = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (parent) parent.appendChild(e);
    return e;
  };
  const html = (tag, text, parent) => {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  };

  // The page: a header, the failure (if any), the timeline and the details panel.
  const header = html("header", undefined, document.body);
  html("h1", model.name || "trace", header);
  if (model.rule) html("span", model.rule, header).className = "rule";
  // Inputs at a few milliseconds (a scripted scenario) spread out on the input-index axis.
  const spread = model.lines.length ? model.lines[model.lines.length - 1].at - model.lines[0].at : 0;
  let axis = spread < model.lines.length ? "index" : "time";
  const toggle = html("button", "axis: " + axis, header);
  toggle.id = "axis-toggle";
  toggle.onclick = () => { axis = axis === "time" ? "index" : "time"; toggle.textContent = "axis: " + axis; draw(); };
  const legend = html("span", undefined, header);
  legend.id = "legend";
  for (const [name, color] of [["completed", "#2e9e4f"], ["failed", "#d33a2c"], ["cancelled", "#e07b00"], ["interrupted", "#8a4fd3"], ["folded", "#6f8fa8"]]) {
    html("span", name, legend).style.background = color;
  }
  if (model.failure) {
    const f = html("div", "replay failed at line " + model.failure.line + ": " + model.failure.text, document.body);
    f.id = "failure";
  }
  const main = html("div", undefined, document.body);
  main.id = "main";
  const timeline = html("div", undefined, main);
  timeline.id = "timeline";
  const details = html("div", undefined, main);
  details.id = "details";

  const lines = model.lines;
  const named = new Set((model.failure && model.failure.sessions) || []);
  const namedSeqs = new Set((model.failure && model.failure.seqs) || []);

  // Bars of a lane are stacked in rows so that overlapping submissions do not cover each other.
  function rows() {
    const byLane = new Map(model.lanes.map((l) => [l.session, []]));
    const rowOf = new Map();
    for (const bar of model.bars) {
      const from = bar.phases[0].from.index;
      const last = bar.phases[bar.phases.length - 1];
      const to = last.to ? last.to.index : lines.length;
      const laneRows = byLane.get(bar.session) || [];
      let r = laneRows.findIndex((end) => end < from);
      if (r < 0) { r = laneRows.length; laneRows.push(to); } else laneRows[r] = to;
      byLane.set(bar.session, laneRows);
      rowOf.set(bar.seq, r);
    }
    return { byLane, rowOf };
  }

  function draw() {
    timeline.innerHTML = "";
    const n = Math.max(lines.length, 1);
    const t0 = lines.length ? lines[0].at : 0;
    const t1 = lines.length ? lines[lines.length - 1].at : 1;
    const fit = Math.max(600, timeline.clientWidth - LEFT - 20);
    const width = Math.max(fit, Math.min(60000, n * WIDTH_PER_LINE));
    const span = axis === "time" ? Math.max(t1 - t0, 1) : Math.max(n - 1, 1);
    const x = (p) => LEFT + 10 + ((axis === "time" ? p.at - t0 : p.index) / span) * (width - 20);
    const xEnd = (p) => (p ? x(p) : LEFT + width - 10);
    const { byLane, rowOf } = rows();
    const laneTop = new Map();
    let y = TOP;
    for (const lane of model.lanes) {
      laneTop.set(lane.session, y);
      y += Math.max(1, (byLane.get(lane.session) || []).length) * ROW + 2 * LANE_PAD;
    }
    const height = y + 10;
    const svg = el("svg", { width: LEFT + width, height, id: "timeline-svg" }, timeline);
    const defs = el("defs", {}, svg);
    const marker = el("marker", { id: "arrow", viewBox: "0 0 6 6", refX: 5, refY: 3, markerWidth: 6, markerHeight: 6, orient: "auto" }, defs);
    el("path", { d: "M0,0 L6,3 L0,6 z", fill: "#6f8fa8" }, marker);
    const drawn = { lanes: [], outcomes: {}, run_completes: {}, unfinished: 0 };

    // Lanes.
    model.lanes.forEach((lane, i) => {
      const top = laneTop.get(lane.session);
      const h = Math.max(1, (byLane.get(lane.session) || []).length) * ROW + 2 * LANE_PAD;
      const cls = "lane-bg" + (i % 2 ? " alt" : "") + (named.has(lane.session) ? " named" : "");
      const bg = el("rect", { x: 0, y: top, width: LEFT + width, height: h, class: cls, "data-session": lane.session }, svg);
      bg.addEventListener("click", (ev) => selectNearest(ev, x));
      const label = el("text", { x: lane.parent ? 18 : 6, y: top + 14, class: "lane-label" }, svg);
      label.textContent = (lane.parent ? "↳ " : "") + lane.session;
      drawn.lanes.push(lane.session);
    });

    // Axis: the time (or input index) of a few inputs.
    const ticks = 8;
    for (let k = 0; k <= ticks; k++) {
      const idx = Math.round((k / ticks) * (n - 1));
      if (!lines[idx]) continue;
      const px = x({ index: idx, at: lines[idx].at });
      el("line", { x1: px, y1: TOP - 6, x2: px, y2: height, class: "axis" }, svg);
      const t = el("text", { x: px + 2, y: TOP - 10, class: "axis-label" }, svg);
      t.textContent = axis === "time" ? lines[idx].at + " ms" : "#" + idx;
    }

    // Bars: one rectangle per phase, outlined by the outcome's colour.
    const rowY = (session, seq) => laneTop.get(session) + LANE_PAD + (rowOf.get(seq) || 0) * ROW;
    for (const bar of model.bars) {
      const top = rowY(bar.session, bar.seq);
      for (const ph of bar.phases) {
        const x1 = x(ph.from), x2 = Math.max(xEnd(ph.to), x1 + 2);
        const r = el("rect", { x: x1, y: top + 1, width: x2 - x1, height: ROW - 2, class: "phase " + ph.kind, "data-index": ph.from.index, "data-seq": bar.seq }, svg);
        el("title", {}, r).textContent = bar.seq + " " + ph.kind + (bar.run_id ? " (" + bar.run_id + ")" : "");
        r.addEventListener("click", () => select(ph.from.index));
      }
      const first = bar.phases[0], last = bar.phases[bar.phases.length - 1];
      const outcome = bar.outcome || "unfinished";
      const x1 = x(first.from), x2 = Math.max(xEnd(last.to), x1 + 2);
      el("rect", { x: x1, y: top + 1, width: x2 - x1, height: ROW - 2, class: "bar-outline " + outcome + (namedSeqs.has(bar.seq) ? " named" : ""), "data-seq": bar.seq, "data-outcome": outcome }, svg);
      const label = el("text", { x: x1 + 3, y: top + 13 }, svg);
      label.textContent = String(bar.seq);
      if (bar.outcome) drawn.outcomes[bar.seq] = bar.outcome; else drawn.unfinished += 1;
      if (bar.run_complete && bar.run_id && last.to) {
        const cap = el("rect", { x: x2 - 3, y: top, width: 6, height: ROW, fill: "#333", class: "cap", "data-run-id": bar.run_id, "data-index": last.to.index }, svg);
        cap.addEventListener("click", () => select(last.to.index));
        const t = el("text", { x: x2 + 5, y: top + 13, class: "cap-label" }, svg);
        t.textContent = bar.run_id + ": " + bar.outcome;
        drawn.run_completes[bar.run_id] = (drawn.run_completes[bar.run_id] || 0) + 1;
      }
      if (bar.folded_into != null && last.to) {
        const to = model.bars.find((b) => b.seq === bar.folded_into);
        if (to) {
          const ty = rowY(to.session, to.seq) + ROW / 2;
          el("path", { d: "M" + x2 + "," + (top + ROW / 2) + " L" + (x2 + 6) + "," + ty, class: "fold" }, svg);
        }
      }
    }

    // Attempts, tool calls and summaries inside their bar's row.
    for (const s of model.spans) {
      const bar = s.seq != null ? model.bars.find((b) => b.seq === s.seq) : null;
      const top = bar ? rowY(bar.session, bar.seq) : laneTop.get(s.session) + LANE_PAD;
      const x1 = x(s.from), x2 = Math.max(xEnd(s.to), x1 + 2);
      const dy = s.kind === "tool" ? ROW / 2 : 4;
      const r = el("rect", { x: x1, y: top + dy, width: x2 - x1, height: ROW / 2 - 4, class: "span " + s.kind + " " + (s.end || "open"), "data-index": s.from.index }, svg);
      el("title", {}, r).textContent = s.label + (s.end ? " (" + s.end + ")" : "");
      r.addEventListener("click", () => select(s.from.index));
    }

    // Marks: cancels and the like as lines across their lane (or every lane), many small
    // ones (commits, timers) as one path per kind, so a large trace stays light.
    const paths = {};
    for (const m of model.marks) {
      const px = x(m.at);
      const top = m.session ? laneTop.get(m.session) : TOP;
      const bottom = m.session ? top + Math.max(1, (byLane.get(m.session) || []).length) * ROW + 2 * LANE_PAD : height;
      if (["commit", "timer_set", "timer_fired", "timer_cancelled", "run_complete", "outcome"].includes(m.kind)) {
        if (m.kind === "run_complete" || m.kind === "outcome") continue;
        const y1 = m.kind === "commit" ? bottom - 5 : TOP - 4, y2 = m.kind === "commit" ? bottom : TOP + 2;
        paths[m.kind] = (paths[m.kind] || "") + "M" + px.toFixed(1) + "," + y1 + "V" + y2;
        continue;
      }
      const line = el("line", { x1: px, y1: top, x2: px, y2: bottom, class: "mark " + m.kind, "data-index": m.at.index }, svg);
      el("title", {}, line).textContent = m.label;
      line.addEventListener("click", () => select(m.at.index));
    }
    for (const [kind, d] of Object.entries(paths)) el("path", { d, class: "ticks " + kind }, svg);
    cursor = el("line", { x1: 0, y1: TOP, x2: 0, y2: height, class: "mark selected-line", visibility: "hidden" }, svg);
    place = (index) => {
      const px = x({ index, at: lines[index].at });
      cursor.setAttribute("x1", px);
      cursor.setAttribute("x2", px);
      cursor.setAttribute("visibility", "visible");
    };
    if (selected != null && lines[selected]) place(selected);
    window.turnstileView = { drawn, selected, axis };
  }
  // The selected input's line on the timeline, moved without redrawing the rest.
  let cursor = null;
  let place = () => {};

  // A click on a lane selects the input nearest to it on the axis.
  function selectNearest(ev, x) {
    const svg = document.getElementById("timeline-svg");
    const px = ev.clientX - svg.getBoundingClientRect().left;
    let best = 0, bestD = Infinity;
    for (let i = 0; i < lines.length; i++) {
      const d = Math.abs(x({ index: i, at: lines[i].at }) - px);
      if (d < bestD) { bestD = d; best = i; }
    }
    select(best);
  }

  function select(index) {
    selected = index;
    const l = lines[index];
    details.innerHTML = "";
    if (!l) return;
    const h = html("h2", "line " + l.line + " · input #" + index + " · at " + l.at + " ms", details);
    h.id = "selected-line";
    h.dataset.line = l.line;
    if (model.failure && model.failure.line === l.line) html("p", model.failure.text, details).style.color = "#8a1c1c";
    html("h2", "input", details);
    html("pre", JSON.stringify(l.input, null, 2), details);
    html("h2", "outputs (" + l.outputs.length + ")", details);
    html("pre", l.outputs.map((o) => JSON.stringify(o)).join("\n"), details);
    html("h2", "core state after it", details);
    html("pre", JSON.stringify(l.state, null, 2), details);
    place(index);
    if (window.turnstileView) window.turnstileView.selected = index;
  }

  draw();
  // A failing trace opens at its failing line; any other at its first.
  let start = 0;
  if (model.failure) {
    const i = lines.findIndex((l) => l.line === model.failure.line);
    start = i >= 0 ? i : lines.length - 1;
  }
  if (lines.length) select(start);
})();
