"""A tiny SVG chart writer, so the labs can draw without matplotlib (not installed on the GPU
machines). ``line_chart`` (one plot), ``bar_chart``, ``figure`` (panels stacked over one
shared x axis, log axes where asked, vertical marks), and ``timeline`` (lanes of boxes over time).

Rules: ``line_chart``'s axes are linear and start at 0 (lower if some value is negative) and end
at a rounded-up maximum, with about five round ticks (1, 2 or 5 times a power of ten);
``figure``'s are the same with 5 % headroom, or decades on a log axis. The file is standalone
SVG, well-formed UTF-8 XML; every series is one ``<g class="series" data-name=...>``.
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
        if not s.get("points") or not all(len(p) == 2 and all(math.isfinite(v) for v in p) for p in s["points"]):
            raise ValueError(f"series[{i}].points: expected (x, y) pairs of finite numbers, got {s.get('points')!r}")
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
        out.append(f'<line x1="{px(x):.1f}" y1="{TOP}" x2="{px(x):.1f}" y2="{TOP + plot_h}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{px(x):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{_label(x, x_step)}</text>')
    for y in y_ticks:
        out.append(f'<line x1="{LEFT}" y1="{py(y):.1f}" x2="{LEFT + plot_w}" y2="{py(y):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{_label(y, y_step)}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>')
    out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 12}" text-anchor="middle">{escape(x_label)}</text>')
    out.append(
        f'<text transform="translate(16 {TOP + plot_h / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )

    for i, s in enumerate(series):
        colour, legend_y = quoteattr(str(s["colour"])), TOP + 10 + 20 * i
        out.append(f'<g class="series" data-name={quoteattr(str(s["name"]))}>')
        if s["style"] == "points":
            out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill={colour}/>' for x, y in s["points"]]
            swatch = f'<circle cx="{WIDTH - RIGHT + 30}" cy="{legend_y}" r="3.5" fill={colour}/>'
        else:
            coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s["points"])
            out.append(f'<polyline points="{coords}" fill="none" stroke={colour} stroke-width="1.5"/>')
            swatch = (
                f'<line x1="{WIDTH - RIGHT + 20}" y1="{legend_y}" x2="{WIDTH - RIGHT + 40}" '
                f'y2="{legend_y}" stroke={colour} stroke-width="1.5"/>'
            )
        out.append("</g>")
        out.append(swatch)
        out.append(f'<text x="{WIDTH - RIGHT + 48}" y="{legend_y + 4}">{escape(str(s["name"]))}</text>')
    out.append("</svg>")

    path = Path(path)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def bar_chart(path, bars, title: str, x_label: str, y_label: str) -> Path:
    """Write a bar chart to ``path`` (an .svg file): ``bars`` is a non-empty list of
    ``(label, value)`` with finite values >= 0, drawn left to right. Anything else -> ValueError
    naming ``bars``."""
    if not bars or not all(
        len(b) == 2 and isinstance(b[1], (int, float)) and math.isfinite(b[1]) and b[1] >= 0 for b in bars
    ):
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
        out.append(f'<line x1="{LEFT}" y1="{py(y):.1f}" x2="{LEFT + plot_w}" y2="{py(y):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{_label(y, y_step)}</text>')
    for i, (label, value) in enumerate(bars):
        x = LEFT + i * step
        out.append(
            f'<rect class="bar" data-label={quoteattr(str(label))} x="{x + step * 0.1:.1f}" '
            f'y="{py(value):.1f}" width="{step * 0.8:.1f}" height="{TOP + plot_h - py(value):.1f}" '
            f'fill="#4c72b0"/>'
        )
        out.append(
            f'<text x="{x + step / 2:.1f}" y="{TOP + plot_h + 16}" text-anchor="middle" '
            f'font-size="10">{escape(str(label))}</text>'
        )
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>')
    out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 12}" text-anchor="middle">{escape(x_label)}</text>')
    out.append(
        f'<text transform="translate(16 {TOP + plot_h / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )
    out.append("</svg>")
    path = Path(path)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


# --- figures of stacked panels -----------------------------------------------------------------

FIG_WIDTH, FIG_LEFT, LEGEND_WIDTH = 980, 80, 360  # the legend column sits right of the plots
PANEL_HEIGHT, ROW = 300, 18  # default plot height; legend line spacing
MARKERS = ("circle", "square", "diamond")
DASHES = {None: None, "dashed": "7 4", "dotted": "2 3"}
SCALES = ("linear", "log")
HEADROOM = 1.05  # an axis ends at a round value at or above 5 % past the largest value


def _text_width(text: str, size: float = 12) -> float:
    """A rough width in px of ``text`` in sans-serif (no font metrics without a renderer)."""
    return 0.6 * size * len(text)


def _marker(shape: str, x: float, y: float, colour: str) -> str:
    """One point marker: filled circle, hollow square, or filled diamond with a dark outline."""
    if shape == "square":
        return (
            f'<rect x="{x - 4.5:.1f}" y="{y - 4.5:.1f}" width="9" height="9" fill="white" '
            f'fill-opacity="0.6" stroke={colour} stroke-width="2"/>'
        )
    if shape == "diamond":
        return (
            f'<polygon points="{x:.1f},{y - 7:.1f} {x + 7:.1f},{y:.1f} {x:.1f},{y + 7:.1f} '
            f'{x - 7:.1f},{y:.1f}" fill={colour} stroke="#222" stroke-width="1"/>'
        )
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill={colour}/>'


def _log_label(value: float) -> str:
    # 1, 10, 100, 1 000, 10 000 ... and 0.1, 0.01 below one.
    if value >= 1:
        return f"{value:,.0f}".replace(",", " ")
    return f"{value:.{-round(math.log10(value))}f}"


def _check_panels(panels) -> None:
    if not panels:
        raise ValueError("panels: expected at least one panel, got none")
    for i, panel in enumerate(panels):
        where = f"panels[{i}]"
        if panel.get("y_scale", "linear") not in SCALES:
            raise ValueError(f"{where}.y_scale: expected one of {SCALES}, got {panel.get('y_scale')!r}")
        if not panel.get("series"):
            raise ValueError(f"{where}.series: expected at least one series, got none")
        for j, s in enumerate(panel["series"]):
            at = f"{where}.series[{j}]"
            if s.get("style") not in STYLES:
                raise ValueError(f"{at}.style: expected one of {STYLES}, got {s.get('style')!r}")
            if s.get("marker", "circle") not in MARKERS:
                raise ValueError(f"{at}.marker: expected one of {MARKERS}, got {s.get('marker')!r}")
            if s.get("dash") not in DASHES:
                raise ValueError(f"{at}.dash: expected one of {tuple(DASHES)}, got {s.get('dash')!r}")
            points = s.get("points")
            if not points or not all(
                len(p) == 2 and all(isinstance(v, (int, float)) and math.isfinite(v) for v in p) for p in points
            ):
                raise ValueError(f"{at}.points: expected (x, y) pairs of finite numbers, got {points!r}")
            if panel.get("y_scale") == "log" and not all(y > 0 for _, y in points):
                raise ValueError(f"{at}.points: a log axis needs every y > 0, got {points!r}")
        if panel.get("mark_labels", "bottom") not in ("bottom", "top"):
            raise ValueError(f"{where}.mark_labels: expected 'bottom' or 'top', got {panel.get('mark_labels')!r}")
        for j, mark in enumerate(panel.get("marks", ())):
            if not (isinstance(mark.get("x"), (int, float)) and math.isfinite(mark["x"])):
                raise ValueError(f"{where}.marks[{j}].x: expected a finite number, got {mark.get('x')!r}")


def figure(path, panels, title: str, x_label: str, caption=(), x_scale: str = "linear") -> Path:
    """Write a figure of ``panels`` stacked top to bottom, sharing one x axis, to ``path``
    (an .svg file); return the path.

    Each panel is a dict: ``name`` (its heading, and ``data-name`` of its ``<g class="panel">``),
    ``y_label``, ``series`` (as in ``line_chart``, plus optional ``marker``: "circle" (filled,
    the default), "square" (hollow) or "diamond" for points; ``dash``: None, "dashed" or
    "dotted" for lines; ``dashed_after``: an x past which a line is drawn dashed, e.g. where a
    fitted line leaves the measured range), and optionally ``y_scale`` ("linear", the default, or
    "log": decades, every y must be > 0), ``marks`` (vertical lines: dicts with ``x`` and
    ``label``, each a ``<g class="mark" data-x=...>``), ``mark_labels`` ("bottom", the default,
    or "top": where the marks' labels go, out of the data's way), ``notes`` (lines of text under
    the panel's legend) and ``height`` (px of the plot). The legend of each panel sits in a
    column to the right of it, never over the data, and the panel grows to fit its legend.
    ``caption``: lines of text under the figure. The x axis starts at 0 (lower if some x is
    negative); every axis ends at a round value at least 5 % past its largest value, so no point
    sits on the frame. ``x_scale="log"`` makes the shared x axis decades instead (every x and
    every mark's x must then be > 0), for sizes or times that span several orders of magnitude.
    Mark labels that would overlap are stacked upwards. Anything malformed -> ValueError naming ``panels[i]`` (or
    ``x_scale``) and the field.
    """
    _check_panels(panels)
    if x_scale not in SCALES:
        raise ValueError(f"x_scale: expected one of {SCALES}, got {x_scale!r}")
    x_log = x_scale == "log"
    xs = [x for p in panels for s in p["series"] for x, _ in s["points"]]
    xs += [m["x"] for p in panels for m in p.get("marks", ())]
    if x_log:
        if not all(x > 0 for x in xs):
            raise ValueError(f"x_scale: a log x axis needs every x > 0 (points and marks), got {min(xs)!r}")
        lo = math.floor(math.log10(min(xs)) + 1e-9)
        hi = max(lo + 1, math.ceil(math.log10(max(xs) * HEADROOM) - 1e-9))
        x_ticks = [10.0**k for k in range(lo, hi + 1)]
        x_lo, x_hi = float(lo), float(hi)
        x_minor = [m * 10.0**k for k in range(lo, hi) for m in range(2, 10)]
    else:
        x_ticks = _ticks(min(0.0, min(xs)), max(0.0, max(xs) * HEADROOM))
        x_lo, x_hi, x_minor = x_ticks[0], x_ticks[-1], []
    x_step = x_ticks[1] - x_ticks[0]
    plot_w = FIG_WIDTH - FIG_LEFT - LEGEND_WIDTH - 20
    legend_x = FIG_LEFT + plot_w + 24
    # The figure widens rather than cut a long legend line (the width is a generous estimate).
    width = max(
        [FIG_WIDTH]
        + [legend_x + 32 + _text_width(str(s["name"])) + 8 for p in panels for s in p["series"]]
        + [legend_x + _text_width(str(n), 11) + 8 for p in panels for n in p.get("notes", ())]
    )
    width = math.ceil(max([width] + [FIG_LEFT + _text_width(str(c)) + 8 for c in caption]))

    def px(x: float) -> float:
        v = math.log10(x) if x_log else x
        return FIG_LEFT + (v - x_lo) / (x_hi - x_lo) * plot_w

    out = []
    top = 52
    for i, panel in enumerate(panels):
        series, notes = panel["series"], list(panel.get("notes", ()))
        legend_h = 10 + ROW * len(series) + (8 + 15 * len(notes) if notes else 0)
        plot_h = max(panel.get("height", PANEL_HEIGHT), legend_h)
        ys = [y for s in series for _, y in s["points"]]
        log = panel.get("y_scale") == "log"
        if log:
            lo = math.floor(math.log10(min(ys)) + 1e-9)
            hi = max(lo + 1, math.ceil(math.log10(max(ys) * HEADROOM) - 1e-9))
            y_lo, y_hi = float(lo), float(hi)
            y_ticks = [10.0**k for k in range(lo, hi + 1)]
            minor = [m * 10.0**k for k in range(lo, hi) for m in range(2, 10)]
        else:
            y_ticks = _ticks(min(0.0, min(ys)), max(0.0, max(ys) * HEADROOM), count=6)
            y_lo, y_hi, minor = y_ticks[0], y_ticks[-1], []

        def py(y: float, top=top, plot_h=plot_h, log=log, y_lo=y_lo, y_hi=y_hi) -> float:
            v = math.log10(y) if log else y
            return top + plot_h - (v - y_lo) / (y_hi - y_lo) * plot_h

        bottom = top + plot_h
        out.append(
            f'<g class="panel" data-name={quoteattr(str(panel.get("name", "")))} '
            f'data-y-scale="{"log" if log else "linear"}">'
        )
        out.append(
            f'<text x="{FIG_LEFT}" y="{top - 8}" font-size="13" font-weight="bold">'
            f'{escape(str(panel.get("name", "")))}</text>'
        )
        for y in minor:
            out.append(
                f'<line x1="{FIG_LEFT}" y1="{py(y):.1f}" x2="{FIG_LEFT + plot_w}" y2="{py(y):.1f}" stroke="#f2f2f2"/>'
            )
        for x in x_minor:
            out.append(f'<line x1="{px(x):.1f}" y1="{top}" x2="{px(x):.1f}" y2="{bottom}" stroke="#f2f2f2"/>')
        for x in x_ticks:
            out.append(f'<line x1="{px(x):.1f}" y1="{top}" x2="{px(x):.1f}" y2="{bottom}" stroke="#e5e5e5"/>')
            out.append(
                f'<text x="{px(x):.1f}" y="{bottom + 16}" text-anchor="middle">'
                f'{_log_label(x) if x_log else _label(x, x_step)}</text>'
            )
        y_step = y_ticks[1] - y_ticks[0]
        for y in y_ticks:
            out.append(
                f'<line x1="{FIG_LEFT}" y1="{py(y):.1f}" x2="{FIG_LEFT + plot_w}" y2="{py(y):.1f}" stroke="#dcdcdc"/>'
            )
            out.append(
                f'<text x="{FIG_LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">'
                f'{_log_label(y) if log else _label(y, y_step)}</text>'
            )
        out.append(
            f'<text transform="translate(18 {top + plot_h / 2:.1f}) rotate(-90)" '
            f'text-anchor="middle">{escape(str(panel.get("y_label", "")))}</text>'
        )
        taken: list[tuple[float, float, int]] = []  # (left, right, row) of the labels so far
        at_top = panel.get("mark_labels", "bottom") == "top"
        for mark in sorted(panel.get("marks", ()), key=lambda m: m["x"]):
            x, label = px(mark["x"]), str(mark.get("label", ""))
            label_w = _text_width(label, 11)
            right = x + 4 + label_w <= FIG_LEFT + plot_w
            left_px = x + 4 if right else x - 4 - label_w
            # The lowest row whose labels this one does not overlap (6 px apart at least).
            row = next(
                r
                for r in range(len(taken) + 1)
                if all(
                    r != t_row or left_px > t_right + 6 or left_px + label_w < t_left - 6
                    for t_left, t_right, t_row in taken
                )
            )
            taken.append((left_px, left_px + label_w, row))
            out.append(f'<g class="mark" data-x="{mark["x"]:g}" data-name={quoteattr(label)}>')
            out.append(
                f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#555" stroke-dasharray="4 3"/>'
            )
            label_y = top + 14 + 14 * row if at_top else bottom - 6 - 14 * row
            out.append(
                f'<rect x="{left_px - 1:.1f}" y="{label_y - 10}" width="{label_w + 2:.1f}" '
                f'height="13" fill="white" fill-opacity="0.8"/>'
            )
            out.append(
                f'<text x="{x + 4 if right else x - 4:.1f}" y="{label_y}" '
                f'text-anchor="{"start" if right else "end"}" font-size="11" '
                f'fill="#333">{escape(label)}</text>'
            )
            out.append("</g>")

        # The data: lines first, then points on top of them.
        order = sorted(range(len(series)), key=lambda j: series[j]["style"] == "points")
        for j in order:
            s = series[j]
            colour = quoteattr(str(s["colour"]))
            out.append(f'<g class="series" data-name={quoteattr(str(s["name"]))} data-style="{s["style"]}">')
            if s["style"] == "points":
                out += [_marker(s.get("marker", "circle"), px(x), py(y), colour) for x, y in s["points"]]
            else:
                cut = s.get("dashed_after")
                pieces = [(s["points"], DASHES[s.get("dash")])]
                if cut is not None:
                    pieces = [
                        ([p for p in s["points"] if p[0] <= cut], DASHES[s.get("dash")]),
                        ([p for p in s["points"] if p[0] >= cut], DASHES["dashed"]),
                    ]
                for points, dash in pieces:
                    if len(points) < 2:
                        continue
                    coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
                    dashed = f' stroke-dasharray="{dash}"' if dash else ""
                    out.append(f'<polyline points="{coords}" fill="none" stroke={colour} stroke-width="1.8"{dashed}/>')
            out.append("</g>")
        out.append(f'<rect x="{FIG_LEFT}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>')

        out.append('<g class="legend">')
        for j, s in enumerate(series):
            colour, ly = quoteattr(str(s["colour"])), top + 12 + ROW * j
            if s["style"] == "points":
                out.append(_marker(s.get("marker", "circle"), legend_x + 12, ly, colour))
            else:
                dash = DASHES[s.get("dash")]
                dashed = f' stroke-dasharray="{dash}"' if dash else ""
                out.append(
                    f'<line x1="{legend_x}" y1="{ly}" x2="{legend_x + 24}" y2="{ly}" '
                    f'stroke={colour} stroke-width="1.8"{dashed}/>'
                )
            out.append(f'<text x="{legend_x + 32}" y="{ly + 4}">{escape(str(s["name"]))}</text>')
        for k, note in enumerate(notes):
            out.append(
                f'<text x="{legend_x}" y="{top + 12 + ROW * len(series) + 8 + 15 * k + 4}" '
                f'font-size="11" fill="#444">{escape(str(note))}</text>'
            )
        out.append("</g>")
        out.append("</g>")
        top = bottom + 58

    x_label_y = top - 58 + 36
    out.append(f'<text x="{FIG_LEFT + plot_w / 2:.1f}" y="{x_label_y}" text-anchor="middle">{escape(x_label)}</text>')
    height = x_label_y + 12
    for k, line in enumerate(caption):
        height = x_label_y + 26 + 16 * k
        out.append(
            f'<text class="caption" x="{FIG_LEFT}" y="{height}" font-size="12" fill="#333">{escape(str(line))}</text>'
        )
    height += 14
    return _write_svg(path, width, height, title, out)


def _write_svg(path, width: float, height: float, title: str, body: list[str]) -> Path:
    """A white ``width`` x ``height`` SVG titled ``title`` around the elements ``body``."""
    head = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2:.1f}" y="26" text-anchor="middle" font-size="16">{escape(title)}</text>',
    ]
    path = Path(path)
    path.write_text("\n".join(head + body + ["</svg>"]) + "\n", encoding="utf-8")
    return path


# --- timelines: lanes of boxes over time --------------------------------------------------------

LANE_LABEL_WIDTH, LANE_HEIGHT, LANE_GAP = 170, 20, 8  # px: lane names column, box height, spacing


def _check_scenarios(scenarios) -> None:
    if not scenarios:
        raise ValueError("scenarios: expected at least one scenario, got none")
    for i, scenario in enumerate(scenarios):
        where = f"scenarios[{i}]"
        if not scenario.get("lanes"):
            raise ValueError(f"{where}.lanes: expected at least one lane, got none")
        for j, lane in enumerate(scenario["lanes"]):
            for k, box in enumerate(lane.get("boxes", ())):
                start, end = box.get("start"), box.get("end")
                if not (
                    all(isinstance(v, (int, float)) and math.isfinite(v) for v in (start, end)) and 0 <= start <= end
                ):
                    raise ValueError(
                        f"{where}.lanes[{j}].boxes[{k}]: expected finite times with "
                        f"0 <= start <= end, got start={start!r}, end={end!r}"
                    )


def timeline(path, scenarios, title: str, legend=(), caption=()) -> Path:
    """Write a timeline figure to ``path`` (an .svg file): scenarios stacked top to bottom, each
    with its own linear time axis from 0 in µs, its lanes one above the other; return the path.

    Each scenario is a dict: ``name`` (heading; ``data-name`` of its ``<g class="scenario">``),
    ``lanes`` (a list of dicts: ``name``, the lane's label at its left, and ``boxes``: dicts
    with ``start`` and ``end`` (0 <= start <= end), ``colour``, optionally ``kind`` (kept as
    ``data-kind``) and ``label`` (written inside the box when it fits)), optionally ``notes``
    (lines of text right of the lanes). Each lane is a ``<g class="lane" data-name=...>``, each
    box a ``<rect class="box" data-start data-end>``.
    ``legend``: (colour, text) pairs drawn once under the title. ``caption``: lines under the
    figure. Anything malformed -> ValueError naming ``scenarios[i]`` and the field.
    """
    _check_scenarios(scenarios)
    plot_left = FIG_LEFT + LANE_LABEL_WIDTH - 60
    plot_w = FIG_WIDTH - plot_left - LEGEND_WIDTH + 40
    notes_x = plot_left + plot_w + 24
    width = max(
        [FIG_WIDTH]
        + [notes_x + _text_width(str(n), 11) + 8 for s in scenarios for n in s.get("notes", ())]
        + [FIG_LEFT + _text_width(str(c)) + 8 for c in caption]
    )
    width = math.ceil(width)
    out = []
    # The legend: one row of swatches under the title, wrapped when it would pass the width.
    lx, ly = 20.0, 50
    for colour, text in legend:
        step = 22 + _text_width(str(text)) + 18
        if lx + step > width - 10:
            lx, ly = 20.0, ly + 18
        out.append(
            f'<rect class="swatch" x="{lx:.1f}" y="{ly - 10}" width="16" height="12" '
            f'fill={quoteattr(str(colour))} stroke="#333" stroke-width="0.5"/>'
        )
        out.append(f'<text x="{lx + 22:.1f}" y="{ly}">{escape(str(text))}</text>')
        lx += step
    top = ly + 40
    for scenario in scenarios:
        lanes, notes = scenario["lanes"], list(scenario.get("notes", ()))
        last = max((b["end"] for lane in lanes for b in lane.get("boxes", ())), default=0.0)
        x_ticks = _ticks(0.0, max(last * HEADROOM, 1e-9), count=8)
        x_step = x_ticks[1] - x_ticks[0]
        lanes_h = len(lanes) * (LANE_HEIGHT + LANE_GAP) + LANE_GAP
        plot_h = max(lanes_h, 15 * len(notes) + 10)
        bottom = top + plot_h

        def px(x: float, x_ticks=x_ticks) -> float:
            return plot_left + (x - x_ticks[0]) / (x_ticks[-1] - x_ticks[0]) * plot_w

        out.append(f'<g class="scenario" data-name={quoteattr(str(scenario.get("name", "")))}>')
        out.append(
            f'<text x="{FIG_LEFT - 60}" y="{top - 10}" font-size="13" font-weight="bold">'
            f'{escape(str(scenario.get("name", "")))}</text>'
        )
        for x in x_ticks:
            out.append(f'<line x1="{px(x):.1f}" y1="{top}" x2="{px(x):.1f}" y2="{bottom}" stroke="#e5e5e5"/>')
            out.append(
                f'<text x="{px(x):.1f}" y="{bottom + 15}" text-anchor="middle" '
                f'font-size="11">{_label(x, x_step)}</text>'
            )
        out.append(
            f'<text x="{plot_left + plot_w:.1f}" y="{bottom + 30}" text-anchor="end" '
            f'font-size="11" fill="#444">time (µs)</text>'
        )
        for j, lane in enumerate(lanes):
            y = top + LANE_GAP + j * (LANE_HEIGHT + LANE_GAP)
            out.append(f'<g class="lane" data-name={quoteattr(str(lane.get("name", "")))}>')
            out.append(
                f'<text x="{plot_left - 8}" y="{y + LANE_HEIGHT / 2 + 4:.1f}" '
                f'text-anchor="end">{escape(str(lane.get("name", "")))}</text>'
            )
            for box in lane.get("boxes", ()):
                x0, x1 = px(box["start"]), px(box["end"])
                kind = f' data-kind={quoteattr(str(box["kind"]))}' if box.get("kind") else ""
                out.append(
                    f'<rect class="box" data-start="{box["start"]:g}" '
                    f'data-end="{box["end"]:g}"{kind} x="{x0:.2f}" y="{y}" '
                    f'width="{max(x1 - x0, 0.6):.2f}" height="{LANE_HEIGHT}" '
                    f'fill={quoteattr(str(box.get("colour", "#888")))} stroke="white" '
                    f'stroke-width="0.6"/>'
                )
                label = str(box.get("label", ""))
                if label and _text_width(label, 10) + 4 <= x1 - x0:
                    out.append(
                        f'<text x="{(x0 + x1) / 2:.1f}" y="{y + LANE_HEIGHT / 2 + 3.5:.1f}" '
                        f'text-anchor="middle" font-size="10" fill="white">'
                        f'{escape(label)}</text>'
                    )
            out.append("</g>")
        out.append(f'<rect x="{plot_left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>')
        for k, note in enumerate(notes):
            out.append(
                f'<text x="{notes_x}" y="{top + 14 + 15 * k}" font-size="11" fill="#333">{escape(str(note))}</text>'
            )
        out.append("</g>")
        top = bottom + 72
    height = top - 72 + 54
    for k, line in enumerate(caption):
        out.append(
            f'<text class="caption" x="{FIG_LEFT - 60}" y="{height + 16 * k}" '
            f'font-size="12" fill="#333">{escape(str(line))}</text>'
        )
    height += 16 * len(caption) + 10
    return _write_svg(path, width, height, title, out)
