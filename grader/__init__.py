"""The grader: the judge (trusted), its sandboxed workers, the checks, the rubric, and what a grading
run writes. ``python -m grader --help`` lists the commands."""
