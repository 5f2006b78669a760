"""Exercise 6 · a vLLM-style CUDA-graph dispatcher (CPU only).

vLLM decides, for every batch, whether to replay a FULL graph (the whole forward pass), a
PIECEWISE graph (everything between attention calls; attention runs eagerly) or nothing. The
``cudagraph_mode`` setting says which graphs exist for uniform-decode batches (every request adds
one token) and which for mixed prefill/decode batches; the dispatcher captures the matching
``(mode, BatchDescriptor)`` keys and, at run time, picks the best captured key for a batch.

The lines marked ``# given`` check the arguments (``coursekit/args.py``); keep them, and write
the rest. Check your work with ``python -m pytest exercises -m ex6``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import AbstractSet, Iterable

from coursekit import args

from .buckets import padded_size  # noqa: F401  (you will need it)


class CUDAGraphMode(enum.Enum):
    """Which graphs to use, with vLLM 0.26.0's values (``vllm/config/compilation.py``). NONE,
    PIECEWISE and FULL are also the *runtime* modes ``dispatch`` returns. A two-routine mode's
    value is the tuple of two runtime modes' values, (mode for uniform-decode batches, mode for
    mixed batches): ``FULL_DECODE_ONLY.value == (2, 0)``, FULL graphs for uniform decode and none
    for mixed batches.

    ====================  ======  ======================
    mode                  value   (decode, mixed)
    ====================  ======  ======================
    NONE                  0       (NONE, NONE)
    PIECEWISE             1       (PIECEWISE, PIECEWISE)
    FULL                  2       (FULL, FULL)
    FULL_DECODE_ONLY      (2, 0)  (FULL, NONE)
    FULL_AND_PIECEWISE    (2, 1)  (FULL, PIECEWISE)
    ====================  ======  ======================

    A mode is falsy only when it is NONE (``if mode:`` reads "graphs are on"), as in vLLM.
    """

    NONE = 0
    PIECEWISE = 1
    FULL = 2
    FULL_DECODE_ONLY = (FULL, NONE)
    FULL_AND_PIECEWISE = (FULL, PIECEWISE)

    def __bool__(self) -> bool:
        return self is not CUDAGraphMode.NONE

    def separate_routine(self) -> bool:
        """True for the two-routine modes (their value is a pair)."""
        raise NotImplementedError("exercise 6: CUDAGraphMode.separate_routine")

    def decode_mode(self) -> "CUDAGraphMode":
        """The mode for uniform-decode batches: the pair's first element, or the mode itself."""
        raise NotImplementedError("exercise 6: CUDAGraphMode.decode_mode")

    def mixed_mode(self) -> "CUDAGraphMode":
        """The mode for mixed batches: the pair's second element, or the mode itself."""
        raise NotImplementedError("exercise 6: CUDAGraphMode.mixed_mode")

    def has_full_cudagraphs(self) -> bool:
        """True when some batches replay a FULL graph (FULL is one of its runtime modes)."""
        raise NotImplementedError("exercise 6: CUDAGraphMode.has_full_cudagraphs")

    def has_piecewise_cudagraphs(self) -> bool:
        """True when some batches replay PIECEWISE graphs."""
        raise NotImplementedError("exercise 6: CUDAGraphMode.has_piecewise_cudagraphs")


#: The modes ``dispatch`` may return (vLLM's ``CUDAGraphMode.valid_runtime_modes()``).
RUNTIME_MODES = frozenset({CUDAGraphMode.NONE, CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL})


@dataclass(frozen=True)
class BatchDescriptor:
    """The key of one captured graph (vLLM's ``vllm/forward_context.py``, without its LoRA
    fields): a padded token count, the number of requests a FULL graph was captured for (None
    for PIECEWISE graphs, which serve any number), and whether the batch is uniform (every
    request adds ``uniform_decode_query_len`` tokens). Frozen, so it can key a dict."""

    num_tokens: int
    num_reqs: int | None = None
    uniform: bool = False


