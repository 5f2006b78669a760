"""Exercise 6 · vLLM's CUDA-graph dispatch, V1 and V2 runners (CPU only).

vLLM decides, for every batch, whether to replay a FULL graph (the whole forward pass), a
PIECEWISE graph (everything between attention calls; attention runs eagerly) or nothing. The
``cudagraph_mode`` setting says which graphs exist for uniform-decode batches (every request adds
the same number of tokens) and which for mixed prefill/decode batches.

vLLM 0.26.0 has two GPU model runners that capture the same graphs and look them up differently:

* part A, the V1 runner's ``CudagraphDispatcher``: the captured ``(mode, BatchDescriptor)`` keys,
  and a lookup that pads the batch, caps its request count and may fall back to PIECEWISE;
* part B, the V2 runner's ``CudaGraphManager``, the one ``vllm serve`` picks for a dense model
  such as the lesson's Qwen2.5-7B (``VllmConfig.use_v2_model_runner``): candidate lists per token
  count, ``BatchExecutionDescriptor`` keys, and a lookup that takes the first graph that fits the
  batch or runs it eagerly, never a larger size.

Both are checked against answers recorded from vLLM 0.26.0's own code.

The lines marked ``# given`` check the arguments (``coursekit/argcheck.py``); keep them, and write
the rest. Check your work with ``python -m pytest exercises -m ex6``.
"""

from __future__ import annotations

import bisect  # noqa: F401 - part B may use it
import enum
from dataclasses import dataclass
from typing import AbstractSet, Iterable

from coursekit import argcheck

from .buckets import padded_size  # noqa: F401 - you will need it


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


# ------------------------------------------------------------------ part A: the V1 runner


