"""Exercise 8 · engine — a decode engine with CUDA graphs. Run: python -m pytest exercises -m ex8

On a CPU the engine captures with the course's stand-in (static inputs, outputs overwritten on
every replay, memory pools); tests marked ``gpu`` run the same checks on real CUDA graphs.
Every mode must give the tokens of a plain greedy loop (one sequence at a time, eagerly) and
logits within 1e-5 of the eager model's (5e-2 for a bfloat16 model, which keeps 8 significant
bits), for a float32 and a bfloat16 ``ToyModel`` alike.
"""

import time

import pytest
import torch

from coursekit.checks import check_rejects
from coursekit.standin import RecordingCapture, RecordingCompiler, inside_graph
from coursekit.strategies import MODES
from coursekit.toymodel import ModelConfig, ToyModel
from coursekit.vllm_recorded import engine_cases, mode_table, resolved_modes

pytestmark = pytest.mark.ex8
gpu = pytest.mark.gpu
SIZES = [1, 2, 4, 8, 16]  # 16 > max_seqs: a prompt batch can be replayed too
PROMPTS = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10]]
NEW_TOKENS = [5, 3, 6, 2]  # sequences finish at different steps
# bfloat16 keeps 8 significant bits, so a replay that sums in another order may move a logit by
# a few of its last bits: these prompts' greedy choices win by more than 0.02 (measured on the
# eager bfloat16 model), far beyond such a rounding, so every correct engine picks the same.
PROMPTS_BF16 = [[9], [221, 432, 29, 227], [310, 290], [392]]
NEW_TOKENS_BF16 = [5, 3, 4, 2]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
#: The engine's CPU tests name the device with its index: its tensors say ``cpu``, the name says
#: ``cpu:0``, as on a GPU ``cuda`` is the device whose tensors say ``cuda:0``. A device is a
#: device however it was named.
CPU = "cpu:0"
#: How close a step's logits must be to the eager model's, by the model's dtype (the stub's rule).
TOLERANCE = {"float32": 1e-5, "bfloat16": 5e-2}


def greedy_alone(prompt, new_tokens, device="cpu", dtype="float32"):
    """The expected tokens: one sequence, one token per forward pass, no engine."""
    model = ToyModel(device=device, dtype=DTYPES[dtype])

    def row(v):
        return torch.tensor([v], device=device)

    for position, token in enumerate(prompt):
        logits = model.forward(row(token), row(position), row(0))
    out = []
    for k in range(new_tokens):
        out.append(int(logits[-1].argmax()))
        if k + 1 < new_tokens:  # the last new token is never fed back
            logits = model.forward(row(out[-1]), row(len(prompt) + k), row(0))
    return out


EXPECTED = [greedy_alone(p, n) for p, n in zip(PROMPTS, NEW_TOKENS)]
EXPECTED_BF16 = [greedy_alone(p, n, dtype="bfloat16") for p, n in zip(PROMPTS_BF16, NEW_TOKENS_BF16)]


def engine_for(engine, mode, device=CPU, sizes=SIZES, dtype="float32", **kwargs):
    model = ToyModel(device=device, dtype=DTYPES[dtype])
    runner = engine.DecodeEngine(model, mode=engine.CUDAGraphMode[mode], capture_sizes=sizes, **kwargs)
    runner.capture_model()
    return model, runner


def rows(*columns, device=CPU):
    return [torch.tensor(c, dtype=torch.long, device=device) for c in columns]


def check_token_lists(got, what):
    """``generate``'s answer is a list of lists of ints, not tuples or tensors."""
    plain = type(got) is list and all(type(s) is list and all(type(t) is int for t in s) for s in got)
    assert plain, (f"{what} returned {got!r} ({type(got).__name__} of "
                   f"{sorted({type(s).__name__ for s in got}) if isinstance(got, (list, tuple)) else '?'})"
                   "\n  rule: generate returns a list of lists of ints (not tuples, not tensors)")


def check_generate(engine, mode, device=CPU, dtype="float32"):
    _, runner = engine_for(engine, mode, device, dtype=dtype)
    prompts, new, expected = ((PROMPTS, NEW_TOKENS, EXPECTED) if dtype == "float32"
                              else (PROMPTS_BF16, NEW_TOKENS_BF16, EXPECTED_BF16))
    got = runner.generate(prompts, new)
    check_token_lists(got, f"mode {mode} ({dtype}): generate")
    assert got == expected, (
        f"mode {mode} ({dtype} model): generate({prompts}, {new}) gave {got}, a greedy loop over "
        f"each sequence alone gives {expected}\n  rule: every mode yields the tokens of eager "
        "decoding (static buffers refilled with copy_ every step, padding in the padding slot)")


def check_step_logits(engine, mode, device=CPU, dtype="float32"):
    """Batches of 1 to beyond the largest bucket (4), each compared with the eager model."""
    eager = ToyModel(device=device, dtype=DTYPES[dtype])
    _, runner = engine_for(engine, mode, device, sizes=[1, 2, 4], dtype=dtype)
    for n in range(1, 9):
        positions = [n + i for i in range(n)]
        tokens, positions, slots = rows([(7 * n + i) % 500 for i in range(n)], positions,
                                        list(range(n)), device=device)
        expected = eager.forward(tokens, positions, slots)
        got = runner.step(tokens, positions, slots)
        assert isinstance(got, torch.Tensor) and got.shape == expected.shape, (
            f"mode {mode}: step of {n} rows returned {getattr(got, 'shape', got)!r}, expected "
            f"{tuple(expected.shape)}\n  rule: one row of logits per token, padding rows dropped")
        assert got.dtype == expected.dtype, (
            f"mode {mode}: step of {n} rows on a {dtype} model returned {got.dtype} logits, the "
            f"eager model's are {expected.dtype}\n  rule: the logits are in the model's dtype")
        error = (got.double() - expected.double()).abs().max().item()
        assert error <= TOLERANCE[dtype], (
            f"mode {mode}: step of {n} rows differs from the eager {dtype} model by {error:.3g} "
            f"(allowed {TOLERANCE[dtype]:g})")