class CudagraphDispatcher:
    """Decides which captured graph, if any, runs a batch: vLLM 0.26.0's
    ``vllm/v1/cudagraph_dispatcher.py`` without LoRA.

    ``CudagraphDispatcher(mode, capture_sizes, max_num_seqs, uniform_decode_query_len=1)``:
    ``q = uniform_decode_query_len`` is the tokens each request adds in a uniform-decode step
    (``1 + num_speculative_tokens``). When ``mode.decode_mode()`` is FULL and ``q > 1``, every
    size is first rounded up to a multiple of ``q``, and rounded sizes above the largest given
    size are dropped; if none is left, the sizes are ``[q]`` when ``q`` is at most the largest
    given size (else ValueError naming ``capture_sizes``). This is vLLM's
    ``CompilationConfig.adjust_cudagraph_sizes_for_spec_decode``: a uniform batch then always
    pads to a whole number of requests. ``capture_sizes`` is a list of the sizes so kept,
    ascending, each once.

    The keys (``keys()``: a dict ``{PIECEWISE: set, FULL: set}`` of ``BatchDescriptor``, both
    entries always there, a set each, empty when no graph of that mode is captured):
      1. if ``mode.mixed_mode()`` is not NONE, one per size ``s``: for PIECEWISE,
         ``BatchDescriptor(s)``; for FULL, ``BatchDescriptor(s, min(s, max_num_seqs), False)``;
      2. if ``mode`` is a two-routine mode whose ``decode_mode()`` is FULL, one FULL key per size
         ``s`` with ``q <= s <= q * max_num_seqs``: ``BatchDescriptor(s, min(s // q,
         max_num_seqs), True)``. No decode graph is bigger than ``max_num_seqs`` requests.
    ``capture_descs()``: a list of ``(mode, BatchDescriptor)`` tuples, one for every key, the
    PIECEWISE keys first, then the FULL keys, each group largest ``num_tokens`` first (the order
    graphs are captured in).

    ``dispatch(num_tokens, uniform_decode=False, valid_modes=None, invalid_modes=None)`` returns
    the tuple ``(runtime mode, BatchDescriptor)``:
      * allowed runtime modes: ``valid_modes`` (None or empty: ``RUNTIME_MODES``), minus ``invalid_modes`` (a
        batch with cascade attention, say, cannot run a FULL graph). None allowed -> ValueError
        naming ``invalid_modes``.
      * ``(NONE, BatchDescriptor(num_tokens))`` when the mode is NONE, ``num_tokens`` is above
        every size, or only NONE is allowed. That eager descriptor is always exactly
        ``BatchDescriptor(num_tokens)``: ``num_reqs`` None and ``uniform`` False (the bool),
        whatever ``uniform_decode`` says.
      * otherwise pad to ``p = padded_size(num_tokens, capture_sizes)``. The batch counts as
        uniform only if ``uniform_decode`` and the mode is a two-routine mode; then its key is
        ``BatchDescriptor(p, min(p // q, max_num_seqs), True)``, else ``BatchDescriptor(p,
        min(p, max_num_seqs), False)``. If FULL is allowed and that key is a FULL key: ``(FULL,
        key)``. Else, if PIECEWISE is allowed and ``BatchDescriptor(p)`` is a PIECEWISE key:
        ``(PIECEWISE, BatchDescriptor(p))``. Else ``(NONE, BatchDescriptor(num_tokens))``.
    It never returns FULL or PIECEWISE with a descriptor that is not a key.

    Errors (ValueError naming the argument; a bool is not an int here, though ``True == 1``):
    ``mode`` not a ``CUDAGraphMode``; a size that is not an int >= 1 (a float such as 2.5 is not
    an int), or no size with a mode other than NONE
    (``capture_sizes``; NONE with no sizes is fine); ``max_num_seqs`` or
    ``uniform_decode_query_len`` not an int >= 1 (1 is fine); ``num_tokens`` not an int >= 1.

    The course leaves out vLLM's LoRA keys (``has_lora``, ``num_active_loras``) and the check that
    ``compile_sizes`` are capture sizes.
    """

    def __init__(self, mode: CUDAGraphMode, capture_sizes: Iterable[int], max_num_seqs: int,
                 uniform_decode_query_len: int = 1):
        args.instance("mode", mode, CUDAGraphMode)  # given
        capture_sizes = args.counts("capture_sizes", capture_sizes, at_least=1)  # given: a list now
        max_num_seqs = args.count("max_num_seqs", max_num_seqs, at_least=1)  # given
        uniform_decode_query_len = args.count(  # given
            "uniform_decode_query_len", uniform_decode_query_len, at_least=1)  # given
        raise NotImplementedError("exercise 6: CudagraphDispatcher.__init__")

    def keys(self) -> dict[CUDAGraphMode, set[BatchDescriptor]]:
        raise NotImplementedError("exercise 6: CudagraphDispatcher.keys")

    def capture_descs(self) -> list[tuple[CUDAGraphMode, BatchDescriptor]]:
        raise NotImplementedError("exercise 6: CudagraphDispatcher.capture_descs")

    def dispatch(
        self, num_tokens: int, uniform_decode: bool = False,
        valid_modes: AbstractSet[CUDAGraphMode] | None = None,
        invalid_modes: AbstractSet[CUDAGraphMode] | None = None,
    ) -> tuple[CUDAGraphMode, BatchDescriptor]:
        num_tokens = args.count("num_tokens", num_tokens, at_least=1)  # given
        raise NotImplementedError("exercise 6: CudagraphDispatcher.dispatch")
