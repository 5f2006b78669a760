"""Exercise 5 · batch-size buckets and padding.

A CUDA graph replays fixed shapes at fixed addresses, so a server captures one graph per batch
size in a short list (the *buckets*, vLLM's ``cudagraph_capture_sizes``), pads each real batch up
to the nearest captured size, and runs eagerly when a batch is larger than every bucket. Both of
vLLM 0.26.0's GPU model runners, V1 and V2, do this over the same list.

The lines marked ``# given`` check the arguments (``coursekit/argcheck.py``); keep them, and write
the rest. Check your work with ``python -m pytest exercises -m ex5``. On a CPU the runner is
tested with the course's stand-in for a captured graph (``coursekit.standin.capture_on_cpu``),
which keeps what matters here: static inputs, outputs overwritten by every replay, and memory
pools.
"""

from __future__ import annotations

from typing import Callable, Iterable

import torch

from coursekit import argcheck
from coursekit.standin import capture_on_cpu  # noqa: F401 - the CPU default for `capture`


def default_capture_sizes(max_size: int = 512) -> list[int]:
    """vLLM's default buckets, its V1 and V2 runners' alike: [1, 2, 4], then the multiples of 8
    below 256, then the multiples of 16 from 256 on, keeping only sizes ``<= max_size``,
    ascending. ``max_size`` not an int (a bool is not) or ``< 1`` -> ValueError naming ``max_size``.

    >>> len(default_capture_sizes(512))
    51
    >>> default_capture_sizes(8)
    [1, 2, 4, 8]
    >>> default_capture_sizes(300)[-4:]
    [248, 256, 272, 288]
    """
    max_size = argcheck.count("max_size", max_size, at_least=1)  # given
    raise NotImplementedError("exercise 5: default_capture_sizes")


def engine_capture_sizes(max_num_seqs: int = 256, num_speculative_tokens: int = 0,
                         max_num_batched_tokens: int = 8192) -> list[int]:
    """The sizes vLLM 0.26.0 captures for an engine's configuration when none are given
    (``VllmConfig._set_cudagraph_sizes`` in ``vllm/config/vllm.py``, shared by its V1 and V2
    model runners; the V1 runner's later rounding to whole requests for speculative decoding,
    ``adjust_cudagraph_sizes_for_spec_decode``, is not part of this list).

    A decode step of ``max_num_seqs`` requests holds up to ``max_num_seqs * (1 +
    num_speculative_tokens)`` tokens; vLLM captures up to twice that, never above 512 nor above
    ``max_num_batched_tokens`` (no batch is larger): the largest size is

        min(2 * max_num_seqs * (1 + num_speculative_tokens), 512, max_num_batched_tokens).

    The sizes are ``default_capture_sizes`` of that largest size, plus ``max_num_batched_tokens`` itself
    when it is ``<= largest`` and not yet a size (so the largest possible batch has its own
    graph even off the stride), ascending. The defaults are vLLM's for the ``LLM`` class on a
    GPU under 70 GiB, such as an RTX 4090. An argument that is not an int (a bool is not),
    ``max_num_seqs < 1``, ``num_speculative_tokens < 0`` or ``max_num_batched_tokens < 1`` ->
    ValueError naming the argument.

    >>> engine_capture_sizes(max_num_seqs=3)
    [1, 2, 4]
    >>> engine_capture_sizes(max_num_seqs=3, num_speculative_tokens=1)
    [1, 2, 4, 8]
    >>> engine_capture_sizes(max_num_seqs=3, max_num_batched_tokens=6)
    [1, 2, 4, 6]
    >>> engine_capture_sizes(max_num_seqs=256, max_num_batched_tokens=100)[-3:]
    [88, 96, 100]
    >>> len(engine_capture_sizes())
    51
    """
    max_num_seqs = argcheck.count("max_num_seqs", max_num_seqs, at_least=1)  # given
    num_speculative_tokens = argcheck.count("num_speculative_tokens", num_speculative_tokens, at_least=0)  # given
    max_num_batched_tokens = argcheck.count("max_num_batched_tokens", max_num_batched_tokens, at_least=1)  # given
    raise NotImplementedError("exercise 5: engine_capture_sizes")


