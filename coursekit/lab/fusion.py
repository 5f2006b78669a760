"""The fusion lab: fused vs unfused add + RMS norm as tensors grow (exercise 7).

    python -m coursekit.lab fusion [--reference]    # fusion.json/.svg: fused vs unfused

Exercise 7's HBM-traffic model of the unfused and the fused add + RMS norm as the rows grow, and
with CUDA the two timed (your ``fused_add_rms_norm``); without CUDA, or with ``--reference``
(the model by arithmetic), it says the figures are modelled, not measured.
"""

from __future__ import annotations

import sys
from pathlib import Path

from coursekit import lesson
from coursekit.impl import Implementation
from coursekit.lab.common import EAGER_COLOUR, GRAPH_COLOUR, call_student, write_json, wrote
from coursekit.svgplot import figure

FUSION_HIDDEN = 3584  # Qwen2.5-7B's hidden size
FUSION_ROWS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)  # tokens: decode batches to prefill
FUSION_DTYPE_BYTES = 2  # bf16
#: add_rms_norm_reference's full-size passes over the rows x hidden tensor: the add, the cast to
#: fp32, the square, the mean's read, the scaling, the cast back, the weight multiply. The model
#: counts each as one read and one write of a bf16 tensor (the fp32 ones move more: a lower bound).
UNFUSED_PASSES = 7
#: Its torch ops (bf16 input): those seven plus "+ eps" and rsqrt on one value per row: 9 launches.
UNFUSED_OPS = 9
#: The fused kernel still moves four full-size bf16 tensors: it reads x and residual and writes
#: out and new_residual (the weight, one row, is negligible). chain_hbm_bytes(1, ..., fused=True)
#: is one read and one write, so the fused traffic is two such chains: 4 tensor reads/writes,
#: against the unfused 7 x (read + write) = 14. Ratio 14 / 4 = 3.5x, not 7x.
FUSED_CHAINS = 2


def fusion_ratio(record: dict) -> float:
    """How many times fewer bytes the fused version moves: unfused_bytes / fused_bytes (the same
    at every row count)."""
    return record["unfused_bytes"][-1] / record["fused_bytes"][-1]


def fusion_record(chain_bytes, rows, hidden: int, source: str) -> dict:
    """The HBM-traffic model of the unfused and the fused add + RMS norm over ``rows``, with
    ``chain_bytes(n_ops, numel, dtype_bytes, fused)`` (exercise 7's ``chain_hbm_bytes``)."""
    anchor = lesson.h200_anchor()
    bandwidth = anchor["copy_TBps"] * 1e12
    unfused = [int(chain_bytes(UNFUSED_PASSES, r * hidden, FUSION_DTYPE_BYTES, False)) for r in rows]
    fused = [FUSED_CHAINS * int(chain_bytes(1, r * hidden, FUSION_DTYPE_BYTES, True)) for r in rows]
    return {
        "hidden": hidden,
        "dtype_bytes": FUSION_DTYPE_BYTES,
        "passes": UNFUSED_PASSES,
        "fused_passes": 2 * FUSED_CHAINS,
        "unfused_ops": UNFUSED_OPS,
        "copy_TBps": anchor["copy_TBps"],
        "tau_us": anchor["tau_eager_us"],
        "model": source,
        "rows": list(rows),
        "unfused_bytes": unfused,
        "fused_bytes": fused,
        "unfused_model_us": [b / bandwidth * 1e6 for b in unfused],
        "fused_model_us": [b / bandwidth * 1e6 for b in fused],
        "measured": None,
    }


#: Exercise 7's docstring: |got - expected| <= tol * (1 + |expected|), tol 1e-2 for bf16.
FUSED_BF16_TOL = 1e-2


