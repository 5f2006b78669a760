"""Your exercises. Each module holds stubs that raise NotImplementedError("exercise N: ...");
replace each stub's body with code that follows its docstring, then run
``python -m pytest exercises -m exN``. The tests live in exercises/tests/."""
