"""Exercise 5 reference: batch-size buckets and padding. Rules: exercises/buckets.py."""

from __future__ import annotations

from collections import Counter
from typing import Callable, Iterable

import torch

from coursekit import argcheck
from coursekit.standin import capture_on_cpu


def default_capture_sizes(max_size: int = 512) -> list[int]:
    max_size = argcheck.count("max_size", max_size, at_least=1)  # given
    sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, max_size + 1, 16))
    return [s for s in sizes if s <= max_size]


def engine_capture_sizes(max_num_seqs: int = 256, num_speculative_tokens: int = 0,
                         max_num_batched_tokens: int = 8192) -> list[int]:
    max_num_seqs = argcheck.count("max_num_seqs", max_num_seqs, at_least=1)  # given
    num_speculative_tokens = argcheck.count("num_speculative_tokens", num_speculative_tokens, at_least=0)  # given
    max_num_batched_tokens = argcheck.count("max_num_batched_tokens", max_num_batched_tokens, at_least=1)  # given
    largest = min(2 * max_num_seqs * (1 + num_speculative_tokens), 512, max_num_batched_tokens)
    sizes = default_capture_sizes(largest)
    if max_num_batched_tokens <= largest and max_num_batched_tokens not in sizes:
        sizes.append(max_num_batched_tokens)
    return sizes


def padded_size(n: int, capture_sizes: Iterable[int]) -> int | None:
    n = argcheck.count("n", n, at_least=1)  # given
    capture_sizes = argcheck.counts("capture_sizes", capture_sizes, at_least=1, nonempty=True)  # given: a list now
    fitting = [s for s in capture_sizes if s >= n]
    return min(fitting) if fitting else None


def pad_rows(x: torch.Tensor, size: int, value: float = 0) -> torch.Tensor:
    x = argcheck.tensor("x", x, min_dim=1)  # given
    size = argcheck.count("size", size, at_least=len(x))  # given: never truncate
    out = x.new_full((size, *x.shape[1:]), value)
    out[: len(x)] = x
    return out


class BucketedGraphRunner:
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
        if capture_sizes is None:
            capture_sizes = default_capture_sizes(len(max_example))
        if capture is None:
            capture = _default_capture(max_example)
        self.fn = fn
        self.pad_value = pad_value
        self.capture_sizes = sorted(set(capture_sizes))
        self.buffer = max_example.clone()
        self.graphs = {}
        self.capture_order = []
        pool = None
        for size in sorted(self.capture_sizes, reverse=True):
            graph = capture(fn, self.buffer[:size], warmup_iters=warmup_iters, pool=pool)
            pool = graph.graph.pool()  # every later (smaller) graph shares the largest one's pool
            self.graphs[size] = graph
            self.capture_order.append(size)
        self.stats = Counter()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = argcheck.tensor("x", x, row_shape=self.buffer.shape[1:], dtype=self.buffer.dtype, device=self.buffer.device,
                        min_rows=1)  # given: reads your self.buffer
        n = len(x)
        size = padded_size(n, self.capture_sizes)
        if size is None:
            self.stats["eager"] += 1
            return self.fn(x)
        self.buffer[:n].copy_(x)
        self.buffer[n:size].fill_(self.pad_value)
        out = self.graphs[size].replay()
        self.stats[size] += 1
        return out[:n].clone()


def _default_capture(example: torch.Tensor) -> Callable:
    if example.is_cuda:
        from .capture import capture  # exercise 3

        return capture
    return capture_on_cpu
