"""Tensors: an fx node plus its FakeTensor (``node.meta["example_value"]``).

Metadata (dtype, device, shape, ndim, ...) is read from the fake tensor and becomes a
trace-time constant: shapes are static and guarded by TENSOR_MATCH.  Everything that
computes goes into the graph.  What depends on tensor *data* (``item()``, ``bool()``,
``tolist()``) cannot be known at trace time and is a graph break.
"""

from __future__ import annotations

import operator

import torch
import torch.fx
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from ..exc import observed, unsupported
from ..guards.guard import GuardKind
from ..sources import AttrSource
from .base import MethodVariable, VariableTracker, check_constant_args, register_builder
from .constant import ConstantVariable
from .sym_node import as_known, is_symbolic, reconstruct_graph_value

#: Device and layout predicates besides ``is_cuda``/``is_cpu`` (torchmetrics asks
#: ``is_mps``): the fake tensor's device and layout are the real one's.
DEVICE_PREDICATES = ("is_mps", "is_xpu", "is_ipu", "is_maia", "is_mtia", "is_vulkan", "is_xla",
                     "is_sparse_csr")

#: Tensor attributes that are trace-time constants, read from the fake tensor.
CONSTANT_ATTRS = frozenset({
    "dtype", "device", "shape", "ndim", "requires_grad", "is_cuda", "is_sparse",
    "is_quantized", "is_meta", "layout", "is_leaf", "is_complex_t", "itemsize", "nbytes",
    "is_mkldnn", "is_nested", "is_cpu", *DEVICE_PREDICATES,
})

#: Attributes that hold sizes (symbolic where a dimension is dynamic).
SIZE_ATTRS = frozenset({"shape"})

#: Tensor attributes that produce a new tensor (recorded as ``getattr`` nodes).
TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "real", "imag"})

#: Methods whose result is metadata (constant under static shapes).
CONSTANT_METHODS = frozenset({
    "size", "dim", "ndimension", "numel", "nelement", "stride", "is_contiguous",
    "is_floating_point", "is_complex", "element_size", "get_device", "is_signed",
    "storage_offset", "is_inference", "has_names", "__len__",
})

#: Metadata that depends on strides / on dispatch keys: reading it at trace time keeps
#: those parts of TENSOR_MATCH even where the backend would not need them.
STRIDE_METADATA = frozenset({"stride", "is_contiguous", "storage_offset"})
KEY_METADATA = frozenset({"is_inference", "is_conj", "is_neg", "is_quantized", "is_sparse",
                          "is_mkldnn", "is_meta", "is_nested", "layout", "is_cuda", "is_cpu",
                          "device", "get_device", *DEVICE_PREDICATES})

#: method name -> handler(tx, tensor, args, kwargs) registered by a later layer
#: (``numpy_tensors``: ``Tensor.numpy()``), tried before the methods below break
METHOD_HOOKS: dict = {}

#: Methods that read tensor data into Python: a graph break by nature.
DATA_DEPENDENT_METHODS = {
    "item": "Tensor.item() reads a value out of the tensor (graphjit.config."
            "capture_scalar_outputs = True traces it as a symbolic number)",
    "tolist": "Tensor.tolist() reads values out of the tensor",
    "numpy": "Tensor.numpy() leaves the graph",
    "__bool__": "bool(tensor) depends on the tensor's data",
    "__int__": "int(tensor) depends on the tensor's data",
    "__float__": "float(tensor) depends on the tensor's data",
    "__index__": "using a tensor as an index depends on its data",
    "backward": "Tensor.backward() runs autograd outside the graph",
    "data_ptr": "Tensor.data_ptr() is a runtime address",
    "__iter__": "iterating a tensor is not traced yet",
}


def _plain_instance_attr(cls: type, name: str) -> bool:
    """Does ``obj.name = v`` on an instance of the tensor subclass ``cls`` only write its
    instance ``__dict__`` (no class attribute or descriptor of that name, ``__setattr__``
    not overridden)?"""
    if cls.__setattr__ is not torch.Tensor.__setattr__ or "__slots__" in cls.__dict__:
        return False
    return not any(name in klass.__dict__ for klass in cls.__mro__)


