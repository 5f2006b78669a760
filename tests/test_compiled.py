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
