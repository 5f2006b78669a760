"""Exercise 6 reference: a vLLM-style CUDA-graph dispatcher (V1) and graph manager (V2).
Rules: exercises/dispatch.py."""

from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass
from typing import AbstractSet, Iterable

from coursekit import argcheck

from .buckets import padded_size


class CUDAGraphMode(enum.Enum):
    NONE = 0
    PIECEWISE = 1
    FULL = 2
    FULL_DECODE_ONLY = (FULL, NONE)
    FULL_AND_PIECEWISE = (FULL, PIECEWISE)

    def __bool__(self) -> bool:
        return self is not CUDAGraphMode.NONE

    def separate_routine(self) -> bool:
        return isinstance(self.value, tuple)

    def decode_mode(self) -> "CUDAGraphMode":
        return CUDAGraphMode(self.value[0]) if self.separate_routine() else self

    def mixed_mode(self) -> "CUDAGraphMode":
        return CUDAGraphMode(self.value[1]) if self.separate_routine() else self

    def has_full_cudagraphs(self) -> bool:
        return CUDAGraphMode.FULL in (self.decode_mode(), self.mixed_mode())

    def has_piecewise_cudagraphs(self) -> bool:
        return CUDAGraphMode.PIECEWISE in (self.decode_mode(), self.mixed_mode())


RUNTIME_MODES = frozenset({CUDAGraphMode.NONE, CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL})


@dataclass(frozen=True)
class BatchDescriptor:
    num_tokens: int
    num_reqs: int | None = None
    uniform: bool = False


