"""Exercise 5 reference: batch-size buckets and padding. Rules: exercises/buckets.py."""

from __future__ import annotations

from collections import Counter
from typing import Callable, Iterable

import torch

from coursekit.standin import capture_on_cpu


def default_capture_sizes(max_size: int = 512) -> list[int]:
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
        raise ValueError(f"max_size: expected an int >= 1, got {max_size!r}")
    sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, max_size + 1, 16))
    return [s for s in sizes if s <= max_size]


def engine_capture_sizes(max_num_seqs: int = 256, num_speculative_tokens: int = 0,
                         max_num_batched_tokens: int = 8192) -> list[int]:
    for name, value, low in (("max_num_seqs", max_num_seqs, 1),
                             ("num_speculative_tokens", num_speculative_tokens, 0),
                             ("max_num_batched_tokens", max_num_batched_tokens, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name}: expected an int >= {low}, got {value!r}")
    largest = min(2 * max_num_seqs * (1 + num_speculative_tokens), 512, max_num_batched_tokens)
    sizes = default_capture_sizes(largest)
    if max_num_batched_tokens <= largest and max_num_batched_tokens not in sizes:
        sizes.append(max_num_batched_tokens)
    return sizes


def padded_size(n: int, capture_sizes: Iterable[int]) -> int | None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n: expected a batch size >= 1, got {n!r}")
    sizes = list(capture_sizes)
    if not sizes:
        raise ValueError("capture_sizes: expected at least one size, got none")
    fitting = [s for s in sizes if s >= n]
    return min(fitting) if fitting else None


def pad_rows(x: torch.Tensor, size: int, value: float = 0) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise ValueError(f"x: expected a tensor with at least one dimension, got {x!r}")
    if size < len(x):
        raise ValueError(f"size: expected at least len(x) = {len(x)} rows, got {size}")
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
        if not isinstance(max_example, torch.Tensor) or max_example.dim() < 1:
            raise ValueError(f"max_example: expected a tensor of rows, got {max_example!r}")
        max_rows = len(max_example)
        sizes = default_capture_sizes(max_rows) if capture_sizes is None else list(capture_sizes)
        if not sizes:
            raise ValueError("capture_sizes: expected at least one size, got none")
        for s in sizes:
            if isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= max_rows:
                raise ValueError(
                    f"capture_sizes: every size must be an int in 1..len(max_example) = "
                    f"1..{max_rows}, got {s!r}"
                )
        if capture is None:
            capture = _default_capture(max_example)
        self.fn = fn
        self.pad_value = pad_value
        self.capture_sizes = sorted(set(sizes))
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
        if (
            not isinstance(x, torch.Tensor)
            or x.dim() < 1
            or x.shape[1:] != self.buffer.shape[1:]
            or x.dtype != self.buffer.dtype
            or x.device != self.buffer.device
            or len(x) < 1
        ):
            got = f"{tuple(x.shape)} {x.dtype} on {x.device}" if isinstance(x, torch.Tensor) else x
            raise ValueError(
                f"x: expected a non-empty batch of rows shaped {tuple(self.buffer.shape[1:])}, "
                f"{self.buffer.dtype} on {self.buffer.device}, got {got}"
            )
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