class CudagraphDispatcher:
    """Decides which captured graph, if any, runs a batch in vLLM 0.26.0's V1 GPU model runner:
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
        argcheck.instance("mode", mode, CUDAGraphMode)  # given
        capture_sizes = argcheck.counts("capture_sizes", capture_sizes, at_least=1)  # given: a list now
        max_num_seqs = argcheck.count("max_num_seqs", max_num_seqs, at_least=1)  # given
        uniform_decode_query_len = argcheck.count(  # given
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
        num_tokens = argcheck.count("num_tokens", num_tokens, at_least=1)  # given
        raise NotImplementedError("exercise 6: CudagraphDispatcher.dispatch")


# ------------------------------------------------------------------ part B: the V2 runner


@dataclass(frozen=True)
class BatchExecutionDescriptor:
    """The V2 runner's key of one graph, and its answer for one batch (vLLM 0.26.0's
    ``vllm/v1/worker/gpu/cudagraph_utils.py``, without ``num_active_loras``): the runtime mode, the
    token count the graph was captured for, the requests it holds (None: any number, as a
    PIECEWISE graph) and the tokens every request adds when it is a uniform-decode graph (None: a
    graph for any batch). The mode is part of the key; V1 keeps it beside its ``BatchDescriptor``."""

    cg_mode: CUDAGraphMode
    num_tokens: int
    num_reqs: int | None
    uniform_token_count: int | None = None


def get_uniform_token_count(num_reqs: int, num_tokens: int, max_query_len: int) -> int | None:
    """The V2 runner's test for a uniform-decode batch (``get_uniform_token_count`` in
    ``cudagraph_utils.py``): ``max_query_len`` when the batch's ``num_tokens`` are exactly
    ``max_query_len`` per request (``num_tokens == max_query_len * num_reqs``), else None.

    Errors (``ValueError`` naming the argument; a bool is not an int here): ``num_reqs`` or
    ``max_query_len`` not an int >= 1, ``num_tokens`` not an int >= ``num_reqs`` (every request has
    a token).
    """
    num_reqs = argcheck.count("num_reqs", num_reqs, at_least=1)  # given
    num_tokens = argcheck.count("num_tokens", num_tokens, at_least=num_reqs)  # given: a token per request
    max_query_len = argcheck.count("max_query_len", max_query_len, at_least=1)  # given
    raise NotImplementedError("exercise 6: get_uniform_token_count")


class CudaGraphManager:
    """The V2 GPU model runner's graphs for one ``cudagraph_mode``: vLLM 0.26.0's
    ``CudaGraphManager`` (``vllm/v1/worker/gpu/cudagraph_utils.py``) without LoRA.

    ``CudaGraphManager(mode, capture_sizes, max_num_seqs, decode_query_len=1)``; ``q =
    decode_query_len``, the tokens each request adds in a uniform-decode step. The sizes are used
    ascending, each once; the V2 runner does not round them for speculative decoding (V1 does).
    With mode NONE or no sizes there are no graphs (no sizes is not an error here, unlike V1).

    The graphs (``_init_candidates``), walking the sizes ``s`` from the smallest:
      1. if ``mode`` is a two-routine mode (both have FULL as their ``decode_mode()``): a decode
         graph at ``r = s`` rounded up to a multiple of ``q``, ``BatchExecutionDescriptor(FULL, r,
         r // q, q)``,
         unless ``r`` is above ``q * max_num_seqs`` or above the largest size, or that same graph
         is already there (two sizes can round to one ``r``);
      2. then, if ``mode.mixed_mode()`` is not NONE, a graph for mixed batches at ``s``:
         ``BatchExecutionDescriptor(mixed_mode, s, None)`` for PIECEWISE, ``(FULL, s, min(s,
         max_num_seqs))`` for FULL (``uniform_token_count`` None: it serves any batch that fits).
    ``capture_descs()``: every graph, as a list, the PIECEWISE ones first, then the FULL ones, each
    group largest ``num_tokens`` first (the order ``CudaGraphManager.capture`` walks them).

    ``candidates(num_tokens)``: the graphs captured at the smallest token count ``t >=
    num_tokens`` (a decode graph's ``r`` counts too), in the order they were added above (at one
    ``t``, the decode graph before the mixed one); ``[]`` when ``num_tokens`` is above every graph.
    A new list each call.

    ``dispatch(num_reqs, num_tokens, uniform_token_count=None)``: the first candidate of
    ``candidates(num_tokens)`` that fits the batch, a ``BatchExecutionDescriptor``:
      * its ``uniform_token_count`` is None or equals the batch's, and
      * its ``num_reqs`` is None or at least the batch's ``num_reqs``.
    No candidate fits -> eager: ``BatchExecutionDescriptor(NONE, num_tokens, num_reqs, None)``. The
    manager never tries a larger token count (V1 caps the request count at ``max_num_seqs``
    instead and may answer a graph where V2 runs eagerly), and has no ``valid_modes`` /
    ``invalid_modes``. vLLM answers eager until its graphs are captured; this manager answers as
    after capture.

    Errors (``ValueError`` naming the argument; a bool is not an int here): ``mode`` not a
    ``CUDAGraphMode``; a size that is not an int >= 1 (``capture_sizes``); ``max_num_seqs`` or
    ``decode_query_len`` not an int >= 1; in ``candidates`` and ``dispatch``, ``num_tokens`` not an
    int >= 1 (``dispatch``: >= ``num_reqs``), ``num_reqs`` not an int >= 1, a
    ``uniform_token_count`` that is not None or an int >= 1.
    """

    def __init__(self, mode: CUDAGraphMode, capture_sizes: Iterable[int], max_num_seqs: int,
                 decode_query_len: int = 1):
        argcheck.instance("mode", mode, CUDAGraphMode)  # given
        capture_sizes = argcheck.counts("capture_sizes", capture_sizes, at_least=1)  # given: a list now
        max_num_seqs = argcheck.count("max_num_seqs", max_num_seqs, at_least=1)  # given
        decode_query_len = argcheck.count("decode_query_len", decode_query_len, at_least=1)  # given
        raise NotImplementedError("exercise 6: CudaGraphManager.__init__")

    def capture_descs(self) -> list[BatchExecutionDescriptor]:
        raise NotImplementedError("exercise 6: CudaGraphManager.capture_descs")

    def candidates(self, num_tokens: int) -> list[BatchExecutionDescriptor]:
        num_tokens = argcheck.count("num_tokens", num_tokens, at_least=1)  # given
        raise NotImplementedError("exercise 6: CudaGraphManager.candidates")

    def dispatch(self, num_reqs: int, num_tokens: int,
                 uniform_token_count: int | None = None) -> BatchExecutionDescriptor:
        num_reqs = argcheck.count("num_reqs", num_reqs, at_least=1)  # given
        num_tokens = argcheck.count("num_tokens", num_tokens, at_least=num_reqs)  # given: a token per request
        if uniform_token_count is not None:  # given
            argcheck.count("uniform_token_count", uniform_token_count, at_least=1)  # given
        raise NotImplementedError("exercise 6: CudaGraphManager.dispatch")
