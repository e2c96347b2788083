"""The report's figures, drawn with matplotlib and returned as inline SVG text (no files, no
network: the HTML report stays one self-contained file).

Each function takes plain records (inspect_run.LineageNode, spend.RoleSpend, dicts) and returns
an `<svg>` string; text stays text (svg.fonttype "none"), so the browser renders it with its own
fonts and it can be searched.
"""
from __future__ import annotations

import io
import re

import matplotlib

matplotlib.use("Agg")  # headless; must precede anything that could pick a GUI backend
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from mstar.run.progress import format_count  # noqa: E402

COLORS = {"up": "#2e7d32", "down": "#c62828", "same": "#757575", "seed": "#1565c0", "best": "#f9a825",
          "failed": "#c62828", "duplicate": "#8e24aa"}
_RC = {"svg.fonttype": "none", "font.size": 10, "axes.spines.top": False, "axes.spines.right": False}


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    with matplotlib.rc_context(_RC):
        fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    # Inline use: drop the XML prolog and DOCTYPE, keep the <svg> element.
    return text[text.index("<svg"):]


def _figure(width: float, height: float) -> Figure:
    with matplotlib.rc_context(_RC):
        return Figure(figsize=(width, height), dpi=96)


def trajectory_svg(nodes) -> str:
    """The paper's Figure 3: every child's static score by iteration, the best-so-far line, seeds
    at iteration 0, and iterations that produced no child (failed gates, duplicates) marked on
    the floor of the plot."""
    with matplotlib.rc_context(_RC):
        fig = _figure(9.0, 4.2)
        ax = fig.subplots()
        seeds = [n for n in nodes if n.status == "seed"]
        children = [n for n in nodes if n.status == "ok" and n.static_score is not None]
        misses = [n for n in nodes if n.status in ("failed", "duplicate")]
        scores = [n.static_score for n in seeds + children if n.static_score is not None]
        floor = (min(scores) if scores else 0.0) - 0.05
        ax.scatter([0] * len(seeds), [n.static_score for n in seeds], marker="D", s=46,
                   color=COLORS["seed"], zorder=3)
        for n in children:
            kind = "up" if (n.delta or 0) > 1e-12 else "down" if (n.delta or 0) < -1e-12 else "same"
            ax.scatter([n.iteration], [n.static_score], s=40, color=COLORS[kind], zorder=3)
        for n in misses:
            ax.scatter([n.iteration], [floor], marker="x" if n.status == "failed" else "s", s=46,
                       color=COLORS[n.status], zorder=3)
        # Best so far after each iteration (a step line over every iteration, misses included).
        last_it = max([n.iteration for n in nodes] or [0])
        best, xs, ys = None, [], []
        for it in range(0, last_it + 1):
            for n in nodes:
                if n.iteration == it and n.static_score is not None and n.status in ("seed", "ok"):
                    best = n.static_score if best is None else max(best, n.static_score)
            if best is not None:
                xs.append(it)
                ys.append(best)
        if xs:
            ax.step(xs, ys, where="post", color=COLORS["best"], linewidth=2.2, zorder=2)
        top = [n for n in nodes if n.best]
        for n in top:
            ax.annotate(f"best: {n.label}", (n.iteration, n.static_score), xytext=(6, 8),
                        textcoords="offset points", fontsize=9)
        ax.set_xlabel("iteration")
        ax.set_ylabel("static validation score")
        ax.set_xlim(-0.6, max(last_it, 1) + 0.6)
        ax.grid(True, alpha=0.25)
        legend = [Line2D([], [], marker="D", ls="", color=COLORS["seed"], label="seed"),
                  Line2D([], [], marker="o", ls="", color=COLORS["up"], label="child, better than parent"),
                  Line2D([], [], marker="o", ls="", color=COLORS["down"], label="child, worse than parent"),
                  Line2D([], [], marker="o", ls="", color=COLORS["same"], label="child, equal"),
                  Line2D([], [], marker="x", ls="", color=COLORS["failed"], label="no child: failed gates/compile"),
                  Line2D([], [], marker="s", ls="", color=COLORS["duplicate"], label="no child: duplicate"),
                  Line2D([], [], color=COLORS["best"], lw=2.2, label="best so far")]
        ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
        return _svg(fig)


def categories_svg(series: dict[str, dict[str, float]]) -> str:
    """Grouped bars: per-category scores of each program in `series` (name -> {category: score})."""
    with matplotlib.rc_context(_RC):
        cats = sorted({c for per in series.values() for c in per})
        fig = _figure(max(6.0, 1.1 * len(cats) * max(1, len(series)) / 2 + 3), 3.8)
        ax = fig.subplots()
        width = 0.8 / max(1, len(series))
        palette = ["#90a4ae", "#64b5f6", "#4db6ac", "#ba68c8", "#ffb74d", "#a1887f"]
        for i, (name, per) in enumerate(series.items()):
            xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(cats))]
            color = COLORS["best"] if i == len(series) - 1 else palette[i % len(palette)]
            ax.bar(xs, [per.get(c, 0.0) for c in cats], width=width * 0.95, label=name, color=color)
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels(cats, rotation=20 if len(cats) > 5 else 0)
        ax.set_ylabel("mean score")
        ax.set_ylim(0, 1.05)
        ax.grid(True, axis="y", alpha=0.25)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
        return _svg(fig)


def spend_svg(spend) -> str:
    """Horizontal stacked bars of prompt and completion tokens per role."""
    with matplotlib.rc_context(_RC):
        roles = list(spend)
        fig = _figure(7.5, 0.5 * max(2, len(roles)) + 1.0)
        ax = fig.subplots()
        prompt = [spend[r].prompt_tokens for r in roles]
        completion = [spend[r].completion_tokens for r in roles]
        ax.barh(roles, prompt, color="#64b5f6", label="prompt tokens")
        ax.barh(roles, completion, left=prompt, color="#1565c0", label="completion tokens")
        ax.set_xlabel("tokens")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: format_count(x)))  # 1.2M, not 1e6
        ax.invert_yaxis()
        ax.legend(loc="lower right", frameon=False, fontsize=9)
        ax.grid(True, axis="x", alpha=0.25)
        return _svg(fig)


def svg_ids_unique(svg: str, prefix: str) -> str:
    """Several matplotlib SVGs in one page reuse ids (clip paths, glyphs); prefix them."""
    svg = re.sub(r'id="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', svg)
    return re.sub(r'url\(#([^)]+)\)', lambda m: f"url(#{prefix}{m.group(1)})", svg).replace(
        'xlink:href="#', f'xlink:href="#{prefix}')
