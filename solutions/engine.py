"""Exercise 8 reference: a decode engine with CUDA graphs. Rules: exercises/engine.py."""

from __future__ import annotations

import time
from collections import Counter
from typing import Callable, Sequence

import torch

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
    ):
        if not isinstance(model, ToyModel):
            raise ValueError(f"model: expected a coursekit.toymodel.ToyModel, got {type(model).__name__}")
        sizes = engine_capture_sizes(model.config.max_seqs) if capture_sizes is None else list(capture_sizes)
        self.model = model
        self.dispatcher = CudagraphDispatcher(mode, sizes, model.config.max_seqs)
        self.warmup_iters = warmup_iters
        self.capture = capture if capture is not None else _default_capture(model)
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
                graph = self.capture(self.model.forward, self.tokens[:s], self.positions[:s],
                                     self.slots[:s], warmup_iters=self.warmup_iters, pool=pool)
                pool = pool or graph.graph.pool()
            else:
                graph, hidden = [], self.hidden[:s]
                for i in range(self.model.n_segments):
                    piece = self.capture(_Segment(self.model, i), self.tokens[:s], self.positions[:s],
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

    def step(self, tokens: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor,
             uniform_decode: bool | None = None) -> torch.Tensor:
        c = self.model.config
        n = _check_rows("tokens", tokens, None, 0, c.vocab_size - 1, self.model.device)
        _check_rows("positions", positions, n, 0, c.max_seq_len - 1, self.model.device)
        _check_rows("slots", slots, n, 0, c.max_seqs - 1, self.model.device)
        if uniform_decode is None:
            uniform_decode = len(torch.unique(slots)) == n
        mode, desc = self.dispatcher.dispatch(n, uniform_decode)
        graph = self.graphs.get((mode, desc))
        if graph is None:
            self.stats["eager"] += 1
            return self.model.forward(tokens, positions, slots)
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
                    self.attn[:s].copy_(self.model.attention(layer, q, k, v, self.positions[:s], self.slots[:s]))
            logits = out
        self.stats[(mode, desc)] += 1
        return logits[:n].clone()

    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: int | Sequence[int]) -> list[list[int]]:
        c = self.model.config
        prompts = [list(p) for p in prompts]
        if not 1 <= len(prompts) <= c.max_seqs:
            raise ValueError(f"prompts: expected 1..{c.max_seqs} prompts (one KV-cache slot each), "
                             f"got {len(prompts)}")
        if any(not p for p in prompts):
            raise ValueError("prompts: every prompt needs at least one token, got an empty one")
        wanted = [max_new_tokens] * len(prompts) if isinstance(max_new_tokens, int) else list(max_new_tokens)
        if len(wanted) != len(prompts) or any(isinstance(m, bool) or not isinstance(m, int) or m < 1
                                              for m in wanted):
            raise ValueError(f"max_new_tokens: expected an int >= 1, or one per prompt, got {max_new_tokens!r}")
        for i, (p, m) in enumerate(zip(prompts, wanted)):
            if len(p) + m - 1 > c.max_seq_len:
                raise ValueError(f"max_new_tokens: prompt {i} ({len(p)} tokens) plus {m} new tokens "
                                 f"does not fit max_seq_len = {c.max_seq_len}")
        device = self.model.device
        rows = [(i, j, t) for i, p in enumerate(prompts) for j, t in enumerate(p)]
        logits = self.step(*(torch.tensor(col, dtype=torch.long, device=device)
                             for col in ([t for _, _, t in rows], [j for _, j, _ in rows],
                                         [i for i, _, _ in rows])),
                           uniform_decode=all(len(p) == 1 for p in prompts))
        last = [sum(len(p) for p in prompts[: i + 1]) - 1 for i in range(len(prompts))]
        new = [[int(t)] for t in logits[last].argmax(dim=-1).tolist()]
        while True:
            active = [i for i in range(len(prompts)) if len(new[i]) < wanted[i]]
            if not active:
                return new
            tokens = torch.tensor([new[i][-1] for i in active], dtype=torch.long, device=device)
            positions = torch.tensor([len(prompts[i]) + len(new[i]) - 1 for i in active],
                                     dtype=torch.long, device=device)
            slots = torch.tensor(active, dtype=torch.long, device=device)
            for i, t in zip(active, self.step(tokens, positions, slots, True).argmax(dim=-1).tolist()):
                new[i].append(int(t))


class _Segment:
    """``model.segment(index, ...)`` as a function of the four static buffers."""

    def __init__(self, model: ToyModel, index: int):
        self.model, self.index = model, index

    def __call__(self, tokens, positions, hidden, attn):
        return self.model.segment(self.index, tokens, positions, hidden, attn)


def _check_rows(name: str, x: object, n: int | None, low: int, high: int, device: torch.device) -> int:
    if not isinstance(x, torch.Tensor) or x.dim() != 1 or x.dtype != torch.long or len(x) < 1:
        got = f"{tuple(x.shape)} {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name}: expected a 1-D int64 tensor with at least one row, got {got}")
    if n is not None and len(x) != n:
        raise ValueError(f"{name}: expected {n} rows (one per token), got {len(x)}")
    if x.device != device:
        raise ValueError(f"{name}: expected a tensor on {device} (the model's device), got {x.device}")
    # Values are read on the CPU only: reading a CUDA tensor would make every step wait for the GPU.
    if x.device.type == "cpu" and bool(((x < low) | (x > high)).any()):
        raise ValueError(f"{name}: expected values in {low}..{high}, got {x.tolist()[:16]}")
    return len(x)


def _default_capture(model: ToyModel) -> Callable:
    if model.device.type == "cuda":
        from .capture import capture  # exercise 3

        return capture
    return capture_on_cpu
