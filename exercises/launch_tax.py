"""Exercise 2 · measuring the launch tax (the lesson's Part A).

Run a chain of ``n_ops`` tiny kernels (``coursekit.measurements.tiny_op_chain``) two ways:
eagerly, where the CPU launches every kernel, and as one captured CUDA graph, replayed with a
single launch. The difference per run is the launch tax; a sweep over chain lengths and exercise
1's ``fit_launch_model`` turn it into a cost per kernel.

The lines marked ``# given`` check the arguments (``coursekit/argcheck.py``) and that there is a
GPU; keep them, and write the rest. Check your work with ``python -m pytest exercises -m ex2``
(the timer is tested on the CPU; the rest needs a GPU: ``python -m pytest exercises -m "ex2 and
gpu"``). Then see it for yourself: ``python -m coursekit.lab launch-tax``.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch  # noqa: F401 - you will need it

from coursekit import argcheck
from coursekit.measurements import LaunchTax, tiny_op_chain  # noqa: F401 - given; use them


def time_ms(fn: Callable[[], object], iters: int = 100, warmup: int = 10) -> float:
    """Mean milliseconds per call of ``fn()``, as a float.

    Call ``fn`` exactly ``warmup + iters`` times: ``warmup`` untimed calls first (first calls pay
    for allocation, caching and autotuning), then ``iters`` timed ones; return the timed calls'
    total divided by ``iters`` (true division), in ms. The warm-up is never part of the result.

    * With CUDA (``torch.cuda.is_available()``): kernels run asynchronously, so a CPU clock would
      only time the launches. The result is the GPU time of the work the timed calls queued, read
      from CUDA events (``torch.cuda.Event(enable_timing=True)``, ``elapsed_time`` is in ms): all
      of that work and none of the warm-up's, and ``time_ms`` returns only once it is done.
    * Without CUDA: a monotonic clock (``time.perf_counter``) around the timed calls; not the
      wall clock ``time.time``, which jumps when the system clock is set.

    ``iters`` not an int (a bool is not) or below 1 -> ValueError naming ``iters``; ``warmup`` not
    an int or below 0 -> ValueError naming ``warmup`` (``iters=1`` and ``warmup=0`` are fine).
    """
    iters, warmup = argcheck.count("iters", iters, at_least=1), argcheck.count("warmup", warmup, at_least=0)  # given
    raise NotImplementedError("exercise 2: time_ms")


def measure_launch_tax(n_ops: int = 200, numel: int = 1024, iters: int = 100) -> LaunchTax:
    """The lesson's Part A on this machine's GPU: a chain of ``n_ops`` tiny kernels,
    ``tiny_op_chain(x, n_ops)`` on ``x``, ``numel`` random float32 values on the GPU (not zeros),
    timed with ``time_ms(..., iters=iters)`` twice: run eagerly, and as replays of one
    ``torch.cuda.CUDAGraph`` that captured one call of the chain on a static copy of ``x``, after
    a warm-up call on a side stream (a new ``torch.cuda.Stream()`` that first waits for the
    current stream; the current stream then waits for it) and captured on that same stream
    (``torch.cuda.graph(graph, stream=side)``), as exercise 3's ``capture`` does.

    Return ``LaunchTax(n_ops, numel, eager_us, graph_us, replay_matches_eager)``: the two times in
    microseconds per run of the chain, and whether a replay's output equals the eager result
    exactly (``torch.equal``). The arguments are checked first, on any machine: ``n_ops``,
    ``numel`` or ``iters`` not an int (a bool is not) or below 1 -> ValueError naming it; then no
    CUDA -> a plain RuntimeError (not a ValueError: no argument is wrong) saying a CUDA device is
    needed.
    """
    n_ops, numel, iters = (argcheck.count(name, value, at_least=1)  # given
                           for name, value in (("n_ops", n_ops), ("numel", numel), ("iters", iters)))  # given
    argcheck.need_cuda("measure_launch_tax")  # given
    raise NotImplementedError("exercise 2: measure_launch_tax")


def sweep_launch_tax(
    n_ops_list: Sequence[int], numel: int = 1024, iters: int = 100
) -> list[LaunchTax]:
    """Call this module's ``measure_launch_tax(n, numel=numel, iters=iters)`` for every chain
    length ``n`` in ``n_ops_list``, in that order, and return their results as a list.

    Fitting a line through the results gives this GPU's two slopes (exercise 1):
    ``fit_launch_model([r.n_ops ...], [r.eager_us / 1e3 ...])`` -> µs per eager kernel launch,
    ``fit_launch_model([r.n_ops ...], [r.graph_us / 1e3 ...])`` -> µs per kernel node in a graph.
    An empty ``n_ops_list``, or a length in it that is not an int >= 1 (a bool is not) ->
    ValueError naming ``n_ops_list``, on any machine (it needs no GPU to tell).
    """
    n_ops_list = argcheck.counts("n_ops_list", n_ops_list, at_least=1, nonempty=True)  # given: a list now
    raise NotImplementedError("exercise 2: sweep_launch_tax")
