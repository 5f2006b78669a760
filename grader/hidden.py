"""Hidden checks: more cases of the same rules, drawn from other seeds. Never released; a failed
hidden check reports its rule, not the values."""

from __future__ import annotations

import random

from grader.checks import ATTRS, Check, P, bucket_probe, decode_step_kwargs, runner_setups, same, step_label
from coursekit.lesson import H200_SWEEP
from coursekit.strategies import MODES



def ex1(rng: random.Random) -> list[Check]:
    rows = [[f"row {i}", decode_step_kwargs(rng)] for i in range(4)]
    kernels = [[], [0.0], [0.0] * 7, [1000.0] * 5, [float(rng.randint(0, 2000)) for _ in range(200)]]
    ns = sorted(H200_SWEEP)
    return [
        Check("ex1", "report_other_rows", "report prints two lines per row in the lesson's format",
              [P("report", "report(other rows)", rows=rows)], hidden=True),
        Check("ex1", "simulate_edge_cases", "no kernels -> 0; zero launch cost; long chains",
              [P("simulate", f"simulate_eager_ms({len(k)} kernels, {l})", kernel_us=k, launch_us=l)
               for k in kernels for l in (0.0, 5.0, 17.0)], hidden=True),
        Check("ex1", "fit_h200_sweep", "least squares through the H200 sweep",
              [P("fit", "fit_launch_model(H200 sweep, eager)", n_kernels=ns,
                 step_ms=[H200_SWEEP[n][0] for n in ns]),
               P("fit", "fit_launch_model(H200 sweep, graph)", n_kernels=ns,
                 step_ms=[H200_SWEEP[n][1] for n in ns])]
              + [P("decode_step", step_label(kw, a), kwargs=kw, attr=a)
                 for kw in [decode_step_kwargs(rng) for _ in range(3)] for a in ATTRS],
              compare=same(rel=1e-6, abs_=1e-9), hidden=True),
    ]


def ex2(rng: random.Random) -> list[Check]:
    return [
        Check("ex2", "time_ms_without_warmup", "warmup=0 is allowed: exactly iters calls",
              [P("time_ms_calls", f"time_ms(fn, iters={i}, warmup=0)", iters=i, warmup=0)
               for i in (1, 7, 33)], hidden=True),
    ]


def ex3(rng: random.Random) -> list[Check]:
    return [
        Check("ex3", "gpu_many_warmups", "exactly warmup_iters warm-up calls for larger counts",
              [P("capture_warmup", f"capture(fn, x, warmup_iters={w})", warmup_iters=w) for w in (2, 5)],
              gpu=True, hidden=True),
    ]


def ex4(rng: random.Random) -> list[Check]:
    return [
        Check("ex4", "runner_many_inputs", "buffers and copy-in for many inputs of many shapes",
              [P("graph_runner", "GraphRunner(combine, 3 inputs)", fn="combine",
                 shapes=[[2, 2, 2], [7], [1, 5]], seeds=[4, 5, 6, 7], warmup_iters=1)],
              compare=same(keys=("outputs", "buffer_count", "buffers_are_examples", "num_captures")),
              hidden=True),
        Check("ex4", "runner_structured_outputs_not_cloned",
              "clone_outputs=False hands out the static outputs of a structured result",
              [P("graph_runner", "GraphRunner(pair, clone_outputs=False) called 3 times", fn="pair",
                 shapes=[[3], [3]], seeds=[7, 8, 9], clone_outputs=False)],
              compare=same(keys=("held_first_now", "outputs_share_static", "output_type")),
              hidden=True),
    ]


def ex5(rng: random.Random) -> list[Check]:
    setups = runner_setups(rng, 4)
    return [
        Check("ex5", "default_capture_sizes_large", "the default rule for large max_size",
              [P("default_sizes", f"default_capture_sizes({m})", max_size=m) for m in (2048, 4099)],
              hidden=True),
        Check("ex5", "runner_default_sizes_and_zero_padding",
              "capture_sizes=None means default_capture_sizes(len(max_example)), capture=None the "
              "CPU stand-in; pad_value 0",
              [bucket_probe(20, None, [11, 20, 3, 25], pad_value=0.0, use_default_capture=True)]
              + [bucket_probe(*s, pad_value=-2.0, warmup_iters=1) for s in setups],
              compare=same(keys=("calls", "capture_order", "stats")), hidden=True),
    ]


def ex6(rng: random.Random) -> list[Check]:
    sizes = sorted(rng.sample(range(1, 300), 12))
    queries = [[rng.randint(1, 320), rng.random() < 0.5] for _ in range(60)]
    return [
        Check("ex6", "dispatch_many_batches", "the dispatch rule on many batches",
              [P("dispatch", f"dispatch in mode {m}", mode=m, sizes=sizes, queries=queries)
               for m in MODES], hidden=True),
        Check("ex6", "capture_descs_repeated_sizes", "repeated sizes are captured once",
              [P("capture_descs", f"capture_descs in mode {m} with repeated sizes", mode=m,
                 sizes=[4, 4, 2, 8, 2, 1, 8]) for m in MODES], hidden=True),
    ]


def ex7(rng: random.Random) -> list[Check]:
    shapes = [[1, 1], [3, 2, 40], [2, 1, 3, 7], [1, 4096]]
    return [
        Check("ex7", "fused_norm_other_shapes", "the norm is over the last dimension, any rank",
              [P("fused_norm", f"fused_add_rms_norm on {s}", shape=s, dtype="float32", seed=9)
               for s in shapes], compare=same(rtol=1e-5, atol=1e-5), hidden=True),
    ]


def ex8(rng: random.Random) -> list[Check]:
    prompts = [[rng.randint(0, 511) for _ in range(rng.randint(1, 6))] for _ in range(6)]
    new_tokens = [rng.randint(1, 7) for _ in prompts]
    return [
        Check("ex8", "generate_other_requests", "eager decoding's tokens for another batch and model",
              [P("engine_generate", f"generate in mode {m}", mode=m, sizes=[1, 2, 4, 8, 16, 32],
                 prompts=prompts, new_tokens=new_tokens, seed=3) for m in MODES], hidden=True),
        Check("ex8", "engine_default_sizes", "capture_sizes=None means default_capture_sizes(max_seqs)",
              [P("engine_generate", f"generate with the default sizes ({m})", mode=m, sizes=None,
                 prompts=[[5], [6, 7]], new_tokens=3) for m in ("FULL", "PIECEWISE")], hidden=True),
    ]


HIDDEN = (ex1, ex2, ex3, ex4, ex5, ex6, ex7, ex8)


def hidden_checks() -> list[Check]:
    checks = []
    for make in HIDDEN:
        checks += make(random.Random(f"launch-tax hidden {make.__name__}"))
    return checks

