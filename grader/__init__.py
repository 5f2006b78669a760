"""Grading harness. For now: a per-exercise progress report from the public tests."""
