"""Text that came from a worker (or a file name), made safe to print and to write.

A submission controls its exception messages, what it prints and the names of its files. Printed
raw, an ANSI sequence could redraw the score table and a lone surrogate could crash the judge's
``print`` or its CSV writer. ``safe`` keeps every printable character and writes everything else
as an escape: ``\\x1b``, ``\\r``, ``\\ud800``...; newlines are escaped too unless ``lines`` is set.
"""

from __future__ import annotations

import os
import sys
import unicodedata


def safe(text: object, limit: int | None = None, lines: bool = False) -> str:
    """``text`` as a str with control, format, private-use and unpaired surrogate characters
    escaped (``lines``: newlines kept), cut to ``limit`` characters (``...`` marks a cut)."""
    if not isinstance(text, str):
        try:
            text = str(text)
        except Exception:  # noqa: BLE001 - a __str__ that raises says nothing
            text = "<unprintable>"
    out = []
    for ch in text:
        if ch == "\n" and lines:
            out.append(ch)
        elif ch.isprintable() and unicodedata.category(ch) not in ("Co", "Cs"):
            out.append(ch)
        elif ch == "\t":
            out.append("    ")
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        if limit is not None and len(out) > limit:
            break
    result = "".join(out)
    if limit is not None and len(result) > limit:
        result = result[: max(0, limit - 3)] + "..."
    return result


def say(text: str) -> None:
    """Print, whatever the terminal's encoding (reasons are already escaped: grader/text.py);
    a reader that went away (``| head``) ends the printing, not the run."""
    try:
        try:
            print(text, flush=True)
        except UnicodeEncodeError:
            print(text.encode("ascii", "backslashreplace").decode("ascii"), flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
