"""Hostile submissions for the grader (``tests/test_adversarial.py``): see ``cases.py``."""
