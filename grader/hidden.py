"""Hidden checks: more cases of the same rules, drawn from their own names. Never released; a
failed hidden check reports its rule, never the values (nor anything its worker said)."""

from __future__ import annotations

from grader.checks import (ATTRS, Check, P, bucket_probe, decode_step_kwargs, per_exercise,
                           report_rows, requests, runner_setups, same, step_label)
from grader.secret import PRACTICE, Draw
from coursekit.lesson import H200_SWEEP
from coursekit.strategies import MODES


def ex1(draw: Draw) -> list[Check]:
    rows = report_rows(draw.rng("ex1.report_other_rows"), 4)
    r = draw.rng("ex1.simulate_edge_cases")
    kernels = [[], [0.0], [0.0] * r.randint(2, 9), [1000.0] * r.randint(2, 9),
               [float(r.randint(0, 2000)) for _ in range(200)]]
    launches = (0.0, 5.0, float(r.randint(6, 40)))
    ns = sorted(H200_SWEEP)
    r = draw.rng("ex1.fit_h200_sweep")
    return [
        Check("ex1", "report_other_rows", "report prints two lines per row in the lesson's format",
              [P("report", "report(other rows)", rows=rows)], hidden=True),
        Check("ex1", "simulate_edge_cases", "no kernels -> 0; zero launch cost; long chains",
              [P("simulate", f"simulate_eager_ms({len(k)} kernels, {l})", kernel_us=k, launch_us=l)
               for k in kernels for l in launches], hidden=True),
        Check("ex1", "fit_h200_sweep", "least squares through the H200 sweep",
              [P("fit", "fit_launch_model(H200 sweep, eager)", n_kernels=ns,
                 step_ms=[H200_SWEEP[n][0] for n in ns]),
               P("fit", "fit_launch_model(H200 sweep, graph)", n_kernels=ns,
                 step_ms=[H200_SWEEP[n][1] for n in ns])]
              + [P("decode_step", step_label(kw, a), kwargs=kw, attr=a)
                 for kw in [decode_step_kwargs(r) for _ in range(3)] for a in ATTRS],
              compare=same(rel=1e-6, abs_=1e-9), hidden=True),
    ]


def ex2(draw: Draw) -> list[Check]:
    r = draw.rng("ex2.time_ms_without_warmup")
    return [
        Check("ex2", "time_ms_without_warmup", "warmup=0 is allowed: exactly iters calls",
              [P("time_ms_calls", f"time_ms(fn, iters={i}, warmup=0)", iters=i, warmup=0)
               for i in (1, r.randint(2, 9), r.randint(10, 40))], hidden=True),
    ]


def ex3(draw: Draw) -> list[Check]:
    r = draw.rng("ex3.gpu_many_warmups")
    return [
        Check("ex3", "gpu_many_warmups", "exactly warmup_iters warm-up calls for larger counts",
              [P("capture_warmup", f"capture(fn, x, warmup_iters={w})", warmup_iters=w)
               for w in (2, r.randint(3, 7))], gpu=True, hidden=True),
    ]


def ex4(draw: Draw) -> list[Check]:
    r = draw.rng("ex4.runner_many_inputs")
    shapes = [[r.randint(1, 3) for _ in range(r.randint(1, 3))] for _ in range(r.randint(3, 5))]
    r2 = draw.rng("ex4.runner_structured_outputs_not_cloned")
    n = r2.randint(1, 6)
    return [
        Check("ex4", "runner_many_inputs", "buffers and copy-in for many inputs of many shapes",
              [P("graph_runner", f"GraphRunner(combine, {len(shapes)} inputs)", fn="combine",
                 shapes=shapes, seeds=r.sample(range(1, 10_000), 4), warmup_iters=1)],
              compare=same(keys=("outputs", "buffer_count", "buffers_are_examples", "num_captures")),
              hidden=True),
        Check("ex4", "runner_structured_outputs_not_cloned",
              "clone_outputs=False hands out the static outputs of a structured result",
              [P("graph_runner", "GraphRunner(pair, clone_outputs=False) called 3 times", fn="pair",
                 shapes=[[n], [n]], seeds=r2.sample(range(1, 10_000), 3), clone_outputs=False)],
              compare=same(keys=("held_first_now", "outputs_share_static", "output_type")),
              hidden=True),
    ]


