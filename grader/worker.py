"""The worker: imports one exercise module of a submission, runs the judge's probes on it and
sends back plain data. It runs in a sandbox (grader/sandbox.py) as
``python -I -B worker.py REQUEST RESULT_FD``, next to copies of ``wire.py``, ``probes.py`` and the
course's support package, never the repository.

Nothing it prints counts, and it decides nothing: every answer goes to the judge, which compares
it with the reference. It ends with ``os._exit`` so that nothing the submission registered (atexit
hooks, threads) runs after the result is sent.

The limit of this design: the submission runs in this process, so code written to attack this
file (patching a probe's helpers during one of its own calls, writing to the result pipe found in
/proc/self/fd) could still forge the yes/no facts a probe reports about it (a buffer that did not
move, an output left unchanged). Values are safe: the judge compares them with the reference.
"""

import json
import os
import sys
import traceback

# Our own references, taken before any submission code runs.
_write, _exit, _dumps = os.write, os._exit, json.dumps
# -I leaves the script's folder off the path; it holds only the runtime (wire, probes, coursekit).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _error(exc: BaseException) -> dict:
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 - a __str__ that raises says nothing
        message = "<unprintable>"
    return {"types": [c.__name__ for c in type(exc).__mro__], "message": message[:2000]}


_MISSING = object()


class _Namespaces:
    """What the worker's own code (the probes, the wire format, this file) looks up as it runs,
    as it was before any submission code ran. ``restore`` puts back what a submission replaced
    (``torch.equal = lambda *a: True`` at import, ``probes.len = ...``), so that the worker's
    own checks (``torch.equal(x, before)``, ``type(result) is float``) mean what they say. It runs
    after the import and before and after every probe; what a submission patches in the middle
    of one of its own calls is not undone until the probe ends.

    Library modules (``torch``, ``math``...) get back the functions and classes they had;
    attributes they gain (a lazily imported submodule) are left alone. The worker's own modules
    and patched classes (``torch.Tensor``) also lose what was added to them."""

    def __init__(self, libraries, own):
        self.saved = [(obj, dict(vars(obj)), False) for obj in libraries]
        self.saved += [(obj, dict(vars(obj)), True) for obj in own]

    def restore(self) -> None:
        for obj, saved, own in self.saved:
            current = vars(obj)
            if own:
                for name in [n for n in current if n not in saved]:
                    try:
                        delattr(obj, name)
                    except (AttributeError, TypeError):
                        pass
            for name, value in saved.items():
                if current.get(name, _MISSING) is not value and (own or callable(value)):
                    try:
                        setattr(obj, name, value)
                    except (AttributeError, TypeError):
                        pass


def main(request_path: str, result_fd: int) -> None:
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    # The result pipe moves to a number nobody was told, and leaves argv: a submission has to
    # search /proc/self/fd to write a forged answer, not just read the command line.
    import fcntl
    import random

    hidden_fd = fcntl.fcntl(result_fd, fcntl.F_DUPFD_CLOEXEC, random.SystemRandom().randint(64, 200))
    os.close(result_fd)
    result_fd = hidden_fd
    del sys.argv[1:]
    import builtins
    import math
    import time

    import torch  # the real one, before any submission code

    torch.manual_seed(0)
    torch.set_num_threads(1)
    if torch.cuda.is_available():  # GPU workers share the device: none may take all its memory
        torch.cuda.set_per_process_memory_fraction(0.5)
    import probes
    import wire
    from coursekit import standin

    namespaces = _Namespaces(
        libraries=(builtins, math, time, json, torch, standin),
        own=(probes, wire, sys.modules[__name__], torch.Tensor, standin.CapturedGraph,
             standin.StandInGraph),
    )
    table = dict(probes.PROBES)
    sys.path.append(request["submission_dir"])
    answer: dict = {"probes": []}
    try:
        import importlib

        module = importlib.import_module(f"{request['package']}.{request['module']}")
    except BaseException as exc:  # noqa: BLE001 - SystemExit, pytest.exit... all count
        namespaces.restore()
        answer["import_error"] = _error(exc)
        answer["import_traceback"] = traceback.format_exc(limit=-3)[-2000:]
        module = None
    if module is not None:
        for item in request["probes"]:
            namespaces.restore()
            fn = table[item["probe"]]
            try:
                value = fn(module, **wire.decode(item.get("args", {})))
                namespaces.restore()
                answer["probes"].append({"ok": True, "value": wire.encode(value)})
            except BaseException as exc:  # noqa: BLE001 - whatever the submission raised
                namespaces.restore()
                answer["probes"].append({"ok": False, "error": _error(exc)})
    namespaces.restore()
    data = _dumps(answer, allow_nan=False).encode()
    view = memoryview(data)
    while view:
        view = view[_write(result_fd, view):]


if __name__ == "__main__":
    status = 0
    try:
        main(sys.argv[1], int(sys.argv[2]))
    except BaseException:  # noqa: BLE001 - the worker's own failure: say it, then leave
        traceback.print_exc()
        status = 3
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - a submission may have replaced them
        pass
    _exit(status)