def fused_mismatch(got, expected, tol: float = FUSED_BF16_TOL) -> str:
    """ "" when ``got`` (a fused_add_rms_norm result) matches ``expected`` =
    ``add_rms_norm_reference``'s ``(out, new_residual)`` by exercise 7's rule
    ``|got - expected| <= tol * (1 + |expected|)``; else what is wrong, in words."""
    import torch

    if not (isinstance(got, tuple) and len(got) == 2 and all(isinstance(t, torch.Tensor) for t in got)):
        return f"expected a tuple (out, new_residual) of two tensors, got {type(got).__name__}"
    for name, g, e in zip(("out", "new_residual"), got, expected):
        if g.shape != e.shape or g.dtype != e.dtype:
            return f"{name}: expected shape {tuple(e.shape)} and {e.dtype}, got {tuple(g.shape)} and {g.dtype}"
        err = (g.float() - e.float()).abs() - tol * (1 + e.float().abs())
        if not bool((err <= 0).all()):
            worst = int(err.argmax())
            return (
                f"{name}: |got - expected| > {tol:g} * (1 + |expected|) at flat index "
                f"{worst}: got {g.flatten()[worst].item():.6g}, expected "
                f"{e.flatten()[worst].item():.6g}"
            )
    return ""


def measure_fusion(impl: Implementation, rows, hidden: int, iters: int) -> dict:
    """Time the eager add + RMS norm (separate torch ops) and ``impl``'s fused_add_rms_norm on
    this GPU, µs per call (CUDA events around ``iters`` calls after 3 untimed ones). Before a
    size is timed, the fused result is checked once against ``add_rms_norm_reference`` with
    exercise 7's bf16 tolerance; on a mismatch the fused times are dropped (``fused_us`` None)
    and ``fused_mismatch`` says why: a wrong kernel's time is not drawn as the fused time."""
    import torch

    from coursekit.fusion import add_rms_norm_reference

    # The first call goes through call_student (NotImplementedError -> ExerciseNotFinished, a
    # missing function -> ImportError); the timed loops then call the function itself.
    fused = None

    def per_call_us(fn, *args) -> float:
        for _ in range(3):  # compiling and caching happen here
            fn(*args)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn(*args)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1e3 / iters

    unfused_us, fused_us, mismatch = [], [], ""
    for r in rows:
        print(f"timing {r} x {hidden} ...", file=sys.stderr)
        g = torch.Generator(device="cuda").manual_seed(r)
        x, res = (torch.randn(r, hidden, generator=g, device="cuda").to(torch.bfloat16) for _ in range(2))
        w = (torch.rand(hidden, generator=g, device="cuda") + 0.5).to(torch.bfloat16)
        unfused_us.append(per_call_us(add_rms_norm_reference, x, res, w))
        if fused_us is None:
            continue  # a mismatch already: the unfused times only
        if fused is None:
            got = call_student(impl, "fusion", "fused_add_rms_norm", x, res, w)
            fused = impl.module("fusion").fused_add_rms_norm
        else:
            got = fused(x, res, w)
        if wrong := fused_mismatch(got, add_rms_norm_reference(x, res, w)):
            mismatch, fused_us = f"at {r} x {hidden}: {wrong}", None
            continue
        fused_us.append(per_call_us(fused, x, res, w))
    return {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "iters": iters,
        "unfused_us": unfused_us,
        "fused_us": fused_us,
        "fused_mismatch": mismatch,
    }


