"""Exercise 6, solved another way: vLLM's tuple enum values and per-mode key sets."""

import enum
from dataclasses import dataclass

from .buckets import padded_size


class CUDAGraphMode(enum.Enum):
    NONE = 0
    PIECEWISE = 1
    FULL = 2
    FULL_DECODE_ONLY = (FULL, NONE)
    FULL_AND_PIECEWISE = (FULL, PIECEWISE)

    def decode_mode(self):
        return CUDAGraphMode(self.value[0]) if isinstance(self.value, tuple) else self

    def mixed_mode(self):
        return CUDAGraphMode(self.value[1]) if isinstance(self.value, tuple) else self


@dataclass(frozen=True)
class BatchDescriptor:
    num_tokens: int
    uniform_decode: bool = False


class CudagraphDispatcher:
    def __init__(self, mode, capture_sizes):
        self.mode = mode
        self.sizes = sorted(set(capture_sizes))
        self.keys = {CUDAGraphMode.FULL: set(), CUDAGraphMode.PIECEWISE: set()}
        self.descs = []
        mixed, decode = mode.mixed_mode(), mode.decode_mode()
        if mixed != CUDAGraphMode.NONE:
            for s in reversed(self.sizes):
                self.keys[mixed].add(BatchDescriptor(s))
                self.descs.append((mixed, BatchDescriptor(s)))
        if decode == CUDAGraphMode.FULL and mixed != CUDAGraphMode.FULL:
            for s in reversed(self.sizes):
                self.keys[CUDAGraphMode.FULL].add(BatchDescriptor(s, uniform_decode=True))
                self.descs.append((CUDAGraphMode.FULL, BatchDescriptor(s, uniform_decode=True)))

    def capture_descs(self):
        return self.descs

    def dispatch(self, num_tokens, uniform_decode=False):
        if num_tokens < 1:
            raise ValueError(f"num_tokens={num_tokens}: a batch has at least one token")
        eager = (CUDAGraphMode.NONE, BatchDescriptor(num_tokens))
        if self.mode == CUDAGraphMode.NONE or not self.sizes or num_tokens > self.sizes[-1]:
            return eager
        s = padded_size(num_tokens, self.sizes)
        if uniform_decode and BatchDescriptor(s, True) in self.keys[CUDAGraphMode.FULL]:
            return CUDAGraphMode.FULL, BatchDescriptor(s, True)
        for mode in (CUDAGraphMode.FULL, CUDAGraphMode.PIECEWISE):
            if BatchDescriptor(s) in self.keys[mode]:
                return mode, BatchDescriptor(s)
        return eager