# ---------------------------------------------------------------- the same tokens in every mode


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mode", MODES)
def test_every_mode_generates_the_tokens_of_eager_decoding(engine, mode, dtype):
    check_generate(engine, mode, dtype=dtype)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mode", MODES)
def test_step_logits_equal_eager_for_every_batch_size(engine, mode, dtype):
    check_step_logits(engine, mode, dtype=dtype)


def test_an_int_max_new_tokens_is_every_sequences_count(engine):
    _, runner = engine_for(engine, "FULL_AND_PIECEWISE")
    got = runner.generate(PROMPTS, 3)
    expected = [greedy_alone(p, 3) for p in PROMPTS]
    check_token_lists(got, "generate(prompts, 3)")
    assert got == expected, (f"generate({PROMPTS}, 3) gave {got}; eager greedy decoding gives "
                             f"{expected}\n  rule: an int max_new_tokens is every sequence's count")


def test_generate_shrinks_the_batch_as_sequences_finish(engine):
    _, runner = engine_for(engine, "FULL")
    sizes, step = [], runner.step

    def spy(tokens, positions, slots, *args, **kwargs):
        sizes.append(len(tokens))
        return step(tokens, positions, slots, *args, **kwargs)

    runner.step = spy
    runner.generate(PROMPTS, NEW_TOKENS)
    expected = [sum(map(len, PROMPTS))] + [sum(n > k for n in NEW_TOKENS) for k in range(1, max(NEW_TOKENS))]
    assert sizes == expected, (
        f"generate stepped with batches of {sizes}; expected {expected}\n  rule: the first step "
        "feeds every prompt token, later steps only the sequences still generating")


def test_generate_steps_each_sequence_in_its_slot_and_passes_the_flag(engine):
    _, runner = engine_for(engine, "FULL")
    seen, step = [], runner.step

    def spy(tokens, positions, slots, *args, **kwargs):
        flag = args[0] if args else kwargs.get("uniform_decode", "not passed")
        seen.append((slots.tolist(), positions.tolist(), flag))
        return step(tokens, positions, slots, *args, **kwargs)

    runner.step = spy
    runner.generate(PROMPTS, NEW_TOKENS)
    first = ([i for i, p in enumerate(PROMPTS) for _ in p], [j for p in PROMPTS for j in range(len(p))],
             False)
    assert seen[0] == first, (
        f"generate's first step: (slots, positions, uniform_decode) = {seen[0]}, expected {first}\n"
        "  rule: sequence i uses slot i; row j of its prompt sits at position j; generate passes "
        "the flag (False: these prompts are longer than one token)")
    for k, (slots, positions, flag) in enumerate(seen[1:], start=1):
        live = [i for i, n in enumerate(NEW_TOKENS) if n > k]
        want = (live, [len(PROMPTS[i]) + k - 1 for i in live], True)
        assert (slots, positions, flag) == want, (
            f"generate's step {k + 1}: (slots, positions, uniform_decode) = {(slots, positions, flag)}, "
            f"expected {want}\n  rule: each unfinished sequence i in slot i at its next position, "
            "and generate passes uniform_decode=True for a decode step")


@pytest.mark.parametrize("mode", ["FULL", "PIECEWISE"])
def test_a_returned_result_survives_the_next_step(engine, mode):
    _, runner = engine_for(engine, mode, sizes=[4])
    first = runner.step(*rows([1, 2, 3], [0, 0, 0], [0, 1, 2]))
    kept = first.clone()
    runner.step(*rows([4, 5, 6], [1, 1, 1], [0, 1, 2]))
    assert torch.equal(first, kept), (
        f"mode {mode}: the logits step() returned changed when the next step ran\n  rule: return "
        "a fresh tensor (the graph overwrites its output tensors on every replay)")


def test_prompt_steps_are_mixed_batches_and_decode_steps_uniform(engine):
    """FULL_AND_PIECEWISE: the prompt step (several rows per sequence) replays a PIECEWISE graph,
    the decode steps (one row per sequence) a FULL one."""
    # 6 prompt tokens pad to 8 = max_seqs: a decode graph would fit, only the flag says no.
    for prompts in (PROMPTS, [[1, 2], [3], [4, 5, 6]]):
        _, runner = engine_for(engine, "FULL_AND_PIECEWISE")
        runner.generate(prompts, 3)
        kinds = sorted({(k[0].name, bool(k[1].uniform)) for k, v in dict(runner.stats).items()
                        if k != "eager" and v})
        assert kinds == [("FULL", True), ("PIECEWISE", False)], (
            f"stats after generate({prompts}, 3) in FULL_AND_PIECEWISE: {dict(runner.stats)}\n  rule: "
            "uniform_decode is True only when every row has its own slot")


def test_a_batch_larger_than_every_bucket_runs_eagerly(engine):
    eager, (_, runner) = ToyModel(), engine_for(engine, "FULL", sizes=[1, 2])
    inputs = rows([3, 4, 5], [0, 0, 0], [0, 1, 2])
    got = runner.step(*inputs)
    assert runner.stats["eager"] == 1, f"stats after one 3-row step with buckets [1, 2]: {dict(runner.stats)}"
    assert (got - eager.forward(*inputs)).abs().max() <= 1e-5


# ---------------------------------------------------------------- padding and capture