def fusion_report(record: dict) -> str:
    m, tau = record["measured"], record["tau_us"]
    timed = bool(m and m["fused_us"] is not None)  # False: no GPU, or the fused result was wrong
    lines = [
        f"add + RMS norm on rows x {record['hidden']} bf16. Model: the unfused version makes "
        f"{record['passes']} full passes, each a read and a write of the tensor",
        f"({2 * record['passes']} tensor reads/writes, counted in bf16: a lower bound, its "
        "fp32 passes move more); the fused one",
        "reads x and residual and writes out and new_residual: "
        f"{record['fused_passes']} tensor reads/writes. Time = bytes over",
        f"the H200's measured copy bandwidth ({record['copy_TBps']:.2f} TB/s). The passes and the ops are read off",
        "coursekit.fusion.add_rms_norm_reference's code, not counted on a GPU.",
        f"Measured on {m['gpu']} (torch {m['torch']}), {m['iters']} calls per point, after 3 untimed ones."
        if m
        else "Modelled, not measured: no CUDA run here, and no bundled fused measurement exists.",
        "",
        "   rows | unfused bytes |  fused bytes | unfused model | fused model"
        + ((" | unfused meas | fused meas | meas ratio" if timed else " | unfused meas") if m else ""),
    ]
    for k, r in enumerate(record["rows"]):
        line = (
            f"{r:7} | {record['unfused_bytes'][k]:13,} | {record['fused_bytes'][k]:12,} | "
            f"{record['unfused_model_us'][k]:10.2f} µs | {record['fused_model_us'][k]:8.2f} µs"
        )
        if m:
            line += f" | {m['unfused_us'][k]:9.1f} µs"
        if timed:
            line += f" | {m['fused_us'][k]:7.1f} µs | {m['unfused_us'][k] / m['fused_us'][k]:9.2f}x"
        lines.append(line)
    launches = record["unfused_ops"] * tau
    lines += [
        "",
        f"Launches: the unfused version's {record['unfused_ops']} ops cost the CPU about "
        f"{launches:.0f} µs ({record['unfused_ops']} × τ = {tau:.2f} µs, H200), the fused "
        f"one {tau:.0f} µs.",
        "At decode sizes (a few rows) the traffic is well under a microsecond and the launches dominate:",
        "fusion pays by launching less. As the rows grow (prefill) the traffic passes the launches and",
        f"fusion pays by moving {fusion_ratio(record):.1f} times fewer bytes (unfused bytes ÷ fused bytes).",
    ]
    if m and not timed:
        lines += [
            "",
            "Your fused_add_rms_norm does not match add_rms_norm_reference (exercise 7's "
            f"bf16 tolerance) {m['fused_mismatch']}:",
            "its times are not measured or drawn; fix exercise 7 (python -m pytest exercises -m ex7).",
        ]
    return "\n".join(lines)


def fusion_panels(record: dict) -> tuple[list[dict], list[str]]:
    rows, m, tau = record["rows"], record["measured"], record["tau_us"]
    launches = record["unfused_ops"] * tau
    times = [
        {
            "name": f"unfused, traffic model ({record['passes']} × read + write)",
            "colour": EAGER_COLOUR,
            "style": "line",
            "dash": "dotted",
            "points": list(zip(rows, record["unfused_model_us"])),
        },
        {
            "name": "fused, traffic model (2 reads + 2 writes)",
            "colour": GRAPH_COLOUR,
            "style": "line",
            "dash": "dotted",
            "points": list(zip(rows, record["fused_model_us"])),
        },
        {
            "name": f"unfused launches: {record['unfused_ops']} × τ = {launches:.0f} µs",
            "colour": EAGER_COLOUR,
            "style": "line",
            "dash": "dashed",
            "points": [(rows[0], launches), (rows[-1], launches)],
        },
        {
            "name": f"fused launch: τ = {tau:.1f} µs",
            "colour": GRAPH_COLOUR,
            "style": "line",
            "dash": "dashed",
            "points": [(rows[0], tau), (rows[-1], tau)],
        },
    ]
    if m:
        times.append(
            {
                "name": "unfused, measured",
                "colour": EAGER_COLOUR,
                "style": "points",
                "points": list(zip(rows, m["unfused_us"])),
            }
        )
    if m and m["fused_us"] is not None:  # None: the fused result did not match the reference
        times.append(
            {
                "name": "fused (yours), measured",
                "colour": GRAPH_COLOUR,
                "style": "points",
                "points": list(zip(rows, m["fused_us"])),
            }
        )
    traffic = [
        {
            "name": "unfused",
            "colour": EAGER_COLOUR,
            "style": "line",
            "points": [(r, b / 1e6) for r, b in zip(rows, record["unfused_bytes"])],
        },
        {
            "name": "fused",
            "colour": GRAPH_COLOUR,
            "style": "line",
            "points": [(r, b / 1e6) for r, b in zip(rows, record["fused_bytes"])],
        },
    ]
    panels = [
        {
            "name": "(a) time per call (log scale)" + ("" if m else ": modelled, not measured"),
            "y_label": "µs per call (log scale)",
            "y_scale": "log",
            "height": 300,
            "series": times,
            "notes": [
                "dotted: HBM bytes ÷ copy bandwidth",
                f"({record['copy_TBps']:.2f} TB/s, H200)",
                "dashed: the CPU's launches (τ from the H200)",
                "Where dotted passes dashed, traffic",
                "outweighs launches.",
            ]
            + ([] if m else ["No measured points: no CUDA run,", "no bundled fused measurement."])
            + (
                ["No fused points: your fused_add_rms_norm", "did not match the reference."]
                if m and m["fused_us"] is None
                else []
            ),
        },
        {
            "name": "(b) HBM traffic per call (model, log scale)",
            "y_label": "MB moved (log scale)",
            "y_scale": "log",
            "height": 220,
            "series": traffic,
            "notes": [
                f"unfused: {record['passes']} passes, each a read and a write",
                f"({2 * record['passes']} tensor reads/writes); fused: read x and",
                f"residual, write out and new_residual ({record['fused_passes']}):",
                f"{fusion_ratio(record):.1f}x fewer bytes (bf16 tensors),",
                "your chain_hbm_bytes" if record["model"] == "chain_hbm_bytes" else "by arithmetic (--reference)",
            ],
        },
    ]
    caption = [
        f"add + RMS norm on rows × {record['hidden']} (Qwen2.5-7B's hidden size), bf16. "
        "Decode: a few rows per step; prefill: thousands.",
        ("Measured on " + m["gpu"] + f", torch {m['torch']}, {m['iters']} calls per point.")
        if m
        else "Modelled, not measured: no CUDA here, and no bundled measurement of a fused kernel exists.",
    ]
    return panels, caption


