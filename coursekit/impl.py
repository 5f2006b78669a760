"""The one seam between tests and a student's code: ``--impl exercises|solutions|PATH``.

An implementation is a folder of exercise module files (``launch_model.py``, ``buckets.py``, ...).
It is imported as a package, so the modules' relative imports (``from .buckets import
padded_size``) resolve inside the same implementation. ``exercises`` and ``solutions`` are the
repository's own packages; any other folder (a submission) is loaded under a private package name
derived from its path, so two submissions never share modules.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parent.parent
NAMED = ("exercises", "solutions")


class ModuleNotInSubmission(ImportError):
    """The implementation folder has no file for an exercise module."""


class ModuleFailedToImport(ImportError):
    """The module file exists but importing it raised; the message carries the traceback."""


def _import_from_repo(name: str, folder: Path) -> None:
    """Import the repository's own package ``name`` from ``folder``, whatever the working
    folder is (the repository root is not on ``sys.path`` when the grader runs elsewhere)."""
    existing = sys.modules.get(name)
    if existing is not None:
        where = Path(getattr(existing, "__file__", "") or ".").resolve().parent
        if where != folder:
            raise ValueError(f"impl: a package {name!r} is already imported from {where}, not from {folder}")
        return
    spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


class Implementation:
    """A folder of exercise modules, importable as one package."""

    def __init__(self, spec: str | Path):
        spec = str(spec)
        if spec in NAMED:
            self.folder = REPO_ROOT / spec
            self.package = spec
            if not (self.folder / "__init__.py").is_file():
                raise ValueError(f"impl: there is no {spec}/ folder in {REPO_ROOT}")
            _import_from_repo(spec, self.folder)
        else:
            self.folder = Path(spec).expanduser().resolve()
            if not self.folder.is_dir():
                raise ValueError(
                    f"impl: expected 'exercises', 'solutions' or a folder of module files, "
                    f"got {spec!r} (no such folder)"
                )
            digest = hashlib.sha1(str(self.folder).encode()).hexdigest()[:10]
            self.package = f"_launch_tax_impl_{digest}"
            if self.package not in sys.modules:
                pkg = ModuleType(self.package)
                pkg.__path__ = [str(self.folder)]
                pkg.__spec__ = importlib.machinery.ModuleSpec(self.package, None, is_package=True)
                pkg.__spec__.submodule_search_locations = pkg.__path__
                pkg.__package__ = self.package
                sys.modules[self.package] = pkg
        self.label = spec

    def has(self, name: str) -> bool:
        return (self.folder / f"{name}.py").is_file()

    def module(self, name: str) -> ModuleType:
        """Import ``name`` from this implementation, with errors a student can act on."""
        if not self.has(name):
            raise ModuleNotInSubmission(f"module {name!r} not in submission: no {name}.py in {self.folder}")
        qualified = f"{self.package}.{name}"
        try:
            return importlib.import_module(qualified)
        except Exception as exc:  # noqa: BLE001 - any import failure is the student's to fix
            sys.modules.pop(qualified, None)
            detail = "".join(traceback.format_exception(exc)).rstrip()
            raise ModuleFailedToImport(f"module {name!r} from {self.folder} failed to import:\n{detail}") from exc

    def qualified(self, name: str) -> str:
        return f"{self.package}.{name}"

    def __repr__(self) -> str:
        return f"Implementation({self.label!r}, folder={str(self.folder)!r})"
