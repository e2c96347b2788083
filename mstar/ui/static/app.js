/* mstar ui -- the router (addresses after '#') and the live stream.
 *
 *   #/                                   runs                 M.views.runs
 *   #/run/<run>                          one run, live        M.views.run
 *   #/run/<run>/program/<id>             one program          M.views.program
 *   #/run/<run>/cases/<id>/<split>?...   its questions        M.views.cases
 *   #/run/<run>/case/<id>/<split>/<qid>  one question         M.views.kase
 *   #/run/<run>/compare/<a>/<b>/<split>  two programs         M.views.compare
 *   #/run/<run>/spend                    spend over time      M.views.spend
 *   #/store                              the memory store     M.views.store (mstar ui --store)
 *   #/store/<namespace>?contains=        its entries, recall  M.views.storeNamespace
 *
 * The live stream (/api/stream, Server-Sent Events) says "changed: lineage" or "changed: usage";
 * a view with an update(kind) method refetches. Updates never overlap: one that arrives while
 * another runs is done once after it.
 */
(function () {
"use strict";
const M = window.MSTAR;
const h = M.h;

const ROUTES = [
  [/^$/, "runs", []],
  [/^run\/([^/]+)$/, "run", ["run"]],
  [/^run\/([^/]+)\/program\/([^/]+)$/, "program", ["run", "id"]],
  [/^run\/([^/]+)\/cases\/([^/]+)\/([^/]+)$/, "cases", ["run", "id", "split"]],
  [/^run\/([^/]+)\/case\/([^/]+)\/([^/]+)\/([^/]+)$/, "kase", ["run", "id", "split", "qid"]],
  [/^run\/([^/]+)\/compare\/([^/]+)\/([^/]+)\/([^/]+)$/, "compare", ["run", "a", "b", "split"]],
  [/^run\/([^/]+)\/spend$/, "spend", ["run"]],
  [/^store$/, "store", []],
  [/^store\/([^/]+)$/, "storeNamespace", ["namespace"]],
];

const RETRY_S = 3;
let current = null, busy = false, pending = null, stream = null, streamKey = null;

function parse() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, qs] = raw.split("?");
  for (const [re, name, keys] of ROUTES) {
    const m = path.replace(/\/$/, "").match(re);
    if (m) {
      const params = {};
      keys.forEach((k, i) => { params[k] = decodeURIComponent(m[i + 1]); });
      return {name, params, query: new URLSearchParams(qs || "")};
    }
  }
  return null;
}

function setLive(on, text) {
  const el = document.getElementById("live");
  el.className = "live " + (on ? "on" : "off");
  M.replace(el, text);
}

function watch(run) {
  const key = run || "";
  if (stream && streamKey === key && stream.readyState !== EventSource.CLOSED) return;
  if (stream) stream.close();
  streamKey = key;
  stream = new EventSource("/api/stream" + (run ? "?run=" + encodeURIComponent(run) : ""));
  stream.addEventListener("hello", () => setLive(true, "live"));
  stream.addEventListener("change", (e) => {
    let kind = "lineage";
    try { kind = JSON.parse(e.data).kind; } catch (err) { /* a malformed message: refetch all */ }
    update(kind);
  });
  stream.addEventListener("gone", () => setLive(false, "run removed"));
  stream.onerror = () => setLive(false, "reconnecting…");
}

async function update(kind) {
  const view = current && current.view;
  if (!view || !view.update) return;
  if (busy) { pending = pending === "lineage" || kind === "lineage" ? "lineage" : kind; return; }
  busy = true;
  try {
    await view.update(kind);
  } catch (err) {
    console.warn("mstar ui: update failed:", err.message);
  } finally {
    busy = false;
    if (pending && current && current.view === view) { const k = pending; pending = null; update(k); }
    else pending = null;
  }
}

async function route() {
  const r = parse();
  const app = document.getElementById("app");
  const root = h("div", {class: "view"});
  M.replace(app, root);
  if (!r) {
    M.replace(root, h("h1", null, "Not found"), h("p", null, M.a("#/", "back to the runs")));
    return;
  }
  const view = M.views[r.name];
  current = {view, name: r.name, params: r.params};
  pending = null;
  watch(r.params.run || null);
  root.classList.add("loading");
  busy = true;                      // live changes wait for the first render
  try {
    await view.render(root, r.params, r.query);
  } catch (err) {
    // A run page opened before its run wrote anything (or while a file is rewritten) comes
    // right by itself: the route is tried again while the address stays the same.
    const hash = location.hash;
    M.replace(root, h("h1", null, "Cannot show this"), h("p", {class: "error"}, err.message),
      h("p", {class: "muted"}, "trying again every " + RETRY_S + " s"),
      h("p", null, M.a(r.params.run && r.name !== "run" ? M.link.run(r.params.run) : "#/", "back")));
    setTimeout(() => { if (location.hash === hash && current && current.view === view) route(); }, RETRY_S * 1000);
  } finally {
    root.classList.remove("loading");
    document.body.dataset.view = r.name;
    busy = false;
    if (pending && current && current.view === view) { const k = pending; pending = null; update(k); }
  }
}

window.addEventListener("hashchange", route);
route();
})();
