"""Exercise 9 · which model is right, and what graphs cost (CPU only).

Exercise 1 gave two answers for an eager step of N kernels launched tau apart: the lesson's sum
``T_compute + N * tau``, and a CPU-GPU pipeline in which a launch hides behind any kernel longer
than tau. They disagree, and this exercise finds where: the launch time at which a step turns
CPU-bound, and the tau that a measured step implies under each model (the H200's 7B decode step
is in the CPU-bound regime).

Graphs are not free either: they hold GPU memory. ``enforce_eager=True`` in vLLM skips capture,
and what that memory is then worth depends on which of vLLM 0.26.0's two GPU model runners sizes
the KV cache: the V1 runner takes its estimate of the graphs' memory out of the KV cache's budget,
so eager gets those tokens back; the V2 runner (the default for dense models, the lesson's
Qwen2.5-7B among them) sizes the cache without the graphs and captures them afterwards, so they
cost no tokens. The second half prices that trade: the graphs' memory (one shared pool or a pool
each), the KV-cache bytes one token needs, and the tokens of KV cache the graphs cost under each
runner.

The lines marked ``# given`` check the arguments (``coursekit/argcheck.py``); keep them, and write
the rest. Run ``python -m exercises.tradeoffs`` to print the course's figures once you are done, and
``python -m pytest exercises -m ex9`` to check your work.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from coursekit import argcheck
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
    kernel_us, launch_us = argcheck.numbers("kernel_us", kernel_us), argcheck.number("launch_us", launch_us)  # given
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
    kernel_us = argcheck.numbers("kernel_us", kernel_us)  # given
    raise NotImplementedError("exercise 9: cpu_bound_launch_us")


def implied_launch_us(eager_ms: float, compute_ms: float, n_kernels: int) -> tuple[float, float]:
    """The tau a measured eager step implies under each model: ``(additive, cpu_bound)``, in us.

    additive (the lesson's sum, ``eager = compute + N * tau``): ``(eager_ms - compute_ms) * 1e3 /
    n_kernels``; cpu_bound (the launches hide the compute, ``eager = N * tau``): ``eager_ms * 1e3 /
    n_kernels``.

    Errors (``ValueError`` naming the argument): ``eager_ms`` or ``compute_ms`` negative, NaN,
    infinite or not a number (a bool is not a number here); ``compute_ms > eager_ms`` names
    ``compute_ms`` (no model explains a step shorter than its compute); ``n_kernels`` not an int (a
    bool is not) or below 1.
    """
    eager_ms, compute_ms = argcheck.number("eager_ms", eager_ms), argcheck.number("compute_ms", compute_ms)  # given
    n_kernels = argcheck.count("n_kernels", n_kernels, at_least=1)  # given
    raise NotImplementedError("exercise 9: implied_launch_us")


def kv_bytes_per_token(n_layers: int, n_kv_heads: int, head_dim: int, dtype_bytes: int = 2) -> int:
    """Bytes of KV cache one token takes: ``2 * n_layers * n_kv_heads * head_dim * dtype_bytes``
    (a key and a value per layer and KV head), an int. Qwen2.5-7B in bf16 (28 layers, 4 KV heads of
    128): 2 * 28 * 4 * 128 * 2 = 57344 bytes, 56 KiB.

    Errors: an argument that is not an int (a bool is not) or is below 1 -> ``ValueError`` naming it.
    """
    n_layers, n_kv_heads, head_dim, dtype_bytes = (  # given
        argcheck.count(name, value, at_least=1) for name, value in (  # given
            ("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim),  # given
            ("dtype_bytes", dtype_bytes)))  # given
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
    per_graph_bytes = argcheck.counts("per_graph_bytes", per_graph_bytes, at_least=0)  # given: a list now
    shared_pool = argcheck.flag("shared_pool", shared_pool)  # given
    raise NotImplementedError("exercise 9: graph_memory_bytes")


def kv_tokens_forgone(graph_bytes: int, bytes_per_token: int, runner: str = "v1") -> int:
    """Tokens of KV cache that the graphs' memory costs under vLLM 0.26.0's GPU model runner
    ``runner``: what ``enforce_eager=True`` buys back. An int, whole tokens.

    - ``runner="v1"`` (the default; the V1 runner, ``vllm/v1/worker/gpu_model_runner.py``): before
      the KV cache is sized, ``Worker.determine_available_memory`` (``vllm/v1/worker/gpu_worker.py``,
      lines 500 to 545) asks the runner's ``profile_cudagraph_memory`` for the graphs' memory and,
      with ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` at its default 1, takes it out of the cache's
      budget. The cache loses whole tokens: ``graph_bytes // bytes_per_token``.
    - ``runner="v2"`` (the V2 runner, ``vllm/v1/worker/gpu/model_runner.py``; vLLM's default for
      dense generate models such as the lesson's Qwen2.5-7B, ``VllmConfig.use_v2_model_runner``):
      its ``profile_cudagraph_memory`` returns 0 (line 705), so the cache is sized as if there were
      no graphs; they are captured afterwards, out of the memory ``gpu_memory_utilization`` leaves
      free. 0 tokens, whatever ``graph_bytes`` is (eager then buys back only that headroom, and
      too little headroom fails at capture with out of memory).

    Errors (``ValueError`` naming the argument): ``graph_bytes`` not an int (a bool is not) or
    negative; ``bytes_per_token`` not an int (a bool is not) or below 1; ``runner`` anything but
    the string ``"v1"`` or ``"v2"`` (not ``"V1"``, not None, not a bool) -> ``ValueError`` naming
    ``runner``.
    """
    graph_bytes = argcheck.count("graph_bytes", graph_bytes, at_least=0)  # given
    bytes_per_token = argcheck.count("bytes_per_token", bytes_per_token, at_least=1)  # given
    runner = argcheck.one_of("runner", runner, ("v1", "v2"))  # given
    raise NotImplementedError("exercise 9: kv_tokens_forgone")


if __name__ == "__main__":
    run_exercise(9, "ex9", lambda: tradeoff_figures(implied_launch_us, cpu_bound_launch_us, kv_bytes_per_token,
                                                    kv_tokens_forgone))