def has_symbolic(value) -> bool:
    """A symbolic number, or a sequence holding one (``x.shape`` of a dynamic tensor)."""
    if isinstance(value, (tuple, list)):
        return any(is_symbolic(v) for v in value)
    return is_symbolic(value)


class TensorVariable(VariableTracker):
    """A tensor in the graph; ``node`` is its fx node, ``example_value`` its fake."""

    def __init__(self, node: torch.fx.Node, example_value, **kwargs) -> None:
        super().__init__(**kwargs)
        self.node = node
        self._example = example_value
        #: the Python type (``type(x)``, dispatch): a traceable wrapper subclass's fake is
        #: an instance of it (``TwoTensor`` of fakes), any other fake stands for a Tensor
        self.class_type: type = type(example_value) if is_traceable_wrapper_subclass(example_value) \
            else torch.Tensor
        #: made by ``as_subclass``: a graph output gets ``class_type`` back even when it is a
        #: Parameter class (a Parameter read from a module or passed in is reloaded instead)
        self.rewrap = False
        #: attributes written on it in the trace (a new object: ``t.scale = s`` after
        #: ``_make_subclass``), set on the object where it is rebuilt
        self.new_attrs: dict[str, VariableTracker] = {}

    def children(self) -> list[VariableTracker]:
        return list(self.new_attrs.values())  # (set on the object where it is rebuilt)

    def _note_metadata(self, name: str) -> None:
        if name in STRIDE_METADATA:
            self.node.meta["strides_used"] = True
        elif name in KEY_METADATA:
            self.node.meta["keys_used"] = True

    @property
    def example_value(self):
        """The fake tensor.  Reading it means trace-time decisions depend on this tensor's
        metadata, so a graph input read this way keeps its TENSOR_MATCH guard even if no
        op uses it (inputs that are only passed through are not guarded)."""
        self.node.meta["metadata_used"] = True
        return self._example

    def _repr_body(self) -> str:
        ev = self._example
        shape = "x".join(map(str, ev.shape)) or "scalar"  # symbolic sizes print as s0
        return f"{self.node.name}: {str(ev.dtype).removeprefix('torch.')}[{shape}]"

    def python_type(self) -> type:
        self.node.meta["metadata_used"] = True
        return self.class_type

    def is_tensor(self) -> bool:
        return True

    def identity(self):
        """Trackers of one tensor share its node (in-place ops return their input's tracker)."""
        return self.node

    def truthiness(self, tx) -> bool:
        numel = self.example_value.numel()
        if numel != 1:  # known from the (static) shape: eager raises whatever the values
            raise observed(RuntimeError, "Boolean value of Tensor with more than one value is ambiguous"
                           if numel else "Boolean value of Tensor with no values is ambiguous")
        raise unsupported(
            "data-dependent branch",
            f"bool() of tensor {self.node.name}",
            "Python control flow that depends on a tensor's value cannot be captured in one graph.",
            ["Use torch.where / torch.cond, or move the condition out of the compiled region."],
        )

    def as_python_constant(self):
        raise unsupported("not a constant", f"tensor {self.node.name} is not a Python constant")

    def unpack(self, tx) -> list[VariableTracker]:
        items = tx.output.torch_function.iterate(tx, self)  # under a mode: ``Tensor.__iter__``
        if items is not None:
            return items
        # iterating needs the length itself (with a dynamic first dimension: guarded)
        n = int(self.example_value.shape[0]) if self.example_value.dim() else None
        if n is None:
            raise unsupported("iteration over a 0-d tensor", self.node.name)
        return [tx.output.call(tx, "call_function", operator.getitem,
                               [self, ConstantVariable(i)], {}) for i in range(n)]

    def _rewrapped(self) -> bool:
        """Is this a tensor whose Python type the graph loses (a ``__torch_function__``
        subclass, an ``as_subclass`` result), given back where it leaves the graph?"""
        return self.class_type is not torch.Tensor \
            and (self.rewrap or not issubclass(self.class_type, torch.nn.Parameter)) \
            and not is_traceable_wrapper_subclass(self._example)  # (a wrapper's graph output is one)

    @property
    def rebuilds_new_object(self) -> bool:
        """Its reconstruction makes a new Python object (``as_subclass`` of a graph output):
        the code generator builds it once and reuses it, so ``return t, t`` gives one object."""
        return self._rewrapped() and self.node.op not in ("placeholder", "get_attr")

    def reconstruct(self, cg) -> None:
        subclass = self._rewrapped()
        if subclass and self.source is not None and self.node.op == "placeholder":
            cg.extend(self.source.reconstruct())  # the input itself
            return
        if subclass and self.node in cg.graph_outputs and self.node.op != "get_attr":
            # a graph output of a ``__torch_function__`` subclass: the graph computes plain tensors
            cg.push_null()
            cg.load_const(torch.Tensor.as_subclass)
            reconstruct_graph_value(cg, self, "tensor")
            cg.load_const(self.class_type)
            cg.call(2)
            for name, value in self.new_attrs.items():  # obj.name = value, obj kept on the stack
                cg.dup_top()
                cg.reconstruct(value)
                cg.swap(2)
                cg.store_attr(name)
            return
        reconstruct_graph_value(cg, self, "tensor")

    # -- attributes and methods ----------------------------------------------------------
    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in self.new_attrs:
            return self.new_attrs[name]
        found = tx.output.torch_function.tensor_getattr(tx, self, name)  # subclasses, modes
        if found is not None:
            return found
        ev = self.example_value
        self._note_metadata(name)
        if name in CONSTANT_ATTRS:
            value = getattr(ev, name)
            if name in SIZE_ATTRS and has_symbolic(value):
                return tx.output.call(tx, "call_method", "size", [self], {})
            return ConstantVariable(value if name not in SIZE_ATTRS else as_known(value))
        if name in TENSOR_ATTRS:
            return tx.output.call(tx, "call_function", getattr, [self, ConstantVariable(name)], {})
        if name == "grad":
            return self._grad(tx)
        if name == "grad_fn":
            return self._grad_fn(tx)
        if name == "data":  # a tensor sharing storage, outside autograd: detach's result
            return self.call_method(tx, "detach", [], {})
        if name == "__class__":  # its class (a class is callable: not a method); the tensor
            return VariableTracker.build(tx, self.python_type())  # guard checks its exact type
        if callable(getattr(torch.Tensor, name, None)):
            return MethodVariable(self, name)
        raise unsupported("unsupported tensor attribute", f"Tensor.{name}")

    def has_attr(self, tx, name: str) -> bool:
        return hasattr(self.example_value, name)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """``t.grad = None`` or ``t.grad = g`` on a tensor from outside the graph (a
        parameter: ``zero_grad(set_to_none=True)`` written by hand): logged and replayed
        after the graph; later reads of ``t.grad`` in the trace see the new value.  Any
        other attribute, or a gradient eager would refuse (another size, dtype or device,
        the tensor itself), runs in Python."""
        if self.rebuilds_new_object and self.rewrap and _plain_instance_attr(self.class_type, name):
            self.new_attrs[name] = value  # (a new object: nothing to replay but its rebuild)
            return
        real = tx.output.real_tensor(self.node) if name == "grad" else None
        if real is None:
            return super().store_attr(tx, name, value)
        if not (isinstance(value, ConstantVariable) and value.value is None):
            g = value.example_value if isinstance(value, TensorVariable) else None
            ev = self.example_value
            if g is None or value.node is self.node or type(g.size()) is not type(ev.size()) or \
                    g.shape != ev.shape or g.dtype != ev.dtype or g.device != ev.device:
                return super().store_attr(tx, name, value)
        tx.output.side_effects.attr_store(self, "grad", value)
        tx.output.side_effects.pending_tensor_grads[id(real)] = (real, value)

    def replay_through_object_setattr(self) -> bool:
        return False  # ``STORE_ATTR``: Tensor.grad's setter checks the value as eager's does

    def _grad_fn(self, tx) -> VariableTracker:
        """``t.grad_fn`` when it is ``None``: a tensor that needs no gradient, or one from
        outside the graph that is a leaf (guarded); an autograd node itself is not
        modelled."""
        real = tx.output.real_tensor(self.node)
        if isinstance(real, torch.nn.Parameter):  # always a leaf
            return ConstantVariable(None)
        if real is not None and real.grad_fn is None and self.source is not None:
            tx.output.add_guard(AttrSource(self.source, "grad_fn"), GuardKind.CONSTANT_MATCH, None)
            return ConstantVariable(None)
        if real is None and not self._example.requires_grad:
            return ConstantVariable(None)
        raise unsupported("autograd attribute", f"Tensor.grad_fn of {self.node.name}",
                          "An autograd graph node is not modelled; the read runs in Python.")

    def _grad(self, tx) -> VariableTracker:
        """``t.grad`` of a tensor from outside the graph (a parameter, an optimizer's
        tensor): its real ``.grad`` read through ``source.grad`` (a graph input, or ``None``,
        guarded either way).  Only ``backward()`` sets a ``.grad``, and it is a graph break,
        so a tensor the graph made has none (a leaf's is ``None``; a non-leaf's read warns
        in eager and runs in Python)."""
        real = tx.output.real_tensor(self.node)
        # a parameter from ``module.parameters()`` is a graph attribute whose tracker has
        # no source of its own: where the trace read it is the node's origin
        source = self.source if self.source is not None else self.node.meta.get("origin")
        if real is not None and source is None:  # its .grad cannot be read at run time
            raise unsupported("autograd attribute", f"Tensor.grad of {self.node.name}",
                              "The tensor's .grad cannot be read again when the code runs; "
                              "it runs in Python.")
        if real is None:
            if not self._example.requires_grad or self._example.is_leaf:
                return ConstantVariable(None)
            raise unsupported("autograd attribute", f"Tensor.grad of non-leaf {self.node.name}",
                              "Reading .grad of a non-leaf tensor warns in eager; it runs in Python.")
        pending = tx.output.side_effects.pending_tensor_grads.get(id(real))
        if pending is not None and pending[0] is real:  # written earlier in this trace
            return pending[1]
        grad_src = AttrSource(source, "grad")
        if real.grad is None:
            tx.output.add_guard(grad_src, GuardKind.CONSTANT_MATCH, None)
            return ConstantVariable(None)
        return VariableTracker.build(tx, real.grad, grad_src, realize=True)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        dispatched = tx.output.torch_function.call_method(tx, self, name, args, kwargs)  # modes, subclasses
        if dispatched is not None:
            return dispatched
        if name == "item" and not args and not kwargs and tx.output.capture_scalar_outputs:
            return tx.output.call(tx, "call_method", "item", [self], {})  # an unbacked symbol
        if name in METHOD_HOOKS:
            return METHOD_HOOKS[name](tx, self, args, kwargs)
        if name in DATA_DEPENDENT_METHODS:
            raise unsupported(
                "data-dependent tensor method" if name != "backward" else "autograd call",
                f"Tensor.{name}()", DATA_DEPENDENT_METHODS[name],
                ["Keep values as tensors inside the compiled region, or move this call out of it."],
            )
        self._note_metadata(name)
        if name == "requires_grad_":
            wanted = (args[0] if args else kwargs.get("requires_grad", None))
            wanted = True if wanted is None else bool(wanted.as_python_constant())
            if wanted != self.example_value.requires_grad:
                raise unsupported(
                    "Tensor.requires_grad_ in compiled code", f"Tensor.requires_grad_({wanted})",
                    "A tensor made to require grad inside a graph is not traced by AOTAutograd "
                    "(outputs would lose requires_grad, a leaf's in-place check would be lost); "
                    "the call runs in Python.")
        if name in CONSTANT_METHODS:
            consts, kconsts = check_constant_args(f"Tensor.{name}", args, kwargs)
            try:
                value = getattr(self.example_value, name)(*consts, **kconsts)
            except Exception:  # noqa: BLE001 (bad arguments: the op's fake run raises eager's error)
                return tx.output.call(tx, "call_method", name, [self, *args], kwargs)
            if has_symbolic(value):  # a size of a dynamic dimension: computed by the graph
                if name == "__len__":
                    return tx.output.call(tx, "call_method", "size", [self, ConstantVariable(0)], {})
                return tx.output.call(tx, "call_method", name, [self, *args], kwargs)
            return VariableTracker.build(tx, as_known(value))
        if name == "type":
            return self._type(tx, args, kwargs)
        if name == "new" and len(args) == 1 and not kwargs and args[0].is_python_constant() \
                and isinstance(args[0].as_python_constant(), torch.Size):
            # ``x.new(Size)`` makes an uninitialized tensor of that size; an fx argument
            # Size would become a plain tuple (``x.new((5, 8))`` holds the values 5 and 8)
            size = tuple(args[0].as_python_constant())
            return tx.output.call(tx, "call_method", "new_empty", [self, ConstantVariable(size)], {})
        if name in ("__getitem__",):
            return tx.output.call(tx, "call_function", operator.getitem, [self, *args], {})
        if name in ("__setitem__",):
            return tx.output.call(tx, "call_function", operator.setitem, [self, *args], {})
        if not callable(getattr(torch.Tensor, name, None)):
            raise unsupported("unsupported tensor method", f"Tensor.{name}")
        value = kwargs.get("value")
        if name in _TENSOR_VALUE_METHODS and value is not None and value.is_tensor() and len(args) == 2 \
                and value.example_value.dim() == 0 and not value.example_value.requires_grad \
                and self.example_value.is_floating_point():
            return self._with_tensor_value(tx, name, args, value)
        return tx.output.call(tx, "call_method", name, [self, *args], kwargs)

    def _with_tensor_value(self, tx, name: str, args: list, value: VariableTracker) -> VariableTracker:
        """``x.addcdiv_(a, b, value=t)`` with a 0-d tensor ``t`` (an optimizer's step size
        while compiling: ``_get_value`` keeps it a tensor).  Eager reads the number out of
        ``t``, which a graph cannot, so the op is written out as ``x.add_(t * a / b)`` (the
        kernel's order: ``value * a``, then ``/ b``); results may differ from eager's in the
        last bit (``t`` is not rounded to a double first)."""
        combine = torch.div if name.startswith("addcdiv") else torch.mul
        scaled = tx.output.call(tx, "call_function", torch.mul, [value, args[0]], {})
        term = tx.output.call(tx, "call_function", combine, [scaled, args[1]], {})
        return tx.output.call(tx, "call_method", "add_" if name.endswith("_") else "add", [self, term], {})

    def _type(self, tx, args, kwargs) -> VariableTracker:
        """``x.type()`` (a string) or ``x.type(T)``: a legacy tensor-type class such as
        ``torch.HalfTensor`` becomes its dtype (a class cannot be written in graph code)."""
        if not args and not kwargs:
            return ConstantVariable(self.example_value.type())
        target = args[0].as_python_constant() if args else kwargs["dtype"].as_python_constant()
        if isinstance(target, type) and isinstance(getattr(target, "dtype", None), torch.dtype):
            if getattr(target, "is_cuda", False):
                raise unsupported("Tensor.type to a CUDA tensor type", repr(target))
            target = target.dtype
        return tx.output.call(tx, "call_method", "type", [self, ConstantVariable(target)], {})


#: methods whose ``value=`` must be a Python number (see ``_with_tensor_value``)
_TENSOR_VALUE_METHODS = frozenset({"addcdiv", "addcdiv_", "addcmul", "addcmul_"})


@register_builder(torch.Tensor)
def _build_tensor(tx, value, source):
    if source is None:
        return tx.output.get_attr_tensor(value, "const_tensor", None)
    var = tx.output.add_input(value, source)
    var.class_type = type(value)
    return var
