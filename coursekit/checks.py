"""Assertions whose failure messages teach: what was expected, what came back, which rule."""

from __future__ import annotations

import math
import re
from typing import Any, Callable


def check_close(got: Any, expected: float, what: str, rule: str, rel: float = 1e-12,
                abs_: float = 1e-12) -> None:
    """``got`` is a real number within ``rel``/``abs_`` of ``expected``."""
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        raise AssertionError(f"{what}: expected a number, got {type(got).__name__} {got!r}")
    if not math.isclose(got, expected, rel_tol=rel, abs_tol=abs_):
        raise AssertionError(f"{what}: expected {expected!r}, got {got!r}\n  rule: {rule}")


def names_argument(message: str, name: str) -> bool:
    """``message`` names ``name`` as a word of its own: ``"x: expected ..."`` names ``x``, while
    ``"weight: expected ..."`` does not (the letter x inside "expected" is no name)."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", message) is not None


def check_rejects(call: Callable[[], Any], argument: str | tuple[str, ...], rule: str,
                  error: type[Exception] = ValueError) -> None:
    """``call()`` raises ``error`` with a message that names ``argument`` (or one of several).

    A ``NotImplementedError`` passes through untouched, so an unfinished stub says so."""
    names = (argument,) if isinstance(argument, str) else argument
    argument = " or ".join(repr(n) for n in names)
    try:
        call()
    except NotImplementedError:
        raise
    except error as exc:
        if not any(names_argument(str(exc), n) for n in names):
            raise AssertionError(
                f"{error.__name__} raised, but its message does not name the argument "
                f"{argument}: {str(exc)!r}\n  rule: {rule}"
            ) from None
        return
    except Exception as exc:  # noqa: BLE001 - report whatever came instead
        raise AssertionError(
            f"expected {error.__name__} naming {argument}, got {type(exc).__name__}: {exc}\n"
            f"  rule: {rule}"
        ) from exc
    raise AssertionError(f"expected {error.__name__} naming {argument}, nothing was raised\n"
                         f"  rule: {rule}")


def says_cuda_is_needed(message: str) -> bool:
    """One sentence of ``message`` names CUDA (or a GPU) and says it is needed or missing."""
    for sentence in re.split(r"[.!;?]\s", message):
        if re.search(r"cuda|gpu", sentence, re.IGNORECASE) and re.search(
            r"\bneed|\brequir|not available|unavailable|is_available", sentence, re.IGNORECASE
        ):
            return True
    return False


def check_says_cuda_is_needed(call: Callable[[], Any], what: str) -> None:
    """On a machine without CUDA, ``call()`` raises a RuntimeError of our own saying a CUDA device
    is needed (not whatever torch raises deep inside). NotImplementedError, a RuntimeError too,
    passes through so an unfinished stub says so."""
    try:
        call()
    except NotImplementedError:
        raise
    except RuntimeError as exc:
        if not says_cuda_is_needed(str(exc)):
            raise AssertionError(
                f"{what} without CUDA raised RuntimeError({str(exc)[:300]!r}); expected a message "
                "saying a CUDA device is needed (check torch.cuda.is_available() first)"
            ) from None
        return
    except Exception as exc:  # noqa: BLE001 - report whatever came instead
        raise AssertionError(
            f"{what} without CUDA must raise a RuntimeError saying a CUDA device is needed, got "
            f"{type(exc).__name__}: {str(exc)[:300]}"
        ) from exc
    raise AssertionError(f"{what} without CUDA must raise a RuntimeError; nothing was raised")
