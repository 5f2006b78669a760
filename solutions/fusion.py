"""Exercise 7 reference: kernel fusion. Rules: exercises/fusion.py."""

from __future__ import annotations

from typing import Callable

import torch

from coursekit import argcheck
from coursekit.fusion import add_rms_norm_reference

_compiled = None


def chain_hbm_bytes(n_ops: int, numel: int, dtype_bytes: int, fused: bool) -> int:
    n_ops, numel = argcheck.count("n_ops", n_ops, at_least=0), argcheck.count("numel", numel, at_least=0)  # given
    dtype_bytes = argcheck.count("dtype_bytes", dtype_bytes, at_least=1)  # given
    if n_ops == 0:
        return 0
    passes = 1 if fused else n_ops
    return 2 * passes * numel * dtype_bytes


def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    x = argcheck.tensor("x", x, min_dim=1)  # given
    residual = argcheck.tensor("residual", residual, shape=tuple(x.shape), dtype=x.dtype, device=x.device)  # given
    weight = argcheck.tensor("weight", weight, shape=tuple(x.shape[-1:]), dtype=x.dtype, device=x.device)  # given
    global _compiled
    if x.is_cuda:
        if _compiled is None:
            # One fused reduction kernel; compiled once per process, reused for every call.
            _compiled = torch.compile(add_rms_norm_reference, fullgraph=True)
        return _compiled(x, residual, weight, eps)
    return add_rms_norm_reference(x, residual, weight, eps)


def count_kernels(fn: Callable[..., object], *fn_args: object) -> int:
    argcheck.need_cuda("count_kernels")  # given
    from torch.profiler import ProfilerActivity, profile

    fn(*fn_args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*fn_args)
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
    return len(kernels)
