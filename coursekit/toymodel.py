"""A small Qwen2-shaped decoder for exercise 8 (given: students use it, never edit it).

Decode only: every row of a batch is one token of one sequence, at a position, in a KV-cache
slot. Per layer: RMSNorm, QKV projections with bias, rotary position embedding (RoPE),
grouped-query attention over a static KV cache indexed by ``[slot, position]``, output
projection, residual, RMSNorm, SwiGLU MLP, residual; then a final RMSNorm and the lm_head (tied
to the embedding or separate). Weights are random but deterministic: drawn from ``config.seed``
on the model's device.

The cache has ``config.max_seqs`` slots for real sequences plus one more, ``padding_slot``: rows
that only pad a batch up to a captured size read and write there, so they never touch a real
sequence's cache. vLLM 0.26.0 does it another way: a padded row's slot is ``PAD_SLOT_ID = -1``
(``vllm/v1/attention/backends/utils.py``) and the kernel that writes the cache skips any slot
below 0 (``reshape_and_cache_kernel_flash``). A plain PyTorch index cannot skip: ``cache[-1]``
is the last row, silently overwritten, which is why this model keeps a spare slot instead. A row
attends to positions ``0..position`` of its slot, after every row of the batch has written its
key and value, so several rows of one sequence at consecutive positions (a prompt) are causal
too.

The forward pass is cut at its attention calls, as vLLM's piecewise CUDA graphs cut it (vLLM cuts
the model's traced graph at the ops in ``splitting_ops``: ``split_graph`` in
``vllm/compilation/backends.py``; here the pieces are written by hand):

    segment(0)          tokens, positions          -> hidden, q, k, v
    attention(0)        q, k, v, positions, slots  -> attn        (reads and writes the cache)
    segment(1)          hidden, attn, positions    -> hidden, q, k, v
    ...
    segment(n_layers)   hidden, attn               -> logits

``forward(tokens, positions, slots)`` runs the whole step. Every segment takes the same four
arguments ``(tokens, positions, hidden, attn)`` and ignores those it does not need, so each can be
captured over the same static buffers.

Attention has two kernels, as FlashAttention 2 has in vLLM 0.26.0, and ``max_query_len`` (the
most rows any one sequence has in the batch, which the caller knows) picks one:

* ``max_query_len=1``, the **decode kernel**, for uniform decode batches (one row per sequence):
  each row reads its own slot's cache as it was before the step, plus its own new key and value.
  Its shapes are fixed by the batch size, so it can be captured in a CUDA graph. A batch in which
  a sequence has several rows (a prompt) comes out wrong, because no row sees the keys the
  batch's other rows of its sequence write.
* any other value, or None, the **varlen kernel**, for any batch: it first writes every row's key
  and value, then sizes its work by the batch's longest context, ``int(positions.max()) + 1``, a
  number it reads on the host (FlashAttention 2 takes ``max_seqlen_k`` as a host int too). On a GPU
  that read waits for the GPU, which a CUDA graph capture refuses; the CPU stand-in of a graph
  refuses it too (``coursekit.standin.inside_graph``). So a batch with prompt rows cannot run
  inside a full graph.

That is why vLLM's ``FlashAttentionMetadataBuilder`` declares ``AttentionCGSupport.UNIFORM_BATCH``
under FlashAttention 2 (``vllm/v1/attention/backends/flash_attn.py``: "a graph is captured with
max_query_len=1 ... then these graphs will not work for mixed prefill-decode"), and why
``CompilationConfig.resolve_cudagraph_mode_and_sizes`` (``vllm/config/compilation.py``) turns
``cudagraph_mode=FULL`` into FULL_AND_PIECEWISE when attention is a splitting op: mixed batches
then replay the pieces between attention calls and run attention eagerly. This model declares
the same, ``ToyModel.cudagraph_support = "uniform_batch"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from coursekit.fusion import add_rms_norm_reference, rms_norm
from coursekit.standin import inside_standin_graph


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 512
    hidden_size: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    intermediate_size: int = 128
    max_seqs: int = 8  # real KV-cache slots; one more, the padding slot, is added
    max_seq_len: int = 64
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6
    tie_embeddings: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "hidden_size",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "intermediate_size",
            "max_seqs",
            "max_seq_len",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected an int >= 1, got {value!r}")
        if self.hidden_size % self.n_heads or (self.hidden_size // self.n_heads) % 2:
            raise ValueError(
                f"hidden_size: expected a multiple of 2 * n_heads = {2 * self.n_heads}, got {self.hidden_size}"
            )
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads: expected a divisor of n_heads = {self.n_heads}, got {self.n_kv_heads}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.n_heads

    @classmethod
    def qwen2_5_7b(cls, **overrides) -> "ModelConfig":
        """Qwen2.5-7B's shapes (28 layers, 28 query and 4 key/value heads of 128, SwiGLU 18944,
        vocabulary 152064, separate lm_head), with random weights."""
        shapes = dict(
            vocab_size=152064,
            hidden_size=3584,
            n_layers=28,
            n_heads=28,
            n_kv_heads=4,
            intermediate_size=18944,
            max_seqs=8,
            max_seq_len=256,
            rope_theta=1e6,
            tie_embeddings=False,
        )
        return cls(**{**shapes, **overrides})


class ToyModel:
    """The decoder, its weights and its KV cache (see the module docstring).

    ``device`` is where its tensors live, named as they name it: ``ToyModel(device="cuda").device``
    is ``cuda:0`` (the current GPU), ``ToyModel(device="cpu:0").device`` is ``cpu``. Compare a
    tensor's ``.device`` with it, never with the name a caller wrote."""

    #: Which batches its attention can run inside a full CUDA graph, in the words of vLLM's
    #: ``AttentionCGSupport`` (``vllm/v1/attention/backend.py``): uniform decode batches only, as
    #: FlashAttention 2 (see the module docstring).
    cudagraph_support = "uniform_batch"

    def __init__(
        self,
        config: ModelConfig = ModelConfig(),
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
        add_rms_norm: Callable | None = None,
    ):
        """``add_rms_norm(x, residual, weight, eps) -> (out, new_residual)`` does each layer's
        residual add and post-attention norm: ``coursekit.fusion.add_rms_norm_reference`` (eager)
        unless given, e.g. exercise 7's ``fused_add_rms_norm``."""
        if not isinstance(config, ModelConfig):
            raise ValueError(f"config: expected a ModelConfig, got {config!r}")
        # ``device`` is the device as its tensors name it: "cuda" is "cuda:0" (the current
        # device), "cpu:0" is "cpu". Compared with what a caller wrote, "cuda" != "cuda:0" although
        # both are one GPU, so the model names its device the one way its tensors report it.
        self.config, self.dtype = config, dtype
        try:
            self.device = torch.empty(0, device=device).device
        except (RuntimeError, TypeError) as exc:
            raise ValueError(
                f"device: expected a torch device such as 'cpu' or 'cuda:0', got {device!r} ({exc})"
            ) from exc
        self.add_rms_norm = add_rms_norm or add_rms_norm_reference
        c = config
        generator = torch.Generator(device=self.device).manual_seed(c.seed)

        # Each weight is drawn in the model's dtype and scaled in place: no float32 copy, so a
        # model takes its own size and no more while it is built (Qwen2.5-7B's shapes: 15.2 GB in
        # bf16, where drawing in float32, scaling a copy and casting peaked 4-5 GB higher). For
        # float32 the values are bit for bit what drawing, scaling and casting gave.
        def weight(*shape: int, scale: float | None = None) -> torch.Tensor:
            # 1/sqrt(fan-in) keeps activations near 1; embedding and lm_head use 0.02 (as GPT-style
            # models do), which keeps the logits small and their rounding far below 1e-5.
            scale = 1.0 / math.sqrt(shape[0]) if scale is None else scale
            w = torch.randn(*shape, generator=generator, device=self.device, dtype=dtype)
            return w.mul_(scale)

        def norm(size: int) -> torch.Tensor:
            w = torch.rand(size, generator=generator, device=self.device, dtype=dtype)
            return w.add_(0.5)

        q_size, kv_size = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
        self.embedding = weight(c.vocab_size, c.hidden_size, scale=0.02)
        self.layers = []
        for _ in range(c.n_layers):
            self.layers.append(
                {
                    "input_norm": norm(c.hidden_size),
                    "qkv": weight(c.hidden_size, q_size + 2 * kv_size),
                    "qkv_bias": weight(q_size + 2 * kv_size, scale=0.1),
                    "o_proj": weight(q_size, c.hidden_size),
                    "post_norm": norm(c.hidden_size),
                    "gate_up": weight(c.hidden_size, 2 * c.intermediate_size),
                    "down": weight(c.intermediate_size, c.hidden_size),
                }
            )
        self.final_norm = norm(c.hidden_size)
        self.lm_head = self.embedding.t() if c.tie_embeddings else weight(c.hidden_size, c.vocab_size, scale=0.02)
        self.padding_slot = c.max_seqs
        cache_shape = (c.n_layers, c.max_seqs + 1, c.max_seq_len, c.n_kv_heads, c.head_dim)
        self.k_cache = torch.zeros(cache_shape, device=self.device, dtype=dtype)
        self.v_cache = torch.zeros(cache_shape, device=self.device, dtype=dtype)
        inv_freq = 1.0 / (
            c.rope_theta ** (torch.arange(0, c.head_dim, 2, device=self.device, dtype=torch.float32) / c.head_dim)
        )
        angles = torch.arange(c.max_seq_len, device=self.device, dtype=torch.float32)[:, None] * inv_freq
        self.rope_cos, self.rope_sin = angles.cos(), angles.sin()

    @property
    def n_segments(self) -> int:
        return self.config.n_layers + 1

    def reset_cache(self) -> None:
        self.k_cache.zero_()
        self.v_cache.zero_()

    # ------------------------------------------------------------------------- the pieces

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        cos, sin = self.rope_cos[positions][:, None, :], self.rope_sin[positions][:, None, :]
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(self.dtype)

    def _pre_attention(self, layer: int, hidden: torch.Tensor, positions: torch.Tensor):
        c, w = self.config, self.layers[layer]
        qkv = rms_norm(hidden, w["input_norm"], c.rms_eps) @ w["qkv"] + w["qkv_bias"]
        q_size, kv_size = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
        q, k, v = qkv.split([q_size, kv_size, kv_size], dim=-1)
        q = self._rope(q.reshape(-1, c.n_heads, c.head_dim), positions)
        k = self._rope(k.reshape(-1, c.n_kv_heads, c.head_dim), positions)
        return q, k, v.reshape(-1, c.n_kv_heads, c.head_dim)

    def _post_attention(self, layer: int, hidden: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        w = self.layers[layer]
        normed, hidden = self.add_rms_norm(attn @ w["o_proj"], hidden, w["post_norm"], self.config.rms_eps)
        gate, up = (normed @ w["gate_up"]).chunk(2, dim=-1)
        return hidden + (torch.nn.functional.silu(gate) * up) @ w["down"]

    def segment(
        self, index: int, tokens: torch.Tensor, positions: torch.Tensor, hidden: torch.Tensor, attn: torch.Tensor
    ):
        """The work between attention calls ``index - 1`` and ``index``: ``(hidden, q, k, v)``
        for ``index < n_layers``, the logits for ``index == n_layers``."""
        if index == 0:
            hidden = self.embedding[tokens]
        else:
            hidden = self._post_attention(index - 1, hidden, attn)
        if index == self.config.n_layers:
            return rms_norm(hidden, self.final_norm, self.config.rms_eps) @ self.lm_head
        return (hidden, *self._pre_attention(index, hidden, positions))

    def attention(
        self,
        layer: int,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        max_query_len: int | None = None,
    ) -> torch.Tensor:
        """Write every row's key and value into the cache at ``[slot, position]`` and let each row
        attend to positions ``0..position`` of its slot. Returns ``(rows, n_heads * head_dim)``.

        ``max_query_len=1``: the decode kernel, one row per sequence, graph-safe; otherwise the
        varlen kernel, any batch, never inside a graph (the module docstring says why)."""
        c = self.config
        # Grouped-query attention without copying keys per query head: q as (rows, kv, group, dim).
        q = q.reshape(-1, c.n_kv_heads, c.n_heads // c.n_kv_heads, c.head_dim)
        rows = torch.arange(len(positions), device=self.device)
        if max_query_len == 1:
            # The decode kernel: the slot's cache as it was, with this row's own key and value in
            # place. Fixed shapes, no host read; a prompt's earlier rows are not seen.
            keys, values = self.k_cache[layer, slots], self.v_cache[layer, slots]  # rows, L, kv, dim
            keys[rows, positions], values[rows, positions] = k, v
            self.k_cache[layer, slots, positions] = k
            self.v_cache[layer, slots, positions] = v
            context = c.max_seq_len
        else:
            self.k_cache[layer, slots, positions] = k
            self.v_cache[layer, slots, positions] = v
            if inside_standin_graph():  # on a GPU the read below is what a capture refuses
                raise RuntimeError(
                    "attention: the varlen kernel reads the batch's longest context on the host, "
                    "a host sync, not permitted when stream is capturing (the CPU stand-in of a "
                    "CUDA graph refuses it as CUDA does); only max_query_len=1, the decode kernel "
                    "of uniform decode batches, can be captured (cudagraph_support = 'uniform_batch')"
                )
            context = int(positions.max()) + 1
            keys = self.k_cache[layer, slots, :context]
            values = self.v_cache[layer, slots, :context]
        scores = torch.einsum("bkgd,blkd->bkgl", q, keys).float() / math.sqrt(c.head_dim)
        later = torch.arange(context, device=self.device)[None, :] > positions[:, None]
        probs = scores.masked_fill(later[:, None, None, :], float("-inf")).softmax(dim=-1)
        out = torch.einsum("bkgl,blkd->bkgd", probs.to(self.dtype), values)
        return out.reshape(-1, c.n_heads * c.head_dim)

    def forward(
        self, tokens: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor, max_query_len: int | None = None
    ) -> torch.Tensor:
        """One step, eagerly: logits ``(rows, vocab_size)``. ``max_query_len`` picks the attention
        kernel (1: decode, graph-safe; otherwise varlen, never in a graph)."""
        hidden, q, k, v = self.segment(0, tokens, positions, None, None)
        for layer in range(self.config.n_layers):
            attn = self.attention(layer, q, k, v, positions, slots, max_query_len)
            out = self.segment(layer + 1, tokens, positions, hidden, attn)
            if layer + 1 < self.config.n_layers:
                hidden, q, k, v = out
        return out
