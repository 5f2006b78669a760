"""Exercise 7 (fusion): the probes a worker runs on the submission's ``fusion`` and
the public checks the judge grades their answers with (``checks(draw)``). Its hidden checks are
the staff repository's, never released."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import torch

from grader.checks import Check, P, Probe, same
from grader.probes import call, probe

if TYPE_CHECKING:
    from grader.secret import Draw


# ------------------------------------------------------------------------- probes


@probe
def hbm(mod, n_ops: int, numel: int, dtype_bytes: int, fused: bool):
    return call(mod.chain_hbm_bytes, n_ops, numel, dtype_bytes, fused=fused)


def _norm_inputs(shape: list, dtype: str, seed: int, device: str = "cpu"):
    g = torch.Generator(device=device).manual_seed(seed)
    x, residual = (torch.randn(*shape, generator=g, device=device).to(getattr(torch, dtype)) for _ in range(2))
    weight = (torch.rand(shape[-1], generator=g, device=device) + 0.5).to(getattr(torch, dtype))
    return x, residual, weight


@probe
def fused_norm(
    mod, shape: list, dtype: str, seed: int, device: str = "cpu", eps: float | None = None, scale: float = 1.0
):
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
    return {
        "out": out.float().cpu(),
        "residual": new_residual.float().cpu(),
        "a_tuple": type(result) is tuple,
        "shapes": [list(out.shape), list(new_residual.shape)],
        "dtypes": [str(out.dtype), str(new_residual.dtype)],
        "inputs_unchanged": bool(torch.equal(x, before[0]) and torch.equal(residual, before[1])),
    }


def _kernels(fn, *args) -> int:
    """The probe's own count (it is the student's fused function being measured, not their
    counter): CUDA kernel events of one call after a warm-up call, copies and sets left out."""
    from torch.profiler import ProfilerActivity, profile

    call(fn, *args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call(fn, *args)
        torch.cuda.synchronize()
    return sum(
        1
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
        and "memcpy" not in e.name.lower()
        and "memset" not in e.name.lower()
    )


@probe
def fused_kernels(mod, dtype: str):
    x, residual, weight = _norm_inputs([8, 4096], dtype, 1, "cuda")
    return {"kernels": _kernels(mod.fused_add_rms_norm, x, residual, weight)}


@probe
def counted_kernels(mod):
    x = torch.ones(1024, device="cuda")
    return [
        call(mod.count_kernels, lambda t: ((t + 1) * 2).neg(), x),
        call(mod.count_kernels, lambda t: t + torch.ones(1024).to("cuda"), x),
        call(mod.count_kernels, lambda t: torch.nn.functional.softmax(t, dim=0) + t, x),
    ]


# ------------------------------------------------------------------------- checks


def norm_probes(rng: random.Random, dtype: str, count: int, eps: bool = False) -> list[Probe]:
    shapes = [[rng.randint(1, 6), rng.randint(1, 96)] for _ in range(count)]
    if not eps:
        return [
            P(
                "fused_norm",
                f"fused_add_rms_norm on a {s} {dtype} input",
                shape=s,
                dtype=dtype,
                seed=rng.randint(0, 2**16),
            )
            for s in shapes
        ]
    epsilons = [rng.choice([1e-3, 0.05, 0.1, 0.5, 2.0]) for _ in shapes]
    return [
        P(
            "fused_norm",
            f"fused_add_rms_norm(x, residual, weight, eps={e}) on a {s} {dtype} input of small values",
            shape=s,
            dtype=dtype,
            seed=rng.randint(0, 2**16),
            eps=e,
        )
        for s, e in zip(shapes, epsilons)
    ]


def limit_norm_probes(rng: random.Random, dtype: str) -> list[Probe]:
    """Every draw: a 1-d x (the fewest dimensions allowed), and eps left out on values so small
    (times 1e-3) that the default 1e-6 is a third of the mean square."""
    n = rng.randint(1, 96)
    return [
        P(
            "fused_norm",
            f"fused_add_rms_norm on a 1-d ({n},) {dtype} input",
            shape=[n],
            dtype=dtype,
            seed=rng.randint(0, 2**16),
        ),
        P(
            "fused_norm",
            f"fused_add_rms_norm(x, residual, weight) (eps left out: 1e-6) on a [3, {n}] {dtype} input times 1e-3",
            shape=[3, n],
            dtype=dtype,
            seed=rng.randint(0, 2**16),
            scale=1e-3,
        ),
    ]


def hbm_probes(rng: random.Random, count: int) -> list[Probe]:
    chains = [(rng.randint(1, 1000), rng.randint(0, 10_000), rng.choice([1, 2, 4, 8])) for _ in range(count)]
    return [
        P("hbm", f"chain_hbm_bytes({n}, {m}, {b}, fused={f})", n_ops=n, numel=m, dtype_bytes=b, fused=f)
        for n, m, b in chains
        for f in (False, True)
    ]


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("ex7.chain_hbm_bytes")
    limits = [
        (0, 1024, 4),
        (r.randint(1, 1000), 0, r.choice([1, 2, 4, 8])),
        (r.randint(1, 1000), r.randint(1, 10_000), 1),
    ]
    hbm_values = hbm_probes(r, 10) + [
        P("hbm", f"chain_hbm_bytes({n}, {m}, {b}, fused={f})", n_ops=n, numel=m, dtype_bytes=b, fused=f)
        for n, m, b in limits
        for f in (False, True)
    ]
    r3 = draw.rng("ex7.gpu_fused_norm_is_one_kernel")
    return [
        Check(
            "ex7",
            "chain_hbm_bytes",
            "unfused: every op reads and writes (2 * n_ops * numel * bytes); fused: one read and "
            "one write; no ops: 0; zero elements and dtype_bytes = 1 at their limits; an int",
            hbm_values,
            points=3,
        ),
        Check(
            "ex7",
            "fused_norm_fp32",
            "new_residual = x + residual, out = rms_norm(new_residual, eps) * weight (fp32: within "
            "1e-5 * (1 + |expected|)), with the eps given (1e-6 when left out), for a 1-d x too; "
            "a tuple of two tensors of x's shape and dtype; x and residual unchanged",
            norm_probes(draw.rng("ex7.fused_norm_fp32"), "float32", 8)
            + norm_probes(draw.rng("ex7.fused_norm_fp32.eps"), "float32", 3, eps=True)
            + limit_norm_probes(draw.rng("ex7.fused_norm_fp32.limits"), "float32"),
            compare=same(rtol=1e-5, atol=1e-5),
            points=2,
        ),
        Check(
            "ex7",
            "fused_norm_bf16",
            "the same in bf16 (bf16 in, bf16 out), within 1e-2 * (1 + |expected|)",
            norm_probes(draw.rng("ex7.fused_norm_bf16"), "bfloat16", 6),
            compare=same(rtol=1e-2, atol=1e-2),
            points=1,
        ),
        Check(
            "ex7",
            "gpu_fused_norm_is_one_kernel",
            "on CUDA, fused_add_rms_norm launches one kernel (profiled by the grader) and matches the reference",
            [P("fused_kernels", f"kernels of fused_add_rms_norm ({d})", dtype=d) for d in ("float32", "bfloat16")]
            + [
                P(
                    "fused_norm",
                    "fused_add_rms_norm on CUDA (8, 4096) bf16",
                    shape=[8, 4096],
                    dtype="bfloat16",
                    seed=r3.randint(0, 2**16),
                    device="cuda",
                )
            ],
            compare=same(rtol=1e-2, atol=1e-2),
            gpu=True,
            triton=True,
            points=2,
        ),
        Check(
            "ex7",
            "gpu_count_kernels",
            "count_kernels counts the kernels of one call after a warm-up, copies left out",
            [P("counted_kernels", "count_kernels of three small functions")],
            gpu=True,
            points=1,
        ),
    ]
