"""Reference implementations. Same module names and APIs as exercises/; the rules and formulas
are stated in the stubs' docstrings (exercises/<module>.py)."""
