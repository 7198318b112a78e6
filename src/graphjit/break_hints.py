"""What a user can change, per kind of graph break (``Unsupported.gb_type``).

Contract: :func:`exc.unsupported` gives a break that was raised without hints the hint of
its kind from :data:`HINTS`.  The kinds listed are the 20 most frequent over the test
suite's break programs and the model zoos (measured for issue 23 with a recording plugin
over ``test_breaks``, ``test_resume_anywhere``, ``test_py_*``, ``test_eager_frames``,
``test_traced_exceptions``, ``test_world_changes``, ``test_object_model_extras``,
``test_models_zoo``, ``test_transformers_models`` and ``test_diffusers_models``: 399
breaks of 27 kinds); :data:`MEASURED` keeps that ranking with the counts, and
``tests/test_report_reasons.py`` checks every one of them has a hint.
"""

from __future__ import annotations

#: (kind, breaks counted) in the measured order
MEASURED = (
    ("print", 158), ("C-level __getattribute__", 51), ("data-dependent branch", 39),
    ("data-dependent operator", 25), ("skipped standard-library function", 16), ("unsupported callable", 14),
    ("f-string of a non-constant", 12), ("data-dependent tensor method", 11), ("C-level operator method", 9),
    ("value drawn from random at run time", 6), ("class with a C-level __new__", 6), ("C-level method", 5),
    ("random.shuffle", 4), ("unknown python type", 3), ("dict key that is not a constant", 3),
    ("C-level __setattr__", 3), ("C-level __delattr__", 3), ("context manager with a C-level method", 3),
    ("attribute write", 3), ("random.choice over non-constants", 2),
)

_CALL_OUTSIDE = "or call it before the compiled function and pass the result in."

HINTS: dict[str, str] = {
    "print": "Remove the print from the compiled code, or put it under `if not graphjit.is_compiling():`.",
    "C-level __getattribute__": "This class looks attributes up in C (threading.local, an extension type): read "
                                "the attribute outside the compiled function and pass the value in.",
    "data-dependent branch": "Use torch.where / torch.cond, or move the condition out of the compiled region.",
    "data-dependent operator": "Set graphjit.config.capture_dynamic_output_shape_ops = True to keep nonzero, "
                               "boolean masks and unique in the graph, or move the op out of the compiled region.",
    "skipped standard-library function": "graphjit does not trace this standard-library function: use a torch "
                                         "or plain-Python equivalent, " + _CALL_OUTSIDE,
    "unsupported callable": "graphjit cannot trace this C function: if it only takes and returns tensors, "
                            "register it with graphjit.allow_in_graph, " + _CALL_OUTSIDE,
    "f-string of a non-constant": "Format strings outside the compiled function (formatting a tensor or a "
                                  "symbolic size needs its value), or format constants only.",
    "data-dependent tensor method": "Set graphjit.config.capture_scalar_outputs = True to keep .item() in the "
                                    "graph, or keep the value a tensor (torch ops instead of Python numbers).",
    "C-level operator method": "This operator is implemented in C for this type: convert the operands to tensors "
                               "or Python builtins first, " + _CALL_OUTSIDE,
    "value drawn from random at run time": "Draw with torch (torch.rand, torch.randint) and branch with "
                                           "torch.where, or draw the value outside the compiled function.",
    "class with a C-level __new__": "Create this object outside the compiled function and pass it in.",
    "C-level method": "This method is implemented in C and not traced (numpy arrays, extension types): use the "
                      "torch equivalent, " + _CALL_OUTSIDE,
    "random.shuffle": "Use torch.randperm to permute indices inside compiled code, or shuffle before the call.",
    "unknown python type": "Pass tensors and plain Python values (numbers, strings, containers of them) into "
                           "the compiled function.",
    "dict key that is not a constant": "Key dicts with strings, numbers, tuples of them, or tensors inside "
                                       "compiled code.",
    "C-level __setattr__": "This class sets attributes in C (threading.local, an extension type): write the "
                           "attribute outside the compiled function.",
    "C-level __delattr__": "This class deletes attributes in C (threading.local, an extension type): delete "
                           "the attribute outside the compiled function.",
    "context manager with a C-level method": "Enter this context manager (a lock, a C extension's) outside the "
                                             "compiled function, or compile the code inside the block as its "
                                             "own function.",
    "attribute write": "Return the value instead of storing it on an object inside the compiled function.",
    "random.choice over non-constants": "Pick an index with torch.randint and index a tensor, or choose "
                                        "outside the compiled function.",
}


def hints_for(gb_type: str) -> tuple[str, ...]:
    """The default hints of a kind of break (empty when there is none)."""
    hint = HINTS.get(gb_type)
    return (hint,) if hint else ()
