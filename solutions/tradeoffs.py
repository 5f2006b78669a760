"""Exercise 9 reference: which model is right, and what graphs cost. Rules: exercises/tradeoffs.py."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from coursekit import argcheck
from coursekit.cli import run_exercise
from coursekit.lesson import tradeoff_figures


def eager_timeline(kernel_us: Sequence[float], launch_us: float) -> list[tuple[float, float, float]]:
    kernel_us, launch_us = argcheck.numbers("kernel_us", kernel_us), argcheck.number("launch_us", launch_us)  # given
    timeline, end = [], 0.0
    for k, t in enumerate(kernel_us, start=1):
        launched = k * launch_us
        start = max(launched, end)
        end = start + t
        timeline.append((launched, start, end))
    return timeline


def cpu_bound_launch_us(kernel_us: Sequence[float]) -> float:
    kernel_us = argcheck.numbers("kernel_us", kernel_us)  # given
    # Kernel m+1 is launched in time iff (m+1)*tau <= tau + t_1 + ... + t_m, i.e. tau <= mean(t_1..t_m).
    tau_star, prefix = math.inf, 0.0
    for m, t in enumerate(kernel_us[:-1], start=1):
        prefix += t
        tau_star = min(tau_star, prefix / m)
    return tau_star


def implied_launch_us(eager_ms: float, compute_ms: float, n_kernels: int) -> tuple[float, float]:
    eager_ms, compute_ms = argcheck.number("eager_ms", eager_ms), argcheck.number("compute_ms", compute_ms)  # given
    n_kernels = argcheck.count("n_kernels", n_kernels, at_least=1)  # given
    if compute_ms > eager_ms:
        raise ValueError(f"compute_ms: expected at most eager_ms ({eager_ms!r}), got {compute_ms!r}")
    return (eager_ms - compute_ms) * 1e3 / n_kernels, eager_ms * 1e3 / n_kernels


def kv_bytes_per_token(n_layers: int, n_kv_heads: int, head_dim: int, dtype_bytes: int = 2) -> int:
    n_layers, n_kv_heads, head_dim, dtype_bytes = (  # given
        argcheck.count(name, value, at_least=1) for name, value in (  # given
            ("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim), ("dtype_bytes", dtype_bytes)))  # given
    return 2 * n_layers * n_kv_heads * head_dim * dtype_bytes


def graph_memory_bytes(per_graph_bytes: Iterable[int], shared_pool: bool = True) -> int:
    per_graph_bytes = argcheck.counts("per_graph_bytes", per_graph_bytes, at_least=0)  # given: a list now
    shared_pool = argcheck.flag("shared_pool", shared_pool)  # given
    if not per_graph_bytes:
        return 0
    return max(per_graph_bytes) if shared_pool else sum(per_graph_bytes)


def kv_tokens_forgone(graph_bytes: int, bytes_per_token: int, runner: str = "v1") -> int:
    graph_bytes = argcheck.count("graph_bytes", graph_bytes, at_least=0)  # given
    bytes_per_token = argcheck.count("bytes_per_token", bytes_per_token, at_least=1)  # given
    runner = argcheck.one_of("runner", runner, ("v1", "v2"))  # given
    if runner == "v2":  # V2 sizes the KV cache first and captures after: the graphs take no tokens
        return 0
    return graph_bytes // bytes_per_token


if __name__ == "__main__":
    run_exercise(9, "ex9", lambda: tradeoff_figures(implied_launch_us, cpu_bound_launch_us, kv_bytes_per_token,
                                                    kv_tokens_forgone))
