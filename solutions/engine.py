"""Exercise 8 reference: a decode engine with CUDA graphs. Rules: exercises/engine.py."""

from __future__ import annotations

import time
from collections import Counter
from typing import Callable, Sequence

import torch

from coursekit import argcheck
from coursekit.standin import capture_on_cpu
from coursekit.toymodel import ToyModel

from .buckets import engine_capture_sizes
from .dispatch import CUDAGraphMode, CudagraphDispatcher


class DecodeEngine:
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
        sizes = engine_capture_sizes(model.config.max_seqs) if capture_sizes is None else list(capture_sizes)
        self.model = model
        if mode is CUDAGraphMode.FULL and model.cudagraph_support == "uniform_batch":
            # Mixed batches cannot run in a full graph here; attention is where the model is cut,
            # so vLLM gives them piecewise graphs instead (resolve_cudagraph_mode_and_sizes).
            mode = CUDAGraphMode.FULL_AND_PIECEWISE
        self.mode = mode
        self.dispatcher = CudagraphDispatcher(mode, sizes, model.config.max_seqs)
        self.warmup_iters = warmup_iters
        self.capture = capture if capture is not None else _default_capture(model)
        self.compiler = compiler
        largest = max(sizes, default=1)
        device, c = model.device, model.config
        self.tokens = torch.zeros(largest, dtype=torch.long, device=device)
        self.positions = torch.zeros(largest, dtype=torch.long, device=device)
        self.slots = torch.full((largest,), model.padding_slot, dtype=torch.long, device=device)
        self.hidden = torch.zeros(largest, c.hidden_size, dtype=model.dtype, device=device)
        self.attn = torch.zeros(largest, c.n_heads * c.head_dim, dtype=model.dtype, device=device)
        self.graphs: dict = {}
        self.stats: Counter = Counter()
        self.capture_seconds = 0.0
        self.capture_memory_bytes = 0

    def capture_model(self) -> None:
        cuda = self.model.device.type == "cuda"
        if cuda:
            # torch.cuda.graph empties the cache as a capture starts; emptied here first, memory
            # cached before (another engine's freed pool) is not counted in the baseline only to be
            # released during capture, which could make the figure negative.
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        reserved = torch.cuda.memory_reserved() if cuda else 0
        start = time.perf_counter()
        pool = None
        for mode, desc in self.dispatcher.capture_descs():
            s = desc.num_tokens
            if mode is CUDAGraphMode.FULL:
                graph = self.capture(self._compiled(_Decode(self.model)), self.tokens[:s], self.positions[:s],
                                     self.slots[:s], warmup_iters=self.warmup_iters, pool=pool)
                pool = pool or graph.graph.pool()
            else:
                graph, hidden = [], self.hidden[:s]
                for i in range(self.model.n_segments):
                    piece = self.capture(self._compiled(_Segment(self.model, i)), self.tokens[:s], self.positions[:s],
                                         hidden, self.attn[:s], warmup_iters=self.warmup_iters, pool=pool)
                    pool = pool or piece.graph.pool()
                    graph.append(piece)
                    if i < self.model.config.n_layers:
                        hidden = piece.static_outputs[0]  # the next segment reads it in place
            self.graphs[(mode, desc)] = graph
        if cuda:
            torch.cuda.synchronize()
        self.capture_seconds = time.perf_counter() - start
        self.capture_memory_bytes = (torch.cuda.memory_reserved() - reserved) if cuda else 0

    def _compiled(self, piece: Callable) -> Callable:
        # Compile, then capture: the graph records the compiled kernels, as vLLM's backend does.
        return piece if self.compiler is None else self.compiler(piece)

    def step(self, tokens: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor,
             uniform_decode: bool | None = None) -> torch.Tensor:
        c, device = self.model.config, self.model.device  # given
        n = argcheck.index_rows("tokens", tokens, device=device, high=c.vocab_size - 1)  # given: n rows
        argcheck.index_rows("positions", positions, device=device, rows=n, high=c.max_seq_len - 1)  # given
        argcheck.index_rows("slots", slots, device=device, rows=n, high=c.max_seqs - 1)  # given: not the padding slot
        if uniform_decode is None:
            uniform_decode = len(torch.unique(slots)) == n
        mode, desc = self.dispatcher.dispatch(n, uniform_decode)
        max_query_len = 1 if uniform_decode else None  # one row per sequence: the decode kernel
        graph = self.graphs.get((mode, desc))
        if graph is None:
            self.stats["eager"] += 1
            return self.model.forward(tokens, positions, slots, max_query_len)
        s = desc.num_tokens
        self.tokens[:n].copy_(tokens)
        self.positions[:n].copy_(positions)
        self.slots[:n].copy_(slots)
        self.tokens[n:s].zero_()
        self.positions[n:s].zero_()
        self.slots[n:s].fill_(self.model.padding_slot)
        if mode is CUDAGraphMode.FULL:
            logits = graph.replay()
        else:
            for layer, piece in enumerate(graph):
                out = piece.replay()
                if layer < c.n_layers:
                    _, q, k, v = out
                    self.attn[:s].copy_(self.model.attention(layer, q, k, v, self.positions[:s], self.slots[:s],
                                                             max_query_len))
            logits = out
        self.stats[(mode, desc)] += 1
        return logits[:n].clone()

    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: int | Sequence[int]) -> list[list[int]]:
        c = self.model.config  # given
        prompts, max_new_tokens = argcheck.decode_requests(  # given: a list of lists, one count per prompt
            prompts, max_new_tokens, max_seqs=c.max_seqs, max_seq_len=c.max_seq_len)  # given
        device = self.model.device
        rows = [(i, j, t) for i, p in enumerate(prompts) for j, t in enumerate(p)]
        logits = self.step(*(torch.tensor(col, dtype=torch.long, device=device)
                             for col in ([t for _, _, t in rows], [j for _, j, _ in rows],
                                         [i for i, _, _ in rows])),
                           uniform_decode=all(len(p) == 1 for p in prompts))
        last = [sum(len(p) for p in prompts[: i + 1]) - 1 for i in range(len(prompts))]
        new = [[int(t)] for t in logits[last].argmax(dim=-1).tolist()]
        while True:
            active = [i for i in range(len(prompts)) if len(new[i]) < max_new_tokens[i]]
            if not active:
                return new
            tokens = torch.tensor([new[i][-1] for i in active], dtype=torch.long, device=device)
            positions = torch.tensor([len(prompts[i]) + len(new[i]) - 1 for i in active],
                                     dtype=torch.long, device=device)
            slots = torch.tensor(active, dtype=torch.long, device=device)
            for i, t in zip(active, self.step(tokens, positions, slots, True).argmax(dim=-1).tolist()):
                new[i].append(int(t))


class _Decode:
    """``model.forward`` with the decode kernel (``max_query_len=1``), the only one a FULL graph
    can hold."""

    def __init__(self, model: ToyModel):
        self.model = model

    def __call__(self, tokens, positions, slots):
        return self.model.forward(tokens, positions, slots, max_query_len=1)


class _Segment:
    """``model.segment(index, ...)`` as a function of the four static buffers."""

    def __init__(self, model: ToyModel, index: int):
        self.model, self.index = model, index

    def __call__(self, tokens, positions, hidden, attn):
        return self.model.segment(self.index, tokens, positions, hidden, attn)


def _default_capture(model: ToyModel) -> Callable:
    if model.device.type == "cuda":
        from .capture import capture  # exercise 3

        return capture
    return capture_on_cpu