@pytest.mark.parametrize("mode", ["FULL", "PIECEWISE"])
def test_padding_lanes_never_touch_a_real_sequence(engine, mode):
    model, runner = engine_for(engine, mode, sizes=[4])
    runner.step(*rows([21, 22, 23, 24], [1, 1, 1, 1], [4, 5, 6, 7]))  # fills all 4 rows first
    g = torch.Generator().manual_seed(0)
    model.k_cache.copy_(torch.randn(model.k_cache.shape, generator=g))
    model.v_cache.copy_(torch.randn(model.v_cache.shape, generator=g))
    before = (model.k_cache.clone(), model.v_cache.clone())
    slots, positions = [1, 2, 3], [5, 6, 7]
    runner.step(*rows([11, 12, 13], positions, slots))
    written = torch.zeros(model.k_cache.shape[1:3], dtype=torch.bool)
    written[slots, positions] = True
    written[model.padding_slot] = True
    for name, old, new in (("k_cache", before[0], model.k_cache), ("v_cache", before[1], model.v_cache)):
        changed = (old != new).any(dim=(0, 3, 4)) & ~written
        where = [tuple(i) for i in changed.nonzero().tolist()]
        assert not where, (
            f"mode {mode}: a 3-row step padded to 4 changed {name} at (slot, position) {where[:4]}, "
            f"which no real row wrote\n  rule: padding rows use slot model.padding_slot = "
            f"{model.padding_slot}, refilled on every step")


@pytest.mark.parametrize("mode", ["FULL", "PIECEWISE"])
def test_padding_rows_are_reset_before_every_replay(engine, mode):
    """vLLM resets the padding part of its input buffers before every replay, so a padding row
    can never read a stale token or an out-of-range position: rows n..bucket-1 of the static
    buffers hold token 0, position 0 and the padding slot, whatever the step before left there."""
    model, runner = engine_for(engine, mode, sizes=[4])
    runner.step(*rows([21, 22, 23, 24], [9, 8, 7, 6], [4, 5, 6, 7]))  # fills all 4 rows first
    runner.step(*rows([11, 12], [5, 6], [1, 2]))
    held = {name: getattr(runner, name)[2:4].tolist() for name in ("tokens", "positions", "slots")}
    expected = {"tokens": [0, 0], "positions": [0, 0], "slots": [model.padding_slot] * 2}
    assert held == expected, (
        f"mode {mode}: after a 2-row step padded to 4 (following a full one), rows 2..3 of the "
        f"static buffers hold {held}; expected {expected}\n  rule: before each replay, fill rows "
        "n..bucket-1 with token 0, position 0 and model.padding_slot")


@pytest.mark.parametrize("device", [CPU, pytest.param("cuda", marks=gpu)])
@pytest.mark.parametrize("mode", ["FULL", "PIECEWISE"])
def test_padded_batches_replay_their_bucket_with_fixed_buffers(engine, mode, device):
    """As vLLM's and SGLang's CUDA-graph tests do: batch sizes that need padding (3, 5, 7 with
    buckets 1, 2, 4, 8) give the eager model's logits, each replays its bucket's graph (no silent
    eager fallback for a size that was captured), the static inputs never move, and in PIECEWISE
    the eager attention between the graphs runs on every replay."""
    eager, model = ToyModel(device=device), ToyModel(device=device)
    runner = engine.DecodeEngine(model, mode=engine.CUDAGraphMode[mode], capture_sizes=[1, 2, 4, 8])
    attention, calls = model.attention, []

    def counted(*args, **kwargs):
        calls.append(inside_graph())
        return attention(*args, **kwargs)

    model.attention = counted
    runner.capture_model()
    descs = runner.dispatcher.capture_descs()
    # FULL runs as FULL_AND_PIECEWISE (this model's attention, like FlashAttention 2's, holds only
    # uniform decode batches in a full graph): a PIECEWISE graph and a FULL one per size.
    graphs = {"FULL": 8, "PIECEWISE": 4}[mode]
    assert len(runner.graphs) == len(descs) == graphs, (
        f"mode {mode} with sizes [1, 2, 4, 8]: expected one graph per descriptor, {graphs} in all; "
        f"capture_descs() lists {len(descs)}, graphs holds {len(runner.graphs)}")
    if mode == "PIECEWISE":
        pieces = [len(g) for g in runner.graphs.values()]
        assert pieces == [model.n_segments] * 4, (
            f"PIECEWISE: expected {model.n_segments} segment graphs per size, got {pieces}")
    addresses = [getattr(runner, name).data_ptr() for name in ("tokens", "positions", "slots")]
    for step, n in enumerate([3, 5, 7, 3]):
        calls.clear()
        slots = list(range(n))
        inputs = rows([(31 * step + 7 * i) % 500 for i in range(n)], [step] * n, slots, device=device)
        before = dict(runner.stats)
        got = runner.step(*inputs)
        error = (got - eager.forward(*inputs)).abs().max().item()
        assert got.shape[0] == n and error <= 1e-5, (
            f"mode {mode}: a {n}-row step (padded to {4 if n < 4 else 8}) differs from the eager "
            f"model by {error:.3g}, shape {tuple(got.shape)}")
        bucket = 4 if n <= 4 else 8
        new = {k: v - before.get(k, 0) for k, v in dict(runner.stats).items() if v != before.get(k, 0)}
        keys = [(k[0].name, k[1].num_tokens) if k != "eager" else "eager" for k in new]
        expected_mode = "FULL" if mode == "FULL" else "PIECEWISE"
        assert keys == [(expected_mode, bucket)] and list(new.values()) == [1], (
            f"mode {mode}: a {n}-row step should replay the {bucket}-row graph once; stats changed "
            f"by {new}")
        now = [getattr(runner, name).data_ptr() for name in ("tokens", "positions", "slots")]
        assert now == addresses, (
            f"mode {mode}: the static tokens / positions / slots buffers moved after step {step}: "
            "a graph reads the addresses it captured, so copy_ into them, never replace them")
        if mode == "PIECEWISE":
            assert calls == [False] * model.config.n_layers, (
                f"PIECEWISE: attention ran {calls} during a {n}-row step; expected "
                f"{model.config.n_layers} eager calls (one per layer) on every replay")


