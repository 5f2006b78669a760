"""What the labs share: calling your code (an unfinished exercise becomes
``ExerciseNotFinished``, which the command line turns into a sentence naming it), the lesson's
model and the bundled H200 figures the labs draw beside yours, the colours of the charts, writing
a lab's JSON, and the argparse types of the options.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from coursekit import lesson
from coursekit.course import by_module
from coursekit.impl import Implementation

EAGER_COLOUR, GRAPH_COLOUR, SPEEDUP_COLOUR = "#d62728", "#1f77b4", "#6a3d9a"
ADDITIVE_COLOUR, PIPELINE_COLOUR, GRAPH_STEP_COLOUR = "#e6550d", "#3182bd", "#31a354"
# The lesson's model (exercise 1's DecodeStep defaults; coursekit may not import the exercise
# modules, and coursekit.lesson keeps them only inside SEED_REPORT, "430 个 kernel" and
# "启动 2.15 ms"):
# eager N·τ, a graph one launch τ, no GPU cost per kernel node (gpu_node_us = 0).
LESSON_LAUNCH_US = 5.0  # τ, DecodeStep.launch_us
LESSON_STEP_KERNELS = 28 * 15 + 10  # DecodeStep.n_kernels: 28 layers x 15 kernels + 10 others


class ExerciseNotFinished(Exception):
    """A student function raised NotImplementedError: ``number`` is the exercise behind it."""

    def __init__(self, number: int, message: str):
        super().__init__(message)
        self.number = number


def call_student(impl: Implementation, module: str, function: str, *args, **kwargs):
    """``impl``'s ``module.function(*args, **kwargs)``; NotImplementedError becomes
    ExerciseNotFinished, a missing function an ImportError, so main can say what is left."""
    mod = impl.module(module)
    fn = getattr(mod, function, None)
    if fn is None:
        raise ImportError(f"module {module!r} from {impl.folder} has no {function!r}")
    return student(module, fn, *args, **kwargs)


def student(module: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` for student code of exercise module ``module`` that is already in
    hand (a method, or a property read in a lambda: ``student("launch_model", lambda:
    step.compute_ms)``); NotImplementedError becomes ExerciseNotFinished, as in call_student."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as exc:
        number = by_module(module).number
        message = str(exc).removeprefix(f"exercise {number}: ")  # the stubs' own prefix
        raise ExerciseNotFinished(number, message) from None


def decode7b() -> dict:
    """The bundled H200 run's 7B-shaped decode step at batch 1 (``decode7b["1"]`` of the anchor:
    ``kernels``, ``eager_ms``, ``graph_ms``, ``speedup``, ``floor_ms``...)."""
    return lesson.h200_anchor()["decode7b"]["1"]


def copy_bandwidth_bps() -> float:
    """The bundled H200's copy bandwidth (bytes read plus written per second)."""
    return lesson.h200_anchor()["copy_TBps"] * 1e12


def write_json(out_dir, name: str, record: dict) -> tuple[Path, Path]:
    """``record`` as ``out_dir/name`` (the folder made if need be): ``(out_dir, that path)``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return out_dir, path


def wrote(paths: tuple[Path, Path]) -> None:
    """Say where a lab's JSON and SVG went."""
    json_path, svg_path = paths
    print(f"\nwrote {json_path}\nwrote {svg_path}")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, got {text!r}")
    return value


def number_in(low: float, high: float = math.inf, *, high_closed: bool = False):
    """An argparse ``type`` for a finite float above ``low`` and below ``high`` (or up to it,
    ``high_closed``); its error names the range and the text given."""
    span = f"> {low:g}" if high == math.inf else f"in ({low:g}, {high:g}{']' if high_closed else ')'}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        inside = math.isfinite(value) and low < value and (value <= high if high_closed else value < high)
        if not inside:
            raise argparse.ArgumentTypeError(f"expected a finite number {span}, got {text!r}")
        return value

    parse.__name__ = f"number {span}"
    return parse
