"""Exercise 8 · capstone: a decode engine with CUDA graphs, the way vLLM's V1 GPU model runner
runs one (vLLM 0.26.0's V2 runner does the same with its own ``CudaGraphManager``).

Everything meets here: the dispatcher (exercise 6) picks a graph for each batch, batches are
padded up to a captured size (exercise 5), inputs are copied into static buffers (exercise 4)
and graphs are captured with a warm-up (exercise 3). The model is given
(``coursekit.toymodel.ToyModel``: read its docstring): a small Qwen2-shaped decoder with a static
KV cache indexed by ``[slot, position]`` and one reserved ``padding_slot``, and a forward pass cut
into segments at its attention calls. Its attention, like FlashAttention 2's in vLLM, can run a
uniform decode batch inside a full CUDA graph but not a batch with prompt rows (the model's
docstring says why): that is what PIECEWISE graphs are for.

The lines marked ``# given`` check the arguments (``coursekit/argcheck.py``); keep them, and write
the rest.

Check your work with ``python -m pytest exercises -m ex8``. On a CPU the graphs are the course's
stand-in (``coursekit.standin.capture_on_cpu``); ``python -m pytest exercises -m "ex8 and gpu"``
runs real CUDA graphs.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from coursekit import argcheck
from coursekit.standin import capture_on_cpu  # noqa: F401 - the CPU default for `capture`
from coursekit.toymodel import ToyModel  # given: the model

from .buckets import engine_capture_sizes  # noqa: F401 - you will need them
from .dispatch import BatchDescriptor, CUDAGraphMode, CudagraphDispatcher  # noqa: F401 - you will need them


class DecodeEngine:
    """Runs decode steps of a ``ToyModel`` eagerly or as CUDA graphs, as ``mode`` says.

    Construction ``DecodeEngine(model, mode=CUDAGraphMode.FULL, capture_sizes=None,
    warmup_iters=1, capture=None, compiler=None)``, each default as written (an engine built
    without ``mode`` asks for FULL graphs; without ``warmup_iters``, each capture warms up once);
    a ``model`` that is not a ``ToyModel`` -> ValueError naming ``model``:
      * ``model``: the model, kept as ``self.model`` (``step`` reads its device and config).
      * ``mode``: the mode the engine runs, as vLLM 0.26.0 resolves the one asked for, for its
        V1 and V2 runners alike (``CompilationConfig.resolve_cudagraph_mode_and_sizes``): the
        model's attention holds only uniform decode batches in a full graph
        (``model.cudagraph_support == "uniform_batch"``, FlashAttention 2's
        ``AttentionCGSupport.UNIFORM_BATCH``) and the model is cut at its attention calls
        (vLLM's ``splitting_ops``), so FULL becomes FULL_AND_PIECEWISE: full graphs for uniform
        decode batches, piecewise ones for mixed batches. Every other mode stays as given
        (FULL_DECODE_ONLY runs mixed batches eagerly).
      * ``dispatcher``: a ``CudagraphDispatcher(self.mode, capture_sizes, model.config.max_seqs)``
        (exercise 6's, after the V1 runner's; one token per request: ``q = 1``);
        ``capture_sizes`` defaults to ``engine_capture_sizes(model.config.max_seqs)``, vLLM's plan
        for ``max_seqs`` requests (up to twice as many tokens: a prompt step may fill them).
      * Static input buffers of ``rows = max(capture_sizes)`` rows (the largest capture size),
        owned by the engine, on the model's device: ``tokens``, ``positions`` and ``slots`` (1-D,
        int64), and for piecewise graphs ``hidden`` (``(rows, hidden_size)``) and ``attn``
        (``(rows, n_heads * head_dim)``), both in the model's dtype (``model.dtype``: float32, or
        bfloat16). The slot buffer starts out filled with ``model.padding_slot`` and the others
        with zeros, so warm-up and capture only ever touch the padding slot (the real slots'
        cache is unchanged by ``capture_model()``).
      * ``capture`` defaults to exercise 3's ``capture`` for a CUDA model and to
        ``capture_on_cpu`` otherwise. Nothing is captured until ``capture_model()``, and a step
        whose key has no graph runs eagerly.
      * ``compiler``: None, or a function that compiles a piece of the model, ``compiler(fn) ->
        compiled`` (``coursekit.compiled.compile_piece``: ``torch.compile``). Compile, then
        capture, as vLLM 0.26.0 does (its backend compiles the model split at attention, then
        captures each compiled piece): when it is given, every function ``capture_model()``
        hands to ``capture`` (the FULL forward, each PIECEWISE segment) is one that ``compiler``
        returned, so the graphs replay the compiled kernels. ``compiler`` is called only in
        ``capture_model()``, never by ``step``; a step without a graph runs ``model.forward`` as
        before. None: every piece is captured as written.

    ``capture_model()`` captures every ``(mode, BatchDescriptor)`` of
    ``dispatcher.capture_descs()``, in that order (PIECEWISE keys, then FULL, each largest
    first), each as ``capture(fn, *inputs, warmup_iters=warmup_iters, pool=pool)`` (``fn``
    passed through ``compiler`` first, when there is one) over the first
    ``num_tokens`` rows of the static buffers (``tokens`` first), all in one memory pool: ``pool``
    is None for the first graph and that graph's ``graph.pool()`` for every later one.
      * FULL: one graph of ``model.forward(tokens, positions, slots, max_query_len=1)`` (the
        decode kernel: a FULL key is a uniform decode batch, one row per sequence; the varlen
        kernel cannot be captured).
      * PIECEWISE: one graph per segment ``i`` of ``model.segment(i, tokens, positions, hidden,
        attn)`` over the ``tokens``, ``positions`` and ``attn`` buffers and a static ``hidden``
        (the ``hidden`` buffer, or the previous segment's static ``hidden`` output); attention is
        not captured: it runs eagerly between the segments' replays.
    It records ``graphs`` (a dict keyed by the ``(mode, desc)`` tuples of ``capture_descs()``;
    each value is what ``capture`` returned: the graph for FULL, the list of the ``n_segments``
    segment graphs in segment order for PIECEWISE), ``capture_seconds`` (the wall time
    ``capture_model()`` took, a float above 0) and ``capture_memory_bytes`` (an int: GPU memory
    the capture reserved, ``torch.cuda.memory_reserved()`` after minus before, "before" read
    after ``torch.cuda.synchronize()`` and ``torch.cuda.empty_cache()`` so that the figure is
    never negative; 0 on a CPU, an int too, never None).

    ``step(tokens, positions, slots, uniform_decode=None) -> logits``, one row per token:
      * ``tokens``, ``positions``, ``slots``: 1-D int64 tensors of one length ``n >= 1`` on the
        model's device (ValueError naming the argument otherwise). ``tokens`` sets ``n``: a
        ``positions`` or ``slots`` of another length -> ValueError naming ``positions`` or
        ``slots``, whichever differs (``positions`` is checked first). The model's device is
        ``model.device``, named as its tensors name it (``cuda:0``, ``cpu``): a tensor made with
        ``device="cuda"`` or ``"cuda:0"`` is on a model built with either name. On a CPU the values are
        checked too (ValueError naming ``tokens`` for a token outside ``0..vocab_size - 1``;
        naming ``slots`` for a slot outside ``0..max_seqs - 1``: the padding slot is reserved;
        naming ``positions`` outside ``0..max_seq_len - 1``; each bound itself is fine); on CUDA
        they are not (reading a CUDA tensor's values makes the CPU wait for the GPU).
      * ``uniform_decode``: True when every row has its own slot (one token per sequence). When it
        is None, the engine works it out from ``slots`` (uniform when every slot is distinct):
        that reads the values, so on CUDA it costs a host sync, the one exception to the rule
        above. Callers that know the flag pass it (``generate`` does; so does the benchmark);
        when it is given, the engine never reads the values of ``slots`` on CUDA.
      * ``max_query_len`` (the attention kernel, see ``ToyModel``): 1 when ``uniform_decode``
        is true (the decode kernel), None otherwise (the varlen kernel, right for any batch).
      * The batch runs as ``dispatcher.dispatch(n, uniform_decode)`` says. NONE (or nothing
        captured for its key): ``model.forward(tokens, positions, slots, max_query_len)`` on the
        inputs as they are. Otherwise, at every
        replay, the first ``n`` rows of the static buffers hold the inputs (copied in with
        ``copy_``: the graphs read the buffers' memory) and rows ``n .. desc.num_tokens - 1``
        hold token 0, position 0 and ``model.padding_slot``, so that padded rows read and write
        only the padding slot; FULL replays its graph, PIECEWISE its segments with
        ``model.attention(layer, q, k, v, positions, slots, max_query_len)`` run eagerly between
        them, over the static ``positions`` and ``slots`` buffers' first ``desc.num_tokens`` rows.
      * The result is the first ``n`` rows of the logits as a fresh tensor (``(n, vocab_size)``,
        in the model's dtype). Graph or eager, they are the eager model's logits for those rows,
        within 1e-5 in float32 and 5e-2 in bfloat16 (which keeps 8 significant bits): a replay
        may sum in another order.
      * ``stats`` counts steps per ``(mode, desc)`` replayed and eager steps (key ``"eager"``).

    ``generate(prompts, max_new_tokens) -> list[list[int]]``: greedy decoding of a batch.
    Sequence ``i`` uses slot ``i``. The first step feeds every prompt token (row ``j`` of
    sequence ``i`` at position ``j``; ``uniform_decode`` True exactly when every prompt is one
    token) and takes each sequence's last row; every later step (uniform) feeds
    each unfinished sequence's latest token at the next position. A sequence is finished once it
    has ``max_new_tokens`` new tokens (an int, or one per sequence), and leaves the batch: later
    steps are smaller. Each new token is the argmax of its row's logits. Returns the new tokens
    of each sequence, a ``list`` of ``list`` of ``int`` (not tuples, not tensors). ValueError
    naming ``prompts`` for more prompts than ``max_seqs`` or an empty prompt (``max_seqs``
    prompts are fine); naming ``max_new_tokens`` for a count below 1 (the int, or any one of the
    per-sequence counts), for per-sequence counts whose number is not the number of prompts, or
    when a sequence would need a position past the cache (``len(prompt) + max_new_tokens - 1 >
    max_seq_len``: the last new token is never fed back, so exactly ``max_seq_len`` is fine).
    """

    def __init__(
        self,
        model: ToyModel,
        mode: CUDAGraphMode = CUDAGraphMode.FULL,
        capture_sizes: Sequence[int] | None = None,
        warmup_iters: int = 1,
        capture: Callable | None = None,
        compiler: Callable | None = None,
    ):
        argcheck.instance("model", model, ToyModel)  # given
        raise NotImplementedError("exercise 8: DecodeEngine.__init__")

    def capture_model(self) -> None:
        raise NotImplementedError("exercise 8: DecodeEngine.capture_model")

    def step(self, tokens: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor,
             uniform_decode: bool | None = None) -> torch.Tensor:
        c, device = self.model.config, self.model.device  # given
        n = argcheck.index_rows("tokens", tokens, device=device, high=c.vocab_size - 1)  # given: n rows
        argcheck.index_rows("positions", positions, device=device, rows=n, high=c.max_seq_len - 1)  # given
        argcheck.index_rows("slots", slots, device=device, rows=n, high=c.max_seqs - 1)  # given: not the padding slot
        raise NotImplementedError("exercise 8: DecodeEngine.step")

    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: int | Sequence[int]) -> list[list[int]]:
        c = self.model.config  # given
        prompts, max_new_tokens = argcheck.decode_requests(  # given: a list of lists, one count per prompt
            prompts, max_new_tokens, max_seqs=c.max_seqs, max_seq_len=c.max_seq_len)  # given
        raise NotImplementedError("exercise 8: DecodeEngine.generate")
