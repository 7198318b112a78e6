"""What torch.compile does differently on the torch releases graphjit supports (2.13, 2.14).

Tests compare graphjit with the torch.compile of the torch they run on. graphjit's own
graph and break counts are the same on both releases; where torch.compile's changed, a
test writes its expectation as ``on_release(v2_13=..., v2_14=...)`` (the only place tests
ask which torch runs). The changes found, torch.compile 2.14 against 2.13:

* generators (``test_generator_protocol``): ``throw()`` into a subgenerator and through
  nested ``yield from`` compile in one graph (2.13 gave the frame up); a subgenerator's
  ``finally`` on ``throw``/``close`` and PEP 479 (``StopIteration`` in a generator's body)
  now give eager's results;
* a generator made before the compiled frame (``test_existing_iterators``) is traced (2.13
  gave the frame up) and is left unconsumed where eager empties it: a wrong result;
* ``functools.partial`` attributes compile in one graph (2.13 gave the frame up); a write
  to a ``mappingproxy`` raises as in eager, with the frame given up (2.13 let it through);
* ``inspect.Signature.bind`` with signatures of nested functions (``nested_signature``): 4
  graphs and a break (2.13 gave the frame up);
* a Python-level ``Tensor`` method under ``__torch_function__`` (``python_tensor_methods``
  of ``test_torch_modes``): one graph (2.13 broke there);
* gpytorch's exact GP (``test_library_zoo``, slow): 38 graphs and 66 breaks (2.13: 78);
* the ``random`` module (``test_py_random``, counted in ``test_py_vs_dynamo``): frames
  that draw are given up more often (no graph), a drawn float fed to ``torch.full_like``
  breaks before its graph (one graph where 2.13 had two);
* ``Tensor._make_subclass(cls, x)`` then an in-place op on the result
  (``test_make_subclass``'s ``shares_storage``): the compiled call raises a ``NameError``
  for a global its own generated code names (2.13 gave eager's result).
"""

from __future__ import annotations

from graphjit._compat import TORCH_RELEASE


def on_release(*, v2_13, v2_14):
    """The expectation for the running torch release."""
    return v2_14 if TORCH_RELEASE >= (2, 14) else v2_13