def ex5(draw: Draw) -> list[Check]:
    r = draw.rng("ex5.default_capture_sizes_large")
    r2 = draw.rng("ex5.runner_default_sizes_and_zero_padding")
    setups = runner_setups(r2, 4)
    max_rows = r2.randint(9, 40)
    return [
        Check("ex5", "default_capture_sizes_large", "the default rule for large max_size",
              [P("default_sizes", f"default_capture_sizes({m})", max_size=m)
               for m in (2048, r.randint(2049, 9000))], hidden=True),
        Check("ex5", "runner_default_sizes_and_zero_padding",
              "capture_sizes=None means default_capture_sizes(len(max_example)), capture=None the "
              "CPU stand-in; pad_value 0",
              [bucket_probe(max_rows, None, [r2.randint(1, max_rows + 6) for _ in range(4)],
                            pad_value=0.0, use_default_capture=True)]
              + [bucket_probe(*s, pad_value=-2.0, warmup_iters=1) for s in setups],
              compare=same(keys=("calls", "capture_order", "stats")), hidden=True),
    ]


def ex6(draw: Draw) -> list[Check]:
    r = draw.rng("ex6.dispatch_many_batches")
    sizes = sorted(r.sample(range(1, 300), 12))
    queries = [[r.randint(1, 320), r.random() < 0.5] for _ in range(60)]
    r2 = draw.rng("ex6.capture_descs_repeated_sizes")
    repeated = [r2.choice([1, 2, 4, 8, 16]) for _ in range(7)]
    return [
        Check("ex6", "dispatch_many_batches", "the dispatch rule on many batches",
              [P("dispatch", f"dispatch in mode {m}", mode=m, sizes=sizes, queries=queries)
               for m in MODES], hidden=True),
        Check("ex6", "capture_descs_repeated_sizes", "repeated sizes are captured once",
              [P("capture_descs", f"capture_descs in mode {m} with repeated sizes", mode=m,
                 sizes=repeated) for m in MODES], hidden=True),
    ]


def ex7(draw: Draw) -> list[Check]:
    r = draw.rng("ex7.fused_norm_other_shapes")
    shapes = [[1, 1], [r.randint(1, 4), 2, r.randint(1, 64)], [2, 1, 3, r.randint(1, 16)], [1, 4096]]
    return [
        Check("ex7", "fused_norm_other_shapes", "the norm is over the last dimension, any rank",
              [P("fused_norm", f"fused_add_rms_norm on {s}", shape=s, dtype="float32",
                 seed=r.randint(0, 2**16)) for s in shapes], compare=same(rtol=1e-5, atol=1e-5),
              hidden=True),
    ]


def ex8(draw: Draw) -> list[Check]:
    r = draw.rng("ex8.generate_other_requests")
    prompts, new_tokens = requests(r, 6)
    seed = r.randint(0, 2**16)
    r2 = draw.rng("ex8.engine_default_sizes")
    small, small_new = requests(r2, 2)
    # Each range holds a count whose default sizes differ from every simpler rule's (powers of
    # two, [1, 2, 4, 8], every size): 24 and up adds 24, 40, 48... which powers of two lack.
    slot_counts = [r2.randint(2, 7), r2.randint(9, 15), r2.randint(24, 40), r2.randint(41, 100)]
    return [
        Check("ex8", "generate_other_requests", "eager decoding's tokens for another batch and model",
              [P("engine_generate", f"generate in mode {m}", mode=m, sizes=[1, 2, 4, 8, 16, 32],
                 prompts=prompts, new_tokens=new_tokens, seed=seed) for m in MODES], hidden=True),
        Check("ex8", "engine_default_sizes",
              "capture_sizes=None means default_capture_sizes(model.config.max_seqs): those sizes "
              "are captured, largest first",
              [P("engine_generate", f"generate with the default sizes ({m})", mode=m, sizes=None,
                 prompts=small, new_tokens=small_new) for m in ("FULL", "PIECEWISE")]
              + [P("engine_default_captures", f"what capture_model() captures by default for "
                   f"max_seqs={n}", max_seqs=n) for n in slot_counts], hidden=True),
    ]


def hidden_checks(draw: Draw | None = None) -> list[Check]:
    draw = draw or PRACTICE
    return [check for make in per_exercise(globals(), "grader/hidden.py") for check in make(draw)]