@pytest.mark.parametrize("mode", ["FULL", "PIECEWISE", "FULL_AND_PIECEWISE"])
def test_capture_largest_first_in_one_pool(engine, mode):
    recorder = RecordingCapture()
    model, runner = engine_for(engine, mode, sizes=[2, 8, 4], capture=recorder, warmup_iters=2)
    descs = runner.dispatcher.capture_descs()
    expected = []
    for captured_mode, desc in descs:
        expected += [desc.num_tokens] * (model.n_segments if captured_mode.name == "PIECEWISE" else 1)
    got = [len(call["inputs"][0]) for call in recorder.calls]
    assert got == expected, (f"mode {mode}: captured sizes in the order {got}; expected {expected} "
                             "(the dispatcher's capture_descs(), largest first)")
    first = recorder.calls[0]["graph"].graph.pool()
    assert recorder.calls[0]["pool"] is None and all(c["pool"] is first for c in recorder.calls[1:]), (
        "every capture after the first must pass pool=<the first graph>.graph.pool(): one shared pool")
    assert all(c["warmup_iters"] == 2 for c in recorder.calls), "capture with the engine's warmup_iters"


def test_piecewise_runs_attention_eagerly_and_full_captures_it(engine):
    for mode in ("PIECEWISE", "FULL"):
        model = ToyModel()
        runner = engine.DecodeEngine(model, mode=engine.CUDAGraphMode[mode], capture_sizes=[4])
        calls, attention = [], model.attention

        def spy(*args, **kwargs):
            calls.append(inside_graph())
            return attention(*args, **kwargs)

        model.attention = spy
        runner.capture_model()
        captured, calls[:] = list(calls), []
        runner.step(*rows([1, 2, 3], [0, 0, 0], [0, 1, 2]))
        replayed = {k: v for k, v in dict(runner.stats).items() if v}
        assert list(replayed.values()) == [1] and "eager" not in replayed, (
            f"{mode}: a 3-row step with a captured 4-row graph must replay it; stats: {replayed}")
        if mode == "PIECEWISE":
            assert not any(captured) and calls == [False] * model.config.n_layers, (
                f"PIECEWISE: attention ran inside a graph (capture: {captured}, step: {calls}); "
                f"expected {model.config.n_layers} eager calls per step and none captured\n"
                "  rule: piecewise graphs hold the segments between attention calls")
        else:
            assert any(captured) and not [c for c in calls if not c], (
                f"FULL: attention ran eagerly during a replayed step ({calls}); the full graph "
                "holds the whole forward pass")


def test_capture_model_records_time_and_memory(engine):
    runner = engine.DecodeEngine(ToyModel(), mode=engine.CUDAGraphMode.FULL, capture_sizes=SIZES)
    start = time.perf_counter()
    runner.capture_model()
    wall = time.perf_counter() - start
    seconds, memory = runner.capture_seconds, runner.capture_memory_bytes
    assert type(seconds) is float and 0 < seconds <= wall, (
        f"capture_seconds after capture_model() is {seconds!r}, and capture_model() took {wall:.4f} s "
        "of wall time\n  rule: the capture's wall time (a difference of two clock readings), a "
        "float above 0 and at most the time capture_model() took")
    assert type(memory) is int and memory == 0, (
        f"capture_memory_bytes after capture_model() on a CPU is {memory!r}\n  rule: an int, 0 on "
        "a CPU (no GPU memory reserved)")