def padded_size(n: int, capture_sizes: Iterable[int]) -> int | None:
    """The bucket for a batch of ``n`` rows: the smallest size ``>= n`` in ``capture_sizes``, or
    ``None`` when ``n`` is larger than every size (the batch runs eagerly).

    Sizes may come in any order and repeated, in any iterable (a list, a set, a generator: read
    it once; the given line reads it into a list). ``n`` not an int (a bool is not) or ``< 1`` ->
    ValueError naming ``n``; no sizes, or a size that is not an int ``>= 1`` -> ValueError naming
    ``capture_sizes``.
    """
    n = argcheck.count("n", n, at_least=1)  # given
    capture_sizes = argcheck.counts("capture_sizes", capture_sizes, at_least=1, nonempty=True)  # given: a list now
    raise NotImplementedError("exercise 5: padded_size")


def pad_rows(x: torch.Tensor, size: int, value: float = 0) -> torch.Tensor:
    """A new tensor of ``size`` rows (same dtype, device and row shape as ``x``): the first
    ``len(x)`` rows are ``x``, the rest are filled with ``value`` (0 when not given). ``x`` itself
    is not modified. ``size == len(x)`` pads nothing (still a new tensor); ``size < len(x)``, or
    ``size`` not an int -> ValueError naming ``size`` (never truncate: that would drop real rows);
    ``x`` not a tensor of at least one dimension -> ValueError naming ``x``.
    """
    x = argcheck.tensor("x", x, min_dim=1)  # given
    size = argcheck.count("size", size, at_least=len(x))  # given: never truncate
    raise NotImplementedError("exercise 5: pad_rows")


class BucketedGraphRunner:
    """One captured graph per bucket over a single static input buffer.

    Construction (defaults: ``capture_sizes=None``, ``warmup_iters=3``, ``pad_value=0``,
    ``capture=None``):
      * ``max_example`` not a tensor with at least one row -> ValueError naming ``max_example``.
      * One static input buffer, the attribute ``buffer`` (the given line of ``__call__`` reads
        it), shaped like ``max_example`` (``len(max_example)`` rows, each of ``max_example``'s row
        shape, not flattened; a 1-D ``max_example`` has scalar rows), owned by the runner (a copy
        of ``max_example``, never the caller's tensor itself).
      * ``capture_sizes`` defaults to ``default_capture_sizes(len(max_example))``; no sizes, or a
        size that is not an int in ``1..len(max_example)`` -> ValueError naming ``capture_sizes``.
      * One capture per size, of ``fn`` over the prefix ``buffer[:size]``:
        ``capture(fn, buffer[:size], warmup_iters=warmup_iters, pool=pool)``, largest size first,
        all graphs in one memory pool (the first graph's ``graph.pool()`` is the ``pool`` of every
        later capture). ``capture`` defaults to exercise 3's ``capture`` for CUDA tensors and to
        ``capture_on_cpu`` for CPU tensors.
      * ``capture_order``: the sizes in the order they were captured.
      * ``stats``: a dict counting the calls that replayed each size (key: the size) and the
        calls that ran eagerly (key: ``"eager"``).

    Calling ``runner(x)`` (the given line checks ``x`` against ``buffer``):
      * ``x`` must have the buffer's row shape (the same shape: rows of ``(3, 2)`` are not rows
        of ``(2, 3)`` nor of ``(6,)``, though they hold as many elements), dtype and device, and
        at least one row (ValueError naming ``x`` otherwise).
      * Find the bucket for ``len(x)``. None -> run ``fn(x)`` eagerly and return its result.
      * Otherwise the buffer's first ``len(x)`` rows hold ``x`` (copied in with ``copy_``: the
        graph reads the buffer's memory, not your variable) and the rest of the bucket holds
        ``pad_value``; that bucket's graph is replayed, and the result is the first ``len(x)``
        output rows as a fresh tensor (the graph overwrites its outputs on the next replay).
    """

    def __init__(
        self,
        fn: Callable[[torch.Tensor], torch.Tensor],
        max_example: torch.Tensor,
        capture_sizes: Iterable[int] | None = None,
        warmup_iters: int = 3,
        pad_value: float = 0,
        capture: Callable | None = None,
    ):
        max_example = argcheck.tensor("max_example", max_example, min_dim=1, min_rows=1)  # given
        if capture_sizes is not None:  # given: then a list of sizes in 1..len(max_example)
            capture_sizes = argcheck.counts("capture_sizes", capture_sizes, at_least=1, at_most=len(max_example),
                                        nonempty=True)  # given
        raise NotImplementedError("exercise 5: BucketedGraphRunner.__init__")

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = argcheck.tensor("x", x, row_shape=self.buffer.shape[1:], dtype=self.buffer.dtype, device=self.buffer.device,
                        min_rows=1)  # given: reads your self.buffer
        raise NotImplementedError("exercise 5: BucketedGraphRunner.__call__")
