"""Handlers: stack manipulation and no-ops.
https://docs.python.org/3.11/library/dis.html#python-bytecode-instructions"""

from __future__ import annotations

from ..variables import NullVariable


class StackHandlers:
    def NOP(self, inst) -> None:
        pass

    RESUME = NOP
    MAKE_CELL = NOP  # cells are modelled from the start of the frame
    COPY_FREE_VARS = NOP

    def POP_TOP(self, inst) -> None:
        self.pop()

    def PUSH_NULL(self, inst) -> None:
        self.push(NullVariable())

    def COPY(self, inst) -> None:
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst) -> None:
        i = inst.arg
        self.stack[-1], self.stack[-i] = self.stack[-i], self.stack[-1]
