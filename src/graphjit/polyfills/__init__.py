"""Polyfills: Python versions of builtins the tracer inlines instead of special-casing
them in trackers (seed 003).  One module per namespace; each function is plain Python with
CPython's semantics, so whatever it does with a traced value (``==`` on a tensor, a
truth test) is traced exactly as user code doing it would be.

These modules import nothing from graphjit; the tracer reads their globals without
guards (they are graphjit's own code)."""
