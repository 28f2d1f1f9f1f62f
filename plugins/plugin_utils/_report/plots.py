"""Inline SVG plots of report.html (controller only, pure logic; no scripts, no network, no libraries).

Every function returns one ``<figure>`` holding an ``<svg>`` that scales with
its container (viewBox + CSS width 100%), or '' when there is nothing to draw.
Every text is escaped. Large fleets are drawn aggregated where one line per
node would be noise (a min-max band plus the median and the outlying nodes).
"""

from __future__ import annotations

import html
import math
from typing import Any, Iterable, Mapping, Optional, Sequence

from ansible_collections.cvs.cluster.plugins.plugin_utils._report import format as fmt

W, H = 640, 240
PAD_L, PAD_R, PAD_T, PAD_B = 56, 12, 12, 34
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")
BAD = "#d62728"
MANY = 24  # more nodes than this: aggregate / no per-node labels


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def _finite(v: Any) -> bool:
    return fmt.is_number(v) and math.isfinite(v)


def _ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    out = []
    v = first
    while v <= hi + step * 1e-9:
        out.append(round(v, 10))
        v += step
    return out


def _range(values: Iterable[float]) -> tuple[float, float]:
    vals = [v for v in values if _finite(v)]
    if not vals:
        return 0.0, 1.0
    lo, hi = min(vals), max(vals)
    if lo == hi:
        d = abs(lo) * 0.05 or 1.0
        return lo - d, hi + d
    d = (hi - lo) * 0.05
    return lo - d, hi + d


def _figure(fid: str, title: str, body: str, caption: str = "", height: int = H) -> str:
    cap = f"<figcaption>{_e(caption)}</figcaption>" if caption else ""
    return (
        f'<figure class="plot" id="{_e(fid)}"><h3>{_e(title)}</h3>'
        f'<svg viewBox="0 0 {W} {height}" preserveAspectRatio="xMidYMid meet" role="img" aria-label="{_e(title)}">'
        f"{body}</svg>{cap}</figure>"
    )


