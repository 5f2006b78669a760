"""The examples in the exercises' docstrings (the ``>>>`` lines) hold for your code.

Run: python -m pytest exercises -k examples (or with the exercise's marker, e.g. -m ex5). Each
docstring with examples is one test, carrying its exercise's marker; the examples run against
the module under test (``--impl``) as written, and a failure shows the example, what the
docstring says it gives, and what yours gave.
"""

import doctest

import pytest

from coursekit.course import EXERCISES
from coursekit.impl import Implementation


def _examples():
    finder = doctest.DocTestFinder(exclude_empty=True)
    stubs = Implementation("exercises")
    for exercise in EXERCISES:
        module = stubs.module(exercise.module)
        for test in sorted(finder.find(module), key=lambda t: t.name):
            if test.examples and test.name.split(".")[-1] != module.__name__.split(".")[-1]:
                name = test.name.split(".", 2)[-1]  # "exercises.buckets.x" -> "x"
                yield pytest.param(exercise.module, name, test,
                                   marks=getattr(pytest.mark, exercise.marker),
                                   id=f"{exercise.module}.{name}")


@pytest.mark.parametrize("module_name, name, example", list(_examples()))
def test_docstring_examples(impl, module_name, name, example):
    try:
        module = impl.module(module_name)
    except ImportError as exc:
        pytest.fail(str(exc), pytrace=False)
    report = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS, verbose=False)
    test = doctest.DocTest(example.examples, dict(vars(module)), name, example.filename,
                           example.lineno, example.docstring)
    outcome = runner.run(test, out=report.append, clear_globs=True)
    if outcome.failed:
        text = "".join(report)
        if "NotImplementedError: exercise " in text:
            raise NotImplementedError(f"exercise {module_name}: {name} is not implemented yet")
        pytest.fail(f"the docstring of {name} gives examples that your code does not hold to:\n"
                    f"{text}", pytrace=False)