class CudagraphDispatcher:
    def __init__(self, mode: CUDAGraphMode, capture_sizes: Iterable[int], max_num_seqs: int,
                 uniform_decode_query_len: int = 1):
        argcheck.instance("mode", mode, CUDAGraphMode)  # given
        capture_sizes = argcheck.counts("capture_sizes", capture_sizes, at_least=1)  # given: a list now
        max_num_seqs = argcheck.count("max_num_seqs", max_num_seqs, at_least=1)  # given
        uniform_decode_query_len = argcheck.count(  # given
            "uniform_decode_query_len", uniform_decode_query_len, at_least=1)  # given
        sizes = sorted(set(capture_sizes))
        self.max_num_seqs = max_num_seqs
        q = self.q = uniform_decode_query_len
        if mode and not sizes:
            raise ValueError(f"capture_sizes: mode {mode.name} needs at least one size")
        if mode.decode_mode() is CUDAGraphMode.FULL and q > 1:
            rounded = sorted({r for r in (-(-s // q) * q for s in sizes) if r <= sizes[-1]})
            if not rounded and q <= sizes[-1]:
                rounded = [q]
            if not rounded:
                raise ValueError(f"capture_sizes: no size {sizes} rounds up to a multiple of "
                                 f"uniform_decode_query_len {q} without passing the largest")
            sizes = rounded
        self.mode, self.capture_sizes = mode, sizes
        self._keys = {CUDAGraphMode.PIECEWISE: set(), CUDAGraphMode.FULL: set()}
        mixed = mode.mixed_mode()
        if mixed:
            for s in sizes:
                self._keys[mixed].add(BatchDescriptor(s) if mixed is CUDAGraphMode.PIECEWISE
                                      else BatchDescriptor(s, min(s, self.max_num_seqs), False))
        if mode.separate_routine() and mode.decode_mode() is CUDAGraphMode.FULL:
            for s in sizes:
                if q <= s <= q * self.max_num_seqs:
                    self._keys[CUDAGraphMode.FULL].add(BatchDescriptor(s, min(s // q, self.max_num_seqs), True))

    def keys(self) -> dict[CUDAGraphMode, set[BatchDescriptor]]:
        return {m: set(k) for m, k in self._keys.items()}

    def capture_descs(self) -> list[tuple[CUDAGraphMode, BatchDescriptor]]:
        return [(m, d) for m in (CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL)
                for d in sorted(self._keys[m], key=lambda d: d.num_tokens, reverse=True)]

    def dispatch(
        self, num_tokens: int, uniform_decode: bool = False,
        valid_modes: AbstractSet[CUDAGraphMode] | None = None,
        invalid_modes: AbstractSet[CUDAGraphMode] | None = None,
    ) -> tuple[CUDAGraphMode, BatchDescriptor]:
        num_tokens = argcheck.count("num_tokens", num_tokens, at_least=1)  # given
        allowed = set(valid_modes or RUNTIME_MODES) - set(invalid_modes or ())
        if not allowed:
            raise ValueError(f"invalid_modes: {invalid_modes} leaves none of valid_modes {valid_modes}")
        eager = (CUDAGraphMode.NONE, BatchDescriptor(num_tokens))
        if not self.mode or num_tokens > self.capture_sizes[-1] or allowed <= {CUDAGraphMode.NONE}:
            return eager
        p = padded_size(num_tokens, self.capture_sizes)
        if uniform_decode and self.mode.separate_routine():
            key = BatchDescriptor(p, min(p // self.q, self.max_num_seqs), True)
        else:
            key = BatchDescriptor(p, min(p, self.max_num_seqs), False)
        if CUDAGraphMode.FULL in allowed and key in self._keys[CUDAGraphMode.FULL]:
            return CUDAGraphMode.FULL, key
        if CUDAGraphMode.PIECEWISE in allowed and BatchDescriptor(p) in self._keys[CUDAGraphMode.PIECEWISE]:
            return CUDAGraphMode.PIECEWISE, BatchDescriptor(p)
        return eager


# ----------------------------------------------------------------------------- the V2 runner


@dataclass(frozen=True)
class BatchExecutionDescriptor:
    cg_mode: CUDAGraphMode
    num_tokens: int
    num_reqs: int | None
    uniform_token_count: int | None = None


def get_uniform_token_count(num_reqs: int, num_tokens: int, max_query_len: int) -> int | None:
    num_reqs = argcheck.count("num_reqs", num_reqs, at_least=1)  # given
    num_tokens = argcheck.count("num_tokens", num_tokens, at_least=num_reqs)  # given: a token per request
    max_query_len = argcheck.count("max_query_len", max_query_len, at_least=1)  # given
    return max_query_len if num_tokens == max_query_len * num_reqs else None


class CudaGraphManager:
    def __init__(self, mode: CUDAGraphMode, capture_sizes: Iterable[int], max_num_seqs: int,
                 decode_query_len: int = 1):
        argcheck.instance("mode", mode, CUDAGraphMode)  # given
        capture_sizes = argcheck.counts("capture_sizes", capture_sizes, at_least=1)  # given: a list now
        max_num_seqs = argcheck.count("max_num_seqs", max_num_seqs, at_least=1)  # given
        decode_query_len = argcheck.count("decode_query_len", decode_query_len, at_least=1)  # given
        q, sizes = decode_query_len, sorted(set(capture_sizes)) if mode else []
        # PIECEWISE first: capture_descs walks this dict in the order graphs are captured.
        self._descs: dict[CUDAGraphMode, list[BatchExecutionDescriptor]] = {
            CUDAGraphMode.PIECEWISE: [], CUDAGraphMode.FULL: []}
        self._by_size: dict[int, list[BatchExecutionDescriptor]] = {}
        decode, mixed_mode = mode.decode_mode(), mode.mixed_mode()
        for s in sizes:
            if mode.separate_routine() and decode:
                r = -(-s // q) * q
                d = BatchExecutionDescriptor(decode, r, r // q, q)
                if r <= min(q * max_num_seqs, sizes[-1]) and d not in self._descs[decode]:
                    self._add(d)
            if mixed_mode:
                self._add(BatchExecutionDescriptor(
                    mixed_mode, s, min(s, max_num_seqs) if mixed_mode is CUDAGraphMode.FULL else None))
        self._sizes = sorted(self._by_size)

    def _add(self, d: BatchExecutionDescriptor) -> None:
        self._descs[d.cg_mode].append(d)
        self._by_size.setdefault(d.num_tokens, []).append(d)

    def capture_descs(self) -> list[BatchExecutionDescriptor]:
        return [d for descs in self._descs.values() for d in sorted(descs, key=lambda d: -d.num_tokens)]

    def candidates(self, num_tokens: int) -> list[BatchExecutionDescriptor]:
        num_tokens = argcheck.count("num_tokens", num_tokens, at_least=1)  # given
        i = bisect.bisect_left(self._sizes, num_tokens)
        return list(self._by_size[self._sizes[i]]) if i < len(self._sizes) else []

    def dispatch(self, num_reqs: int, num_tokens: int,
                 uniform_token_count: int | None = None) -> BatchExecutionDescriptor:
        num_reqs = argcheck.count("num_reqs", num_reqs, at_least=1)  # given
        num_tokens = argcheck.count("num_tokens", num_tokens, at_least=num_reqs)  # given: a token per request
        if uniform_token_count is not None:  # given
            argcheck.count("uniform_token_count", uniform_token_count, at_least=1)  # given
        for d in self.candidates(num_tokens):
            if (d.uniform_token_count in (None, uniform_token_count)
                    and (d.num_reqs is None or d.num_reqs >= num_reqs)):
                return d
        return BatchExecutionDescriptor(CUDAGraphMode.NONE, num_tokens, num_reqs)
