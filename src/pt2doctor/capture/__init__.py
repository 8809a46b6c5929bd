"""Capture: the only code that runs the user's program or touches torch internals."""