def test_an_engine_built_with_the_defaults_captures_full_and_piecewise_graphs_warmed_up_once(engine):
    """``DecodeEngine(model)`` as the docstring writes its defaults: ``mode=CUDAGraphMode.FULL``,
    which this model runs as FULL_AND_PIECEWISE, ``capture_sizes=None`` (vLLM's plan for
    max_seqs), ``warmup_iters=1``."""
    model, recorder = ToyModel(), RecordingCapture()
    runner = engine.DecodeEngine(model, capture=recorder)
    runner.capture_model()
    sizes = next(c[3] for c in engine_cases() if c[:3] == (model.config.max_seqs, 0, 8192))
    keys = sorted(((k[0].name, k[1].num_tokens, bool(k[1].uniform)) if isinstance(k, tuple) and len(k) == 2
                   else repr(k) for k in runner.graphs), key=repr)
    # FULL_AND_PIECEWISE: a PIECEWISE graph per size for mixed batches, a FULL one per size of
    # at most max_seqs requests for uniform decode batches
    want = sorted([("PIECEWISE", s, False) for s in sizes]
                  + [("FULL", s, True) for s in sizes if s <= model.config.max_seqs], key=repr)
    assert keys == want, (
        f"DecodeEngine(model) captured graphs under {keys}; the default mode is "
        f"CUDAGraphMode.FULL, which this model's attention (cudagraph_support 'uniform_batch') "
        f"turns into FULL_AND_PIECEWISE, with the default sizes {sizes}: {want}")
    warmups = sorted({c["warmup_iters"] for c in recorder.calls})
    assert warmups == [1], (f"DecodeEngine(model).capture_model() warmed up with warmup_iters "
                            f"{warmups}; the default is warmup_iters=1")


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mode, sizes", [("PIECEWISE", [2, 8, 4]), ("FULL_AND_PIECEWISE", None)])
def test_static_buffers_have_the_stated_dtypes_shapes_and_contents(engine, mode, sizes, dtype):
    """tokens, positions, slots: 1-D int64; hidden, attn: the model's dtype; all of
    max(capture_sizes) rows; slots start at the padding slot, the rest at 0; capture_model()
    touches only the padding slot's cache."""
    model = ToyModel(dtype=DTYPES[dtype])
    c = model.config
    runner = engine.DecodeEngine(model, mode=engine.CUDAGraphMode[mode], capture_sizes=sizes)
    default = next(case[3] for case in engine_cases() if case[:3] == (c.max_seqs, 0, 8192))
    rows_ = max(sizes if sizes is not None else default)  # vLLM's default plan for max_seqs
    wanted = {"tokens": (torch.int64, (rows_,), 0), "positions": (torch.int64, (rows_,), 0),
              "slots": (torch.int64, (rows_,), model.padding_slot),
              "hidden": (DTYPES[dtype], (rows_, c.hidden_size), 0),
              "attn": (DTYPES[dtype], (rows_, c.n_heads * c.head_dim), 0)}
    for name, (dtype_, shape, fill) in wanted.items():
        buffer = getattr(runner, name, None)
        assert isinstance(buffer, torch.Tensor), f"the engine has no static buffer {name!r}"
        got = (buffer.dtype, tuple(buffer.shape))
        assert got == (dtype_, shape), (
            f"{mode}, {dtype} model, capture_sizes={sizes}: buffer {name} is {got[0]} of shape "
            f"{got[1]}, expected {dtype_} of shape {shape}\n  rule: tokens, positions, slots 1-D "
            "int64; hidden, attn in the model's dtype; max(capture_sizes) rows")
        assert bool((buffer == fill).all()), (
            f"a new engine's {name} buffer holds {buffer.flatten()[:8].tolist()}..., expected all "
            f"{fill}\n  rule: the slot buffer starts filled with model.padding_slot, the others "
            "with zeros")
    runner.capture_model()
    for name in ("k_cache", "v_cache"):
        touched = getattr(model, name)[:, : c.max_seqs].ne(0).any(dim=(0, 2, 3, 4))
        assert not touched.any(), (
            f"{mode}: capture_model() wrote {name} of real slots {touched.nonzero().flatten().tolist()}"
            "\n  rule: warm-up and capture only ever touch the padding slot")


@pytest.mark.parametrize("mode", ["FULL", "PIECEWISE", "FULL_AND_PIECEWISE"])
def test_graphs_hold_what_capture_returned_under_their_keys(engine, mode):
    recorder = RecordingCapture()
    model, runner = engine_for(engine, mode, sizes=[2, 4], capture=recorder)
    made = [call["graph"] for call in recorder.calls]
    descs = runner.dispatcher.capture_descs()
    assert isinstance(runner.graphs, dict) and set(runner.graphs) == set(descs), (
        f"{mode}: graphs is keyed by {list(runner.graphs)}; expected the (mode, desc) tuples of "
        f"capture_descs(): {descs}")
    for key, value in runner.graphs.items():
        if key[0].name == "FULL":
            ok = any(value is g for g in made)
            want = "the graph capture returned"
        else:
            ok = (type(value) is list and len(value) == model.n_segments
                  and all(any(v is g for g in made) for v in value)
                  and [next(i for i, g in enumerate(made) if g is v) for v in value]
                  == sorted(next(i for i, g in enumerate(made) if g is v) for v in value))
            want = f"a list of the {model.n_segments} segment graphs capture returned, in order"
        assert ok, f"{mode}: graphs[{key}] is {value!r}; expected {want}"


@pytest.mark.parametrize("max_seqs", [8, 3, 24, 100])
def test_default_capture_sizes_are_vllms_plan(engine, max_seqs):
    """What is captured by default is a configuration: no generated token shows it, so the test
    looks at what capture_model() captured: vLLM 0.26.0's sizes for max_num_seqs = max_seqs and
    its default token budget (recorded from vLLM)."""
    expected = next(c[3] for c in engine_cases() if c[:3] == (max_seqs, 0, 8192))
    model = ToyModel(ModelConfig(max_seqs=max_seqs, n_layers=1))
    recorder = RecordingCapture()
    runner = engine.DecodeEngine(model, mode=engine.CUDAGraphMode.FULL, capture=recorder)
    runner.capture_model()
    sizes = sorted({d.num_tokens for _, d in runner.dispatcher.capture_descs()})
    captured = sorted({len(c["inputs"][0]) for c in recorder.calls})
    assert sizes == captured == expected, (
        f"capture_sizes=None with max_seqs={max_seqs}: expected vLLM's sizes for max_num_seqs="
        f"{max_seqs}, engine_capture_sizes({max_seqs}) = {expected}; the dispatcher lists {sizes} and "
        f"capture_model() captured {captured}")


def test_step_before_capture_model_runs_eagerly(engine):
    """Nothing is captured until capture_model(): a step before it has no graph, so it runs the
    model eagerly (as vLLM does for a size it has no graph for), it does not crash."""
    eager, model = ToyModel(), ToyModel()
    runner = engine.DecodeEngine(model, mode=engine.CUDAGraphMode.FULL, capture_sizes=[4])
    inputs = rows([5, 6, 7], [0, 0, 0], [0, 1, 2])
    got = runner.step(*inputs)
    error = (got - eager.forward(*inputs)).abs().max().item()
    assert error <= 1e-5, f"a step before capture_model() differs from the eager model by {error:.3g}"
    assert dict(runner.stats).get("eager") == 1 and len(runner.graphs) == 0, (
        f"a step before capture_model(): expected one eager step and no graph, got stats "
        f"{dict(runner.stats)} and {len(runner.graphs)} graphs")


