"""Record which ``torch._C`` calls each torch release has for sending allocations to a graph's
memory pool (``_cuda_beginAllocate*ToPool``, ``_cuda_endAllocate*ToPool``): the golden data that
``tests/test_allocator.py`` pins ``coursekit.allocator``'s choice against.

The names are read from each release's own binary, not its documentation: the wheel's
``torch/lib/libtorch_python.so`` holds the name of every ``torch._C`` function it defines. CUDA
wheels only (the CPU builds define none of these).

Re-record (about 7 GB of downloads; minutes)::

    python tests/platforms/record_torch_pool_bindings.py [VERSION ...] [--wheels DIR]

with no VERSION it records every release from 2.4 (the oldest pyproject allows) that pip can
find for this Python (``pip download --no-deps torch==VERSION``, PyPI's Linux wheels). It writes
``tests/platforms/torch_pool_bindings.json``; commit it with the run's date.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "torch_pool_bindings.json"
RELEASES = ["2.4.1", "2.5.1", "2.6.0", "2.7.1", "2.8.0", "2.9.1", "2.10.0", "2.11.0", "2.12.0"]
NAME = re.compile(rb"_cuda_(?:begin|end)Allocate[A-Za-z]*ToPool")


def bindings_in(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        data = zf.read("torch/lib/libtorch_python.so")
    return sorted({m.decode() for m in NAME.findall(data)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="*", default=RELEASES)
    parser.add_argument("--wheels", type=Path, help="a folder to download into and reuse")
    args = parser.parse_args(argv)
    folder = args.wheels or Path(tempfile.mkdtemp(prefix="torch-wheels-"))
    folder.mkdir(parents=True, exist_ok=True)
    recorded = {}
    for version in args.versions:
        wheels = sorted(folder.glob(f"torch-{version}-*.whl"))
        if not wheels:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--quiet",
                    f"torch=={version}",
                    "-d",
                    str(folder),
                ],
                check=True,
            )
            wheels = sorted(folder.glob(f"torch-{version}-*.whl"))
        recorded[version] = {"wheel": wheels[0].name, "bindings": bindings_in(wheels[0])}
        print(version, " ".join(recorded[version]["bindings"]))
    OUT.write_text(
        json.dumps(
            {
                "what": "torch._C calls for allocating to a CUDA graph pool, read from each release's "
                "torch/lib/libtorch_python.so",
                "recorded": datetime.date.today().isoformat(),
                "how": "python tests/platforms/record_torch_pool_bindings.py",
                "releases": recorded,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
