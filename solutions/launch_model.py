"""Exercise 1 reference: the launch-overhead model. Rules: exercises/launch_model.py."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Iterable, Sequence

from coursekit import argcheck
from coursekit.cli import run_exercise
from coursekit.lesson import SEED_WEIGHTS

OTHER_KERNELS = 10  # embedding, final norm, lm_head, sampling...


@dataclass
class DecodeStep:
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
        return int(self.n_layers * self.kernels_per_layer + OTHER_KERNELS)

    @property
    def compute_ms(self) -> float:
        return self.weight_gib * 1024**3 / self.bandwidth_bps * 1e3

    @property
    def launch_ms(self) -> float:
        return self.n_kernels * self.launch_us / 1e3

    def eager_ms(self) -> float:
        return self.compute_ms + self.launch_ms + self.n_kernels * self.gpu_node_us / 1e3

    def graph_ms(self) -> float:
        return self.compute_ms + self.launch_us / 1e3 + self.n_kernels * self.gpu_node_us / 1e3

    def speedup(self) -> float:
        return self.eager_ms() / self.graph_ms()


SEED_ROWS = tuple((label, DecodeStep(weight_gib)) for label, weight_gib in SEED_WEIGHTS)


def report(rows: Iterable[tuple[str, DecodeStep]]) -> str:
    lines = []
    for label, step in rows:
        eager, graph = step.eager_ms(), step.graph_ms()
        lines.append(
            f"{label}: {step.n_kernels} 个 kernel | 计算 {step.compute_ms:5.1f} ms | "
            f"启动 {step.launch_ms:4.2f} ms"
        )
        lines.append(
            f"   eager {eager:5.1f} ms -> {1000 / eager:5.1f} tok/s | "
            f"graph {graph:5.1f} ms -> {1000 / graph:5.1f} tok/s | 加速比 {eager / graph:.2f}x"
        )
    return "\n".join(lines)


def simulate_eager_ms(kernel_us: Sequence[float], launch_us: float) -> float:
    kernel_us, launch_us = argcheck.numbers("kernel_us", kernel_us), argcheck.number("launch_us", launch_us)  # given
    end_us = 0.0
    for k, t in enumerate(kernel_us, start=1):
        end_us = max(k * launch_us, end_us) + t
    return end_us / 1e3


def fit_launch_model(n_kernels: Sequence[float], step_ms: Sequence[float]) -> tuple[float, float]:
    argcheck.same_length("n_kernels", n_kernels, "step_ms", step_ms)  # given
    xs, ys = [float(x) for x in n_kernels], [float(y) for y in step_ms]
    if len(set(xs)) < 2:
        raise ValueError(
            f"n_kernels: expected at least two distinct kernel counts to fit a line, got {xs!r}"
        )
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mean_x) ** 2 for x in xs)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
    slope_ms = sxy / sxx
    return slope_ms * 1e3, mean_y - slope_ms * mean_x


if __name__ == "__main__":
    run_exercise(1, "ex1", lambda: report(SEED_ROWS))