class _Axes:
    def __init__(self, x: tuple[float, float], y: tuple[float, float], height: int = H) -> None:
        self.x0, self.x1 = x
        self.y0, self.y1 = y
        self.h = height

    def px(self, x: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return PAD_L + (x - self.x0) / span * (W - PAD_L - PAD_R)

    def py(self, y: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return self.h - PAD_B - (y - self.y0) / span * (self.h - PAD_T - PAD_B)

    def frame(self, xlabel: str, ylabel: str, xticks: bool = True) -> str:
        parts = [
            f'<rect class="frame" x="{PAD_L}" y="{PAD_T}" width="{W - PAD_L - PAD_R}" '
            f'height="{self.h - PAD_T - PAD_B}"/>'
        ]
        for t in _ticks(self.y0, self.y1):
            y = self.py(t)
            parts.append(
                f'<line class="grid" x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}"/>'
                f'<text class="tick" x="{PAD_L - 4}" y="{y + 3:.1f}" text-anchor="end">{_e(fmt.number(t, 3))}</text>'
            )
        if xticks:
            for t in _ticks(self.x0, self.x1, 6):
                x = self.px(t)
                parts.append(
                    f'<text class="tick" x="{x:.1f}" y="{self.h - PAD_B + 13}" text-anchor="middle">'
                    f"{_e(fmt.number(t, 3))}</text>"
                )
        parts.append(
            f'<text class="label" x="{(PAD_L + W - PAD_R) / 2}" y="{self.h - 4}" text-anchor="middle">'
            f"{_e(xlabel)}</text>"
        )
        parts.append(
            f'<text class="label" x="12" y="{(PAD_T + self.h - PAD_B) / 2}" text-anchor="middle" '
            f'transform="rotate(-90 12 {(PAD_T + self.h - PAD_B) / 2})">{_e(ylabel)}</text>'
        )
        return "".join(parts)


def _polyline(ax: _Axes, pts: Sequence[Sequence[Any]], cls: str, colour: str, title: str) -> str:
    """A polyline per run of finite points (a non-finite value breaks the line)."""
    runs: list[list[str]] = [[]]
    for x, y in pts:
        if _finite(x) and _finite(y):
            runs[-1].append(f"{ax.px(x):.1f},{ax.py(y):.1f}")
        elif runs[-1]:
            runs.append([])
    return "".join(
        f'<polyline class="{cls}" stroke="{colour}" points="{" ".join(r)}"><title>{_e(title)}</title></polyline>'
        for r in runs
        if r
    )


def lines(
    fid: str,
    title: str,
    series: Mapping[str, Sequence[Sequence[Any]]],
    ylabel: str,
    highlight: Any = (),
    xlabel: str = "step",
) -> str:
    """One line per node (overlaid); above MANY nodes: min-max band, median and the highlighted nodes only.

    ``highlight``: nodes drawn thicker (a mapping node -> status also labels them in the legend).
    """
    series = {n: list(p) for n, p in series.items() if any(_finite(y) for _x, y in p)}
    if not series:
        return ""
    xs = [x for p in series.values() for x, _y in p if _finite(x)]
    ys = [y for p in series.values() for _x, y in p if _finite(y)]
    ax = _Axes(_range(xs) if len(set(xs)) > 1 else (min(xs) - 1, max(xs) + 1), _range(ys))
    body = [ax.frame(xlabel, ylabel)]
    gaps = [n for n, p in series.items() if any(not _finite(y) for _x, y in p)]
    if len(series) <= MANY:
        legend = []
        for i, (node, pts) in enumerate(series.items()):
            colour = PALETTE[i % len(PALETTE)]
            body.append(_polyline(ax, pts, "line hl" if node in highlight else "line", colour, node))
            mark = f" ({highlight[node]})" if isinstance(highlight, Mapping) and node in highlight else ""
            legend.append(f'<span class="key"><i style="background:{colour}"></i>{_e(node + mark)}</span>')
        caption = ""
        legend_html = f'<div class="legend">{"".join(legend)}</div>'
    else:
        by_x: dict[Any, list[float]] = {}
        for pts in series.values():
            for x, y in pts:
                if _finite(x) and _finite(y):
                    by_x.setdefault(x, []).append(y)
        steps = sorted(by_x)
        top = " ".join(f"{ax.px(x):.1f},{ax.py(max(by_x[x])):.1f}" for x in steps)
        bottom = " ".join(f"{ax.px(x):.1f},{ax.py(min(by_x[x])):.1f}" for x in reversed(steps))
        body.append(
            f'<polygon class="band" points="{top} {bottom}"><title>min-max of {len(series)} nodes</title></polygon>'
        )
        med = [[x, sorted(by_x[x])[len(by_x[x]) // 2]] for x in steps]
        body.append(_polyline(ax, med, "line", PALETTE[0], "fleet median"))
        for node in highlight:
            if node in series:
                body.append(_polyline(ax, series[node], "line hl", BAD, node))
        caption = f"{len(series)} nodes: band = min-max per step, blue = median, red = outlying nodes"
        legend_html = ""
    if gaps:
        caption = (caption + "; " if caption else "") + f"non-finite values (gaps) on {', '.join(gaps[:10])}"
    return _figure(fid, title, "".join(body), caption).replace("</figure>", legend_html + "</figure>")


def bars(
    fid: str,
    title: str,
    values: Mapping[str, Any],
    metric: str,
    median: Optional[float] = None,
    tolerance: Optional[float] = None,
    direction: str = "higher",
    highlight: Sequence[str] = (),
    unit: Optional[str] = None,
) -> str:
    """One bar per node, the fleet median as a line and the tolerance limit dashed; outliers red. ``unit``: the
    metric's declared unit (None: the one its name implies)."""
    unit = fmt.unit_of(metric) if unit is None else unit
    vals = {n: v for n, v in values.items() if _finite(v)}
    if not vals:
        return ""
    n = len(values)
    lo = 0.0 if min(vals.values()) >= 0 else min(vals.values())
    hi = max(vals.values())
    if median is not None and tolerance is not None:
        hi = max(hi, median * (1 + tolerance))
    ax = _Axes((0, max(n, 1)), (lo, hi * 1.05 if hi > 0 else 1.0))
    body = [ax.frame("node", unit or metric, xticks=False)]
    width = (W - PAD_L - PAD_R) / max(n, 1)
    for i, (node, v) in enumerate(values.items()):
        x = PAD_L + i * width
        label = f"{node}: {fmt.value(v, metric, unit)}"
        if not _finite(v):
            body.append(
                f'<text class="tick na" x="{x + width / 2:.1f}" y="{ax.py(lo) - 4:.1f}" text-anchor="middle">'
                f"n/a<title>{_e(label)}</title></text>"
            )
            continue
        y = ax.py(max(v, lo))
        colour = BAD if node in highlight else PALETTE[0]
        body.append(
            f'<rect class="bar" x="{x + width * 0.1:.1f}" y="{y:.1f}" width="{max(width * 0.8, 0.5):.2f}" '
            f'height="{max(ax.py(lo) - y, 0):.1f}" fill="{colour}"><title>{_e(label)}</title></rect>'
        )
        if n <= MANY:
            body.append(
                f'<text class="tick" x="{x + width / 2:.1f}" y="{H - PAD_B + 13}" text-anchor="middle">'
                f"{_e(node if len(node) <= 10 else node[:9] + '…')}</text>"
            )
    if median is not None:
        y = ax.py(median)
        body.append(
            f'<line class="median" x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}">'
            f"<title>median {_e(fmt.value(median, metric, unit))}</title></line>"
        )
        if tolerance is not None:
            limit = median * (1 - tolerance) if direction == "higher" else median * (1 + tolerance)
            y = ax.py(limit)
            body.append(
                f'<line class="limit" x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}">'
                f"<title>outlier limit {_e(fmt.value(limit, metric, unit))}</title></line>"
            )
    caption = "solid line: fleet median; dashed: outlier limit" if median is not None else ""
    return _figure(fid, title, "".join(body), caption)


def boxes(fid: str, title: str, series: Mapping[str, Sequence[Sequence[Any]]], skip_first: int = 1) -> str:
    """Step-time distribution per node: whiskers p5-p95, box p25-p75, median tick (warm-up steps left out)."""
    data = {}
    for node, pts in series.items():
        vals = sorted(y for x, y in pts if _finite(y) and _finite(x) and x >= skip_first)
        if vals:
            data[node] = vals
    if not data:
        return ""

    def q(v: list[float], p: float) -> float:
        k = (len(v) - 1) * p
        f = math.floor(k)
        c = min(f + 1, len(v) - 1)
        return v[f] + (v[c] - v[f]) * (k - f)

    lo, hi = _range([x for v in data.values() for x in (q(v, 0.05), q(v, 0.95))])
    ax = _Axes((0, len(data)), (min(lo, 0.0) if lo > 0 and lo < (hi - lo) else lo, hi))
    body = [ax.frame("node", "step time (s)", xticks=False)]
    width = (W - PAD_L - PAD_R) / len(data)
    for i, (node, v) in enumerate(data.items()):
        cx = PAD_L + (i + 0.5) * width
        bw = max(width * 0.5, 1.0)
        p5, p25, p50, p75, p95 = (ax.py(q(v, p)) for p in (0.05, 0.25, 0.5, 0.75, 0.95))
        tip = f"{node}: median {fmt.duration(q(v, 0.5))}, p95 {fmt.duration(q(v, 0.95))}, {len(v)} steps"
        body.append(
            f'<g class="box"><title>{_e(tip)}</title>'
            f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{p95:.1f}" y2="{p5:.1f}"/>'
            f'<rect x="{cx - bw / 2:.1f}" y="{p75:.1f}" width="{bw:.1f}" height="{max(p25 - p75, 0.5):.1f}"/>'
            f'<line class="med" x1="{cx - bw / 2:.1f}" x2="{cx + bw / 2:.1f}" y1="{p50:.1f}" y2="{p50:.1f}"/></g>'
        )
        if len(data) <= MANY:
            body.append(
                f'<text class="tick" x="{cx:.1f}" y="{H - PAD_B + 13}" text-anchor="middle">'
                f"{_e(node if len(node) <= 10 else node[:9] + '…')}</text>"
            )
    return _figure(
        fid, title, "".join(body), f"whiskers p5-p95, box p25-p75, line median; steps < {skip_first} left out"
    )


def gpu_grid(fid: str, title: str, grid: Mapping[str, Mapping[str, Mapping[str, Any]]], limit: int = 16) -> str:
    """RVS results per node and GPU: one square per (test, GPU), red = failed on that GPU.

    Above ``limit`` nodes only the nodes with a failure are drawn (the caption says how many passed).
    """
    if not grid:
        return ""
    nodes = list(grid)
    shown = nodes if len(nodes) <= limit else [n for n in nodes if any(t["failed"] for t in grid[n].values())]
    tests = sorted({t for n in nodes for t in grid[n]})
    cols = [(t, g) for t in tests for g in sorted({g for n in nodes for g in (grid[n].get(t) or {}).get("gpus", [])})]
    if not cols:
        return ""
    label_w = 90
    cell = min(22.0, (W - label_w - 8) / len(cols))
    row_h = max(min(cell, 18.0), 8.0)
    height = int(28 + row_h * max(len(shown), 1) + 8)
    body = []
    x = label_w
    for t in tests:
        n_cols = sum(1 for c in cols if c[0] == t)
        body.append(f'<text class="tick" x="{x + 1:.1f}" y="12">{_e(t)}</text>')
        x += n_cols * cell
    for r, node in enumerate(shown):
        y = 24 + r * row_h
        short = node if len(node) <= 12 else node[:11] + "…"
        body.append(
            f'<text class="tick" x="{label_w - 4}" y="{y + row_h * 0.75:.1f}" text-anchor="end">{_e(short)}</text>'
        )
        for c, (t, g) in enumerate(cols):
            res = grid[node].get(t)
            if not res or g not in res["gpus"]:
                cls, state = "na", "not run"
            elif g in res["failed"]:
                cls, state = "bad", "FAIL"
            else:
                cls, state = "ok", "PASS"
            body.append(
                f'<rect class="gpu {cls}" x="{label_w + c * cell + 1:.1f}" y="{y:.1f}" width="{max(cell - 2, 1):.1f}" '
                f'height="{max(row_h - 2, 1):.1f}"><title>{_e(f"{node} {t} GPU {g}: {state}")}</title></rect>'
            )
    if not shown:
        body.append('<text class="tick" x="100" y="40">no GPU failed</text>')
    caption = f"{len(nodes) - len(shown)} node(s) with every GPU passing not drawn" if len(shown) < len(nodes) else ""
    caption = (caption + "; " if caption else "") + "columns: GPU ids per test (RVS ids); red = failed, green = passed"
    return _figure(fid, title, "".join(body), caption, height)


def heatmap(fid: str, title: str, rows: Sequence[Mapping[str, Any]], nodes: Sequence[str]) -> str:
    """Metrics (rows) x nodes (columns), coloured by deviation from the fleet median on the bad side.

    ``rows``: fleet metric rows (``metric``, ``direction``, ``tolerance``, ``nodes: {node: {deviation, status}}``).
    """
    rows = [r for r in rows if r.get("median") is not None]
    if not rows or not nodes:
        return ""
    label_w = 150
    cell_w = (W - label_w - 4) / len(nodes)
    row_h = 16
    height = 8 + row_h * len(rows) + 20
    body = []
    cw = max(cell_w - (0.6 if cell_w > 3 else 0), 0.4)
    for r, row in enumerate(rows):
        y = 4 + r * row_h
        body.append(
            f'<text class="tick" x="{label_w - 4}" y="{y + 12}" text-anchor="end">{_e(row["metric"][:24])}</text>'
        )
        for c, node in enumerate(nodes):
            cellv = row["nodes"].get(node)
            dev = cellv.get("deviation") if cellv else None
            if dev is None:
                colour, text = "#ddd", "no value"
            else:
                bad = -dev if row["direction"] == "higher" else dev
                scale = min(max(bad / max(row["tolerance"] * 2, 1e-9), -1.0), 1.0)
                if scale > 0:
                    colour = f"rgb(255,{int(235 - 190 * scale)},{int(225 - 190 * scale)})"
                else:
                    colour = f"rgb({int(235 + 10 * scale)},{int(245 + 0 * scale)},{int(235 + 10 * scale)})"
                if cellv.get("status") == "OUTLIER":
                    colour = BAD
                text = f"{fmt.value(cellv.get('value'), row['metric'])} ({fmt.percent(dev)})"
            tip = f"{node} {row['metric']}: {text}"
            body.append(
                f'<rect x="{label_w + c * cell_w:.2f}" y="{y}" width="{cw:.2f}" '
                f'height="{row_h - 2}" fill="{colour}"><title>{_e(tip)}</title></rect>'
            )
    body.append(
        f'<text class="label" x="{label_w}" y="{height - 4}">{len(nodes)} nodes, in report order '
        "(worse than the median: redder; outliers solid red)</text>"
    )
    return _figure(fid, title, "".join(body), "", height)
