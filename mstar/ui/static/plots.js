/* mstar ui -- SVG figures drawn with createElementNS: the trajectory (every child's static
 * score by iteration, the best so far, the misses), stacked bars over time (spend per role), and
 * a paired interval. Labels and tooltips (<title>) are text nodes, like everything else.
 */
(function () {
"use strict";
const M = window.MSTAR;
const NS = "http://www.w3.org/2000/svg";

function s(tag, attrs, ...kids) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v != null) el.setAttribute(k, String(v));
  for (const k of kids.flat()) if (k != null) el.appendChild(k instanceof Node ? k : document.createTextNode(M.shown(k)));
  return el;
}
const tip = (text) => s("title", null, text);
M.svg = s;

M.COLORS = {seed: "#90a4ae", ok: "#1e88e5", regression: "#e57373", best: "#f9a825", failed: "#6d4c41",
  duplicate: "#8e24aa", bestLine: "#2e7d32"};
M.ROLE_COLORS = ["#1565c0", "#64b5f6", "#2e7d32", "#f9a825", "#8e24aa", "#ef6c00", "#00897b", "#6d4c41"];

function axes(g, x0, x1, y0, y1, W, H, pad, xlabel, ylabel, yfmt, xfmt) {
  const X = (v) => pad.l + (x1 === x0 ? 0.5 : (v - x0) / (x1 - x0)) * (W - pad.l - pad.r);
  const Y = (v) => H - pad.b - (y1 === y0 ? 0.5 : (v - y0) / (y1 - y0)) * (H - pad.t - pad.b);
  for (let i = 0; i <= 4; i++) {
    const v = y0 + (i / 4) * (y1 - y0);
    g.appendChild(s("line", {x1: pad.l, x2: W - pad.r, y1: Y(v), y2: Y(v), stroke: "#eceff1"}));
    g.appendChild(s("text", {x: pad.l - 6, y: Y(v) + 4, "text-anchor": "end"}, yfmt ? yfmt(v) : v.toFixed(2)));
  }
  const step = Math.max(1, Math.ceil((x1 - x0) / 10));
  for (let v = Math.ceil(x0); v <= x1; v += step) {
    g.appendChild(s("text", {x: X(v), y: H - pad.b + 14, "text-anchor": "middle"}, xfmt ? xfmt(v) : String(v)));
  }
  g.appendChild(s("line", {x1: pad.l, x2: W - pad.r, y1: H - pad.b, y2: H - pad.b, stroke: "#90a4ae"}));
  g.appendChild(s("text", {x: (W + pad.l - pad.r) / 2, y: H - 4, "text-anchor": "middle"}, xlabel));
  g.appendChild(s("text", {x: 12, y: (H - pad.b + pad.t) / 2, transform: `rotate(-90 12 ${(H - pad.b + pad.t) / 2})`,
    "text-anchor": "middle"}, ylabel));
  return {X, Y};
}

/* nodes: the run's flat lineage nodes. onPick(id) when a point is clicked. */
M.trajectory = function (nodes, total, onPick) {
  const W = 960, H = 270, pad = {l: 48, r: 16, t: 12, b: 34};
  const maxIt = Math.max(1, total || 0, ...nodes.map((n) => n.iteration));
  const svg = s("svg", {viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "trajectory"});
  const g = s("g");
  svg.appendChild(g);
  const scores = nodes.filter((n) => typeof n.static_score === "number").map((n) => n.static_score);
  const lo = Math.min(0, ...scores), hi = Math.max(1, ...scores);
  const {X, Y} = axes(g, 0, maxIt, lo, hi, W, H, pad, "iteration", "static score");
  // best so far: a step line over iterations, from the seeds on
  const byIt = [...nodes].sort((a, b) => a.iteration - b.iteration);
  let best = null, path = "";
  for (const n of byIt) {
    if (typeof n.static_score !== "number") continue;
    if (best === null || n.static_score > best) {
      path += best === null ? `M${X(n.iteration)},${Y(n.static_score)}` : `H${X(n.iteration)}V${Y(n.static_score)}`;
      best = n.static_score;
    }
  }
  if (path) g.appendChild(s("path", {d: path + `H${X(maxIt)}`, fill: "none", stroke: M.COLORS.bestLine,
    "stroke-width": 2, class: "best-line"}));
  for (const n of nodes) {
    const miss = typeof n.static_score !== "number";
    const color = n.best ? M.COLORS.best : n.status === "seed" ? M.COLORS.seed : miss ? M.COLORS[n.status] || "#999"
      : (n.delta || 0) < 0 ? M.COLORS.regression : M.COLORS.ok;
    const x = X(n.iteration), y = miss ? H - pad.b - 4 : Y(n.static_score);
    const label = `${n.id}: ${miss ? n.status : M.score(n.static_score)}${typeof n.delta === "number" ?
      " (" + M.signed(n.delta) + ")" : ""} ${n.title || ""}`;
    const attrs = {class: "pt", "data-id": n.id, fill: color};
    const mark = miss ? s("rect", {...attrs, x: x - 3, y: y - 3, width: 6, height: 6})
      : s("circle", {...attrs, cx: x, cy: y, r: n.best ? 6 : 4, stroke: n.best ? "#795548" : "none"});
    mark.appendChild(tip(label));
    mark.addEventListener("click", () => onPick && onPick(n.id));
    g.appendChild(mark);
  }
  return svg;
};

