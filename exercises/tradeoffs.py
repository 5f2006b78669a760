"""Exercise 9 · which model is right, and what graphs cost (CPU only).

Exercise 1 gave two answers for an eager step of N kernels launched tau apart: the lesson's sum
``T_compute + N * tau``, and a CPU-GPU pipeline in which a launch hides behind any kernel longer
than tau. They disagree, and this exercise finds where: the launch time at which a step turns
CPU-bound, and the tau that a measured step implies under each model (the H200's 7B decode step
is in the CPU-bound regime).

Graphs are not free either. ``enforce_eager=True`` in vLLM skips capture and keeps the memory the
graphs would have taken for the KV cache. The second half prices that trade: the graphs' memory
(one shared pool or a pool each), the KV-cache bytes one token needs, and the tokens of KV cache
the graphs cost.

The lines marked ``# given`` check the arguments (``coursekit/args.py``); keep them, and write
the rest. Run ``python -m exercises.tradeoffs`` to print the course's figures once you are done, and
``python -m pytest exercises -m ex9`` to check your work.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from coursekit import args
from coursekit.cli import run_exercise
from coursekit.lesson import tradeoff_figures


def eager_timeline(kernel_us: Sequence[float], launch_us: float) -> list[tuple[float, float, float]]:
    """The eager pipeline of exercise 1, kernel by kernel: one ``(launched, start, end)`` per kernel.

    Kernel k (k = 1, 2, ...) is launched at ``k * launch_us``, starts at ``max(k * launch_us, end
    of kernel k-1)`` and ends ``kernel_us[k-1]`` microseconds later. Times in microseconds, as
    floats, in kernel order; no kernels -> ``[]``. The last end, divided by 1e3, is exercise 1's
    ``simulate_eager_ms``.

    Errors: ``launch_us`` or a kernel time that is negative, NaN, infinite or not a number (a bool
    is not a number here) -> ``ValueError`` naming ``launch_us`` or ``kernel_us``.
    """
    kernel_us, launch_us = args.numbers("kernel_us", kernel_us), args.number("launch_us", launch_us)  # given
    raise NotImplementedError("exercise 9: eager_timeline")


def cpu_bound_launch_us(kernel_us: Sequence[float]) -> float:
    """The launch time tau* above which the step turns CPU-bound, in microseconds.

    A step is GPU-bound when only the first launch shows: the pipeline ends at ``launch_us +
    sum(kernel_us)``. That holds for every ``launch_us <= tau*``, where tau* is the smallest mean
    of the first m kernels, m = 1 .. N-1 (kernel m+1 must be launched, at ``(m+1) * launch_us``,
    before the first m kernels are done, at ``launch_us + t_1 + ... + t_m``). Above tau* the GPU
    waits for a launch at least once and the step takes longer. Fewer than two kernels ->
    ``math.inf`` (no launch is ever waited for).

    Errors: a kernel time that is negative, NaN, infinite or not a number (a bool is not a number
    here) -> ``ValueError`` naming ``kernel_us``.
    """
    kernel_us = args.numbers("kernel_us", kernel_us)  # given
    raise NotImplementedError("exercise 9: cpu_bound_launch_us")


def implied_launch_us(eager_ms: float, compute_ms: float, n_kernels: int) -> tuple[float, float]:
    """The tau a measured eager step implies under each model: ``(additive, cpu_bound)``, in us.

    additive (the lesson's sum, ``eager = compute + N * tau``): ``(eager_ms - compute_ms) * 1e3 /
    n_kernels``; cpu_bound (the launches hide the compute, ``eager = N * tau``): ``eager_ms * 1e3 /
    n_kernels``.

    Errors (``ValueError`` naming the argument): ``eager_ms`` or ``compute_ms`` negative, NaN,
    infinite or not a number (a bool is not a number here); ``compute_ms > eager_ms`` names ``compute_ms`` (no model explains a
    step shorter than its compute); ``n_kernels`` not an int (a bool is not) or below 1.
    """
    eager_ms, compute_ms = args.number("eager_ms", eager_ms), args.number("compute_ms", compute_ms)  # given
    n_kernels = args.count("n_kernels", n_kernels, at_least=1)  # given
    raise NotImplementedError("exercise 9: implied_launch_us")


def kv_bytes_per_token(n_layers: int, n_kv_heads: int, head_dim: int, dtype_bytes: int = 2) -> int:
    """Bytes of KV cache one token takes: ``2 * n_layers * n_kv_heads * head_dim * dtype_bytes``
    (a key and a value per layer and KV head), an int. Qwen2.5-7B in bf16 (28 layers, 4 KV heads of
    128): 2 * 28 * 4 * 128 * 2 = 57344 bytes, 56 KiB.

    Errors: an argument that is not an int (a bool is not) or is below 1 -> ``ValueError`` naming it.
    """
    n_layers, n_kv_heads, head_dim, dtype_bytes = (  # given
        args.count(name, value, at_least=1) for name, value in (  # given
            ("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim), ("dtype_bytes", dtype_bytes)))  # given
    raise NotImplementedError("exercise 9: kv_bytes_per_token")


def graph_memory_bytes(per_graph_bytes: Iterable[int], shared_pool: bool = True) -> int:
    """The memory a set of captured graphs holds, given each graph's own footprint in bytes (what
    capturing that graph alone reserves, e.g. exercise 8's ``capture_memory_bytes`` for an engine
    with one capture size).

    ``shared_pool=True`` (one pool, captured largest first, as vLLM and exercise 5 do): the smaller
    graphs reuse the largest one's memory, so the largest footprint; ``shared_pool=False`` (a pool
    per graph): the sum. No graphs -> 0. An int. ``per_graph_bytes`` may be any iterable (a
    generator too: read it once).

    Errors: a footprint that is not an int (a bool is not) or is negative -> ``ValueError`` naming
    ``per_graph_bytes``; ``shared_pool`` not a bool -> ``ValueError`` naming it.
    """
    per_graph_bytes = args.counts("per_graph_bytes", per_graph_bytes, at_least=0)  # given: a list now
    shared_pool = args.flag("shared_pool", shared_pool)  # given
    raise NotImplementedError("exercise 9: graph_memory_bytes")


def kv_tokens_forgone(graph_bytes: int, bytes_per_token: int) -> int:
    """Tokens of KV cache the graphs' memory could have held: whole tokens,
    ``graph_bytes // bytes_per_token``. What ``enforce_eager=True`` buys back.

    Errors (``ValueError`` naming the argument): ``graph_bytes`` not an int (a bool is not) or
    negative; ``bytes_per_token`` not an int (a bool is not) or below 1.
    """
    graph_bytes = args.count("graph_bytes", graph_bytes, at_least=0)  # given
    bytes_per_token = args.count("bytes_per_token", bytes_per_token, at_least=1)  # given
    raise NotImplementedError("exercise 9: kv_tokens_forgone")


if __name__ == "__main__":
    run_exercise(9, "ex9", lambda: tradeoff_figures(implied_launch_us, cpu_bound_launch_us, kv_bytes_per_token,
                                                    kv_tokens_forgone))