@pytest.mark.parametrize("slots, uniform", [([0, 1, 2], True), ([3, 0, 5], True), ([0, 0, 1], False),
                                            ([0, 1, 1], False), ([2, 1, 2], False), ([4, 4, 4], False)])
def test_uniform_decode_is_worked_out_from_the_slots(engine, slots, uniform):
    """step(..., uniform_decode=None): uniform when every slot is distinct. Rows of one slot are
    one sequence's prompt chunk (a mixed batch), wherever the repeat is and however few rows."""
    _, runner = engine_for(engine, "FULL_AND_PIECEWISE", sizes=[4])
    runner.step(*rows([1, 2, 3], [0, 1, 2], slots))
    kinds = [(k[0].name, bool(k[1].uniform)) for k, v in dict(runner.stats).items()
             if k != "eager" and v]
    expected = [("FULL", True)] if uniform else [("PIECEWISE", False)]
    assert kinds == expected, (
        f"step(slots={slots}) in FULL_AND_PIECEWISE without uniform_decode: replayed {kinds}, "
        f"expected {expected}\n  rule: uniform_decode is worked out as 'every slot distinct'")


LONG = torch.long
BAD_ROWS = {
    "lengths": (("slots", "rows"), lambda: rows([1, 2], [0, 1], [0])),
    "padding-slot": ("slots", lambda: rows([1], [0], [8])),  # the padding slot is reserved
    "negative-slot": ("slots", lambda: rows([1], [0], [-1])),
    "position-past-the-cache": ("positions", lambda: rows([1], [64], [0])),
    "negative-position": ("positions", lambda: rows([1], [-1], [0])),
    "int32-tokens": ("tokens", lambda: [torch.tensor([1, 2], dtype=torch.int32), *rows([0, 1], [0, 1])]),
    "float-positions": ("positions", lambda: [*rows([1]), torch.tensor([0.0]), *rows([0])]),
    "2-d-slots": ("slots", lambda: [*rows([1], [0]), torch.tensor([[0]], dtype=LONG)]),
    "no-rows": ("tokens", lambda: [torch.zeros(0, dtype=LONG)] * 3),
    "a-list": ("tokens", lambda: [[1], *rows([0], [0])]),
    "token-past-the-vocabulary": ("tokens", lambda: rows([512], [0], [0])),
    "negative-token": ("tokens", lambda: rows([-1], [0], [0])),
    # The meta device stands in for another device on a CPU-only machine.
    "another-device": ("tokens", lambda: [torch.tensor([1], device="meta"), *rows([0], [0])]),
    "0-d-tokens": ("tokens", lambda: [torch.tensor(1), torch.tensor(0), torch.tensor(0)]),
    "more-positions-than-tokens": ("positions", lambda: rows([1], [0, 1], [0, 1])),
}


@pytest.mark.given
@pytest.mark.parametrize("kind", list(BAD_ROWS))
def test_step_rejects_bad_rows(engine, kind):
    name, make = BAD_ROWS[kind]
    _, runner = engine_for(engine, "FULL", sizes=[2])
    bad = make()
    check_rejects(lambda: runner.step(*bad), name,
                  f"{kind}: tokens, positions and slots must be 1-D int64 tensors of one length "
                  ">= 1 on the model's device; tokens 0..vocab_size-1; real slots 0..max_seqs-1; "
                  "positions 0..max_seq_len-1")


def test_step_accepts_the_largest_token_slot_and_position(engine):
    """The boundary on the accepted side: token vocab_size - 1, slot max_seqs - 1 and position
    max_seq_len - 1 are real."""
    eager, (model, runner) = ToyModel(), engine_for(engine, "FULL", sizes=[2])
    c = model.config
    inputs = rows([c.vocab_size - 1, 4], [c.max_seq_len - 1, c.max_seq_len - 1], [c.max_seqs - 1, 0])
    got = runner.step(*inputs)
    error = (got - eager.forward(*inputs)).abs().max().item()
    assert error <= 1e-5, (f"a step with token {c.vocab_size - 1} at slot {c.max_seqs - 1} and "
                           f"position {c.max_seq_len - 1} (the largest real ones) differs from the "
                           f"eager model by {error:.3g}")


@pytest.mark.given
@pytest.mark.parametrize("prompts, new, name", [
    ([[1]] * 9, 1, "prompts"), ([[1], []], 1, "prompts"), ([[1]], 0, "max_new_tokens"),
    ([[1] * 60], 10, "max_new_tokens"),
    ([[1] * 55], 11, "max_new_tokens"),  # 55 + 11 - 1 = 65: one past max_seq_len = 64
    ([[1], [2]], [2, 0], "max_new_tokens"),  # one per-sequence count below 1
    ([[1], [2]], [2], "max_new_tokens"),  # fewer counts than prompts
    ([[1], [2]], [2, 2, 2], "max_new_tokens"),  # more counts than prompts
])
def test_generate_rejects_bad_requests(engine, prompts, new, name):
    _, runner = engine_for(engine, "NONE", sizes=[2])
    check_rejects(lambda: runner.generate(prompts, new), name,
                  "at most max_seqs non-empty prompts; max_new_tokens >= 1, an int or one count "
                  "per prompt; every sequence within max_seq_len (len(prompt) + max_new_tokens - 1 "
                  "<= max_seq_len)")


