"""Exercise 8 (engine): the public checks the judge grades the answers of its probes with
(``checks(draw)``); the probes a worker runs on the submission's ``engine`` are in
``grader/exercises/engine_probes.py``, registered by the import below. Its hidden checks are the
staff repository's, never released."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from coursekit.strategies import MODES
from grader.checks import Answer, Check, P, Probe, same
from grader.exercises.engine_probes import TOLERANCE  # also registers the probes

if TYPE_CHECKING:
    from grader.secret import Draw


# ------------------------------------------------------------------------- checks


def requests(rng: random.Random, count: int = 4) -> tuple[list[list[int]], list[int]]:
    """``count`` prompts of 1 to 4 tokens and how many tokens each wants (1 to 6)."""
    prompts = [[rng.randint(0, 511) for _ in range(rng.randint(1, 4))] for _ in range(count)]
    return prompts, [rng.randint(1, 6) for _ in prompts]


def step_batches(rng: random.Random) -> list[list[list[int]]]:
    """Steps of 1 to 9 rows (beyond the largest bucket, 8), one row per slot."""
    steps = []
    for n in range(1, 10):
        slots = rng.sample(range(8), n) if n <= 8 else None
        if slots is None:  # 9 rows: one sequence has two rows (a prompt chunk), so not uniform
            slots = list(range(8)) + [0]
            position = rng.randint(0, 20)
            positions = [position] * 8 + [position + 1]
        else:
            positions = [rng.randint(0, 20) for _ in slots]
        steps.append([[rng.randint(0, 511) for _ in slots], positions, slots])
    return steps


def _logits_close(probe: Probe, got: Answer, expected: Answer) -> str | None:
    """The reference's logits within the stub's tolerance for the probe's model dtype (and in
    that dtype: ``same`` compares dtypes and shapes first)."""
    atol = TOLERANCE[probe.args.get("dtype", "float32")]
    return same(rtol=0, atol=atol)(probe, got, expected)


_logits_close.needs_reference = True


def checks(draw: Draw) -> list[Check]:
    sizes = [1, 2, 4, 8, 16]
    r = draw.rng("ex8.generate_every_mode")
    prompts, new_tokens = requests(r)
    seed = r.randint(0, 2**16)
    steps = step_batches(draw.rng("ex8.step_logits"))
    r = draw.rng("ex8.padding_uses_the_padding_slot")
    pad_slots = r.sample(range(8), 3)
    pad_positions = [r.randint(0, 60) for _ in pad_slots]
    pad_tokens = [r.randint(0, 511) for _ in pad_slots]
    r = draw.rng("ex8.capture_largest_first_in_one_pool")
    capture_sizes = r.sample([1, 2, 3, 4, 6, 8], 3)
    # A different warm-up count for each probe: a hard-coded count can match one of them only.
    capture_warmups = dict(zip(("FULL", "PIECEWISE", "FULL_AND_PIECEWISE"), r.sample(range(1, 6), 3)))
    r = draw.rng("ex8.piecewise_attention_is_eager")
    n = r.randint(1, 4)
    attention_rows = dict(tokens=[r.randint(0, 511) for _ in range(n)], positions=[0] * n, slots=r.sample(range(8), n))
    prompt_n = r.randint(2, 4)  # one sequence's prompt tokens: a mixed batch, never in a full graph
    prompt_rows = dict(
        tokens=[r.randint(0, 511) for _ in range(prompt_n)],
        positions=list(range(prompt_n)),
        slots=[r.randint(0, 7)] * prompt_n,
    )
    shrink_prompts, shrink_new = requests(draw.rng("ex8.generate_shrinks_the_batch"))
    # A prompt step of at most max_seqs (8) tokens, some sequences with several: padded, it still
    # fits a decode graph (<= max_seqs requests), so only the uniform flag keeps it off one.
    r = draw.rng("ex8.generate_shrinks_the_batch.short")
    short_prompts = [[r.randint(0, 511) for _ in range(k)] for k in (2, 1, r.randint(2, 4))]
    short_new = [r.randint(2, 4) for _ in short_prompts]
    # The given argument checks' accepted side, run for its answers: the largest token, slot and
    # position, a step far past the buckets, max_seqs prompts with one filling the cache exactly.
    token = draw.rng("ex8.step_logits.largest").randint(0, 511)
    r = draw.rng("ex8.step_logits.before_capture")
    early = [
        [[r.randint(0, 511) for _ in range(n)], [r.randint(0, 20) for _ in range(n)], r.sample(range(8), n)]
        for n in (r.randint(1, 4), r.randint(5, 8))
    ]
    r = draw.rng("ex8.padding_uses_the_padding_slot.rows")
    refill = [[[r.randint(1, 511) for _ in range(4)], [r.randint(1, 60) for _ in range(4)], [4, 5, 6, 7]]]
    refill += [
        [[r.randint(1, 511) for _ in range(n)], [r.randint(1, 60) for _ in range(n)], r.sample(range(8), n)]
        for n in (r.randint(1, 3), r.randint(1, 3))
    ]
    r = draw.rng("ex8.generate_shrinks_the_batch.flags")
    # prompts of one token each (a uniform prompt step) and of two each (not uniform), 2 or 3 of them
    one_token_prompts = [
        [[r.randint(0, 511)] for _ in range(r.randint(2, 3))],
        [[r.randint(0, 511), r.randint(0, 511)] for _ in range(r.randint(2, 3))],
    ]
    # Always distinct slots in descending order (uniform: every slot distinct), which a rule
    # such as "the slots ascend" gets wrong; drawn in any order they may happen to ascend.
    flag_slots = [sorted(r.sample(range(8), r.randint(2, 4)), reverse=True), r.sample(range(8), r.randint(1, 4))]
    a, b = r.randint(0, 3), r.randint(4, 7)  # two slots; a repeated one is a prompt chunk
    flag_slots += [[a, a, b], [a, b, b], [b, a, b], [a] * r.randint(2, 4)]
    r2 = draw.rng("ex8.gpu_engine")
    gpu_prompts, gpu_new = requests(r2)
    gpu_steps = step_batches(r2)
    r = draw.rng("ex8.generate_every_mode.more")
    bf16_prompts, bf16_new = requests(r)
    bf16_seed = r.randint(0, 2**16)
    every_count = r.randint(2, 5)  # one int max_new_tokens for every sequence
    r = draw.rng("ex8.padding_uses_the_padding_slot.buffers")
    buffer_sizes = r.sample([1, 2, 3, 4, 6, 8, 12], 3)  # in any order: the buffers take the largest
    default_seqs = r.randint(2, 7)  # a second max_seqs for the defaults (8 is the first)
    r = draw.rng("ex8.compile_then_capture")
    compile_sizes = sorted(r.sample([1, 2, 3, 4, 6, 8], 2))
    compile_prompts, compile_new = requests(r, count=3)
    return [
        Check(
            "ex8",
            "generate_every_mode",
            "every mode yields the tokens of eager decoding, for a float32 and a bfloat16 model: "
            "the prompt step, then one token per unfinished sequence, greedy; max_new_tokens is "
            "an int or one count per sequence; the tokens come back as a list of lists of ints; "
            "max_seqs prompts, one of them filling the cache exactly, run right too",
            [
                P(
                    "engine_generate",
                    f"DecodeEngine({m}, {sizes}).generate({prompts}, {new_tokens})",
                    mode=m,
                    sizes=sizes,
                    prompts=prompts,
                    new_tokens=new_tokens,
                    seed=seed,
                )
                for m in MODES
            ]
            + [
                P(
                    "engine_generate",
                    f"DecodeEngine({m}, {sizes}) on a bfloat16 model: generate({bf16_prompts}, {bf16_new})",
                    mode=m,
                    sizes=sizes,
                    prompts=bf16_prompts,
                    new_tokens=bf16_new,
                    seed=bf16_seed,
                    dtype="bfloat16",
                )
                for m in MODES
            ]
            + [
                P(
                    "engine_generate",
                    f"DecodeEngine(FULL_AND_PIECEWISE, {sizes}).generate({prompts}, {every_count})",
                    mode="FULL_AND_PIECEWISE",
                    sizes=sizes,
                    prompts=prompts,
                    new_tokens=every_count,
                    seed=seed,
                )
            ]
            + [
                P(
                    "engine_largest",
                    f"DecodeEngine(FULL, [2]).generate(max_seqs prompts: [[{token}] * 55] + "
                    f"[[{token}]] * 7, [10, 1, 1, 1, 1, 1, 1, 2]) (one sequence fills the cache exactly)",
                    kind="generate-largest",
                    token=token,
                )
            ],
            points=3,
        ),
        Check(
            "ex8",
            "step_logits",
            "step returns one row of logits per token, in the model's dtype, within 1e-5 of the "
            "eager model in float32 and 5e-2 in bfloat16, for every "
            "batch up to one row past the largest capture size (which runs eagerly); before "
            "capture_model() nothing is captured, so every step runs eagerly; the last token, "
            "slot and position and a step of hundreds of rows (eager) run right too",
            [
                P(
                    "engine_steps",
                    f"DecodeEngine({m}, [1, 2, 4, 8]): steps of 1..9 rows",
                    mode=m,
                    sizes=[1, 2, 4, 8],
                    steps=steps,
                )
                for m in MODES
            ]
            + [
                P(
                    "engine_steps",
                    f"DecodeEngine({m}, [1, 2, 4, 8]) on a bfloat16 model: steps of 1..9 rows",
                    mode=m,
                    sizes=[1, 2, 4, 8],
                    steps=steps,
                    dtype="bfloat16",
                )
                for m in MODES
            ]
            + [
                P(
                    "engine_steps",
                    f"DecodeEngine({m}, [1, 2, 4, 8]): steps before capture_model()",
                    mode=m,
                    sizes=[1, 2, 4, 8],
                    steps=early,
                    capture_now=False,
                )
                for m in ("FULL", "PIECEWISE")
            ]
            + [
                P(
                    "engine_largest",
                    f"DecodeEngine(FULL, [2]).step(tokens [{token}, 511], positions [63, 63], "
                    "slots [7, 0]): the last token, position and slot",
                    kind="step-largest",
                    token=token,
                ),
                P(
                    "engine_largest",
                    "DecodeEngine(FULL, [2]).step of 300 rows (eager, past the bucket): its last three rows",
                    kind="step-300-rows",
                    token=token,
                ),
            ],
            compare=_logits_close,
            points=2,
        ),
        Check(
            "ex8",
            "padding_uses_the_padding_slot",
            "rows that only pad a batch are reset before every replay to token 0, position 0 and "
            "model.padding_slot, so they read and write only the padding slot, never a real "
            "sequence's cache; a new engine's static buffers are as stated (tokens, positions, "
            "slots 1-D int64; hidden, attn in the model's dtype; max(capture_sizes) rows; slots "
            "filled with model.padding_slot, the rest zeros) and capture_model() leaves the real "
            "slots' cache unchanged",
            [
                P(
                    "engine_padding",
                    f"a 3-row step padded to 4 ({m})",
                    mode=m,
                    sizes=[4],
                    tokens=pad_tokens,
                    positions=pad_positions,
                    slots=pad_slots,
                )
                for m in ("FULL", "PIECEWISE")
            ]
            + [
                P(
                    "engine_padding_rows",
                    f"padding rows of the static buffers after steps of "
                    f"{[len(t) for t, _, _ in refill]} rows padded to 4 ({m})",
                    mode=m,
                    sizes=[4],
                    steps=refill,
                )
                for m in ("FULL", "PIECEWISE")
            ]
            + [
                P(
                    "engine_buffers",
                    f"the static buffers of a new DecodeEngine({m}, {s}) on a {d} model",
                    mode=m,
                    sizes=s,
                    dtype=d,
                )
                for m, s, d in (
                    ("PIECEWISE", buffer_sizes, "float32"),
                    ("PIECEWISE", buffer_sizes, "bfloat16"),
                    ("FULL_AND_PIECEWISE", None, "bfloat16"),
                    ("FULL", buffer_sizes, "float32"),
                )
            ],
            points=2,
        ),
        Check(
            "ex8",
            "capture_largest_first_in_one_pool",
            "capture_model captures capture_descs() in order (largest first), PIECEWISE one graph "
            "per segment, all in the first graph's pool, with the engine's warmup_iters; the "
            "defaults are mode=CUDAGraphMode.FULL, capture_sizes=None and warmup_iters=1; graphs "
            "holds what capture returned under each (mode, desc) key (PIECEWISE: the list of "
            "segment graphs); capture_seconds is a float above 0, at most capture_model()'s wall "
            "time, and capture_memory_bytes the int 0 on a CPU",
            [
                P(
                    "engine_captures",
                    f"DecodeEngine({m}, {capture_sizes}, warmup_iters={w}).capture_model()",
                    mode=m,
                    sizes=capture_sizes,
                    warmup_iters=w,
                )
                for m, w in capture_warmups.items()
            ]
            + [
                P(
                    "engine_defaults",
                    f"DecodeEngine(model of max_seqs={k}, capture=recorder), every "
                    "other argument left to its default: capture_model()",
                    max_seqs=k,
                )
                for k in (8, default_seqs)
            ],
            points=2,
        ),
        Check(
            "ex8",
            "piecewise_attention_is_eager",
            "PIECEWISE captures the segments between attention calls and runs attention eagerly; "
            "FULL captures the whole forward pass of a uniform decode batch; the model's attention "
            "holds only such batches in a full graph, so FULL runs as FULL_AND_PIECEWISE (engine.mode): "
            "a prompt step replays the PIECEWISE graphs, and with full graphs alone "
            "(FULL_DECODE_ONLY) it runs eagerly; every other mode runs as given",
            [
                P("engine_attention", f"where attention runs ({m}), a {n}-row step", mode=m, **attention_rows)
                for m in ("PIECEWISE", "FULL")
            ]
            + [P("engine_mode", f"DecodeEngine(mode={m}).mode", mode=m) for m in MODES]
            + [
                P(
                    "engine_attention",
                    f"where attention runs ({m}), a {len(prompt_rows['tokens'])}-token prompt step",
                    mode=m,
                    **prompt_rows,
                )
                for m in ("FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
            ],
            points=2,
        ),
        Check(
            "ex8",
            "generate_shrinks_the_batch",
            "the first step feeds every prompt token (a mixed batch), later steps only the "
            "unfinished sequences (uniform decode); stats count each (mode, descriptor) replayed; "
            "step(uniform_decode=None) is uniform exactly when every slot is distinct; "
            "sequence i in slot i, generate passing the flag",
            [
                P(
                    "engine_batches",
                    f"the steps of generate({shrink_prompts}, {shrink_new}): rows, "
                    "slots, positions and the uniform_decode flag passed",
                    prompts=shrink_prompts,
                    new_tokens=shrink_new,
                )
            ]
            + [
                P("engine_stats", f"stats after generate in {m}", mode=m, prompts=shrink_prompts, new_tokens=shrink_new)
                for m in ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY")
            ]
            + [
                P(
                    "engine_stats",
                    f"stats after generate({short_prompts}, {short_new}) in {m}",
                    mode=m,
                    prompts=short_prompts,
                    new_tokens=short_new,
                )
                for m in ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY")
            ]
            + [
                P(
                    "engine_stats",
                    f"stats after generate({p}, 1) in FULL_DECODE_ONLY (the prompt step is "
                    "uniform exactly when every prompt is one token)",
                    mode="FULL_DECODE_ONLY",
                    prompts=p,
                    new_tokens=1,
                )
                for p in one_token_prompts
            ]
            + [
                P(
                    "engine_uniform_flags",
                    f"what steps with slots {flag_slots} replay in FULL_AND_PIECEWISE without uniform_decode",
                    slot_lists=flag_slots,
                )
            ],
            points=1,
        ),
        Check(
            "ex8",
            "compile_then_capture",
            "with a compiler, every function capture_model() captures (the FULL forward, each "
            "PIECEWISE segment) is one the compiler returned; the compiler is never called by "
            "step; generate still yields eager decoding's tokens",
            [
                P(
                    "engine_compiles",
                    f"DecodeEngine({m}, {compile_sizes}, compiler=stand-in): what was "
                    f"captured, then generate({compile_prompts}, {compile_new})",
                    mode=m,
                    sizes=compile_sizes,
                    prompts=compile_prompts,
                    new_tokens=compile_new,
                )
                for m in ("FULL", "PIECEWISE", "FULL_DECODE_ONLY")
            ],
            points=1,
        ),
        Check(
            "ex8",
            "gpu_engine",
            "on real CUDA graphs: every mode yields eager decoding's tokens and logits within 1e-5",
            [
                P(
                    "engine_generate",
                    f"generate on CUDA ({m})",
                    mode=m,
                    sizes=sizes,
                    prompts=gpu_prompts,
                    new_tokens=gpu_new,
                    device="cuda",
                )
                for m in MODES
            ]
            + [
                P("engine_steps", f"steps on CUDA ({m})", mode=m, sizes=[1, 2, 4, 8], steps=gpu_steps, device="cuda")
                for m in ("FULL", "PIECEWISE")
            ],
            compare=same(rtol=0, atol=1e-5),
            gpu=True,
            points=3,
        ),
    ]
