"""Code the students never edit: the implementation switch, the CPU stand-in for a captured
CUDA graph, hypothesis strategies, and small command-line helpers. Imported by exercises/,
solutions/ and the tests alike, so it lives here once."""
