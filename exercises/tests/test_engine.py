"""Exercise 8 · engine — a decode engine with CUDA graphs. Run: python -m pytest exercises -m ex8

On a CPU the engine captures with the course's stand-in (static inputs, outputs overwritten on
every replay, memory pools); tests marked ``gpu`` run the same checks on real CUDA graphs.
Every mode must give the tokens of a plain greedy loop (one sequence at a time, eagerly) and
logits within 1e-5 of the eager model's.
"""

import pytest
import torch

from coursekit.checks import check_rejects
from coursekit.standin import RecordingCapture, inside_graph
from coursekit.strategies import MODES
from coursekit.toymodel import ToyModel

pytestmark = pytest.mark.ex8
gpu = pytest.mark.gpu
SIZES = [1, 2, 4, 8, 16]  # 16 > max_seqs: a prompt batch can be replayed too
PROMPTS = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10]]
NEW_TOKENS = [5, 3, 6, 2]  # sequences finish at different steps


def greedy_alone(prompt, new_tokens, device="cpu"):
    """The expected tokens: one sequence, one token per forward pass, no engine."""
    model = ToyModel(device=device)
    row = lambda v: torch.tensor([v], device=device)  # noqa: E731
    for position, token in enumerate(prompt):
        logits = model.forward(row(token), row(position), row(0))
    out = []
    for k in range(new_tokens):
        out.append(int(logits[-1].argmax()))
        logits = model.forward(row(out[-1]), row(len(prompt) + k), row(0))
    return out


EXPECTED = [greedy_alone(p, n) for p, n in zip(PROMPTS, NEW_TOKENS)]


def engine_for(engine, mode, device="cpu", sizes=SIZES, **kwargs):
    model = ToyModel(device=device)
    runner = engine.DecodeEngine(model, mode=engine.CUDAGraphMode[mode], capture_sizes=sizes, **kwargs)
    runner.capture_model()
    return model, runner


def rows(*columns, device="cpu"):
    return [torch.tensor(c, dtype=torch.long, device=device) for c in columns]


def check_generate(engine, mode, device="cpu"):
    _, runner = engine_for(engine, mode, device)
    got = runner.generate(PROMPTS, NEW_TOKENS)
    assert got == EXPECTED, (
        f"mode {mode}: generate({PROMPTS}, {NEW_TOKENS}) gave {got}, a greedy loop over each "
        f"sequence alone gives {EXPECTED}\n  rule: every mode yields the tokens of eager decoding "
        "(static buffers refilled with copy_ every step, padding in the padding slot)")


def check_step_logits(engine, mode, device="cpu"):
    """Batches of 1 to beyond the largest bucket (4), each compared with the eager model."""
    eager, (_, runner) = ToyModel(device=device), engine_for(engine, mode, device, sizes=[1, 2, 4])
    for n in range(1, 9):
        positions = [n + i for i in range(n)]
        tokens, positions, slots = rows([(7 * n + i) % 500 for i in range(n)], positions,
                                        list(range(n)), device=device)
        expected = eager.forward(tokens, positions, slots)
        got = runner.step(tokens, positions, slots)
        assert isinstance(got, torch.Tensor) and got.shape == expected.shape, (
            f"mode {mode}: step of {n} rows returned {getattr(got, 'shape', got)!r}, expected "
            f"{tuple(expected.shape)}\n  rule: one row of logits per token, padding rows dropped")
        error = (got - expected).abs().max().item()
        assert error <= 1e-5, (f"mode {mode}: step of {n} rows differs from the eager model by "
                               f"{error:.3g} (allowed 1e-5)")


# ---------------------------------------------------------------- the same tokens in every mode


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_generates_the_tokens_of_eager_decoding(engine, mode):
    check_generate(engine, mode)


@pytest.mark.parametrize("mode", MODES)
def test_step_logits_equal_eager_for_every_batch_size(engine, mode):
    check_step_logits(engine, mode)


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
    _, runner = engine_for(engine, "FULL_AND_PIECEWISE")
    runner.generate(PROMPTS, NEW_TOKENS)
    kinds = sorted({(k[0].name, bool(k[1].uniform_decode)) for k, v in dict(runner.stats).items()
                    if k != "eager" and v})
    assert kinds == [("FULL", True), ("PIECEWISE", False)], (
        f"stats after generate in FULL_AND_PIECEWISE: {dict(runner.stats)}\n  rule: uniform_decode "
        "is True only when every row has its own slot")


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
    _, runner = engine_for(engine, "FULL")
    assert isinstance(runner.capture_seconds, float) and runner.capture_seconds > 0
    assert runner.capture_memory_bytes == 0, "on a CPU, capture reserves no GPU memory: 0"


def test_default_capture_sizes_fit_the_model(engine):
    model = ToyModel()
    runner = engine.DecodeEngine(model, mode=engine.CUDAGraphMode.FULL)
    sizes = sorted({d.num_tokens for _, d in runner.dispatcher.capture_descs()})
    assert sizes == [1, 2, 4, 8], f"default capture sizes for max_seqs=8: expected [1, 2, 4, 8], got {sizes}"


@pytest.mark.parametrize("args, name", [
    (([1, 2], [0, 1], [0]), ("slots", "rows")),
    (([1], [0], [8]), "slots"),  # the padding slot is reserved
    (([1], [64], [0]), "positions"),
])
def test_step_rejects_bad_rows(engine, args, name):
    _, runner = engine_for(engine, "FULL", sizes=[2])
    check_rejects(lambda: runner.step(*rows(*args)), name,
                  "tokens, positions and slots: 1-D int64 tensors of one length; real slots "
                  "0..max_seqs-1; positions 0..max_seq_len-1")


@pytest.mark.parametrize("prompts, new, name", [
    ([[1]] * 9, 1, "prompts"), ([[1], []], 1, "prompts"), ([[1]], 0, "max_new_tokens"),
    ([[1] * 60], 10, "max_new_tokens"),
])
def test_generate_rejects_bad_requests(engine, prompts, new, name):
    _, runner = engine_for(engine, "NONE", sizes=[2])
    check_rejects(lambda: runner.generate(prompts, new), name,
                  "at most max_seqs non-empty prompts, max_new_tokens >= 1, every sequence "
                  "within max_seq_len")


# ---------------------------------------------------------------- on a GPU


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
