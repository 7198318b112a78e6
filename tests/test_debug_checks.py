"""``config.debug_checks``: every handler's stack effect is checked against ``dis``'s, so a
handler that forgets to pop (or to pop on a jump) raises ``InternalError`` naming the
opcode; without the checks the same bug goes unnoticed.  (The opcode coverage these checks
run under is ``test_opcodes.py``.)"""

from __future__ import annotations

import dis

import pytest
import torch

import graphjit
from graphjit import config
from graphjit.graph.output_graph import OutputGraph
from graphjit.tracer.translator import InstructionTranslator
from graphjit.variables import ConstantVariable


A = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
LST3 = [torch.randn(3, 4, generator=torch.Generator().manual_seed(s)) for s in (4, 5, 6)]


def f_pop_top(a):
    a.sum()  # expression statement: its value is popped
    return a * 2


def f_for_loop(a, lst):
    total = a
    for x in lst:  # GET_ITER, FOR_ITER, JUMP_BACKWARD
        total = total + x
    return total


class _BrokenPopTop(InstructionTranslator):
    def POP_TOP(self, inst):  # forgets to pop
        pass


class _BrokenForIter(InstructionTranslator):
    def FOR_ITER(self, inst):  # on exhaustion, forgets to pop the iterator
        it = self.stack[-1]
        item = it.next_item()
        if item is None:
            self.jump_to(inst.target)
        else:
            self.push(item)


def _translator(cls, fn, *args):
    return cls(fn.__code__, fn.__globals__, OutputGraph(fn.__globals__),
               dict(zip(fn.__code__.co_varnames, args)), fn.__closure__)


def test_subclass_gets_its_own_dispatch_table():
    op = dis.opmap["POP_TOP"]
    assert _BrokenPopTop.dispatch_table[op] is _BrokenPopTop.POP_TOP
    assert InstructionTranslator.dispatch_table[op] is not _BrokenPopTop.POP_TOP


def test_wrong_stack_effect_is_caught():
    tx = _translator(_BrokenPopTop, f_pop_top, A)
    with pytest.raises(graphjit.InternalError, match=r"POP_TOP.*expected -1, got 0"):
        tx.run()


def test_wrong_stack_effect_checked_step_directly():
    tx = _translator(_BrokenPopTop, f_pop_top, A)
    inst = next(i for i in tx.instructions if i.opname == "POP_TOP")
    tx.stack = [ConstantVariable(1)]
    with pytest.raises(graphjit.InternalError, match="stack effect of POP_TOP"):
        tx._checked_step(_BrokenPopTop.POP_TOP, inst)
    # the correct handler passes the same check
    tx.stack = [ConstantVariable(1)]
    tx._checked_step(InstructionTranslator.POP_TOP, inst)
    assert tx.stack == []


def test_wrong_stack_effect_on_jump_is_caught():
    tx = _translator(_BrokenForIter, f_for_loop, A, LST3)
    with pytest.raises(graphjit.InternalError, match=r"FOR_ITER.*expected -1, got 0"):
        tx.run()


def test_no_check_without_debug_checks():
    config.debug_checks = False
    tx = _translator(_BrokenPopTop, f_pop_top, A)
    tx.run()  # the bug goes unnoticed: the checks are what catches it
    assert tx.done and len(tx.stack) == 1


def test_correct_translator_passes_debug_checks():
    tx = _translator(InstructionTranslator, f_pop_top, A)
    tx.run()
    assert tx.done and tx.stack == []
