"""Exercise 4 (static_runner): plausible wrong versions of ``solutions/static_runner.py``."""

from tests.mutants import K, M

MUTANTS = [
    M("static_runner", "rebinds-buffers", "rebinds the static inputs instead of copy_",
      ("        for x, buffer in zip(inputs, self.static_inputs):\n            buffer.copy_(x)\n",
       "        self.static_inputs = tuple(inputs)\n")),
    M("static_runner", "borrows-example-inputs", "captures over the caller's tensors",
      ("self.static_inputs = tuple(x.clone() for x in example_inputs)", "self.static_inputs = tuple(example_inputs)")),
    M("static_runner", "static-output-when-clone-asked", "returns the static outputs although clone_outputs=True",
      ("return _clone(outputs) if self.clone_outputs else outputs", "return outputs")),
    M("static_runner", "clones-when-not-asked", "clones although clone_outputs=False",
      ("return _clone(outputs) if self.clone_outputs else outputs", "return _clone(outputs)")),
    M("static_runner", "captures-every-call", "captures again on every call",
      ("        self.num_captures = 1\n", "        self.num_captures = 1\n        self._capture = capture\n        self._warmup_iters = warmup_iters\n"),
      ("        outputs = self.graph.replay()",
       "        self.graph = self._capture(self.fn, *self.static_inputs, warmup_iters=self._warmup_iters)\n"
       "        outputs = self.graph.replay()")),
    M("static_runner", "fixed-warmup", "ignores warmup_iters",
      ("warmup_iters=warmup_iters)", "warmup_iters=3)")),
    M("static_runner", "clone-loses-structure", "turns a tuple of outputs into a list",
      ("return type(obj)(_clone(item) for item in obj)", "return [_clone(item) for item in obj]")),
    M("static_runner", "replay-before-copy", "replays, then copies in: returns the previous call's result",
      ("        for x, buffer in zip(inputs, self.static_inputs):\n            buffer.copy_(x)\n        outputs = self.graph.replay()\n",
       "        outputs = self.graph.replay()\n        for x, buffer in zip(inputs, self.static_inputs):\n            buffer.copy_(x)\n")),
    # The gap corpus: mistakes each of which one kind of test could miss.
    K("container", "static_runner", "clone-list-to-tuple", "a list of outputs comes back a tuple",
      ("        return type(obj)(_clone(item) for item in obj)", "        return tuple(_clone(item) for item in obj)")),
    # Issue 23: the docstring's defaults, types and shapes, each one exercised.
    K("issue23", "static_runner", "default-warmup-1", "warmup_iters defaults to 1, not 3",
      ("        warmup_iters: int = 3,\n", "        warmup_iters: int = 1,\n")),
    K("issue23", "static_runner", "default-no-clone", "clone_outputs defaults to False, not True",
      ("        clone_outputs: bool = True,\n", "        clone_outputs: bool = False,\n")),
    K("issue23", "static_runner", "static-inputs-list", "static_inputs is a list, not a tuple",
      ("self.static_inputs = tuple(x.clone() for x in example_inputs)",
       "self.static_inputs = [x.clone() for x in example_inputs]")),
    K("issue23", "static_runner", "zeros-buffers", "buffers made with zeros_like: fn is warmed up and "
      "captured on zeros, not on the example's values",
      ("self.static_inputs = tuple(x.clone() for x in example_inputs)",
       "self.static_inputs = tuple(torch.zeros_like(x) for x in example_inputs)")),
]
