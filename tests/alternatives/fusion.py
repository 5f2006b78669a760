"""Exercise 7, written differently: arithmetic by cases, torch's own rms_norm, one compiled
function per dtype, kernel events counted from key_averages."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from coursekit.fusion import add_rms_norm_reference  # noqa: F401 - the stub's given import, kept as a student's file keeps it

_compiled = {}


def chain_hbm_bytes(n_ops, numel, dtype_bytes, fused):
    if type(n_ops) is not int or n_ops < 0:
        raise ValueError(f"n_ops must be a non-negative int, not {n_ops!r}")
    if type(numel) is not int or numel < 0:
        raise ValueError(f"numel must be a non-negative int, not {numel!r}")
    if type(dtype_bytes) is not int or dtype_bytes < 1:
        raise ValueError(f"dtype_bytes must be a positive int, not {dtype_bytes!r}")
    tensor_bytes = numel * dtype_bytes
    if fused:
        return tensor_bytes * 2 if n_ops else 0
    return n_ops * tensor_bytes * 2


def _add_norm(x, residual, weight, eps):
    h = x + residual
    normed = F.rms_norm(h.float(), (h.shape[-1],), eps=eps)
    return normed.to(x.dtype) * weight, h


def fused_add_rms_norm(x, residual, weight, eps=1e-6):
    if not torch.is_tensor(x) or x.ndim == 0:
        raise ValueError("x must be a tensor with at least one dimension")
    if not torch.is_tensor(residual) or (residual.shape, residual.dtype, residual.device) != (
            x.shape, x.dtype, x.device):
        raise ValueError("residual does not match x in shape, dtype or device")
    if not torch.is_tensor(weight) or (tuple(weight.shape), weight.dtype, weight.device) != (
            (x.shape[-1],), x.dtype, x.device):
        raise ValueError(f"weight should be a {x.dtype} tensor of shape ({x.shape[-1]},) on {x.device}")
    if x.device.type == "cuda":
        if x.dtype not in _compiled:
            _compiled[x.dtype] = torch.compile(_add_norm)
        return _compiled[x.dtype](x, residual, weight, eps)
    return _add_norm(x, residual, weight, eps)


def count_kernels(fn, *args):
    if not torch.cuda.is_available():
        raise RuntimeError("count_kernels needs a CUDA GPU, and none is available")
    fn(*args)
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        fn(*args)
        torch.cuda.synchronize()
    total = 0
    for event in prof.key_averages():
        if event.device_type == torch.autograd.DeviceType.CUDA and not any(
                word in event.key for word in ("Memcpy", "Memset", "memcpy", "memset")):
            total += event.count
    return total
