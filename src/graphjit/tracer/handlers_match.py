"""Handlers: structural pattern matching (``match`` statements): ``GET_LEN``,
``MATCH_MAPPING``, ``MATCH_SEQUENCE``, ``MATCH_KEYS``, ``MATCH_CLASS``, as CPython 3.11's
``ceval.c`` runs them.
https://docs.python.org/3.11/library/dis.html#opcode-MATCH_CLASS"""

from __future__ import annotations

from ..exc import ObservedException, observed, unsupported
from ..variables import ConstantVariable, DictVariable, TupleVariable
from ..variables.builtins import call_builtin
from ..variables.dicts import MISSING, key_of
from ..diagnostics.describe import describe

_TPFLAGS_SEQUENCE = 1 << 5
_TPFLAGS_MAPPING = 1 << 6
#: classes whose one positional sub-pattern matches the subject itself (``case int(x)``)
_SELF_MATCHING = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)


class MatchHandlers:
    def GET_LEN(self, inst) -> None:
        self.push(call_builtin(self, len, [self.stack[-1]], {}))

    def MATCH_MAPPING(self, inst) -> None:
        self.push(ConstantVariable(bool(self._subject_type().__flags__ & _TPFLAGS_MAPPING)))

    def MATCH_SEQUENCE(self, inst) -> None:
        self.push(ConstantVariable(bool(self._subject_type().__flags__ & _TPFLAGS_SEQUENCE)))

    def _subject_type(self) -> type:
        return self.stack[-1].python_type()

    def MATCH_KEYS(self, inst) -> None:
        keys, subject = self.stack[-1], self.stack[-2]
        if not isinstance(subject, DictVariable) or subject.python_method(self, "get") is not None:
            raise unsupported("match on a mapping graphjit does not model", describe(subject))
        values = []
        for key in keys.unpack(self):
            value = subject.lookup(self, key_of(key, self))
            if value is MISSING:
                self.push(ConstantVariable(None))
                return
            values.append(value)
        self.push(TupleVariable(values))

    def MATCH_CLASS(self, inst) -> None:
        names, cls, subject = self.pop(), self.pop(), self.pop()
        klass = cls.as_python_constant()
        if not isinstance(klass, type):
            raise observed(TypeError, "called match pattern must be a class")
        if not call_builtin(self, isinstance, [subject, cls], {}).as_python_constant():
            self.push(ConstantVariable(None))
            return
        count = inst.arg
        positional: list[str] = []
        if count:
            try:
                match_args = cls.var_getattr(self, "__match_args__").as_python_constant()
            except ObservedException as e:
                if not e.is_attribute_error():
                    raise
                match_args = None
            if match_args is None:
                if count == 1 and klass in _SELF_MATCHING:  # ``case int(x)``: x is the subject
                    self._match_attrs(subject, [subject], [], names)
                    return
                match_args = ()
            if type(match_args) is not tuple:
                raise observed(TypeError, f"{klass.__name__}.__match_args__ must be a tuple "
                                          f"(got {type(match_args).__name__})")
            if count > len(match_args):
                raise observed(TypeError, f"{klass.__name__}() accepts {len(match_args)} positional "
                                          f"sub-pattern{'' if len(match_args) == 1 else 's'} "
                                          f"({count} given)")
            positional = list(match_args[:count])
        self._match_attrs(subject, [], positional, names, klass)

    def _match_attrs(self, subject, found: list, positional: list, names, klass=None) -> None:
        """Push the tuple of ``found`` then the attributes named ``positional`` and
        ``names`` (a missing one: no match, ``None``)."""
        seen: set[str] = set()
        values = list(found)
        for name in [*positional, *names.as_python_constant()]:
            if name in seen:
                raise observed(TypeError, f"{klass.__name__}() got multiple sub-patterns for "
                                          f"attribute '{name}'")
            seen.add(name)
            try:
                values.append(subject.var_getattr(self, name))
            except ObservedException as e:
                if not e.is_attribute_error():
                    raise
                self.push(ConstantVariable(None))
                return
        self.push(TupleVariable(values))
