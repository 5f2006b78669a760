"""Exercise 2 reference: measuring the launch tax. Rules: exercises/launch_tax.py."""

from __future__ import annotations

import time
from typing import Callable, Sequence

import torch

from coursekit.measurements import LaunchTax, tiny_op_chain


def time_ms(fn: Callable[[], object], iters: int = 100, warmup: int = 10) -> float:
    _check_count("iters", iters, minimum=1)
    _check_count("warmup", warmup, minimum=0)
    for _ in range(warmup):
        fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / iters
    start_s = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - start_s) * 1e3 / iters


def measure_launch_tax(n_ops: int = 200, numel: int = 1024, iters: int = 100) -> LaunchTax:
    for name, value in (("n_ops", n_ops), ("numel", numel), ("iters", iters)):
        _check_count(name, value, minimum=1)
    if not torch.cuda.is_available():
        raise RuntimeError(
            "measure_launch_tax: a CUDA device is needed (it captures a CUDA graph), and "
            "torch.cuda.is_available() is False on this machine"
        )
    # A private generator: the default CUDA generator is left mid-capture by a failed capture.
    x = torch.rand(numel, device="cuda", generator=torch.Generator(device="cuda")) + 0.5
    eager_ms = time_ms(lambda: tiny_op_chain(x, n_ops), iters=iters)

    static_x = x.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        tiny_op_chain(static_x, n_ops)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = tiny_op_chain(static_x, n_ops)
    graph_ms = time_ms(graph.replay, iters=iters)

    graph.replay()
    matches = torch.equal(static_out, tiny_op_chain(x, n_ops))
    return LaunchTax(n_ops, numel, eager_ms * 1e3, graph_ms * 1e3, bool(matches))


def sweep_launch_tax(
    n_ops_list: Sequence[int], numel: int = 1024, iters: int = 100
) -> list[LaunchTax]:
    n_ops_list = list(n_ops_list)
    if not n_ops_list:
        raise ValueError("n_ops_list: expected at least one chain length, got none")
    return [measure_launch_tax(n, numel=numel, iters=iters) for n in n_ops_list]


def _check_count(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}: expected an int >= {minimum}, got {value!r}")
