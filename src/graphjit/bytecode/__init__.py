"""CPython 3.11 bytecode layer: decode code objects into instructions, assemble them back.

Public API (see each module for contracts and design notes):

* :mod:`.instruction` -- the :class:`Instruction` model and ``create_*`` helpers.
* :func:`decode` -- code object to instruction list (:mod:`.decode`).
* :func:`assemble` -- instruction list + template code object to a new code object
  (:mod:`.assemble`; exception table in :mod:`.exception_table`, line table in
  :mod:`.linetable`, stack analysis in :mod:`.stack`).
* :func:`instructions_from_template` -- harvest instruction sequences from Python functions
  (:mod:`.templates`).
* :func:`format_code` -- deterministic ``dis``-style text (:mod:`.disasm`).
"""

from .assemble import assemble
from .decode import decode
from .disasm import format_code
from .instruction import (
    ExceptionTableEntry,
    Instruction,
    create_call,
    create_instruction,
    create_jump,
    create_load_global,
)
from .stack import compute_stacksize, stack_depths, stack_effect
from .templates import instructions_from_template

__all__ = [
    "Instruction",
    "ExceptionTableEntry",
    "create_instruction",
    "create_jump",
    "create_load_global",
    "create_call",
    "decode",
    "assemble",
    "instructions_from_template",
    "format_code",
    "stack_effect",
    "stack_depths",
    "compute_stacksize",
]