def test_generate_accepts_the_largest_request(engine):
    """The accepted side of each limit: max_seqs prompts, a count of 1, and a sequence that needs
    exactly max_seq_len positions (55 + 10 - 1 = 64)."""
    model, runner = engine_for(engine, "FULL_AND_PIECEWISE")
    c = model.config
    prompts = [[7] * 55] + [[100 + i] for i in range(c.max_seqs - 1)]
    new = [10] + [1] * (c.max_seqs - 2) + [2]
    got = runner.generate(prompts, new)
    expected = [greedy_alone(p, n) for p, n in zip(prompts, new)]
    assert got == expected, (
        f"generate({c.max_seqs} prompts, the first of 55 tokens with 10 new) gave {got}; eager "
        f"greedy decoding gives {expected}\n  rule: max_seqs prompts are fine, and so is "
        "len(prompt) + max_new_tokens - 1 == max_seq_len")


# ---------------------------------------------------------------- on a GPU


@pytest.mark.parametrize("model_device, batch_device", [
    (CPU, "cpu"), ("cpu", CPU),
    pytest.param("cuda", "cuda:0", marks=gpu), pytest.param("cuda:0", "cuda", marks=gpu)])
def test_a_device_is_a_device_however_it_is_named(engine, model_device, batch_device):
    """A model built on ``cuda`` holds its tensors on ``cuda:0`` (the current GPU), and a batch
    made on ``cuda`` is there too: the engine compares devices, not the names a caller wrote (on
    a CPU, ``cpu:0`` and ``cpu`` are the same device the same way)."""
    eager = ToyModel(device=model_device)
    _, runner = engine_for(engine, "FULL", model_device, sizes=[2])
    tokens, positions, slots = rows([5, 9], [0, 0], [0, 1], device=batch_device)
    try:
        got = runner.step(tokens, positions, slots)
    except ValueError as exc:
        pytest.fail(f"step refused a batch made on {batch_device!r} for a model built on "
                    f"{model_device!r} ({exc})\n  rule: the model's device is model.device, named as "
                    f"its tensors name it ({eager.device}); compare devices, not names",
                    pytrace=False)
    expected = eager.forward(tokens.to(eager.device), positions.to(eager.device), slots.to(eager.device))
    assert got.device == eager.device and torch.allclose(got, expected, atol=1e-5, rtol=1e-5), (
        f"the logits on {model_device!r} differ from the eager model's")


@gpu
@pytest.mark.parametrize("mode", MODES)
def test_every_mode_on_cuda(engine, mode):
    expected = [greedy_alone(p, n, "cuda") for p, n in zip(PROMPTS, NEW_TOKENS)]
    _, runner = engine_for(engine, mode, "cuda")
    got = runner.generate(PROMPTS, NEW_TOKENS)
    assert got == expected, f"mode {mode} on CUDA: {got}, eager greedy decoding: {expected}"
    check_step_logits(engine, mode, "cuda")


@gpu
def test_capture_on_cuda_records_memory(engine):
    _, runner = engine_for(engine, "FULL", "cuda")
    assert runner.capture_memory_bytes > 0 and runner.capture_seconds > 0
    assert len(runner.graphs) == len(runner.dispatcher.capture_descs())


def test_the_prompt_step_is_uniform_only_when_every_prompt_is_one_token(engine):
    """FULL_DECODE_ONLY replays a decode graph for a uniform batch and runs a mixed one eagerly:
    stats show the flag generate gave its first step."""
    # keys shown as (mode, num_tokens, num_reqs, uniform), "eager" as is
    for prompts, want in (([[1], [2]], {("FULL", 2, 2, True): 1}), ([[1, 2], [3, 4]], {"eager": 1})):
        _, runner = engine_for(engine, "FULL_DECODE_ONLY", sizes=[1, 2, 4])
        runner.generate(prompts, 1)
        got = {k if k == "eager" else (k[0].name, k[1].num_tokens, k[1].num_reqs, bool(k[1].uniform)): v
               for k, v in dict(runner.stats).items() if v}
        assert got == want, (
            f"stats after generate({prompts}, 1) in FULL_DECODE_ONLY (sizes [1, 2, 4]): expected {want}, "
            f"got {got}\n  rule: the prompt step is uniform exactly when every prompt is one token "
            "(each row then has its own slot)")


