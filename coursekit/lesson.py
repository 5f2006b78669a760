"""Facts from the lesson, kept once for exercises, solutions and tests, and the bundled H200
reference measurement (``coursekit/data/h200-anchor-2026-11-30.json``, see its README).

The H200 figures are read from that file the first time one of them is used, not at import:
a grading worker imports this module (for the seed rows) with only ``coursekit/*.py`` present.

* ``H200_SWEEP``: chain length N -> (eager ms, graph ms) per iteration of N tiny ``x + 1``
  kernels.
* ``H200_PART_A``: the lesson's Part A (200 tiny kernels on 1024 floats), (eager µs, graph µs)
  per iteration (about 10x).
* ``H200_TAU_EAGER_US``, ``H200_TAU_GRAPH_US``: the slopes fitted through ``H200_SWEEP`` (µs per
  kernel): the eager launch cost and the graph node cost.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

#: The lesson's two decode steps: (label, GiB of weights read per step).
SEED_WEIGHTS = (
    ("AWQ  权重 (~5.5 GiB)", 5.5),
    ("BF16 权重 (~14.2 GiB)", 14.2),
)

#: What ``report(SEED_ROWS)`` prints, byte for byte (the lesson's "expected output" block).
SEED_REPORT = """\
AWQ  权重 (~5.5 GiB): 430 个 kernel | 计算   5.9 ms | 启动 2.15 ms
   eager   8.1 ms -> 124.1 tok/s | graph   5.9 ms -> 169.2 tok/s | 加速比 1.36x
BF16 权重 (~14.2 GiB): 430 个 kernel | 计算  15.2 ms | 启动 2.15 ms
   eager  17.4 ms ->  57.5 tok/s | graph  15.3 ms ->  65.6 tok/s | 加速比 1.14x"""

#: The bundled H200 run, in the shape the lab reads and writes (``launch-tax.json``).
H200_ANCHOR = Path(__file__).resolve().parent / "data" / "h200-anchor-2026-11-30.json"
#: The day of that run (in its file name).
H200_DATE = H200_ANCHOR.stem.removeprefix("h200-anchor-")


@cache
def h200_anchor() -> dict:
    """The bundled H200 measurement, as read from ``H200_ANCHOR``."""
    return json.loads(H200_ANCHOR.read_text(encoding="utf-8"))


def __getattr__(name: str):
    anchor = h200_anchor() if name.startswith("H200_") else None
    if name == "H200_SWEEP":
        return {int(n): (pair[0], pair[1]) for n, pair in anchor["sweep_ms"].items()}
    if name == "H200_PART_A":
        return (anchor["partA"]["eager_us"], anchor["partA"]["graph_us"])
    if name == "H200_TAU_EAGER_US":
        return anchor["tau_eager_us"]
    if name == "H200_TAU_GRAPH_US":
        return anchor["tau_graph_us"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
