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

import torch
import torch._C._functorch as _functorch
import torch._functorch.eager_transforms as _eager
import torch._functorch.predispatch as _predispatch
import torch._functorch.vmap as _vmap
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


class FlatVmapCall:
    """``vmap`` of a body whose inputs and outputs are flat: what ``torch.func.vmap`` does
    once it has flattened its arguments (``_flat_vmap``), without its pytree work on every
    call.  ``in_dims``: the batch dimension of each explicit input (``None``: not batched);
    ``out_dims``: where each output's batch dimension goes.  Made only where functorch's
    own checks passed at trace time (``transforms._flat_vmap_call``), with no
    ``chunk_size``; an output that stays batched with ``out_dims`` ``None`` raises
    functorch's own error."""

    __module__ = "graphjit_runtime"

    def __init__(self, in_dims: tuple, out_dims: tuple, randomness: str, result_spec: pytree.TreeSpec,
                 fn_name: str) -> None:
        self.in_dims, self.out_dims, self.randomness = in_dims, out_dims, randomness
        self.result_spec, self.fn_name = result_spec, fn_name
        self.first_batched = next(i for i, d in enumerate(in_dims) if d is not None)
        self.__name__ = "vmap_call"
        self.returns_function = False
        _vmap.lazy_load_decompositions()

    def __repr__(self) -> str:
        return f"FlatVmapCall({self.fn_name}, in_dims={self.in_dims}, out_dims={self.out_dims})"

    def __call__(self, body: Callable, *flat: Any) -> tuple:
        in_dims, n = self.in_dims, len(self.in_dims)
        explicit, lifted = flat[:n], flat[n:]
        batch = explicit[self.first_batched].size(in_dims[self.first_batched])
        level = _vmap._vmap_increment_nesting(batch, self.randomness)
        try:
            batched = [x if d is None else _vmap._add_batch_dim(x, d, level) for x, d in zip(explicit, in_dims)]
            outputs = getattr(body, "forward", body)(*batched, *lifted)
            return tuple(_vmap._maybe_remove_batch_dim(self.fn_name, o, level, batch, d)
                         for o, d in zip(outputs, self.out_dims, strict=True))
        finally:
            _vmap._vmap_decrement_nesting()


class FlatGradCall:
    """``grad``/``grad_and_value`` of a body with flat inputs: what functorch's
    ``grad_and_value_impl`` does (wrap every input for the grad level, make the
    differentiated ones require grad, call, ``_autograd_grad``, unwrap), without its pytree
    work on every call.  ``diff``: the positions of the differentiated inputs, in the
    order of the gradients; ``with_value``: ``grad_and_value``.  The body returns the
    output then the aux leaves (``has_aux``).  Made only where functorch's checks passed
    at trace time (``transforms._flat_grad_call``): a scalar tensor output, tensors only
    in the differentiated arguments and the aux."""

    __module__ = "graphjit_runtime"

    def __init__(self, n_inputs: int, diff: tuple, has_aux: bool, with_value: bool,
                 result_spec: pytree.TreeSpec, fn_name: str) -> None:
        self.n_inputs, self.diff, self.has_aux, self.with_value = n_inputs, diff, has_aux, with_value
        self.result_spec, self.fn_name = result_spec, fn_name
        self.__name__ = "grad_and_value_call" if with_value else "grad_call"
        self.returns_function = False

    def __repr__(self) -> str:
        return f"FlatGradCall({self.fn_name}, diff={self.diff}, has_aux={self.has_aux})"

    def __call__(self, body: Callable, *flat: Any) -> tuple:
        explicit, lifted = flat[:self.n_inputs], flat[self.n_inputs:]
        level = _functorch._grad_increment_nesting()
        try:
            with torch.enable_grad():
                wrapped = [_functorch._wrap_for_grad(x, level) if isinstance(x, torch.Tensor) else x
                           for x in explicit]
                with _eager.enable_inplace_requires_grad(True):
                    for i in self.diff:
                        wrapped[i] = wrapped[i].requires_grad_()
                outputs = getattr(body, "forward", body)(*wrapped, *lifted)
                grads = _eager._autograd_grad((outputs[0],), [wrapped[i] for i in self.diff], create_graph=True)
                grads = [_predispatch._unwrap_for_grad(g, level) for g in grads]
                rest = [_predispatch._unwrap_for_grad(o, level) for o in outputs]
        finally:
            _functorch._grad_decrement_nesting()
        if self.with_value:
            return (*grads, *rest)
        return (*grads, *rest[1:])


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

    __graphjit_portable__ = True  # (written by content into the persistent cache)

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
    """Marks where an explicit input goes in a template (one object: copies and pickles
    of a graph keep it)."""

    __graphjit_portable__ = True  # (written by content into the persistent cache)

    def __repr__(self) -> str:
        return "INPUT"

    def __reduce__(self) -> str:
        return "INPUT"

    def __copy__(self) -> "_Input":
        return self

    def __deepcopy__(self, memo) -> "_Input":
        return self


INPUT = _Input()


__all__ = ["TransformCall", "FlatVmapCall", "FlatGradCall", "FunctionCall", "Template", "INPUT"]
