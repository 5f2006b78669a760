"""Exercise 9 reference: which model is right, and what graphs cost. Rules: exercises/tradeoffs.py."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from coursekit.cli import run_exercise
from coursekit.lesson import tradeoff_figures


def _duration(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    if value < 0:
        raise ValueError(f"{name}: expected a value >= 0, got {value!r}")
    return float(value)


def _count(name: str, value, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name}: expected an int >= {least}, got {value!r}")
    return value


def eager_timeline(kernel_us: Sequence[float], launch_us: float) -> list[tuple[float, float, float]]:
    tau = _duration("launch_us", launch_us)
    timeline, end = [], 0.0
    for k, t in enumerate(kernel_us, start=1):
        t = _duration(f"kernel_us[{k - 1}]", t)
        launched = k * tau
        start = max(launched, end)
        end = start + t
        timeline.append((launched, start, end))
    return timeline


def cpu_bound_launch_us(kernel_us: Sequence[float]) -> float:
    times = [_duration(f"kernel_us[{i}]", t) for i, t in enumerate(kernel_us)]
    # Kernel m+1 is launched in time iff (m+1)*tau <= tau + t_1 + ... + t_m, i.e. tau <= mean(t_1..t_m).
    tau_star, prefix = math.inf, 0.0
    for m, t in enumerate(times[:-1], start=1):
        prefix += t
        tau_star = min(tau_star, prefix / m)
    return tau_star


def implied_launch_us(eager_ms: float, compute_ms: float, n_kernels: int) -> tuple[float, float]:
    eager = _duration("eager_ms", eager_ms)
    compute = _duration("compute_ms", compute_ms)
    n = _count("n_kernels", n_kernels, 1)
    if compute > eager:
        raise ValueError(f"compute_ms: expected at most eager_ms ({eager_ms!r}), got {compute_ms!r}")
    return (eager - compute) * 1e3 / n, eager * 1e3 / n


def kv_bytes_per_token(n_layers: int, n_kv_heads: int, head_dim: int, dtype_bytes: int = 2) -> int:
    return (2 * _count("n_layers", n_layers, 1) * _count("n_kv_heads", n_kv_heads, 1)
            * _count("head_dim", head_dim, 1) * _count("dtype_bytes", dtype_bytes, 1))


def graph_memory_bytes(per_graph_bytes: Iterable[int], shared_pool: bool = True) -> int:
    if not isinstance(shared_pool, bool):
        raise ValueError(f"shared_pool: expected a bool, got {shared_pool!r}")
    sizes = [_count("per_graph_bytes", b, 0) for b in per_graph_bytes]
    if not sizes:
        return 0
    return max(sizes) if shared_pool else sum(sizes)


def kv_tokens_forgone(graph_bytes: int, bytes_per_token: int) -> int:
    return _count("graph_bytes", graph_bytes, 0) // _count("bytes_per_token", bytes_per_token, 1)


if __name__ == "__main__":
    run_exercise(9, "ex9", lambda: tradeoff_figures(implied_launch_us, cpu_bound_launch_us, kv_bytes_per_token,
                                                    kv_tokens_forgone))
