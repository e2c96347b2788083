/* mstar ui -- DOM helpers, formatting, the JSON client and the page addresses.
 *
 * The one rule of this page: whatever the server sends is data. Titles, commit bodies, sources,
 * questions, answers, retrieved text and errors were written by programs and models and may
 * hold markup; they reach the DOM only as text nodes (M.h and M.append turn every string child
 * into a text node) or as attribute values this code names; no string is ever parsed as markup. Control
 * and bidirectional-override characters are shown as escapes (\u202e), as the CLI shows them.
 */
(function () {
"use strict";
const M = (window.MSTAR = window.MSTAR || {});

const INVISIBLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/g;
M.shown = (v) => (v == null ? "" : String(v).replace(INVISIBLE,
  (ch) => "\\u" + ch.charCodeAt(0).toString(16).padStart(4, "0")));

M.append = function (el, kids) {
  for (const k of [kids].flat(Infinity)) {
    if (k == null || k === false) continue;
    el.appendChild(k instanceof Node ? k : document.createTextNode(M.shown(k)));
  }
  return el;
};

/* h("a", {href: "#/run/x", class: "id", on: {click: fn}, data: {id: "x"}}, "text", child, ...) */
M.h = function (tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "on") for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else if (k === "data") for (const [dk, dv] of Object.entries(v)) el.dataset[dk] = String(dv);
    else if (k === "style") Object.assign(el.style, v);
    else if (k === "href") el.setAttribute("href", M.safeHref(v));
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  return M.append(el, kids);
};

/* Links go to this page's own routes or to this server: never a scheme a string could smuggle. */
M.safeHref = (v) => { v = String(v); return v.startsWith("#/") || v.startsWith("/") ? v : "#/"; };

M.clear = (el) => { while (el.firstChild) el.removeChild(el.firstChild); return el; };
M.replace = (el, ...kids) => M.append(M.clear(el), kids);

/* ------------------------------------------------------------------ formatting */
M.score = (x) => (typeof x === "number" ? x.toFixed(3) : "–");
M.signed = (x, d = 3) => (typeof x === "number" ? (x >= 0 ? "+" : "") + x.toFixed(d) : "");
M.count = function (n) {
  if (typeof n !== "number") return "–";
  const a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toFixed(2) + "G";
  if (a >= 1e6) return (n / 1e6).toFixed(2) + "M";
  if (a >= 1e3) return (n / 1e3).toFixed(1) + "k";
  return String(Math.round(n));
};
M.money = (x) => (typeof x === "number" ? "$" + (x >= 100 ? x.toFixed(0) : x.toFixed(4)) : "–");
M.duration = function (s) {
  if (typeof s !== "number" || !isFinite(s)) return "–";
  s = Math.max(0, Math.round(s));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
  return Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
};
M.ago = (s) => (typeof s === "number" ? M.duration(s) + " ago" : "–");
M.clock = (epoch) => (typeof epoch === "number" ? new Date(epoch * 1000).toLocaleString() : "–");
M.deltaSpan = function (d) {
  if (typeof d !== "number") return null;
  return M.h("span", {class: "num " + (d > 0 ? "up" : d < 0 ? "down" : "")}, "(" + M.signed(d) + ")");
};
M.interval = (e) => (e ? M.h("span", {class: "muted", title: "paired difference, 95% bootstrap interval"},
  "paired " + M.signed(e.mean) + " [" + M.signed(e.low) + ", " + M.signed(e.high) + "] n=" + e.n) : null);

const MARKERS = {BEST: "BEST", REGRESSION: "REGRESSION", FAILED: "FAILED", DUPLICATE: "DUPLICATE",
  ERROR: "ERROR", GAIN: "GAIN", LOSS: "LOSS", "NO CHANGE": "NO-CHANGE"};
M.badges = (markers) => (markers || []).map((m) => M.h("span", {class: "badge " + (MARKERS[m] || "")}, m));
const STATUSES = ["running", "finished", "stopped", "crashed", "incomplete", "unreadable"];
M.status = (s) => M.h("span", {class: "status " + (STATUSES.includes(s) ? s : "")}, s);

M.pre = (text, cls) => M.h("pre", {class: cls || null}, text == null ? "" : text);
M.json = (v) => M.pre(JSON.stringify(v, null, 2));
M.section = (id, title, ...kids) => M.h("section", {id}, title ? M.h("h2", null, title) : null, ...kids);
M.kv = (pairs) => M.h("div", {class: "kv"}, pairs.filter((p) => p && p[1] != null && p[1] !== "")
  .map(([k, v]) => [M.h("div", {class: "k"}, k), M.h("div", null, v)]));

/* ------------------------------------------------------------------ the server */
M.api = async function (path) {
  const r = await fetch(path, {credentials: "same-origin", cache: "no-store"});
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  if (!r.ok) throw new Error((body && body.error) || r.status + " " + r.statusText);
  return body;
};
const enc = encodeURIComponent;
M.apiPath = {
  runs: () => "/api/runs",
  run: (run) => "/api/runs/" + enc(run),
  progress: (run) => "/api/runs/" + enc(run) + "/progress",
  spend: (run) => "/api/runs/" + enc(run) + "/spend",
  program: (run, id) => "/api/runs/" + enc(run) + "/programs/" + enc(id),
  cases: (run, id, split) => "/api/runs/" + enc(run) + "/programs/" + enc(id) + "/cases/" + enc(split),
  kase: (run, id, split, q) => M.apiPath.cases(run, id, split) + "/" + enc(q),
  compare: (run, a, b, split) => "/api/runs/" + enc(run) + "/compare?a=" + enc(a) + "&b=" + enc(b) +
    "&split=" + enc(split),
};

/* ------------------------------------------------------------------ the page's own addresses */
M.link = {
  runs: () => "#/",
  run: (run) => "#/run/" + enc(run),
  program: (run, id) => "#/run/" + enc(run) + "/program/" + enc(id),
  cases: (run, id, split, q) => "#/run/" + enc(run) + "/cases/" + enc(id) + "/" + enc(split) + (q ? "?" + q : ""),
  kase: (run, id, split, qid) => "#/run/" + enc(run) + "/case/" + enc(id) + "/" + enc(split) + "/" + enc(qid),
  compare: (run, a, b, split) => "#/run/" + enc(run) + "/compare/" + enc(a) + "/" + enc(b) + "/" + enc(split || "static"),
  spend: (run) => "#/run/" + enc(run) + "/spend",
};
M.a = (href, text, cls) => M.h("a", {href, class: cls || null}, text);

/* Breadcrumbs in the header: [[text, href], ..., [text]] */
M.crumbs = function (items) {
  const nav = document.getElementById("crumbs");
  const out = [];
  items.forEach(([text, href], i) => {
    if (i) out.push(M.h("span", {class: "sep"}, "›"));
    out.push(href ? M.a(href, text) : M.h("span", null, text));
  });
  M.replace(nav, out);
};
})();