/* Stacked bars: buckets[i][key][series] (or buckets[i][key] for one series). */
M.stackedBars = function (buckets, series, key, opts) {
  const W = 960, H = opts.height || 220, pad = {l: 58, r: 16, t: 10, b: 34};
  const svg = s("svg", {viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": opts.label || key});
  const get = (b, name) => (series.length && typeof b[key] === "object" ? b[key][name] || 0 : b[key] || 0);
  const totals = buckets.map((b) => (series.length ? series.reduce((a, r) => a + get(b, r), 0) : get(b)));
  const top = Math.max(opts.minTop || 1e-9, ...totals);
  const g = s("g");
  svg.appendChild(g);
  const {Y} = axes(g, 0, buckets.length, 0, top, W, H, pad, opts.xlabel || "time", opts.ylabel || key, opts.yfmt,
    opts.xfmt);
  const bw = (W - pad.l - pad.r) / Math.max(1, buckets.length);
  buckets.forEach((b, i) => {
    let acc = 0;
    (series.length ? series : [null]).forEach((r, j) => {
      const v = r === null ? get(b) : get(b, r);
      if (!v) return;
      const y1 = Y(acc), y2 = Y(acc + v);
      acc += v;
      const rect = s("rect", {x: pad.l + i * bw + 1, y: y2, width: Math.max(1, bw - 2), height: Math.max(0.5, y1 - y2),
        fill: opts.colors ? opts.colors[j % opts.colors.length] : M.ROLE_COLORS[j % M.ROLE_COLORS.length]});
      rect.appendChild(tip(`${opts.bucketLabel ? opts.bucketLabel(i) : "bucket " + i}: ${r || key} ` +
        (opts.yfmt ? opts.yfmt(v) : v)));
      g.appendChild(rect);
    });
  });
  return svg;
};

M.legend = (names, colors) => M.h("div", {class: "legend"}, names.map((n, i) =>
  M.h("span", null, M.h("i", {style: {background: (colors || M.ROLE_COLORS)[i % (colors || M.ROLE_COLORS).length]}}), n)));

/* A paired difference: its interval against zero, on [-1, 1]. */
M.intervalPlot = function (p) {
  const W = 520, H = 56, pad = 20;
  const X = (v) => pad + ((Math.max(-1, Math.min(1, v)) + 1) / 2) * (W - 2 * pad);
  const color = p.significant ? (p.mean > 0 ? M.COLORS.bestLine : "#c62828") : "#607d8b";
  return s("svg", {viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "paired difference", class: "interval"},
    s("line", {x1: pad, x2: W - pad, y1: 28, y2: 28, stroke: "#cfd8dc"}),
    s("line", {x1: X(0), x2: X(0), y1: 12, y2: 44, stroke: "#90a4ae", "stroke-dasharray": "3 3"}),
    s("line", {x1: X(p.low), x2: X(p.high), y1: 28, y2: 28, stroke: color, "stroke-width": 6}),
    s("circle", {cx: X(p.mean), cy: 28, r: 6, fill: color}),
    s("text", {x: pad, y: 52}, "-1"), s("text", {x: X(0) - 3, y: 52}, "0"), s("text", {x: W - pad - 4, y: 52}, "+1"));
};
})();
