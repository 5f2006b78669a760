"""Exercise 7 (fusion): the probes a worker runs on the submission's ``fusion`` and
the public checks the judge grades their answers with (``checks(draw)``). Its hidden checks are
the staff repository's, never released."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import torch

from coursekit.course import ARGUMENTS
from grader.checks import Check, P, Probe, acceptance, same
from grader.probes import call, probe

if TYPE_CHECKING:
    from grader.secret import Draw


# ------------------------------------------------------------------------- probes


@probe
def hbm(mod, n_ops: int, numel: int, dtype_bytes: int, fused: bool):
    return call(mod.chain_hbm_bytes, n_ops, numel, dtype_bytes, fused=fused)


def _norm_inputs(shape: list, dtype: str, seed: int, device: str = "cpu"):
    g = torch.Generator(device=device).manual_seed(seed)
    x, residual = (torch.randn(*shape, generator=g, device=device).to(getattr(torch, dtype))
                   for _ in range(2))
    weight = (torch.rand(shape[-1], generator=g, device=device) + 0.5).to(getattr(torch, dtype))
    return x, residual, weight


@probe
def fused_norm(mod, shape: list, dtype: str, seed: int, device: str = "cpu", eps: float | None = None,
               scale: float = 1.0):
    """``fused_add_rms_norm`` on inputs of ``shape`` times ``scale`` (tiny values make the default
    eps tell), with ``eps`` passed only when given."""
    x, residual, weight = _norm_inputs(shape, dtype, seed, device)
    if scale != 1.0:
        x, residual = x * scale, residual * scale
    if eps is not None:  # small values, so that eps is not lost next to the mean square
        x, residual = x * 0.1, residual * 0.1
    before = (x.clone(), residual.clone())
    if eps is None:
        result = call(mod.fused_add_rms_norm, x, residual, weight)
    else:
        result = call(mod.fused_add_rms_norm, x, residual, weight, eps)
    out, new_residual = result
    return {"out": out.float().cpu(), "residual": new_residual.float().cpu(),
            "a_tuple": type(result) is tuple,
            "shapes": [list(out.shape), list(new_residual.shape)],
            "dtypes": [str(out.dtype), str(new_residual.dtype)],
            "inputs_unchanged": bool(torch.equal(x, before[0]) and torch.equal(residual, before[1]))}


#: Arguments for ``fused_add_rms_norm`` made from a good (4, 16) fp32 ``(x, residual, weight)``:
#: the bad ones, named by the argument at fault, then the good ones at the rules' limits.
NORM_ARGUMENTS = {
    "residual": lambda x, r, w: (x, r[:, :8], w),
    "residual-more-rows": lambda x, r, w: (x[:1], r[:2], w),  # would broadcast: x's shape only
    "residual-dtype": lambda x, r, w: (x, r.double(), w),
    "residual-device": lambda x, r, w: (x, torch.empty(r.shape, device="meta"), w),
    "residual-list": lambda x, r, w: (x, r.tolist(), w),
    "weight": lambda x, r, w: (x, r, w[:8]),
    "weight-full-shape": lambda x, r, w: (x, r, torch.ones(x.shape)),
    "weight-2-d": lambda x, r, w: (x, r, w[None]),  # as many elements, the wrong shape
    "weight-column": lambda x, r, w: (x, r, w[:, None]),
    "weight-dtype": lambda x, r, w: (x, r, w.double()),
    "weight-device": lambda x, r, w: (x, r, torch.empty(w.shape, device="meta")),
    "weight-list": lambda x, r, w: (x, r, w.tolist()),
    "x-0-d": lambda x, r, w: (torch.tensor(1.0), torch.tensor(1.0), torch.tensor(1.0)),
    "x-list": lambda x, r, w: (x.tolist(), r, w),
    "good": lambda x, r, w: (x, r, w),
    "good-1-d": lambda x, r, w: (x[0], r[0], w),
    "good-bf16": lambda x, r, w: (x.bfloat16(), r.bfloat16(), w.bfloat16()),
}


@probe
def fused_norm_args(mod, which: str):
    """``fused_add_rms_norm`` on ``NORM_ARGUMENTS[which]``: "accepted" or the error (the values
    are the other checks')."""
    x, residual, weight = _norm_inputs([4, 16], "float32", 0)
    call(mod.fused_add_rms_norm, *NORM_ARGUMENTS[which](x, residual, weight))
    return "accepted"


@probe
def count_kernels_no_cuda(mod):
    return call(mod.count_kernels, torch.add, torch.ones(2), 1.0)


def _kernels(fn, *args) -> int:
    """The probe's own count (it is the student's fused function being measured, not their
    counter): CUDA kernel events of one call after a warm-up call, copies and sets left out."""
    from torch.profiler import ProfilerActivity, profile

    call(fn, *args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call(fn, *args)
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower())


@probe
def fused_kernels(mod, dtype: str):
    x, residual, weight = _norm_inputs([8, 4096], dtype, 1, "cuda")
    return {"kernels": _kernels(mod.fused_add_rms_norm, x, residual, weight)}


@probe
def counted_kernels(mod):
    x = torch.ones(1024, device="cuda")
    return [call(mod.count_kernels, lambda t: ((t + 1) * 2).neg(), x),
            call(mod.count_kernels, lambda t: t + torch.ones(1024).to("cuda"), x),
            call(mod.count_kernels, lambda t: torch.nn.functional.softmax(t, dim=0) + t, x)]


# ------------------------------------------------------------------------- checks


def norm_probes(rng: random.Random, dtype: str, count: int, eps: bool = False) -> list[Probe]:
    shapes = [[rng.randint(1, 6), rng.randint(1, 96)] for _ in range(count)]
    if not eps:
        return [P("fused_norm", f"fused_add_rms_norm on a {s} {dtype} input", shape=s, dtype=dtype,
                  seed=rng.randint(0, 2**16)) for s in shapes]
    epsilons = [rng.choice([1e-3, 0.05, 0.1, 0.5, 2.0]) for _ in shapes]
    return [P("fused_norm", f"fused_add_rms_norm(x, residual, weight, eps={e}) on a {s} {dtype} input "
              "of small values", shape=s, dtype=dtype, seed=rng.randint(0, 2**16), eps=e)
            for s, e in zip(shapes, epsilons)]


def limit_norm_probes(rng: random.Random, dtype: str) -> list[Probe]:
    """Every draw: a 1-d x (the fewest dimensions allowed), and eps left out on values so small
    (times 1e-3) that the default 1e-6 is a third of the mean square."""
    n = rng.randint(1, 96)
    return [P("fused_norm", f"fused_add_rms_norm on a 1-d ({n},) {dtype} input", shape=[n], dtype=dtype,
              seed=rng.randint(0, 2**16)),
            P("fused_norm", f"fused_add_rms_norm(x, residual, weight) (eps left out: 1e-6) on a "
              f"[3, {n}] {dtype} input times 1e-3", shape=[3, n], dtype=dtype,
              seed=rng.randint(0, 2**16), scale=1e-3)]


def hbm_probes(rng: random.Random, count: int) -> list[Probe]:
    chains = [(rng.randint(1, 1000), rng.randint(0, 10_000), rng.choice([1, 2, 4, 8])) for _ in range(count)]
    return [P("hbm", f"chain_hbm_bytes({n}, {m}, {b}, fused={f})", n_ops=n, numel=m, dtype_bytes=b,
              fused=f) for n, m, b in chains for f in (False, True)]


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("ex7.chain_hbm_bytes")
    limits = [(0, 1024, 4), (r.randint(1, 1000), 0, r.choice([1, 2, 4, 8])), (r.randint(1, 1000),
              r.randint(1, 10_000), 1)]
    hbm_values = hbm_probes(r, 10) + [
        P("hbm", f"chain_hbm_bytes({n}, {m}, {b}, fused={f})", n_ops=n, numel=m, dtype_bytes=b, fused=f)
        for n, m, b in limits for f in (False, True)]
    r = draw.rng("ex7.rejects_bad_arguments")
    bad_hbm = (((-1, 8, 4), "n_ops"), ((-r.randint(2, 9), 8, 4), "n_ops"), ((2, -1, 4), "numel"),
               ((2, -r.randint(2, 9), 4), "numel"), ((2, 8, 0), "dtype_bytes"),
               ((2, 8, -r.randint(1, 8)), "dtype_bytes"))
    good_hbm = [(0, 0, 1), (r.randint(1, 1000), r.randint(0, 10_000), 1)]
    bad_norm = [w for w in NORM_ARGUMENTS if not w.startswith("good")]
    good_norm = [w for w in NORM_ARGUMENTS if w.startswith("good")]
    r3 = draw.rng("ex7.gpu_fused_norm_is_one_kernel")
    return [
        Check("ex7", "chain_hbm_bytes",
              "unfused: every op reads and writes (2 * n_ops * numel * bytes); fused: one read and "
              "one write; no ops: 0; zero elements and dtype_bytes = 1 at their limits; an int",
              hbm_values, points=2),
        Check("ex7", "fused_norm_fp32",
              "new_residual = x + residual, out = rms_norm(new_residual, eps) * weight (fp32: within "
              "1e-5 * (1 + |expected|)), with the eps given (1e-6 when left out), for a 1-d x too; "
              "a tuple of two tensors of x's shape and dtype; x and residual unchanged",
              norm_probes(draw.rng("ex7.fused_norm_fp32"), "float32", 8)
              + norm_probes(draw.rng("ex7.fused_norm_fp32.eps"), "float32", 3, eps=True)
              + limit_norm_probes(draw.rng("ex7.fused_norm_fp32.limits"), "float32"),
              compare=same(rtol=1e-5, atol=1e-5), points=2),
        Check("ex7", "fused_norm_bf16", "the same in bf16 (bf16 in, bf16 out), within 1e-2 * (1 + |expected|)",
              norm_probes(draw.rng("ex7.fused_norm_bf16"), "bfloat16", 6), compare=same(rtol=1e-2, atol=1e-2), points=1),
        Check("ex7", "rejects_bad_arguments",
              "chain_hbm_bytes: a negative count or size, or dtype_bytes < 1, is a ValueError naming "
              "it (zero ops, zero elements and dtype_bytes = 1 are accepted); fused_add_rms_norm: x a "
              "tensor of at least one dimension, residual a tensor matching x (shape, dtype, device), "
              "weight a tensor of exactly the shape x.shape[-1:] (not merely as many elements) with "
              "x's dtype on x's device, else a ValueError naming it (matching inputs, 1-d and bf16 "
              "ones too, are accepted); count_kernels without CUDA: a RuntimeError saying a CUDA "
              "device is needed",
              [P("hbm", f"chain_hbm_bytes{args}", name, n_ops=args[0], numel=args[1],
                 dtype_bytes=args[2], fused=False) for args, name in bad_hbm]
              + [P("hbm", f"chain_hbm_bytes{args}", n_ops=args[0], numel=args[1],
                   dtype_bytes=args[2], fused=f) for args in good_hbm for f in (False, True)]
              + [P("fused_norm_args", f"fused_add_rms_norm with a bad {w}", w.split("-")[0], which=w)
                 for w in bad_norm]
              + [P("fused_norm_args", f"fused_add_rms_norm with {w} inputs", which=w) for w in good_norm]
              + [P("count_kernels_no_cuda", "count_kernels(torch.add, ...)", cuda=True)],
              compare=acceptance(), idea=ARGUMENTS, points=1),
        Check("ex7", "gpu_fused_norm_is_one_kernel",
              "on CUDA, fused_add_rms_norm launches one kernel (profiled by the grader) and matches "
              "the reference",
              [P("fused_kernels", f"kernels of fused_add_rms_norm ({d})", dtype=d)
               for d in ("float32", "bfloat16")]
              + [P("fused_norm", "fused_add_rms_norm on CUDA (8, 4096) bf16", shape=[8, 4096],
                   dtype="bfloat16", seed=r3.randint(0, 2**16), device="cuda")],
              compare=same(rtol=1e-2, atol=1e-2), gpu=True, triton=True, points=2),
        Check("ex7", "gpu_count_kernels",
              "count_kernels counts the kernels of one call after a warm-up, copies left out",
              [P("counted_kernels", "count_kernels of three small functions")], gpu=True, points=1),
    ]
