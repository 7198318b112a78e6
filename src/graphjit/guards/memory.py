"""Machine words that change whenever a guarded Python value can change.

CPython 3.11 gives every dict a version tag (PEP 509: ``ma_version_tag``), set from a
global counter on every insertion, replacement and deletion; an object's type, a
function's ``__code__``/``__defaults__``/``__kwdefaults__``/``__closure__``, a cell's
contents, a class's MRO and an instance's ``__dict__`` are pointers in fixed fields.  A
guard whose every check reads only such state can be answered "unchanged" by comparing
those words with a snapshot (``guards/footprint.py``); this module reads them.

Contract: :data:`MEM` is a memoryview of unsigned 64-bit words over the process's address
space (for calibration); :func:`word_address` gives the address of a word of a (live,
referenced) object; :func:`reader` turns addresses into ``(take, indices)`` such that
``take(indices).tobytes()`` reads them all in one C loop (a numpy gather over the address
space: about a nanosecond and a half per word).  The field
offsets are not assumed: :func:`_calibrate` finds each on sample objects at import and
checks that a dict's tag changes on every kind of write; if anything is not as expected,
:data:`AVAILABLE` is ``False`` and guards check every value instead.  Callers must hold a
reference to every object whose words they read (an address is valid while its object
lives).
"""

from __future__ import annotations

import ctypes
import gc
import sys
import types
from typing import Any

_WORD = 8
_MANAGED_DICT = 1 << 4  # Py_TPFLAGS_MANAGED_DICT (3.11)

#: kind of word -> offset from the object's address (filled by _calibrate)
OFFSETS: dict[str, int] = {}
MEM: memoryview | None = None
AVAILABLE = False


