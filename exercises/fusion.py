"""Exercise 7 · kernel fusion.

Fusion helps twice. A chain of elementwise ops run one kernel at a time launches N kernels *and*
sends the tensor through HBM N times (each kernel reads its input and writes its output); one
fused kernel launches once and keeps the intermediates in registers. vLLM fuses the small ops
around its big GEMMs for both reasons, in model code its V1 and V2 runners share; its
``fused_add_rms_norm`` adds the residual and normalizes in one kernel, which is what you build
here.

The lines marked ``# given`` check the arguments (``coursekit/argcheck.py``); keep them, and write
the rest. Check your work with ``python -m pytest exercises -m ex7`` (the kernel counts need a
GPU: ``python -m pytest exercises -m "ex7 and gpu"``).
"""

from __future__ import annotations

from typing import Callable

import torch

from coursekit import argcheck
from coursekit.fusion import add_rms_norm_reference  # noqa: F401 - given: the eager version


def chain_hbm_bytes(n_ops: int, numel: int, dtype_bytes: int, fused: bool) -> int:
    """Bytes a chain of ``n_ops`` unary elementwise ops on ``numel`` elements moves through HBM.

    Unfused, every op reads its input and writes its output: ``2 * n_ops * numel * dtype_bytes``.
    Fused, the chain reads the input once and writes the result once: ``2 * numel * dtype_bytes``.
    No ops move nothing: 0. Returns an int. A count or size that is not an int (a bool is not) or
    is negative, or ``dtype_bytes < 1`` -> ValueError naming the argument (zero ops, zero elements
    and ``dtype_bytes = 1`` are fine).
    """
    n_ops, numel = argcheck.count("n_ops", n_ops, at_least=0), argcheck.count("numel", numel, at_least=0)  # given
    dtype_bytes = argcheck.count("dtype_bytes", dtype_bytes, at_least=1)  # given
    raise NotImplementedError("exercise 7: chain_hbm_bytes")


def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """``add_rms_norm_reference(x, residual, weight, eps)``'s results from one fused kernel on CUDA.

    Returns the tuple ``(out, new_residual)``, both of ``x``'s shape and dtype (bf16 in, bf16
    out), where ``new_residual = x + residual`` and ``out`` is ``new_residual`` RMS-normalized
    over the last dimension (in fp32, then cast back, with the ``eps`` given: 1e-6 when left
    out) times ``weight``. ``x`` and ``residual`` are not modified.

    * Close to the reference: ``|got - expected| <= tol * (1 + |expected|)`` with ``tol`` 1e-5 for
      fp32 and 1e-2 for bf16 (a fused kernel may skip the reference's intermediate bf16 roundings).
    * On CUDA: one kernel per call (as ``count_kernels`` counts), every call after the first.
    * On CPU: the same results (plain PyTorch is fine there).
    * ``x`` must be a tensor with at least one dimension (a 1-d ``x`` is one row); ``residual`` a
      tensor matching ``x`` (the same shape, dtype and device: a mismatch names ``residual``, not
      ``x``); ``weight`` a tensor of exactly the shape
      ``x.shape[-1:]`` (as many elements in another shape, such as ``(1, hidden)``, is refused),
      with ``x``'s dtype, on the same device: ValueError naming the argument otherwise.
    """
    x = argcheck.tensor("x", x, min_dim=1)  # given
    residual = argcheck.tensor("residual", residual, shape=tuple(x.shape), dtype=x.dtype, device=x.device)  # given
    weight = argcheck.tensor("weight", weight, shape=tuple(x.shape[-1:]), dtype=x.dtype, device=x.device)  # given
    raise NotImplementedError("exercise 7: fused_add_rms_norm")


def count_kernels(fn: Callable[..., object], *fn_args: object) -> int:
    """How many GPU kernels one call ``fn(*fn_args)`` launches, an int.

    The call counted is never the first: ``fn(*fn_args)`` runs once uncounted (compilation and
    caching happen there), then one call is profiled on the GPU (``torch.profiler``) and its CUDA
    kernels are counted, leaving out memory copies and sets (names containing ``"Memcpy"`` or
    ``"Memset"``). No CUDA -> a plain RuntimeError (not a ValueError: no argument is wrong)
    saying a CUDA device is needed.
    """
    argcheck.need_cuda("count_kernels")  # given
    raise NotImplementedError("exercise 7: count_kernels")
