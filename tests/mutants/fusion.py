"""Exercise 7 (fusion): plausible wrong versions of ``solutions/fusion.py``."""

from tests.mutants import G, K, M

MUTANTS = [
    M("fusion", "fused-counts-every-op", "the fused chain still moves the tensor once per op",
      ("passes = 1 if fused else n_ops", "passes = n_ops")),
    M("fusion", "one-way-traffic", "counts only the reads",
      ("return 2 * passes * numel * dtype_bytes", "return passes * numel * dtype_bytes")),
    M("fusion", "zero-ops-move-a-tensor", "a fused chain of no ops still reads and writes",
      ("    if n_ops == 0:\n        return 0\n", "")),
    M("fusion", "norm-without-residual", "normalizes x instead of x + residual",
      ("    return add_rms_norm_reference(x, residual, weight, eps)\n",
       "    out, new_residual = add_rms_norm_reference(x, torch.zeros_like(residual), weight, eps)\n"
       "    return out, x + residual\n")),
    M("fusion", "norm-over-rows", "normalizes over the first dimension",
      ("    return add_rms_norm_reference(x, residual, weight, eps)\n",
       "    h = x + residual\n    f = h.float()\n"
       "    return (f * torch.rsqrt(f.pow(2).mean(0, keepdim=True) + eps)).to(x.dtype) * weight, h\n")),
    M("fusion", "in-place-residual", "adds into residual in place (vLLM's op does; this API returns new tensors)",
      ("    return add_rms_norm_reference(x, residual, weight, eps)\n",
       "    residual.add_(x)\n    return add_rms_norm_reference(torch.zeros_like(x), residual, weight, eps)\n")),
    G("fusion", "eager-on-cuda", "never fuses: returns the eager version on CUDA",
      ("    if x.is_cuda:\n", "    if False:\n")),
    G("fusion", "counts-copies", "counts memcpy and memset as kernels",
      ('and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]', "]")),
    G("fusion", "counts-the-warm-up", "profiles the warm-up call too",
      ("    fn(*fn_args)\n    torch.cuda.synchronize()\n    with profile(activities=[ProfilerActivity.CUDA]) as prof:\n",
       "    with profile(activities=[ProfilerActivity.CUDA]) as prof:\n        fn(*fn_args)\n")),
    # The gap corpus: mistakes each of which one kind of test could miss.
    # A keyword never used with a non-default value.
    K("non-default", "fusion", "eps-ignored", "always uses eps=1e-6",
      ("    return add_rms_norm_reference(x, residual, weight, eps)\n",
       "    return add_rms_norm_reference(x, residual, weight, 1e-6)\n")),
    # Issue 23: every stated default, type, dtype, shape and limit, at it and one past it.
    K("issue23", "fusion", "default-eps-1e-5", "eps defaults to 1e-5 (another model's), not the stated 1e-6",
      ("    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6\n",
       "    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5\n")),
    K("issue23", "fusion", "out-in-fp32", "out left in fp32 (never cast back): bf16 in, fp32 out",
      ("    return add_rms_norm_reference(x, residual, weight, eps)\n",
       "    h = x + residual\n    f = h.float()\n"
       "    return f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + eps) * weight, h\n")),
    K("issue23", "fusion", "norm-returns-a-list", "returns [out, new_residual], a list, not the tuple",
      ("    return add_rms_norm_reference(x, residual, weight, eps)\n",
       "    return list(add_rms_norm_reference(x, residual, weight, eps))\n")),
    # Issue 33: the argument checks are given; the byte count is the exercise's own.
    K("issue33", "fusion", "fused-flag-inverted", "fused and unfused swapped: the fused chain moves the "
      "tensor once per op, the unfused one once",
      ("passes = 1 if fused else n_ops", "passes = n_ops if fused else 1")),
    K("issue33", "fusion", "hbm-true-division", "bytes as a float (true division somewhere on the way)",
      ("return 2 * passes * numel * dtype_bytes", "return 2 * passes * numel * dtype_bytes / 1")),
]
