/* mstar ui -- the lineage as a graph, and what its marks mean.
 *
 * One node per seed and per iteration, placed by iteration (x; the seeds side by side at the
 * left) and by generation (y: how many parents lie above it), with an edge from each parent to
 * its child. A node is drawn as the trajectory draws it (colour: seed, child, regression, best,
 * failed, duplicate; a green ring for GAIN, a red one for LOSS); an iteration that made no child
 * is a square at the end of a dashed edge. Its tooltip names the program, score, change, marks
 * and title, as text. Drawn with createElementNS (M.svg): nothing from the run is parsed.
 */
(function () {
"use strict";
const M = window.MSTAR;
const h = M.h;

// Every mark a lineage row or node can carry (mstar/run/views.py LineageNode.markers), defined.
M.MARKS = [
  ["BEST", "the best static score in the pool (the champion, once the run has finished)"],
  ["GAIN", "better than its parent item by item on the static set: the 95% paired interval is above zero"],
  ["LOSS", "worse than its parent item by item: the 95% paired interval is below zero"],
  ["REGRESSION", "a static score below its parent's, by any amount; without LOSS the drop is within the noise"],
  ["NO CHANGE", "answered every static item exactly as its parent did"],
  ["FAILED", "the iteration made no child: the reply, the patch, the gates or the evaluation failed (why: on its row)"],
  ["DUPLICATE", "the iteration made no child: its program was already in the pool"],
  ["ERROR", "scored, but its evaluation reported an error of the whole program (its cases say more)"],
];
M.marksLegend = () => h("div", {class: "marker-legend"},
  M.MARKS.map(([mark, meaning]) => [M.badges([mark]), h("span", null, meaning)]));

/* Generation and x slot of each node: parents come before children in iteration order. */
function layout(nodes) {
  const byProgram = new Map(), gen = new Map(), slot = new Map();
  nodes.forEach((n) => { if (n.program_id) byProgram.set(n.program_id, n); });
  const order = [...nodes].sort((a, b) => a.iteration - b.iteration);
  const seeds = order.filter((n) => n.iteration === 0);
  seeds.forEach((n, i) => slot.set(n.id, i - (seeds.length - 1)));   // side by side, left of iteration 1
  for (const n of order) {
    const parent = n.parent_id ? byProgram.get(n.parent_id) : null;
    gen.set(n.id, parent && gen.has(parent.id) ? gen.get(parent.id) + 1 : 0);
    if (!slot.has(n.id)) slot.set(n.id, n.iteration);
  }
  return {byProgram, gen, slot};
}

M.lineageGraph = function (nodes, onPick) {
  const s = M.svg;
  const {byProgram, gen, slot} = layout(nodes);
  const xs = [...slot.values()], gens = [...gen.values()];
  const x0 = Math.min(0, ...xs), x1 = Math.max(1, ...xs), deepest = Math.max(1, ...gens);
  const W = 960, pad = {l: 70, r: 20, t: 16, b: 30};
  const H = pad.t + pad.b + Math.min(520, Math.max(120, 26 * deepest));
  const X = (v) => pad.l + ((v - x0) / (x1 - x0)) * (W - pad.l - pad.r);
  const Y = (g) => pad.t + (g / deepest) * (H - pad.t - pad.b);
  const svg = s("svg", {viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "lineage graph", class: "lineage-graph"});
  const edges = s("g"), marks = s("g");
  svg.append(edges, marks);
  const step = Math.max(1, Math.ceil(x1 / 12));
  for (let v = step; v <= x1; v += step) {
    edges.appendChild(s("text", {x: X(v), y: H - 8, "text-anchor": "middle"}, String(v)));
  }
  edges.appendChild(s("text", {x: X(x0), y: H - 8, "text-anchor": "start"}, "seeds"));
  edges.appendChild(s("text", {x: 8, y: pad.t + 4}, "generation 0"));
  edges.appendChild(s("text", {x: 8, y: Y(deepest) + 4}, `generation ${deepest}`));
  for (const n of nodes) {
    const parent = n.parent_id ? byProgram.get(n.parent_id) : null;
    if (!parent) continue;
    const [px, py, cx, cy] = [X(slot.get(parent.id)), Y(gen.get(parent.id)), X(slot.get(n.id)), Y(gen.get(n.id))];
    const mx = (px + cx) / 2;
    const cls = "edge" + (n.program_id ? "" : " miss") + ((n.markers || []).includes("GAIN") ? " gain" : "");
    edges.appendChild(s("path", {d: `M${px},${py} C${mx},${py} ${mx},${cy} ${cx},${cy}`, class: cls,
      "data-from": parent.id, "data-to": n.id}));
  }
  for (const n of nodes) {
    const made = n.status === "seed" || n.status === "ok";
    const color = n.best ? M.COLORS.best : n.status === "seed" ? M.COLORS.seed : !made ? M.COLORS[n.status] || "#999"
      : (n.delta || 0) < 0 ? M.COLORS.regression : M.COLORS.ok;
    const markers = n.markers || [];
    const ring = markers.includes("GAIN") ? M.COLORS.bestLine : markers.includes("LOSS") ? "#c62828" : null;
    const x = X(slot.get(n.id)), y = Y(gen.get(n.id));
    const attrs = {class: "node", "data-id": n.id, "data-markers": markers.join(","), fill: color,
      stroke: ring, "stroke-width": ring ? 2.5 : null};
    const mark = made ? s("circle", {...attrs, cx: x, cy: y, r: n.best ? 7 : 5})
      : s("rect", {...attrs, x: x - 4, y: y - 4, width: 8, height: 8});
    mark.appendChild(s("title", null, `${n.id} (iteration ${n.iteration}, parent ${n.parent_id || "none"}): ` +
      `${made ? M.score(n.static_score) : n.status}${typeof n.delta === "number" ? " (" + M.signed(n.delta) + ")" : ""}` +
      `${markers.length ? " " + markers.join(" ") : ""} ${n.title || ""}`));
    mark.addEventListener("click", () => onPick && onPick(n.id));
    marks.appendChild(mark);
    if (n.best) marks.appendChild(s("text", {x: x + 9, y: y - 8}, n.id));
  }
  return svg;
};
})();
