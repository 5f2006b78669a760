"""A tiny SVG chart writer, so the labs can draw without matplotlib (not installed on the GPU
machines). One function: ``line_chart``.

Rules: both axes are linear and start at 0 (lower if some value is negative) and end at a
rounded-up maximum, with about five round ticks (1, 2 or 5 times a power of ten). The file is
standalone SVG, well-formed UTF-8 XML; every series is one ``<g class="series" data-name=...>``.
"""

from __future__ import annotations

import math
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

WIDTH, HEIGHT = 800, 440
LEFT, RIGHT, TOP, BOTTOM = 70, 260, 40, 50  # margins in px; the legend sits in the right one
STYLES = ("points", "line")


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round, evenly spaced ticks; the first is <= lo and the last >= hi."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [k * step for k in range(first, last + 1)]


def _label(value: float, step: float) -> str:
    # As many decimals as the tick step needs, so 0.6000000000000001 prints as 0.6.
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    return f"{value:.{decimals}f}"


def line_chart(path, series, title: str, x_label: str, y_label: str) -> Path:
    """Write a chart of ``series`` to ``path`` (an .svg file); return the path.

    ``series``: a list of dicts, each with ``name`` (legend text), ``colour`` (any SVG colour),
    ``points`` (a non-empty list of (x, y) finite numbers) and ``style``: ``"points"`` draws a
    circle per point, ``"line"`` joins the points in the order given. Anything else ->
    ValueError naming ``series[i]`` and the field.
    """
    if not series:
        raise ValueError("series: expected at least one series, got none")
    for i, s in enumerate(series):
        if s.get("style") not in STYLES:
            raise ValueError(f"series[{i}].style: expected one of {STYLES}, got {s.get('style')!r}")
        if not s.get("points") or not all(
            len(p) == 2 and all(math.isfinite(v) for v in p) for p in s["points"]
        ):
            raise ValueError(f"series[{i}].points: expected (x, y) pairs of finite numbers, "
                             f"got {s.get('points')!r}")
    xs = [x for s in series for x, _ in s["points"]]
    ys = [y for s in series for _, y in s["points"]]
    x_ticks = _ticks(min(0.0, min(xs)), max(0.0, max(xs)))
    y_ticks = _ticks(min(0.0, min(ys)), max(0.0, max(ys)))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x_ticks[0]) / (x_ticks[-1] - x_ticks[0]) * plot_w

    def py(y: float) -> float:  # SVG's y grows downwards
        return TOP + plot_h - (y - y_ticks[0]) / (y_ticks[-1] - y_ticks[0]) * plot_h

    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{TOP / 2 + 5:.1f}" text-anchor="middle" '
        f'font-size="15">{escape(title)}</text>',
    ]
    # Grid and tick labels first, so the data is drawn on top of them.
    x_step, y_step = x_ticks[1] - x_ticks[0], y_ticks[1] - y_ticks[0]
    for x in x_ticks:
        out.append(f'<line x1="{px(x):.1f}" y1="{TOP}" x2="{px(x):.1f}" y2="{TOP + plot_h}" '
                   f'stroke="#e5e5e5"/>')
        out.append(f'<text x="{px(x):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">'
                   f'{_label(x, x_step)}</text>')
    for y in y_ticks:
        out.append(f'<line x1="{LEFT}" y1="{py(y):.1f}" x2="{LEFT + plot_w}" y2="{py(y):.1f}" '
                   f'stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">'
                   f'{_label(y, y_step)}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
               f'stroke="black"/>')
    out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 12}" text-anchor="middle">'
               f'{escape(x_label)}</text>')
    out.append(f'<text transform="translate(16 {TOP + plot_h / 2:.1f}) rotate(-90)" '
               f'text-anchor="middle">{escape(y_label)}</text>')

    for i, s in enumerate(series):
        colour, legend_y = quoteattr(str(s["colour"])), TOP + 10 + 20 * i
        out.append(f'<g class="series" data-name={quoteattr(str(s["name"]))}>')
        if s["style"] == "points":
            out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill={colour}/>'
                    for x, y in s["points"]]
            swatch = f'<circle cx="{WIDTH - RIGHT + 30}" cy="{legend_y}" r="3.5" fill={colour}/>'
        else:
            coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s["points"])
            out.append(f'<polyline points="{coords}" fill="none" stroke={colour} '
                       f'stroke-width="1.5"/>')
            swatch = (f'<line x1="{WIDTH - RIGHT + 20}" y1="{legend_y}" x2="{WIDTH - RIGHT + 40}" '
                      f'y2="{legend_y}" stroke={colour} stroke-width="1.5"/>')
        out.append("</g>")
        out.append(swatch)
        out.append(f'<text x="{WIDTH - RIGHT + 48}" y="{legend_y + 4}">{escape(str(s["name"]))}'
                   f'</text>')
    out.append("</svg>")

    path = Path(path)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def bar_chart(path, bars, title: str, x_label: str, y_label: str) -> Path:
    """Write a bar chart to ``path`` (an .svg file): ``bars`` is a non-empty list of
    ``(label, value)`` with finite values >= 0, drawn left to right. Anything else -> ValueError
    naming ``bars``."""
    if not bars or not all(len(b) == 2 and isinstance(b[1], (int, float)) and math.isfinite(b[1])
                           and b[1] >= 0 for b in bars):
        raise ValueError(f"bars: expected (label, value >= 0) pairs, got {bars!r}")
    y_ticks = _ticks(0.0, max(float(v) for _, v in bars))
    plot_w, plot_h = WIDTH - LEFT - 40, HEIGHT - TOP - BOTTOM
    step = plot_w / len(bars)

    def py(y: float) -> float:
        return TOP + plot_h - y / y_ticks[-1] * plot_h

    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{TOP / 2 + 5:.1f}" text-anchor="middle" '
        f'font-size="15">{escape(title)}</text>',
    ]
    y_step = y_ticks[1] - y_ticks[0]
    for y in y_ticks:
        out.append(f'<line x1="{LEFT}" y1="{py(y):.1f}" x2="{LEFT + plot_w}" y2="{py(y):.1f}" '
                   f'stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">'
                   f'{_label(y, y_step)}</text>')
    for i, (label, value) in enumerate(bars):
        x = LEFT + i * step
        out.append(f'<rect class="bar" data-label={quoteattr(str(label))} x="{x + step * 0.1:.1f}" '
                   f'y="{py(value):.1f}" width="{step * 0.8:.1f}" height="{TOP + plot_h - py(value):.1f}" '
                   f'fill="#4c72b0"/>')
        out.append(f'<text x="{x + step / 2:.1f}" y="{TOP + plot_h + 16}" text-anchor="middle" '
                   f'font-size="10">{escape(str(label))}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
               f'stroke="black"/>')
    out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 12}" text-anchor="middle">'
               f'{escape(x_label)}</text>')
    out.append(f'<text transform="translate(16 {TOP + plot_h / 2:.1f}) rotate(-90)" '
               f'text-anchor="middle">{escape(y_label)}</text>')
    out.append("</svg>")
    path = Path(path)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path
