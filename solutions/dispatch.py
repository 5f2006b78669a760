"""Exercise 6 reference: a vLLM-style CUDA-graph dispatcher. Rules: exercises/dispatch.py."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable

from .buckets import padded_size


class CUDAGraphMode(enum.Enum):
    NONE = 0
    PIECEWISE = 1
    FULL = 2
    FULL_DECODE_ONLY = 3
    FULL_AND_PIECEWISE = 4

    def decode_mode(self) -> "CUDAGraphMode":
        return _ROUTINES[self][0]

    def mixed_mode(self) -> "CUDAGraphMode":
        return _ROUTINES[self][1]


# mode -> (mode for uniform-decode batches, mode for mixed prefill/decode batches)
_ROUTINES = {
    CUDAGraphMode.NONE: (CUDAGraphMode.NONE, CUDAGraphMode.NONE),
    CUDAGraphMode.PIECEWISE: (CUDAGraphMode.PIECEWISE, CUDAGraphMode.PIECEWISE),
    CUDAGraphMode.FULL: (CUDAGraphMode.FULL, CUDAGraphMode.FULL),
    CUDAGraphMode.FULL_DECODE_ONLY: (CUDAGraphMode.FULL, CUDAGraphMode.NONE),
    CUDAGraphMode.FULL_AND_PIECEWISE: (CUDAGraphMode.FULL, CUDAGraphMode.PIECEWISE),
}


@dataclass(frozen=True)
class BatchDescriptor:
    num_tokens: int
    uniform_decode: bool = False


class CudagraphDispatcher:
    def __init__(self, mode: CUDAGraphMode, capture_sizes: Iterable[int]):
        if not isinstance(mode, CUDAGraphMode):
            raise ValueError(f"mode: expected a CUDAGraphMode, got {mode!r}")
        sizes = list(capture_sizes)
        for s in sizes:
            if isinstance(s, bool) or not isinstance(s, int) or s < 1:
                raise ValueError(f"capture_sizes: expected ints >= 1, got {s!r}")
        self.mode = mode
        self.capture_sizes = sorted(set(sizes), reverse=True)
        descs = []
        if mode.mixed_mode() is not CUDAGraphMode.NONE:
            descs += [(mode.mixed_mode(), BatchDescriptor(s, False)) for s in self.capture_sizes]
        if mode.decode_mode() is CUDAGraphMode.FULL and mode.mixed_mode() is not CUDAGraphMode.FULL:
            descs += [(CUDAGraphMode.FULL, BatchDescriptor(s, True)) for s in self.capture_sizes]
        self._descs = descs
        self._captured = set(descs)

    def capture_descs(self) -> list[tuple[CUDAGraphMode, BatchDescriptor]]:
        return list(self._descs)

    def dispatch(
        self, num_tokens: int, uniform_decode: bool = False
    ) -> tuple[CUDAGraphMode, BatchDescriptor]:
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 1:
            raise ValueError(f"num_tokens: expected an int >= 1, got {num_tokens!r}")
        unpadded = (CUDAGraphMode.NONE, BatchDescriptor(num_tokens, uniform_decode))
        if not self._descs:
            return unpadded
        size = padded_size(num_tokens, self.capture_sizes)
        if size is None:
            return unpadded
        candidates = [(self.mode.mixed_mode(), BatchDescriptor(size, False))]
        if uniform_decode:
            candidates.insert(0, (CUDAGraphMode.FULL, BatchDescriptor(size, True)))
        for candidate in candidates:
            if candidate in self._captured:
                return candidate
        return unpadded
