"""Exercise 6 · a vLLM-style CUDA-graph dispatcher (CPU only).

vLLM decides, for every batch, whether to replay a FULL graph (the whole forward pass), a
PIECEWISE graph (everything between attention calls; attention runs eagerly) or nothing. The
``cudagraph_mode`` setting says which graphs exist for uniform-decode batches (every request adds
one token) and which for mixed prefill/decode batches; the dispatcher captures the matching
``(mode, BatchDescriptor)`` keys and, at run time, picks the best captured key for a batch.

Check your work with ``python -m pytest exercises -m ex6``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable

from .buckets import padded_size  # noqa: F401  (you will need it)


class CUDAGraphMode(enum.Enum):
    """Which graphs to use. Each mode names a pair (mode for uniform-decode batches, mode for
    mixed batches):

    ====================  =====================
    mode                  (decode, mixed)
    ====================  =====================
    NONE                  (NONE, NONE)
    PIECEWISE             (PIECEWISE, PIECEWISE)
    FULL                  (FULL, FULL)
    FULL_DECODE_ONLY      (FULL, NONE)
    FULL_AND_PIECEWISE    (FULL, PIECEWISE)
    ====================  =====================
    """

    NONE = 0
    PIECEWISE = 1
    FULL = 2
    FULL_DECODE_ONLY = 3
    FULL_AND_PIECEWISE = 4

    def decode_mode(self) -> "CUDAGraphMode":
        """The first element of the pair above."""
        raise NotImplementedError("exercise 6: CUDAGraphMode.decode_mode")

    def mixed_mode(self) -> "CUDAGraphMode":
        """The second element of the pair above."""
        raise NotImplementedError("exercise 6: CUDAGraphMode.mixed_mode")


@dataclass(frozen=True)
class BatchDescriptor:
    """The key of one captured graph: a (padded) token count, and whether the batch is a uniform
    decode batch. Frozen, so it can key a dict."""

    num_tokens: int
    uniform_decode: bool = False


class CudagraphDispatcher:
    """Decides which captured graph, if any, runs a batch.

    ``capture_descs()`` lists the ``(mode, BatchDescriptor)`` pairs to capture, in order:
      1. if ``mode.mixed_mode()`` is not NONE: ``(mode.mixed_mode(), BatchDescriptor(s, False))``
         for every capture size ``s``, largest first;
      2. then, if ``mode.decode_mode()`` is FULL and ``mode.mixed_mode()`` is not FULL:
         ``(FULL, BatchDescriptor(s, True))`` for every size, largest first.

    ``dispatch(num_tokens, uniform_decode=False)`` returns ``(mode, BatchDescriptor)``:
      * NONE with the unpadded descriptor ``BatchDescriptor(num_tokens, uniform_decode)`` when the
        mode is NONE or ``num_tokens`` is larger than every capture size;
      * otherwise, with ``s = padded_size(num_tokens, capture_sizes)``: ``(FULL, BD(s, True))``
        for a uniform-decode batch if that was captured; else ``(mixed_mode(), BD(s, False))`` if
        that was captured; else NONE with the unpadded descriptor.
    Invariant: it never returns a mode other than NONE with a descriptor that
    ``capture_descs()`` did not list. ``num_tokens < 1`` -> ValueError naming ``num_tokens``.
    """

    def __init__(self, mode: CUDAGraphMode, capture_sizes: Iterable[int]):
        raise NotImplementedError("exercise 6: CudagraphDispatcher.__init__")

    def capture_descs(self) -> list[tuple[CUDAGraphMode, BatchDescriptor]]:
        raise NotImplementedError("exercise 6: CudagraphDispatcher.capture_descs")

    def dispatch(
        self, num_tokens: int, uniform_decode: bool = False
    ) -> tuple[CUDAGraphMode, BatchDescriptor]:
        raise NotImplementedError("exercise 6: CudagraphDispatcher.dispatch")
