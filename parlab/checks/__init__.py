"""Checkers for the exercises: one module per exercise topic, each raising AssertionError with a
helpful message when the learner's function is wrong (and passing the stub's NotImplementedError
through, so a stub fails its check)."""
