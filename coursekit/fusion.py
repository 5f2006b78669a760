"""Given code for exercise 7: the eager add + RMSNorm that ``fused_add_rms_norm`` must match
(and the toy model of exercise 8 normalizes with)."""

from __future__ import annotations

import torch


def add_rms_norm_reference(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM's ``fused_add_rms_norm`` computation, eagerly (one kernel per op), returning new
    tensors where vLLM's op writes into its inputs:
    ``new_residual = x + residual``; ``out = rms_norm(new_residual) * weight``, normalizing in
    fp32 over the last dimension. Returns ``(out, new_residual)``."""
    new_residual = x + residual
    return rms_norm(new_residual, weight, eps), new_residual


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dimension, computed in fp32 and cast back: ``x / rms(x) * weight``."""
    h = x.float()
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight
