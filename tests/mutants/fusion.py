"""Exercise 7 (fusion): plausible wrong versions of ``solutions/fusion.py``."""

from tests.mutants import G, K, M

MUTANTS = [
    M("fusion", "fused-counts-every-op", "the fused chain still moves the tensor once per op",
      ("passes = 1 if fused else n_ops", "passes = n_ops")),
    M("fusion", "one-way-traffic", "counts only the reads",
      ("return 2 * passes * numel * dtype_bytes", "return passes * numel * dtype_bytes")),
    M("fusion", "zero-ops-move-a-tensor", "a fused chain of no ops still reads and writes",
      ("    if n_ops == 0:\n        return 0\n", "")),
    M("fusion", "accepts-zero-dtype-bytes", "dtype_bytes 0 accepted",
      ('("dtype_bytes", dtype_bytes, 1)', '("dtype_bytes", dtype_bytes, 0)')),
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
    M("fusion", "no-weight-check", "a wrong-sized weight fails deep inside torch",
      ("    if (not isinstance(weight, torch.Tensor) or weight.shape != x.shape[-1:]\n"
       "            or weight.dtype != x.dtype or weight.device != x.device):",
       "    if not isinstance(weight, torch.Tensor):")),
    M("fusion", "count-without-cuda-check", "profiles on a machine without CUDA",
      ("    if not torch.cuda.is_available():\n        raise", "    if False:\n        raise")),
    G("fusion", "eager-on-cuda", "never fuses: returns the eager version on CUDA",
      ("    if x.is_cuda:\n", "    if False:\n")),
    G("fusion", "counts-copies", "counts memcpy and memset as kernels",
      ('and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]', "]")),
    G("fusion", "counts-the-warm-up", "profiles the warm-up call too",
      ("    fn(*args)\n    torch.cuda.synchronize()\n    with profile(activities=[ProfilerActivity.CUDA]) as prof:\n",
       "    with profile(activities=[ProfilerActivity.CUDA]) as prof:\n        fn(*args)\n")),
    # The gap corpus: mistakes each of which one kind of test could miss.
    K("mismatch", "fusion", "residual-dtype-unchecked", "accepts a residual of another dtype",
      ("            or residual.dtype != x.dtype or residual.device != x.device):",
       "            or residual.device != x.device):")),
    K("mismatch", "fusion", "weight-type-unchecked", "a weight that is not a tensor crashes with AttributeError",
      ("    if (not isinstance(weight, torch.Tensor) or weight.shape", "    if (weight.shape")),
    # A keyword never used with a non-default value.
    K("non-default", "fusion", "eps-ignored", "always uses eps=1e-6",
      ("    return add_rms_norm_reference(x, residual, weight, eps)\n",
       "    return add_rms_norm_reference(x, residual, weight, 1e-6)\n")),
    K("boundary", "fusion", "rejects-zero-numel", "an empty tensor's traffic (numel=0) is refused",
      ('("numel", numel, 0)', '("numel", numel, 1)')),
    K("empty", "fusion", "norm-accepts-0-d", "a 0-d x is accepted",
      ("    if not isinstance(x, torch.Tensor) or x.dim() < 1:\n        raise ValueError(f\"x: expected a tensor with at least one",
       "    if not isinstance(x, torch.Tensor):\n        raise ValueError(f\"x: expected a tensor with at least one")),
    # Issue 23: every stated default, type, dtype, shape and limit, at it and one past it.
    K("issue23", "fusion", "weight-numel-only", "weight checked by its number of elements, not its shape: "
      "a (1, hidden) weight accepted (it broadcasts)",
      ("or weight.shape != x.shape[-1:]\n", "or weight.numel() != x.shape[-1]\n")),
    K("issue23", "fusion", "weight-dtype-unchecked", "a weight of another dtype accepted (out then takes "
      "the promoted dtype, not x's)",
      ("            or weight.dtype != x.dtype or weight.device != x.device):",
       "            or weight.device != x.device):")),
    K("issue23", "fusion", "norm-rejects-1-d", "asks for at least two dimensions: a 1-d x (one row) refused",
      ("    if not isinstance(x, torch.Tensor) or x.dim() < 1:", "    if not isinstance(x, torch.Tensor) or x.dim() < 2:")),
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
    K("issue23-mutmut", "fusion", "residual-shape-ordered",
      "cosmic-ray G24: residual's shape compared with `<`: a residual of more rows than x broadcasts",
      ("residual.shape != x.shape", "residual.shape < x.shape")),
]
