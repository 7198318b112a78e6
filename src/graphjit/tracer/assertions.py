"""``assert`` on a one-element CPU tensor, checked inside the graph.

``assert (t[-1] == end).all(), "past the end"`` needs the tensor's value, known only when
the graph runs: a graph break, two graphs where torch.compile makes one (it puts
``torch._assert_async`` in the graph, which raises ``RuntimeError``, not eager's
``AssertionError``).  graphjit puts the check in the graph too, and gives the program
eager's exception.

Contract:

* :func:`assertion_jump` is asked at a conditional jump on a tensor.  The jump belongs to
  an ``assert`` when one of its two successors is the assert's raise block
  (``LOAD_ASSERTION_ERROR``, then ``RAISE_VARARGS`` or a constant ``str`` message called
  and raised).  The check goes into the graph, as
  ``torch.ops.aten._assert_async.msg(t, marker)`` (an op every backend keeps and that
  raises on CPU where it runs: nothing after it in the graph runs), and the trace goes on
  along the passing path.  Only where the graph raising at that point is what eager does:
  a plain tensor of one element (static) on the CPU (on an accelerator the op is
  asynchronous), outside a higher-order operator's body, in no ``try`` or ``with`` block
  of the frame or of a caller it is inlined in (their handlers are not around the graph's
  call), and with nothing the graph would have to undo: no input written yet, no Python side effect pending (those are
  applied after the graph) and grad mode as the frame found it.  Otherwise ``None``: the
  jump breaks the graph as before.
* The marker is the message itself, framed and in hexadecimal (:data:`PREFIX`, whether
  there is a message, its UTF-8 bytes in hex, ``:``; inductor writes it into C++ source),
  so the graph module alone says what to raise (a graph loaded from the persistent cache
  too): :func:`raising_assertions` wraps a graph's callable so
  that the ``RuntimeError`` of a marked check is the program's ``AssertionError``
  (``AssertionError()`` or ``AssertionError(message)``, as eager's), raised with no
  context; any other error passes through unchanged.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.fx

#: the start of a marked check's message
PREFIX = "graphjit-assert:"
_END = ":"
_OP = torch.ops.aten._assert_async.msg


def assertion_jump(tx, inst, value, when: bool):
    """The instruction the passing path of ``assert`` continues at, with the check now
    in the graph, or ``None`` (see the module docstring).  ``inst`` jumps to its target
    when ``value``'s truth is ``when``."""
    from ..variables.tensor import TensorVariable

    fall = tx.instructions[tx.ip]
    if when and fall.opname == "LOAD_ASSERTION_ERROR":
        raising, passing = fall, inst.target
    elif not when and inst.target.opname == "LOAD_ASSERTION_ERROR":
        raising, passing = inst.target, fall
    else:
        return None
    if type(value) is not TensorVariable or getattr(value, "class_type", torch.Tensor) is not torch.Tensor:
        return None
    message = _message(tx, raising)
    output = tx.output
    fake = value.example_value
    if message is None or output.bodies or fake.device.type != "cpu" or \
            isinstance(fake.numel(), torch.SymInt) or fake.numel() != 1:
        return None
    if output.may_mutate_inputs() or output.side_effects or output.grad_enabled != torch.is_grad_enabled():
        return None
    frame = tx
    while frame is not None:  # the graph's error would skip a handler around the assert
        if frame.current_inst.exn_tab_entry is not None:
            return None
        frame = frame.parent
    marker = PREFIX + ("1" + message[0].encode("utf-8", "surrogatepass").hex() if message else "0") + _END
    output.graph.create_node("call_function", _OP, (value.node, marker))
    return passing


def _message(tx, raising) -> tuple | None:
    """``()`` or ``(message,)`` of the raise block starting at ``raising``, or ``None``
    where it is not a constant ``str``."""
    at = tx.indexof[id(raising)]
    ops = tx.instructions[at + 1: at + 5]
    if ops and ops[0].opname == "RAISE_VARARGS" and ops[0].arg == 1:
        return ()
    if [i.opname for i in ops] == ["LOAD_CONST", "PRECALL", "CALL", "RAISE_VARARGS"] and \
            ops[1].arg == 0 and ops[2].arg == 0 and ops[3].arg == 1 and \
            type(ops[0].argval) is str:
        return (ops[0].argval,)
    return None


def has_assertions(gm: torch.fx.GraphModule) -> bool:
    return any(isinstance(n.args[1], str) and n.args[1].startswith(PREFIX)
               for n in gm.graph.find_nodes(op="call_function", target=_OP))


def raising_assertions(gm: torch.fx.GraphModule, fn: Callable) -> Callable:
    """``fn``, or, where ``gm`` checks an ``assert``, ``fn`` raising the program's
    ``AssertionError`` for a failed check (see the module docstring)."""
    if not has_assertions(gm):
        return fn

    def call(*args):
        try:
            return fn(*args)
        except RuntimeError as e:
            error = assertion_error(str(e))
            if error is None:
                raise
        raise error

    return call


def assertion_error(text: str) -> AssertionError | None:
    """The ``AssertionError`` a failed check's error text stands for, or ``None``."""
    start = text.find(PREFIX)
    if start < 0:
        return None
    body = text[start + len(PREFIX):]
    end = body.find(_END)
    if end < 1:
        return None
    if body[0] == "0":
        return AssertionError()
    try:
        return AssertionError(bytes.fromhex(body[1:end]).decode("utf-8", "surrogatepass"))
    except ValueError:
        return None


__all__ = ["PREFIX", "assertion_error", "assertion_jump", "has_assertions", "raising_assertions"]