def test_a_step_of_300_rows_runs_eagerly(engine):
    """Lengths are compared by value: 300 rows (above the largest bucket) run eagerly, like any
    batch past the buckets; two equal ints above 256 are distinct objects, so `is not` refuses them."""
    eager, (model, runner) = ToyModel(), engine_for(engine, "FULL", sizes=[2])
    n = torch.arange(300)
    # each row its own cache cell (slot n // 64, position n % 64): rows sharing one would race for it
    inputs = [(n * 7) % model.config.vocab_size, n % model.config.max_seq_len, n // model.config.max_seq_len]
    got = runner.step(*inputs)
    error = (got - eager.forward(*inputs)).abs().max().item()
    assert got.shape == (300, model.config.vocab_size) and error <= 1e-5, (
        f"a step of 300 rows: expected the eager model's (300, {model.config.vocab_size}) logits, got "
        f"shape {tuple(got.shape)}, max error {error:.3g}\n  rule: tokens, positions and slots of one "
        "length n >= 1 (any n) are accepted")


#: The mode vLLM 0.26.0 runs for each mode asked for, for an attention backend like this model's
#: (FlashAttention 2's UNIFORM_BATCH, attention split off): recorded from vLLM's own
#: ``CompilationConfig.resolve_cudagraph_mode_and_sizes``.
RUNS_AS = resolved_modes(ToyModel.cudagraph_support, attention_split=True)


@pytest.mark.parametrize("mode", sorted(RUNS_AS))
def test_full_graphs_alone_run_a_prompt_step_eagerly(engine, mode):
    """This model's attention, like FlashAttention 2's in vLLM 0.26.0, can hold only a uniform
    decode batch in a full graph (``ToyModel.cudagraph_support == "uniform_batch"``). So the engine
    runs FULL as vLLM's ``resolve_cudagraph_mode_and_sizes`` does: as FULL_AND_PIECEWISE, whose
    PIECEWISE graphs run a prompt step (attention eager between them). With full graphs alone
    (FULL_DECODE_ONLY) a prompt step runs eagerly."""
    runs_as = RUNS_AS[mode]
    mixed = mode_table()[runs_as]["mixed_mode"]  # vLLM's, recorded: not your exercise 6's
    prompt_step = "eager" if mixed == "NONE" else mixed
    prompt = rows([5, 6, 7, 8], [0, 1, 2, 3], [0, 0, 0, 0])  # four tokens of one prompt: a mixed batch
    expected = ToyModel().forward(*prompt)
    runner = engine.DecodeEngine(ToyModel(), mode=engine.CUDAGraphMode[mode], capture_sizes=[4])
    got_mode = getattr(runner, "mode", None)
    assert got_mode is engine.CUDAGraphMode[runs_as], (
        f"DecodeEngine(mode={mode}).mode is {got_mode!r}; expected {runs_as}\n  rule: FULL becomes "
        "FULL_AND_PIECEWISE (the model's attention holds only uniform decode batches in a full "
        "graph, and the model is cut at its attention calls); every other mode stays as given")
    runner.capture_model()
    got = runner.step(*prompt)
    error = (got - expected).abs().max().item()
    assert error <= 1e-5, f"mode {mode}: a prompt step differs from the eager model by {error:.3g}"
    ran = ["eager" if k == "eager" else k[0].name for k in runner.stats]
    assert ran == [prompt_step], (
        f"DecodeEngine(mode={mode}, capture_sizes=[4]): a 4-token prompt step (a mixed batch) "
        f"ran as {ran}; expected {prompt_step} (mode {runs_as}: mixed batches run {mixed})")


@pytest.mark.parametrize("mode", ["FULL", "PIECEWISE", "FULL_DECODE_ONLY"])
def test_with_a_compiler_every_captured_piece_is_compiled(engine, mode):
    """Compile, then capture (vLLM's backend compiles the model split at attention, then captures
    each compiled piece): with ``compiler=``, each function handed to ``capture`` is one the
    compiler returned, the FULL forward and every PIECEWISE segment alike; ``step`` compiles
    nothing, and the tokens are eager decoding's."""
    recorder, compiler = RecordingCapture(), RecordingCompiler()
    _, runner = engine_for(engine, mode, sizes=[2, 4], capture=recorder, compiler=compiler)
    captured = compiler.captured(recorder)
    assert captured and set(captured) == {"compiled"}, (
        f"DecodeEngine({mode}, [2, 4], compiler=...).capture_model(): the captures got {captured}\n"
        "  rule: every function capture_model() hands to capture (the FULL forward, each PIECEWISE "
        "segment) is one that compiler returned: compile, then capture")
    compiled = len(compiler.made)
    got = runner.generate(PROMPTS, NEW_TOKENS)
    assert got == EXPECTED, f"mode {mode} with a compiler: {got}, eager greedy decoding: {EXPECTED}"
    assert len(compiler.made) == compiled, (
        f"generate called the compiler {len(compiler.made) - compiled} more times after capture_model()\n"
        "  rule: compiler is called only in capture_model(), never by step")


def compile_problem_here(device):
    from coursekit.compiled import compile_problem

    return compile_problem(device)


@pytest.mark.parametrize("mode", ["PIECEWISE"])  # three compiled pieces; FULL's one is the GPU test's
def test_compiled_then_captured_is_token_identical_in_float32(engine, mode):
    """The real thing: each piece through ``torch.compile`` (``coursekit.compiled.compile_piece``,
    inductor's CPU backend), then captured. In float32 the compiled kernels keep eager's tokens.
    The first compile in a process takes tens of seconds on a laptop (inductor builds its C++
    runtime once, then caches it on disk)."""
    from coursekit.compiled import compile_piece

    problem = compile_problem_here("cpu")
    if problem:
        pytest.skip(problem)
    _, runner = engine_for(engine, mode, sizes=[4], compiler=compile_piece)
    prompts, new = PROMPTS[:3], [8, 8, 8]
    expected = [greedy_alone(p, n) for p, n in zip(prompts, new)]
    got = runner.generate(prompts, new)
    assert got == expected, f"mode {mode}, compiled then captured: {got}, eager greedy decoding: {expected}"


@gpu
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_compiled_then_captured_on_cuda(engine, dtype):
    """On a GPU, inductor writes Triton kernels: the compiled FULL graphs keep eager's tokens in
    float32 and the stated tolerance (5e-2) on a bfloat16 model's logits."""
    from coursekit.compiled import compile_piece

    problem = compile_problem_here("cuda")
    if problem:
        pytest.skip(problem)
    model, runner = engine_for(engine, "FULL_DECODE_ONLY", "cuda", sizes=[4], dtype=dtype, compiler=compile_piece)
    inputs = rows([5, 6, 7], [3, 9, 1], [0, 1, 2], device="cuda")
    expected = ToyModel(device="cuda", dtype=DTYPES[dtype]).forward(*inputs, max_query_len=1)
    error = (runner.step(*inputs, uniform_decode=True).float() - expected.float()).abs().max().item()
    assert error <= TOLERANCE[dtype], (
        f"compiled FULL graph on a {dtype} model: logits differ from eager by {error:.3g} "
        f"(allowed {TOLERANCE[dtype]})")
    if dtype == "float32":
        _, runner = engine_for(engine, "FULL_DECODE_ONLY", "cuda", sizes=[4], compiler=compile_piece)
        expected_tokens = [greedy_alone(p, n, "cuda") for p, n in zip(PROMPTS[:3], [8, 8, 8])]
        assert runner.generate(PROMPTS[:3], [8, 8, 8]) == expected_tokens