def _find(obj: Any, target: Any) -> int | None:
    """The offset (bytes) of the word inside ``obj`` that points at ``target``, when
    exactly one does."""
    span = sys.getsizeof(obj) // _WORD  # (never past the object)
    hits = [i * _WORD for i in range(span) if MEM[(id(obj) + i * _WORD) // _WORD] == id(target)]
    return hits[0] if len(hits) == 1 else None


def _calibrate() -> bool:
    global MEM
    if sys.implementation.name != "cpython" or sys.version_info[:2] != (3, 11) or ctypes.sizeof(ctypes.c_void_p) != 8:
        return False
    MEM = memoryview((ctypes.c_uint64 * (1 << 44)).from_address(0)).cast("B").cast("Q")

    def read(addr: int) -> int:
        return MEM[addr // _WORD]

    # a dict's version tag: changes on insert, replace and delete; stays on a no-op
    d: dict = {}
    tag = 3 * _WORD
    t0 = read(id(d) + tag)
    d["k"] = []
    t1 = read(id(d) + tag)
    d["k"] = d["k"]
    t2 = read(id(d) + tag)
    d["k"] = ()
    t3 = read(id(d) + tag)
    del d["k"]
    t4 = read(id(d) + tag)
    if not (t0 < t1 == t2 < t3 < t4):
        return False
    OFFSETS["tag"] = tag
    OFFSETS["type"] = _WORD  # ob_type: the stable ABI

    def sample(a=1, *, b=2):
        return cell

    cell = sample
    for field, value in (("code", sample.__code__), ("defaults", sample.__defaults__),
                         ("kwdefaults", sample.__kwdefaults__), ("closure", sample.__closure__)):
        offset = _find(sample, value)
        if offset is None:
            return False
        OFFSETS[field] = offset
    offset = _find(sample.__closure__[0], sample)
    if offset is None:
        return False
    OFFSETS["cell"] = offset

    class Probe:
        pass

    p = Probe()
    p.x = 1
    pd = p.__dict__  # (materialized first: until then the attributes live in the object)
    if not type(p).__flags__ & _MANAGED_DICT or read(id(p) - 3 * _WORD) != id(pd):
        return False
    OFFSETS["managed_dict"] = -3 * _WORD
    for field, value in (("mro", Probe.__mro__), ("type_dict", gc.get_referents(Probe.__dict__)[0])):
        offset = _find(Probe, value)
        if offset is None:
            return False
        OFFSETS[field] = offset
    # a write through the instance reaches the materialized dict's tag
    before = read(id(p.__dict__) + tag)
    p.x = 2
    if read(id(p.__dict__) + tag) == before:
        return False

    # a __slots__ member: its descriptor's PyMemberDef gives the offset
    class Slotted:
        __slots__ = ("first", "second")

    q = Slotted()
    q.first, q.second = [], ()
    OFFSETS["member_def"] = 5 * _WORD  # PyDescr_COMMON, then d_member
    for name, value in (("first", q.first), ("second", q.second)):
        offset = slot_offset(Slotted.__dict__[name])
        if offset is None or read(id(q) + offset) != id(value):
            return False
    return True


def slot_offset(descriptor: Any) -> int | None:
    """Where the ``__slots__`` member ``descriptor`` keeps its value in an instance
    (``PyMemberDef.offset``), or ``None`` for another kind of member."""
    if type(descriptor) is not types.MemberDescriptorType or "member_def" not in OFFSETS:
        return None
    member_def = MEM[(id(descriptor) + OFFSETS["member_def"]) // _WORD]
    kind = MEM[(member_def + _WORD) // _WORD] & 0xFFFFFFFF
    if kind != 16:  # T_OBJECT_EX: a slot holding an object
        return None
    offset = MEM[(member_def + 2 * _WORD) // _WORD]
    owner = descriptor.__objclass__
    return offset if _WORD <= offset < owner.__basicsize__ else None


class _AddressSpace:
    """The address space as a numpy array of words starting at address 8 (numpy does not
    take a NULL data pointer); nothing is read until indexed."""

    def __init__(self) -> None:
        self.__array_interface__ = {"shape": ((1 << 44) - 1,), "typestr": "<u8", "data": (_WORD, True),
                                    "version": 3}


WORDS = None


def reader(addresses: list[int]) -> tuple:
    """``(take, indices)``: ``take(indices).tobytes()`` is the words at ``addresses``."""
    indices = np.array([a // _WORD - 1 for a in addresses], dtype=np.intp)
    return WORDS.take, indices


try:
    import numpy as np

    AVAILABLE = _calibrate()
    if AVAILABLE:
        WORDS = np.asarray(_AddressSpace())
        _probe: dict = {}
        _take, _idx = reader([id(_probe) + OFFSETS["tag"]])
        _before = _take(_idx).tobytes()
        _probe["x"] = 1
        _after = _take(_idx).tobytes()
        AVAILABLE = _after != _before and int.from_bytes(_after, "little") == MEM[(id(_probe) + OFFSETS["tag"]) // _WORD]
except Exception:  # (a platform this was not written for: guards check every value)
    AVAILABLE = False


def instance_dict(obj: Any) -> dict | None:
    """``obj``'s own ``__dict__`` (materialized: its writes then reach its version tag),
    when its type keeps one in a known place."""
    t = type(obj)
    if not (t.__flags__ & _MANAGED_DICT or t.__dictoffset__ > 0):
        return None
    try:
        d = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None
    return d if type(d) is dict else None


def class_dict(cls: type) -> dict:
    """The dict behind ``cls.__dict__`` (a mappingproxy)."""
    return gc.get_referents(cls.__dict__)[0]


def word_address(kind: str, obj: Any) -> int:
    """The address of the word ``kind`` of ``obj``: ``"tag"`` (a dict's version),
    ``"type"``, ``"code"``/``"defaults"``/``"kwdefaults"``/``"closure"`` (a function's),
    ``"cell"`` (a cell's contents), ``"mro"`` (a class's), ``"dict"`` (where an instance
    keeps its ``__dict__``)."""
    if kind.startswith("slot"):
        return id(obj) + int(kind[4:])
    if kind == "dict":
        t = type(obj)
        offset = OFFSETS["managed_dict"] if t.__flags__ & _MANAGED_DICT else t.__dictoffset__
        return id(obj) + offset
    return id(obj) + OFFSETS[kind]


def mutable_type(cls: type) -> bool:
    """Can ``cls``'s dict, MRO or its instances' type change (a class made in Python)?"""
    return not cls.__flags__ & _IMMUTABLE_TYPE


def type_can_change(obj: Any) -> bool:
    """Can ``obj.__class__`` be assigned (an instance of a Python class, or a module)?"""
    return bool(type(obj).__flags__ & _HEAP_TYPE) or isinstance(obj, types.ModuleType)


_HEAP_TYPE = 1 << 9
_IMMUTABLE_TYPE = 1 << 8

__all__ = ["AVAILABLE", "MEM", "OFFSETS", "word_address", "instance_dict", "class_dict", "slot_offset", "reader",
           "mutable_type", "type_can_change"]
