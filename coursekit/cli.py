"""Running an exercise module as a script (``python -m exercises.launch_model``)."""

from __future__ import annotations

import sys
from typing import Callable


def run_exercise(number: int, marker: str, show: Callable[[], str]) -> None:
    """Print ``show()``; if the student has not finished, say what is left instead of a traceback."""
    try:
        text = show()
    except NotImplementedError as exc:
        print(
            f"Exercise {number} is not finished yet: {exc}\n"
            f"Fill in the stub, then check it with:  python -m pytest exercises -m {marker}",
            file=sys.stderr,
        )
        raise SystemExit(1) from None
    print(text)
