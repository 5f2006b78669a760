"""The Part B lab's record (``coursekit.lab.vllm_analysis``) as text (``report``) and as a chart
(``chart_panels``); ``write_outputs`` writes both into the folder: ``vllm-lab.json`` and
``vllm-lab.svg``.
"""

from __future__ import annotations

import json
from pathlib import Path

from coursekit.lab.vllm_runs import RESULT_JSON, RESULT_SVG, RUNNER_VAR, _short
from coursekit.svgplot import figure

COLOURS = {
    "default": "#8c564b",
    "eager": "#d62728",
    "none": "#ff7f0e",
    "piecewise": "#2ca02c",
    "full_decode_only": "#1f77b4",
    "full_and_piecewise": "#6a3d9a",
}


def _f(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def _group_title(group: dict) -> str:
    ran = group["runner_ran"] or "not told by the log"
    return f"{group['model']} · runner {group['runner']} ({group['runner_asked']}) · ran: {ran}" + (
        f" (from {'; '.join(group['runner_evidence'])})" if group["runner_evidence"] else ""
    )


def report(record: dict) -> str:
    """The lab's text report for a record from ``analyze`` (exercises 1 and 9 may be missing):
    one section per model and runner, then the runners and the models side by side."""
    lines = [
        f"vLLM {record.get('vllm')} on {record.get('gpu')}, model {record.get('model')}, "
        f"runners {', '.join(record['runners'])}",
        f"Exercise 2's tau = {_f(record['tau_us'], '.2f')} µs: {record['tau_source']}",
    ]
    for group in record["groups"]:
        lines += ["", "== " + _group_title(group), *_group_lines(group, record)]
    lines += _runners_side_by_side(record)
    lines += _models_side_by_side(record)
    lines += [f"note: {n}" for n in record.get("notes", [])]
    return "\n".join(lines)


def _group_lines(group: dict, record: dict) -> list[str]:
    v = group["variants"]
    batches = sorted({int(b) for x in v.values() for b in x["decode_ms"]})
    lines = [
        "Decode step (ms; slope of latency against output length) and speedup over eager",
        f"  {'variant':20}" + "".join(f"{'batch ' + str(b):>18}" for b in batches),
    ]
    eager = v.get("eager", {}).get("decode_ms", {})
    for name, x in v.items():
        cells = []
        for b in batches:
            ms = x["decode_ms"].get(str(b))
            speed = f" ({eager[str(b)] / ms:.2f}x)" if ms and str(b) in eager and name != "eager" else ""
            cells.append(f"{_f(ms, '.3f') + speed:>18}")
        lines.append(f"  {name:20}" + "".join(cells))
    lines += [
        "Memory and capture (medians over each variant's runs; '-': not in the log)",
        f"  {'variant':20}{'KV GiB':>8}{'KV tokens':>12}{'graphs GiB':>12}{'estimate':>10}{'capture s':>11}",
    ]
    for name, x in v.items():
        lines.append(
            f"  {name:20}{_f(x['kv_cache_gib'], '8.2f', '       -')}"
            f"{_f(x['kv_cache_tokens'], '12,.0f', '           -')}"
            f"{_f(x['graph_gib'], '12.2f', '           -')}"
            f"{_f(x['graph_estimate_gib'], '10.2f', '         -')}"
            f"{_f(x['graph_capture_s'], '11.0f', '          -')}"
        )
    lines.append(f"Graph memory before the KV cache: {group['graph_reserve']}")
    lines.append(f"Kernels per decode step K = {group['kernels_per_step']}: {group['kernels_per_step_source']}")
    if "tau_eff_us" not in group:
        lines.append("tau_eff: " + group.get("tau_eff_missing", "not computed"))
    elif not group["tau_eff_us"]:
        lines.append("tau_eff: nothing to fit (needs K and decode times of a graph variant and of the baseline)")
    else:
        lines.append(
            f"tau_eff (exercise 1's fit through (1, graph ms) and (K, {group['baseline']}"
            " ms)), µs per launch removed; tau_eff / tau:"
        )
        for name, row in group["tau_eff_us"].items():
            lines.append(
                f"  {name:20}"
                + "  ".join(
                    f"batch {b}: {t:.2f}" + (f" ({t / record['tau_us']:.1f}x)" if record["tau_us"] else "")
                    for b, t in row.items()
                )
            )
    if "kv_tokens_forgone" not in group:
        lines.append("KV tokens forgone: " + group.get("kv_missing", "not computed"))
    else:
        lines.append(f"KV cache per token (exercise 9): {group['kv_bytes_per_token']} bytes {group['kv_shape']}")
        v2 = group["runner_ran"] == "V2"
        for name, row in group["kv_tokens_forgone"].items():
            estimate = (
                "none (V2 reserves none)"
                if v2 and "from_graph_estimate" not in row
                else _f(row.get("from_graph_estimate"), ",")
            )
            lines.append(
                f"  {name:20}graphs' memory -> {_f(row.get('from_graph_memory'), ',')} "
                f"tokens; vLLM's estimate -> {estimate}; "
                f"measured {group['baseline']} - {name}: "
                f"{_f(row.get('measured'), ',')}"
            )
    return lines


def _runners_side_by_side(record: dict) -> list[str]:
    """Per model and variant, each runner's KV cache, graphs and decode time (when >1 runner)."""
    runners = record["runners"]
    if len(runners) < 2:
        return []
    lines = [
        "",
        "Runners side by side (" + " | ".join(runners) + "): KV tokens; graphs GiB; "
        "vLLM's estimate GiB; decode ms per batch",
    ]
    for model in record["models"]:
        groups = {g["runner"]: g for g in record["groups"] if g["model"] == model}
        lines.append(
            f"  {model}: " + ", ".join(f"{r} ran {_f(groups[r]['runner_ran'], 's')}" for r in runners if r in groups)
        )
        names = list(dict.fromkeys(n for g in groups.values() for n in g["variants"]))
        for name in names:
            cells = [groups.get(r, {}).get("variants", {}).get(name) for r in runners]

            def each(key, spec, cells=cells):
                return " | ".join("-" if c is None else _f(c[key], spec) for c in cells)

            batches = sorted({int(b) for c in cells if c for b in c["decode_ms"]})
            decode = "; ".join(
                f"b{b} " + " | ".join("-" if c is None else _f(c["decode_ms"].get(str(b)), ".3f") for c in cells)
                for b in batches
            )
            lines.append(
                f"    {name:20}KV {each('kv_cache_tokens', ',.0f')}; graphs "
                f"{each('graph_gib', '.2f')}; estimate {each('graph_estimate_gib', '.2f')}"
                f"; {decode}"
            )
    return lines


def _models_side_by_side(record: dict) -> list[str]:
    """The speedup over eager per model, side by side (when >1 model)."""
    table = record.get("speedup_by_model") or {}
    if not table:
        return []
    models = record["models"]
    lines = [
        "",
        "Speedup over eager per model, side by side ("
        + " | ".join(map(_short, models))
        + "): smaller compute, bigger gain from graphs?",
    ]
    for runner, rows in table.items():
        for name, per_batch in rows.items():
            for batch, per_model in sorted(per_batch.items(), key=lambda kv: int(kv[0])):
                lines.append(
                    f"  runner {runner:8}{name:20}batch {batch:>4}: "
                    + " | ".join(f"{_short(m)} {_f(per_model.get(m), '.2f')}x" for m in models)
                )
    return lines


def chart_panels(record: dict) -> tuple[list[dict], list[str]]:
    """The chart: (a) decode step time against batch size per model, runner and variant, (b)
    speedup over eager, (c) tau_eff beside exercise 2's tau (when fitted). Colour: the variant;
    a dashed line: the V1 pin; several models: the model's name in the series."""
    times, speedups, taus = [], [], []
    several = len(record["groups"]) > 1
    for group in record["groups"]:
        v = group["variants"]
        tag = (
            f"{_short(group['model']) + ' ' if len(record['models']) > 1 else ''}{group['runner']} " if several else ""
        )
        dash = "dashed" if group["runner"] == "v1" and len(record["runners"]) > 1 else None
        eager = v.get("eager", {}).get("decode_ms", {})
        for name, x in v.items():
            colour = COLOURS.get(name, "#333")
            points = sorted((int(b), ms) for b, ms in x["decode_ms"].items() if ms > 0)
            if points:
                times.append(
                    {
                        "name": f"{tag}{name}: {x['label']}",
                        "colour": colour,
                        "style": "line",
                        "dash": dash,
                        "points": points,
                    }
                )
                times.append({"name": f"{tag}{name}, measured", "colour": colour, "style": "points", "points": points})
            ratio = [(b, eager[str(b)] / ms) for b, ms in points if str(b) in eager]
            if name != "eager" and ratio:
                speedups.append(
                    {"name": f"{tag}{name}", "colour": colour, "style": "line", "dash": dash, "points": ratio}
                )
                speedups.append(
                    {"name": f"{tag}{name}, measured", "colour": colour, "style": "points", "points": ratio}
                )
        for name, row in group.get("tau_eff_us", {}).items():
            points = sorted((int(b), t) for b, t in row.items())
            taus.append(
                {
                    "name": f"tau_eff, {tag}{name}",
                    "colour": COLOURS.get(name, "#333"),
                    "style": "line",
                    "dash": dash,
                    "points": points,
                }
            )
    if not times:
        raise ValueError("FOLDER: no variant has decode times (each batch size needs two output lengths that ran)")
    panels = [{"name": "(a) decode step time", "y_label": "ms per decode step", "height": 280, "series": times}]
    if speedups:
        panels.append(
            {
                "name": "(b) speedup over --enforce-eager",
                "y_label": "eager ÷ variant",
                "height": 200,
                "series": speedups,
            }
        )
    if taus and record["tau_us"]:
        xs = [x for s in taus for x, _ in s["points"]]
        taus.append(
            {
                "name": f"exercise 2's tau: {record['tau_us']:.2f} µs",
                "colour": "#555",
                "style": "line",
                "dash": "dotted",
                "points": [(min(xs), record["tau_us"]), (max(xs), record["tau_us"])],
            }
        )
        ks = sorted(
            {
                (g["kernels_per_step"], g["kernels_per_step_source"].startswith("given"))
                for g in record["groups"]
                if g.get("tau_eff_us")
            }
        )
        panels.append(
            {
                "name": "(c) tau_eff: µs per launch the graphs removed",
                "y_label": "µs per launch",
                "height": 200,
                "series": taus,
                "notes": [
                    f"K = {', '.join(str(k) for k, _ in ks)} kernels per decode step,",
                    "given" if all(g for _, g in ks) else "an ESTIMATE, not measured",
                ],
            }
        )
    caption = [
        f"vLLM {record.get('vllm')}, {record.get('model')}, on {record.get('gpu')}; decode "
        "time = slope of latency against output length."
    ]
    if len(record["runners"]) > 1:
        caption.append(f"Solid: vLLM's own runner choice (default); dashed: V1 pinned ({RUNNER_VAR}=0).")
    for group in record["groups"]:
        for name, x in group["variants"].items():
            graphs = (
                "no graphs captured"
                if x["graph_gib"] is None
                else f"graphs {x['graph_gib']:.2f} GiB, captured in {_f(x['graph_capture_s'], '.0f')} s"
            )
            who = f"{_short(group['model'])}, {group['runner']} (ran {group['runner_ran'] or '?'}), " if several else ""
            caption.append(
                f"{who}{name}: KV cache {_f(x['kv_cache_tokens'], ',')} tokens "
                f"({_f(x['kv_cache_gib'], '.2f')} GiB), {graphs}"
            )
    return panels, caption


def write_outputs(record: dict, folder) -> tuple[Path, Path]:
    folder = Path(folder)
    json_path = folder / RESULT_JSON
    json_path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    panels, caption = chart_panels(record)
    svg_path = figure(
        folder / RESULT_SVG,
        panels,
        x_label="batch size",
        caption=caption,
        title=f"vLLM CUDA graph modes: {record.get('model')} on {record.get('gpu')}",
    )
    return json_path, svg_path
