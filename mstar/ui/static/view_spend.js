/* mstar ui -- where the money goes: spend per role, tokens (or dollars) per role over time, and
 * errors, retries, 429 answers and seconds held by the endpoint's limiter over time. Live.
 */
(function () {
"use strict";
const M = window.MSTAR;
const h = M.h;

function rolesTable(d) {
  const head = ["role", "calls", "errors", "prompt tokens", "completion tokens", "cache hits (tokens saved)"]
    .concat(d.priced ? ["cost"] : []).concat(["models"]);
  return h("table", {class: "grid", id: "spend-table"}, h("tr", null, head.map((t) => h("th", null, t))),
    [...d.roles, d.total].map((s) => h("tr", null, h("th", null, s.role), h("td", {class: "num"}, M.count(s.calls)),
      h("td", {class: "num"}, s.errors), h("td", {class: "num"}, M.count(s.prompt_tokens)),
      h("td", {class: "num"}, M.count(s.completion_tokens)),
      h("td", {class: "num"}, `${s.cache_hits} (${M.count(s.saved_tokens)})`),
      d.priced ? h("td", {class: "num"}, M.money(s.cost_usd || 0)) : null, h("td", null, (s.models || []).join(", ")))));
}

M.views.spend = {
  async render(root, params) {
    this.root = root;
    this.run = params.run;
    this.measure = this.measure || "tokens";
    M.crumbs([["runs", M.link.runs()], [this.run, M.link.run(this.run)], ["spend"]]);
    await this.update();
  },
  async update() {
    const d = await M.api(M.apiPath.spend(this.run));
    const s = d.series;
    const when = (i) => (s.start == null ? "" : new Date((s.start + i * s.width_s) * 1000).toLocaleTimeString());
    const bucketLabel = (i) => `${when(i)} (+${M.duration(s.width_s)})`;
    const xfmt = (i) => "+" + M.duration(i * s.width_s);      // time since the first call
    const fmt = this.measure === "cost" ? M.money : M.count;
    const switcher = h("div", {class: "filters"}, ["tokens", "cost", "calls"].map((m) => h("label", null,
      h("input", {type: "radio", name: "measure", value: m, checked: m === this.measure || null,
        on: {change: () => { this.measure = m; this.update(); }}}), " " + m)));
    const problems = [["errors", "#c62828"], ["retries", "#ef6c00"], ["rate_limited", "#8e24aa"]];
    const charts = s.buckets.length ? [
      h("div", {class: "figure"}, M.stackedBars(s.buckets, s.roles, this.measure, {label: "spend over time",
        ylabel: this.measure + " per bucket", yfmt: fmt, bucketLabel, xfmt, minTop: this.measure === "cost" ? 1e-6 : 1, xlabel: `time (buckets of ${M.duration(s.width_s)} from ` +
          `${when(0)})`})),
      M.legend(s.roles),
      h("h3", null, "Errors, retries and 429 answers over time"),
      h("div", {class: "figure"}, M.stackedBars(s.buckets.map((b) => ({p: {errors: b.errors, retries: b.retries,
        rate_limited: b.rate_limited}})), problems.map((x) => x[0]), "p", {label: "problems over time", height: 160,
        ylabel: "per bucket", xfmt, minTop: 4, yfmt: (v) => String(Math.round(v * 10) / 10), xlabel: "time since the first call", colors: problems.map((x) => x[1]), bucketLabel})),
      M.legend(["failed calls", "retries", "429 answers"], problems.map((x) => x[1])),
      h("p", {class: "muted"}, "seconds held by the endpoint's limiter: " +
        s.buckets.reduce((a, b) => a + b.held_s, 0).toFixed(1) + " in all"),
    ] : [h("p", {class: "muted"}, "No LLM call recorded with a time yet.")];
    M.replace(this.root, h("h1", null, "Spend of ", h("span", {class: "id"}, this.run)),
      M.section("roles", "Per role", rolesTable(d), d.priced ? null : h("p", {class: "muted"},
        "No prices configured: spend is shown in tokens.")),
      M.section("over-time", "Over time", switcher, charts),
      d.endpoints ? M.section("endpoints", "Endpoints (at the end of the run)", d.endpoints.map((e) => M.json(e))) : null,
      d.bad_lines ? h("p", {class: "warn"}, `${d.bad_lines} usage line(s) could not be read`) : null);
  },
};
})();
