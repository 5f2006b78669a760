"""Exercise 2, solved another way: perf_counter_ns, one CUDA event pair per call summed, a
capture that warms up on the capturing stream itself, a sweep built in a loop."""

import time

import torch

from coursekit import argcheck
from coursekit.measurements import LaunchTax, tiny_op_chain


def time_ms(fn, iters=100, warmup=10):
    if not isinstance(iters, int) or iters < 1:
        raise ValueError(f"iters must be a positive int, not {iters!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be >= 0, not {warmup!r}")
    for _ in range(warmup):
        fn()
    if not torch.cuda.is_available():
        begin = time.perf_counter_ns()
        for _ in range(iters):
            fn()
        return (time.perf_counter_ns() - begin) / 1e6 / iters
    torch.cuda.synchronize()
    pairs = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return sum(s.elapsed_time(e) for s, e in pairs) / iters


def measure_launch_tax(n_ops=200, numel=1024, iters=100):
    for name, value in {"n_ops": n_ops, "numel": numel, "iters": iters}.items():
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: measuring the launch tax needs a GPU")
    x = torch.randn(numel, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))
    eager = time_ms(lambda: tiny_op_chain(x, n_ops), iters=iters)
    static = x.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            tiny_op_chain(static, n_ops)
    torch.cuda.current_stream().wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        out = tiny_op_chain(static, n_ops)
    graph = time_ms(g.replay, iters=iters)
    g.replay()
    torch.cuda.synchronize()
    same = bool((out == tiny_op_chain(x, n_ops)).all().item())
    return LaunchTax(n_ops=n_ops, numel=numel, eager_us=eager * 1000, graph_us=graph * 1000,
                     replay_matches_eager=same)


def sweep_launch_tax(n_ops_list, numel=1024, iters=100):
    # the stub's given line, kept as a student keeps it: every length checked before any is measured
    n_ops_list = argcheck.counts("n_ops_list", n_ops_list, at_least=1, nonempty=True)
    results = []
    for n in n_ops_list:
        results.append(measure_launch_tax(n, numel, iters))
    return results
