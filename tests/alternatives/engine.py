"""Exercise 8, written differently: every segment reads the engine's own hidden buffer (copied
in between replays) instead of the previous graph's output, graphs kept per descriptor in two
dicts, a plain-dict stats, buffers made with new_full, generate driven by a queue of
(slot, next token, position) requests, and each piece compiled once for every size (the
reference compiles it again for each capture)."""

from __future__ import annotations

import functools
import time

import torch

from coursekit.standin import capture_on_cpu

from .buckets import engine_capture_sizes
from .dispatch import CUDAGraphMode, CudagraphDispatcher


class DecodeEngine:
    def __init__(self, model, mode=CUDAGraphMode.FULL, capture_sizes=None, warmup_iters=1, capture=None,
                 compiler=None):
        self.model = model
        self.compiler, self.compiled = compiler, {}
        if capture_sizes is None:
            capture_sizes = engine_capture_sizes(max_num_seqs=model.config.max_seqs)
        # full graphs of uniform decode batches only (the model's attention): mixed ones go piecewise
        self.mode = {CUDAGraphMode.FULL: CUDAGraphMode.FULL_AND_PIECEWISE}.get(mode, mode) \
            if model.cudagraph_support != "always" else mode
        self.dispatcher = CudagraphDispatcher(self.mode, list(capture_sizes), model.config.max_seqs)
        self.warmup_iters = warmup_iters
        if capture is None:
            if model.device.type == "cuda":
                from .capture import capture
            else:
                capture = capture_on_cpu
        self.capture = capture
        top = max(capture_sizes) if capture_sizes else 1
        c = model.config
        ints = torch.zeros(1, dtype=torch.long, device=model.device)
        self.tokens = ints.new_full((top,), 0)
        self.positions = ints.new_full((top,), 0)
        self.slots = ints.new_full((top,), model.padding_slot)
        self.hidden = torch.zeros(top, c.hidden_size, dtype=model.dtype, device=model.device)
        self.attn = torch.zeros(top, c.n_heads * c.head_dim, dtype=model.dtype, device=model.device)
        self.full_graphs, self.piece_graphs = {}, {}
        self.graphs = {}
        self.stats = {}
        self.capture_seconds, self.capture_memory_bytes = 0.0, 0

    def piece(self, key, fn):
        if self.compiler is None:
            return fn
        if key not in self.compiled:
            self.compiled[key] = self.compiler(fn)
        return self.compiled[key]

    def capture_model(self):
        on_gpu = self.model.device.type == "cuda"
        if on_gpu:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()  # as torch.cuda.graph does on entry: a baseline it cannot lower
        start_mem = torch.cuda.memory_reserved() if on_gpu else 0
        t0 = time.perf_counter()
        shared = None
        for mode, desc in self.dispatcher.capture_descs():
            n = desc.num_tokens
            bufs = (self.tokens[:n], self.positions[:n])
            if mode == CUDAGraphMode.FULL:
                g = self.capture(self.piece("forward", functools.partial(self.model.forward, max_query_len=1)),
                                 *bufs, self.slots[:n],
                                 warmup_iters=self.warmup_iters, pool=shared)
                self.full_graphs[desc] = g
                self.graphs[(mode, desc)] = g
            else:
                pieces = []
                for index in range(self.model.n_segments):
                    def seg(t, p, h, a, index=index):
                        return self.model.segment(index, t, p, h, a)
                    pieces.append(self.capture(self.piece(index, seg), *bufs, self.hidden[:n], self.attn[:n],
                                               warmup_iters=self.warmup_iters, pool=shared))
                    shared = shared if shared is not None else pieces[0].graph.pool()
                self.piece_graphs[desc] = pieces
                self.graphs[(mode, desc)] = pieces
                continue
            if shared is None:
                shared = g.graph.pool()
        if on_gpu:
            torch.cuda.synchronize()
        self.capture_seconds = time.perf_counter() - t0
        self.capture_memory_bytes = torch.cuda.memory_reserved() - start_mem if on_gpu else 0

    def _check(self, name, x, length, top):
        if not isinstance(x, torch.Tensor) or x.dtype != torch.int64 or x.ndim != 1 or x.numel() == 0:
            raise ValueError(f"{name} must be a non-empty 1-D int64 tensor")
        if length is not None and x.numel() != length:
            raise ValueError(f"{name} has {x.numel()} rows but tokens has {length}")
        if x.device != self.model.device:
            raise ValueError(f"{name} is on {x.device}, the model on {self.model.device}")
        if x.device.type == "cpu" and (x.min().item() < 0 or x.max().item() > top):
            raise ValueError(f"{name} out of range 0..{top}")

    def step(self, tokens, positions, slots, uniform_decode=None):
        c = self.model.config
        self._check("tokens", tokens, None, c.vocab_size - 1)
        n = tokens.numel()
        self._check("positions", positions, n, c.max_seq_len - 1)
        self._check("slots", slots, n, c.max_seqs - 1)
        if uniform_decode is None:
            uniform_decode = len(set(slots.tolist())) == n
        mode, desc = self.dispatcher.dispatch(n, uniform_decode=uniform_decode)
        one_row_each = 1 if uniform_decode else None
        if mode == CUDAGraphMode.FULL and desc in self.full_graphs:
            graph, pieces = self.full_graphs[desc], None
        elif mode == CUDAGraphMode.PIECEWISE and desc in self.piece_graphs:
            graph, pieces = None, self.piece_graphs[desc]
        else:
            self.stats["eager"] = self.stats.get("eager", 0) + 1
            return self.model.forward(tokens, positions, slots, max_query_len=one_row_each)
        s = desc.num_tokens
        for buffer, values, pad in ((self.tokens, tokens, 0), (self.positions, positions, 0),
                                    (self.slots, slots, self.model.padding_slot)):
            buffer[:n].copy_(values)
            buffer[n:s] = pad
        if pieces is None:
            out = graph.replay()
        else:
            for index, piece in enumerate(pieces):
                out = piece.replay()
                if index == c.n_layers:
                    break
                hidden, q, k, v = out
                self.hidden[:s].copy_(hidden)
                self.attn[:s].copy_(self.model.attention(index, q, k, v, self.positions[:s], self.slots[:s],
                                                         max_query_len=one_row_each))
        key = (mode, desc)
        self.stats[key] = self.stats.get(key, 0) + 1
        return out[:n].clone()

    def generate(self, prompts, max_new_tokens):
        c = self.model.config
        if len(prompts) == 0 or len(prompts) > c.max_seqs:
            raise ValueError(f"prompts: {len(prompts)} prompts for {c.max_seqs} slots")
        if not all(len(p) for p in prompts):
            raise ValueError("prompts: an empty prompt")
        budgets = list(max_new_tokens) if isinstance(max_new_tokens, (list, tuple)) else [max_new_tokens] * len(prompts)
        if len(budgets) != len(prompts) or min(budgets) < 1:
            raise ValueError(f"max_new_tokens must be >= 1 per prompt, got {max_new_tokens!r}")
        if any(len(p) + b - 1 > c.max_seq_len for p, b in zip(prompts, budgets)):
            raise ValueError(f"max_new_tokens: a sequence would exceed max_seq_len={c.max_seq_len}")
        dev = self.model.device
        flat = [(slot, pos, tok) for slot, p in enumerate(prompts) for pos, tok in enumerate(p)]
        slots, positions, tokens = (torch.tensor(col, device=dev) for col in zip(*flat))
        logits = self.step(tokens, positions, slots, all(len(p) == 1 for p in prompts))
        ends = torch.tensor([len(p) for p in prompts], device=dev).cumsum(0) - 1
        outputs = [[t] for t in logits[ends].argmax(-1).tolist()]
        requests = [(i, outputs[i][0], len(prompts[i])) for i in range(len(prompts)) if budgets[i] > 1]
        while requests:
            slots, tokens, positions = (torch.tensor(col, device=dev) for col in zip(*requests))
            next_tokens = self.step(tokens, positions, slots, True).argmax(-1).tolist()
            survivors = []
            for (i, _, pos), tok in zip(requests, next_tokens):
                outputs[i].append(tok)
                if len(outputs[i]) < budgets[i]:
                    survivors.append((i, tok, pos + 1))
            requests = survivors
        return outputs