def write_fusion(record: dict, out_dir) -> tuple[Path, Path]:
    out_dir, json_path = write_json(out_dir, "fusion.json", record)
    panels, caption = fusion_panels(record)
    what = f"measured on {record['measured']['gpu']}" if record["measured"] else "modelled, not measured"
    svg_path = figure(
        out_dir / "fusion.svg",
        panels,
        x_scale="log",
        caption=caption,
        title=f"Fused vs unfused add + RMS norm as tensors grow ({what})",
        x_label=f"rows (tokens) of {record['hidden']} values, log scale",
    )
    return json_path, svg_path


def _chain_bytes_rule(n_ops: int, numel: int, dtype_bytes: int, fused: bool) -> int:
    """chain_hbm_bytes's docstring rule, for --reference: a read and a write per pass."""
    return 0 if n_ops == 0 else 2 * (1 if fused else n_ops) * numel * dtype_bytes


def command(args, impl: Implementation) -> int:
    rows = sorted(set(args.rows))
    if len(rows) < 2:
        print(f"lab: --rows: expected at least two distinct row counts, got {args.rows}", file=sys.stderr)
        return 2
    if args.reference:
        record = fusion_record(_chain_bytes_rule, rows, args.hidden, "arithmetic")
        source = (
            "the traffic model by arithmetic (--reference); modelled, not measured: no bundled fused measurement exists"
        )
    else:
        record = fusion_record(
            lambda *a: call_student(impl, "fusion", "chain_hbm_bytes", *a), rows, args.hidden, "chain_hbm_bytes"
        )
        import torch

        if torch.cuda.is_available():
            record["measured"] = measure_fusion(impl, rows, args.hidden, args.iters)
            yours = (
                "with your fused_add_rms_norm"
                if record["measured"]["fused_us"] is not None
                else "the unfused version only (your fused_add_rms_norm gave a wrong result)"
            )
            source = (
                f"measured on {record['measured']['gpu']} {yours}, the traffic model from "
                f"your chain_hbm_bytes (--impl {args.impl})"
            )
        else:
            source = (
                f"the traffic model from your chain_hbm_bytes (--impl {args.impl}); "
                "modelled, not measured: no CUDA here, and no bundled fused measurement "
                "exists"
            )
    print(f"fusion lab: {source}\n")
    print(fusion_report(record))
    wrote(write_fusion(record, args.out))
    return 0
