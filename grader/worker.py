"""The worker: imports one exercise module of a submission, runs the judge's probes on it and
sends back plain data. It runs in a sandbox (grader/sandbox.py) as
``python -I -B worker.py REQUEST RESULT_FD``, next to copies of ``wire.py``, ``probes.py`` and the
course's support package, never the repository.

Nothing it prints counts, and it decides nothing: every answer goes to the judge, which compares
it with the reference. It ends with ``os._exit`` so that nothing the submission registered (atexit
hooks, threads) runs after the result is sent.
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


def main(request_path: str, result_fd: int) -> None:
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    import torch  # noqa: F401  (the real one, before any submission code)

    torch.manual_seed(0)
    torch.set_num_threads(1)
    import probes
    import wire

    sys.path.append(request["submission_dir"])
    answer: dict = {"probes": []}
    try:
        import importlib

        module = importlib.import_module(f"{request['package']}.{request['module']}")
    except BaseException as exc:  # noqa: BLE001 - SystemExit, pytest.exit... all count
        answer["import_error"] = _error(exc)
        answer["import_traceback"] = traceback.format_exc(limit=-3)[-2000:]
        module = None
    if module is not None:
        for item in request["probes"]:
            fn = probes.PROBES[item["probe"]]
            try:
                value = fn(module, **wire.decode(item.get("args", {})))
                answer["probes"].append({"ok": True, "value": wire.encode(value)})
            except BaseException as exc:  # noqa: BLE001 - whatever the submission raised
                answer["probes"].append({"ok": False, "error": _error(exc)})
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
