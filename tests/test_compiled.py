"""``coursekit.compiled``: the compiler the engine's ``compiler=`` option takes (issue 35), and the
one-line reason ``torch.compile`` cannot run where it cannot."""

import pytest
import torch

from coursekit.compiled import compile_piece, compile_problem
from coursekit.platform import cpu_compile_problem


class Segment:
    """A piece like the engine's ``_Segment``: one ``__call__`` for every index, so one code object."""

    def __init__(self, index):
        self.index, self.weight = index, torch.randn(8, 8, generator=torch.Generator().manual_seed(index))

    def __call__(self, x):
        return (x @ self.weight).relu() + self.index


PIECES, SIZES, LIMIT = 3, (1, 2), 4  # 6 compiled variants of one __call__, over a limit of 4


@pytest.mark.skipif(bool(compile_problem("cpu")), reason=str(compile_problem("cpu")))
def test_pieces_sharing_one_code_object_each_compile_in_a_frame_of_their_own():
    """Dynamo keeps at most ``recompile_limit`` variants per code object (8 by default; 4 here, so
    that few compiles show it): every PIECEWISE segment runs one ``__call__`` with another index,
    at every capture size, so a model of 28 layers needs far more than 8. ``torch.compile`` on the
    pieces themselves hits the limit (``fullgraph=True`` makes that an error instead of a silent
    fall back to eager); ``compile_piece`` gives each its own frame and compiles them all, each
    right."""
    assert torch._dynamo.config.recompile_limit == 8  # what a student's run has
    with torch._dynamo.config.patch(recompile_limit=LIMIT):
        torch._dynamo.reset()
        with pytest.raises(Exception) as failure:
            for i in range(PIECES):
                for n in SIZES:
                    torch.compile(Segment(i), dynamic=False, fullgraph=True)(torch.ones(n, 8))
        assert failure.typename == "FailOnRecompileLimitHit", failure.value
        torch._dynamo.reset()
        for i in range(PIECES):
            piece = Segment(i)
            compiled = compile_piece(piece)
            for n in SIZES:
                x = torch.randn(n, 8, generator=torch.Generator().manual_seed(n))
                assert torch.allclose(compiled(x), piece(x), atol=1e-6), f"piece {i}, {n} rows"
        torch._dynamo.reset()


def test_compile_piece_refuses_what_is_not_callable():
    with pytest.raises(TypeError, match="fn: expected a callable"):
        compile_piece(3)


def test_cpu_compile_problem_names_what_is_missing(tmp_path):
    """Inductor's CPU backend compiles C++ with ``$CXX``, else ``g++`` (``torch._inductor.config.cpp.cxx``),
    and builds against ``Python.h``."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "include").mkdir()
    nothing = {"PATH": str(tmp_path / "bin")}
    problem = cpu_compile_problem(env=nothing, include_dir=str(tmp_path / "include"))
    assert problem.startswith("torch.compile cannot build CPU kernels: ")
    assert "no C++ compiler" in problem and "'g++'" in problem and "no Python.h" in problem
    gxx = tmp_path / "bin" / "g++"
    gxx.write_text("#!/bin/sh\n")
    gxx.chmod(0o755)
    (tmp_path / "include" / "Python.h").write_text("")
    assert cpu_compile_problem(env=nothing, include_dir=str(tmp_path / "include")) is None
    assert "'clang++'" in cpu_compile_problem(env={**nothing, "CXX": "clang++"}, include_dir=str(tmp_path / "include"))
    assert torch._inductor.config.cpp.cxx[-1] in ("g++", __import__("os").environ.get("CXX")), (
        "inductor's compiler default changed: update cpu_compile_problem"
    )


def test_compile_problem_asks_triton_for_cuda(tmp_path):
    def no_triton():
        raise ImportError("No module named 'triton'")

    problem = compile_problem(
        "cuda:0", env={"PATH": str(tmp_path)}, include_dir=str(tmp_path), ldconfig="", import_triton=no_triton
    )
    assert problem.startswith("torch.compile cannot build GPU kernels") and "triton cannot be imported" in problem
    assert "does not compile for meta" in compile_problem("meta")


class CountingBackend:
    """A torch.compile backend that runs the traced graph as it is and notes each compile: whether
    it happened while a (stand-in) graph was being captured or replayed."""

    def __init__(self):
        self.compiles: list[bool] = []

    def __call__(self, gm, example_inputs):
        from coursekit.standin import inside_graph

        self.compiles.append(inside_graph())
        return gm.forward


def compiles_of(mode: str, sizes: list[int]) -> CountingBackend:
    """The reference engine over the toy model, its pieces traced by dynamo with a counting backend,
    after capture_model() and a generate."""
    from coursekit.impl import Implementation
    from coursekit.toymodel import ToyModel

    engine = Implementation("solutions").module("engine")
    backend = CountingBackend()
    torch._dynamo.reset()
    try:
        runner = engine.DecodeEngine(
            ToyModel(),
            mode=engine.CUDAGraphMode[mode],
            capture_sizes=sizes,
            compiler=lambda piece: compile_piece(piece, backend=backend),
        )
        runner.capture_model()
        backend.after_capture = list(backend.compiles)
        runner.generate([[1, 2, 3], [4, 5]], [4, 4])
    finally:
        torch._dynamo.reset()
    return backend


@pytest.mark.parametrize("mode, pieces", [("FULL_DECODE_ONLY", 1), ("PIECEWISE", 3)])
def test_compile_then_capture_compiles_once_per_piece_and_size_never_at_the_capture(mode, pieces):
    """Compile, then capture works only if the capture's call finds the variant the warm-up
    compiled: dynamo's guards must hold between the two (a global the model reads, such as
    whether a graph is being captured, would fail them and the capture would record a compile).
    The reference engine with the CPU stand-in, dynamo tracing each piece (its own backend: no
    inductor): one compile per captured piece and size, none inside a capture or replay, none
    more while generating."""
    sizes = [2, 4]
    backend = compiles_of(mode, sizes)
    assert backend.after_capture == [False] * (pieces * len(sizes)), (
        f"{mode}, sizes {sizes}: compiles {backend.after_capture} (True: inside a capture or replay); "
        f"expected {pieces * len(sizes)}, one per piece and size, all at the warm-up"
    )
    assert backend.compiles == backend.after_capture, f"generating compiled again: {backend.compiles}"


def test_the_count_sees_a_compile_at_the_capture(monkeypatch):
    """The check above can fail: a model that reads a global the capture changes (the stand-in's
    graph depth) fails dynamo's guards at the capture's call, and the count shows the compile."""
    from coursekit import standin
    from coursekit.toymodel import ToyModel

    original = ToyModel.forward

    def forward(self, tokens, positions, slots, max_query_len=None):
        out = original(self, tokens, positions, slots, max_query_len)
        return out + 0.0 if standin._graph_depth else out

    monkeypatch.setattr(ToyModel, "forward", forward)
    assert True in compiles_of("FULL_DECODE_ONLY", [2]).after_capture
