"""Exercise 1 · the launch-overhead model (CPU only).

A decode step launches N small kernels. In eager mode the CPU pays tau (``launch_us``) to launch
each one, and the GPU waits for the CPU between tiny kernels:

    T_eager = T_compute + N * tau + N * gpu_node_us
    T_graph = T_compute + tau     + N * gpu_node_us    (one submission replays all N kernels)

``gpu_node_us`` (nu) is what each kernel costs the GPU beyond moving its bytes (starting it,
finishing it), eager or in a graph alike: a graph removes the N launches, not the kernels. With
``gpu_node_us = 0`` this is the lesson's model. On a real GPU nu is about 1.1 us on an H200 (the
graph's cost per kernel node, see coursekit/data/), which is why fusion matters even after
capture: fewer kernels, fewer nu.

The lines marked ``# given`` check the arguments (``coursekit/argcheck.py``); keep them, and write
the rest. Run ``python -m exercises.launch_model`` to print the lesson's table once you are done,
and ``python -m pytest exercises -m ex1`` to check your work.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Iterable, Sequence

from coursekit import argcheck
from coursekit.cli import run_exercise
from coursekit.lesson import SEED_WEIGHTS


@dataclass
class DecodeStep:
    """One decode step of a transformer, as the launch model sees it.

    Fields: ``weight_gib`` (GiB read per step, weights dominate), ``n_layers``,
    ``kernels_per_layer``, ``launch_us`` (CPU cost to launch one kernel, tau),
    ``bandwidth_bps`` (HBM bytes per second), ``gpu_node_us`` (GPU cost of each kernel beyond
    its bytes, nu: paid eager and in a graph alike).

    Rule: every field is a finite number >= 0 (zero is fine; NaN, inf and bool are not) and
    ``bandwidth_bps`` > 0, checked when the step is built (``__post_init__``): otherwise
    ``ValueError`` whose message names the field, e.g. ``DecodeStep(-1.0)`` ->
    ``ValueError("weight_gib: expected a value >= 0, got -1.0")``.
    """

    weight_gib: float
    n_layers: int = 28
    kernels_per_layer: int = 15
    launch_us: float = 5.0
    bandwidth_bps: float = 1.0e12
    gpu_node_us: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):  # given
            argcheck.number(f.name, getattr(self, f.name))  # given
        argcheck.number("bandwidth_bps", self.bandwidth_bps, above=0)  # given

    @property
    def n_kernels(self) -> int:
        """Kernels per step, an int: ``n_layers * kernels_per_layer + 10``
        (the 10 are the embedding, final norm, lm_head and friends)."""
        raise NotImplementedError("exercise 1: DecodeStep.n_kernels")

    @property
    def compute_ms(self) -> float:
        """Memory-bound compute time: bytes over bandwidth, in ms.
        ``weight_gib * 1024**3 / bandwidth_bps * 1e3`` (GiB means 1024**3 bytes, not 1e9)."""
        raise NotImplementedError("exercise 1: DecodeStep.compute_ms")

    @property
    def launch_ms(self) -> float:
        """The launch tax N * tau, in ms: ``n_kernels * launch_us / 1e3``."""
        raise NotImplementedError("exercise 1: DecodeStep.launch_ms")

    def eager_ms(self) -> float:
        """``compute_ms + launch_ms + n_kernels * gpu_node_us / 1e3``: every kernel launched by
        the CPU, and every kernel's GPU cost."""
        raise NotImplementedError("exercise 1: DecodeStep.eager_ms")

    def graph_ms(self) -> float:
        """``compute_ms + launch_us / 1e3 + n_kernels * gpu_node_us / 1e3``: one submission for
        the whole graph, and still every kernel's GPU cost."""
        raise NotImplementedError("exercise 1: DecodeStep.graph_ms")

    def speedup(self) -> float:
        """``eager_ms() / graph_ms()``."""
        raise NotImplementedError("exercise 1: DecodeStep.speedup")


#: The lesson's two rows: AWQ (~5.5 GiB) and BF16 (~14.2 GiB) weights, all other fields default.
SEED_ROWS = tuple((label, DecodeStep(weight_gib)) for label, weight_gib in SEED_WEIGHTS)


def report(rows: Iterable[tuple[str, DecodeStep]]) -> str:
    """The lesson's table: two lines per ``(label, step)`` row, joined with ``"\\n"``.

    Line 1: ``f"{label}: {n_kernels} 个 kernel | 计算 {compute_ms:5.1f} ms | 启动 {launch_ms:4.2f} ms"``
    Line 2: three spaces, then ``eager {E:5.1f} ms -> {1000/E:5.1f} tok/s | graph {G:5.1f} ms ->
    {1000/G:5.1f} tok/s | 加速比 {E/G:.2f}x`` on one line, where E = eager_ms(), G = graph_ms().

    ``print(report(SEED_ROWS))`` must print the lesson's expected output byte for byte.
    """
    raise NotImplementedError("exercise 1: report")


def simulate_eager_ms(kernel_us: Sequence[float], launch_us: float) -> float:
    """Simulate the CPU-GPU pipeline of an eager step; return when the last kernel ends, in ms.

    The CPU finishes launching kernel k (k = 1, 2, ...) at ``k * launch_us``. Kernel k starts at
    ``max(k * launch_us, end of kernel k-1)`` and runs for ``kernel_us[k-1]`` microseconds.
    No kernels -> 0.0. A negative or non-finite (NaN, inf) ``launch_us`` or kernel time, or one
    that is not a number (bool included) -> ValueError naming the argument (``launch_us``, or
    ``kernel_us[i]`` for kernel i).
    """
    kernel_us, launch_us = argcheck.numbers("kernel_us", kernel_us), argcheck.number("launch_us", launch_us)  # given
    raise NotImplementedError("exercise 1: simulate_eager_ms")


def fit_launch_model(n_kernels: Sequence[float], step_ms: Sequence[float]) -> tuple[float, float]:
    """Fit ``step_ms = compute_ms + n_kernels * launch_us / 1e3`` by least squares.

    Returns ``(launch_us, compute_ms)``: the slope in microseconds per kernel and the intercept in
    ms. Exact (up to rounding) when the points lie on a line. Sequences of different lengths ->
    ValueError naming ``n_kernels`` or ``step_ms``; fewer than two distinct kernel counts ->
    ValueError naming ``n_kernels`` (a line through one x is not determined).
    """
    argcheck.same_length("n_kernels", n_kernels, "step_ms", step_ms)  # given
    raise NotImplementedError("exercise 1: fit_launch_model")


if __name__ == "__main__":
    run_exercise(1, "ex1", lambda: report(SEED_ROWS))
