"""Graph targets that apply a ``torch.func`` transform to a traced body when the graph
runs (and when it is run on fake tensors at trace time, and when AOTAutograd traces it).

A :class:`TransformCall` node is ``call(body, *explicit, *lifted)``: ``body`` is the
``GraphModule`` of the user's function, ``explicit`` the tensors (and symbolic numbers)
among the call's arguments, ``lifted`` the outer values the body reads.  The call rebuilds
the user's arguments (their structure and constants are the call's), wraps the body as a
function of those arguments, applies the real transform (``torch.func.vmap(fn, in_dims,
...)(*args)``, ``torch.func.grad(fn, argnums, has_aux)(*args)``...) and returns the
result's leaves as a flat tuple; the structure of the result is kept in
:attr:`TransformCall.result_spec`.  So in_dims, argnums, out_dims, randomness, chunking and
every error are functorch's own, and its levels are pushed and popped by functorch itself
(nothing is left on its stack if the body raises).

``vjp`` and ``linearize`` return a function besides tensors: it is the last item of the
tuple, and :class:`FunctionCall` calls it in a later node.
"""

from __future__ import annotations

from typing import Any, Callable

import torch.utils._pytree as pytree


class TransformCall:
    """``transform`` applied to a body (see the module docstring).

    ``style``: ``"wrap"`` (``transform(fn, **options)(*args, **kwargs)``) or ``"call"``
    (``transform(fn, *args, **options)``: ``vjp``, ``jvp``, ``linearize``).  ``template``:
    the ``(args, kwargs)`` the transform gets, with :data:`INPUT` where an explicit input
    goes; ``fn_template``: the ``(args, kwargs)`` the transform calls the function with,
    :data:`INPUT` marking the body's inputs.  ``body_spec``: the torch pytree spec of what
    the body returns.  ``returns_function``: the transform's result is ``(out, function,
    *aux)`` (``vjp``, ``linearize``)."""

    __module__ = "graphjit_runtime"  # (written into graph code as a global)

    def __init__(self, transform: Callable, options: dict, style: str, template: tuple,
                 fn_template: tuple, body_spec: pytree.TreeSpec, fn_name: str,
                 returns_function: bool = False) -> None:
        self.transform, self.options, self.style = transform, options, style
        self.template = Template(template)
        self.body_positions = Template(fn_template).positions
        self.body_spec, self.fn_name, self.returns_function = body_spec, fn_name, returns_function
        self.__name__ = f"{getattr(transform, '__name__', 'transform')}_call"
        self.result_spec: pytree.TreeSpec | None = None

    def __repr__(self) -> str:
        return f"TransformCall({self.__name__} of {self.fn_name}, {self.options})"

    def __call__(self, body: Callable, *flat: Any) -> tuple:
        n = len(self.template.positions)
        explicit, lifted = flat[:n], flat[n:]
        args, kwargs = self.template.fill(explicit)
        positions, body_spec = self.body_positions, self.body_spec
        body = getattr(body, "forward", body)  # (a GraphModule's __call__ prints errors to stderr)

        def fn(*a, **k):
            leaves = pytree.tree_leaves((a, k))
            return pytree.tree_unflatten(list(body(*[leaves[i] for i in positions], *lifted)), body_spec)

        fn.__name__ = fn.__qualname__ = self.fn_name
        if self.style == "wrap":
            result = self.transform(fn, **self.options)(*args, **kwargs)
        else:
            result = self.transform(fn, *args, **kwargs, **self.options)
        if self.returns_function:  # (out, function, *aux): the function last
            leaves, self.result_spec = pytree.tree_flatten((result[0], *result[2:]))
            return (*leaves, result[1])
        leaves, self.result_spec = pytree.tree_flatten(result)
        return tuple(leaves)


class FunctionCall:
    """Call a function a transform returned (``vjp_fn``, ``jvp_fn``) on arguments in the
    structure ``template``; the result's leaves as a flat tuple (its structure in
    :attr:`result_spec`)."""

    __module__ = "graphjit_runtime"

    def __init__(self, template: tuple) -> None:
        self.template = Template(template)
        self.__name__ = "call_transformed_function"
        self.result_spec: pytree.TreeSpec | None = None

    def __repr__(self) -> str:
        return "FunctionCall()"

    def __call__(self, fn: Callable, *explicit: Any) -> tuple:
        args, kwargs = self.template.fill(explicit)
        leaves, self.result_spec = pytree.tree_flatten(fn(*args, **kwargs))
        return tuple(leaves)


class Template:
    """A pytree with :data:`INPUT` markers, filled with values in flatten order."""

    __slots__ = ("leaves", "spec", "positions")

    def __init__(self, tree: Any) -> None:
        leaves, self.spec = pytree.tree_flatten(tree)
        self.leaves = list(leaves)
        self.positions = [i for i, leaf in enumerate(self.leaves) if leaf is INPUT]

    def fill(self, values: tuple) -> Any:
        leaves = list(self.leaves)
        for pos, value in zip(self.positions, values, strict=True):
            leaves[pos] = value
        return pytree.tree_unflatten(leaves, self.spec)


class _Input:
    """Marks where an explicit input goes in a template."""

    def __repr__(self) -> str:
        return "INPUT"


INPUT = _Input()


__all__ = ["TransformCall", "FunctionCall", "Template", "INPUT"]
