"""Exercise 2 reference: measuring the launch tax. Rules: exercises/launch_tax.py."""

from __future__ import annotations

import time
from typing import Callable, Sequence

import torch

from coursekit import argcheck
from coursekit.measurements import LaunchTax, tiny_op_chain


def time_ms(fn: Callable[[], object], iters: int = 100, warmup: int = 10) -> float:
    iters, warmup = argcheck.count("iters", iters, at_least=1), argcheck.count("warmup", warmup, at_least=0)  # given
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
    n_ops, numel, iters = (argcheck.count(name, value, at_least=1)  # given
                           for name, value in (("n_ops", n_ops), ("numel", numel), ("iters", iters)))  # given
    argcheck.need_cuda("measure_launch_tax")  # given
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
    with torch.cuda.graph(graph, stream=side):
        static_out = tiny_op_chain(static_x, n_ops)
    graph_ms = time_ms(graph.replay, iters=iters)

    graph.replay()
    matches = torch.equal(static_out, tiny_op_chain(x, n_ops))
    return LaunchTax(n_ops, numel, eager_ms * 1e3, graph_ms * 1e3, bool(matches))


def sweep_launch_tax(
    n_ops_list: Sequence[int], numel: int = 1024, iters: int = 100
) -> list[LaunchTax]:
    n_ops_list = argcheck.counts("n_ops_list", n_ops_list, at_least=1, nonempty=True)  # given: a list now
    return [measure_launch_tax(n, numel=numel, iters=iters) for n in n_ops_list]
