"""``dataclass``, with ``__eq__``, ``__hash__`` and ``__repr__`` shared, not generated per class.

Python (3.12 and before) makes each method a dataclass generates by compiling
its source text, one ``exec`` each: ~0.6 M instructions apiece, six for a frozen
dataclass. Start-up builds ~60 of them (issue 13): ~220 M instructions of a
serving process's ~840 M before its first answer. Three of the six need no
code of their own, only the class's fields: this module's :func:`dataclass`
asks :func:`dataclasses.dataclass` for the others (``__init__``, and a frozen
class's ``__setattr__`` and ``__delattr__``) and sets these three, the same
functions for every class, reading the fields from ``__dataclass_fields__`` (on
first use, then kept on the class). -85 M instructions at import.

They do what the generated ones do (Python 3.10-3.12; tests/test_dataclass.py
holds them to it): ``__eq__`` compares the tuples of the compared fields of two
instances of the same class (else ``NotImplemented``); ``__hash__``, set only
on a frozen class that compares, hashes the tuple of its hashed fields (an
unfrozen one that compares is unhashable); ``__repr__`` is the class's
qualified name and its shown fields (``...`` for a recursive one). A class that
defines one of them itself keeps its own, as a dataclass does. With ``order``,
``__lt__``, ``__le__``, ``__gt__`` and ``__ge__`` are shared too: the same
comparison of those tuples (a class defining one of them, or ordered without
``eq``, gets dataclasses' error). ``unsafe_hash`` is the standard library's
alone (the whole class is then left to it). ``__dataclass_params__`` says
``eq=False, repr=False, order=False`` for a class made here; nothing in
mockskill reads it.

The methods dataclasses still makes are not all compiled when the class is:
a frozen class's ``__setattr__`` and ``__delattr__`` are closures (no
compile), and ``__init__`` is compiled on the class's first use (its first
instance, or the first read of ``cls.__init__``), most of serve's classes
being made after its first answer if ever (see :class:`_DeferredInit`).

For type checkers this is :func:`dataclasses.dataclass` itself.
"""

from __future__ import annotations

import _thread
import dataclasses
import functools
import operator
import reprlib
import sys
from collections.abc import Callable
from dataclasses import MISSING
from operator import attrgetter
from typing import TYPE_CHECKING, Any

__all__ = ["dataclass"]

_Getter = Callable[[Any], tuple[Any, ...]]


def _getter(names: tuple[str, ...]) -> _Getter:
    """A function from an instance to the tuple of its attributes *names* (always a tuple)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        (name,) = names
        return lambda obj: (getattr(obj, name),)
    return lambda obj: ()


def _compared(cls: type) -> _Getter:
    getter: _Getter | None = cls.__dict__.get("_dataclass_compared")
    if getter is None:
        getter = _getter(tuple(f.name for f in dataclasses.fields(cls) if f.compare))
        type.__setattr__(cls, "_dataclass_compared", getter)
    return getter


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        values = _compared(self.__class__)
        return values(self) == values(other)
    return NotImplemented


def _ordering(compare: Callable[[Any, Any], bool], name: str) -> Callable[[Any, Any], Any]:
    """An ``order=True`` class's *name* (``__lt__`` ...): *compare* of the compared fields'
    tuples of two instances of the same class (else ``NotImplemented``)."""

    def method(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            values = _compared(self.__class__)
            return compare(values(self), values(other))
        return NotImplemented

    method.__name__ = method.__qualname__ = name
    return method


_ORDER = {
    name: _ordering(compare, name)
    for name, compare in (
        ("__lt__", operator.lt),
        ("__le__", operator.le),
        ("__gt__", operator.gt),
        ("__ge__", operator.ge),
    )
}


def _hash(self: Any) -> int:
    cls = self.__class__
    getter: _Getter | None = cls.__dict__.get("_dataclass_hashed")
    if getter is None:
        hashed = (f for f in dataclasses.fields(cls) if (f.compare if f.hash is None else f.hash))
        getter = _getter(tuple(f.name for f in hashed))
        type.__setattr__(cls, "_dataclass_hashed", getter)
    return hash(getter(self))


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    cls = self.__class__
    names: tuple[str, ...] | None = cls.__dict__.get("_dataclass_shown")
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls) if f.repr)
        type.__setattr__(cls, "_dataclass_shown", names)
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
    return f"{cls.__qualname__}({shown})"


# Python 3.10-3.12 compile a frozen class's __setattr__ and __delattr__ one exec each
# (_frozen_get_del_attr; 3.13 builds all of a class's methods in one exec, and
# renamed what it calls): two of the six compiles of a frozen dataclass, ~65 M
# instructions of serve's start-up. Where dataclasses has that function, it is
# swapped, while one of our classes is made, for one that makes the same two
# methods as closures (no compile); the lock keeps two threads' swaps apart.
_FROZEN_METHODS = "_frozen_get_del_attr"
_SWAP = sys.version_info < (3, 13) and all(
    callable(getattr(dataclasses, name, None)) for name in (_FROZEN_METHODS, "_init_fn")
)
_swapping = _thread.allocate_lock()


def _frozen_methods(
    cls: Any, fields: list[dataclasses.Field[Any]], globals: dict[str, Any]
) -> tuple[Callable[..., None], Callable[..., None]]:
    """``__setattr__`` and ``__delattr__`` as dataclasses writes them, for *cls*'s *fields*."""
    names = tuple(f.name for f in fields)
    frozen_error = dataclasses.FrozenInstanceError

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise frozen_error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise frozen_error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __setattr__, __delattr__


# The third compile, ``__init__``'s (~0.6-3 M instructions, more with more fields), is
# made on the class's first use instead: many of serve's ~60 classes (the journal's
# Entry, TLS, proxying, recording, the shared store's) are never made before its first
# answer, some never at all. Until then the class holds a _DeferredInit, a descriptor
# whose first read (an instantiation, ``cls.__init__``, inspect.signature) compiles the
# real method with the same arguments, sets it on the class in its place and returns it:
# later instances are made by the compiled function alone, as a dataclass's are.
_INIT = "_init_fn"


class _DeferredInit:
    """A dataclass's ``__init__`` not compiled yet: compiled and set on its first read."""

    __slots__ = ("_arguments", "_build")

    def __init__(self, build: Callable[..., Any], arguments: tuple[Any, ...]) -> None:
        self._build = build
        self._arguments = arguments

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        owner = type(instance) if owner is None else owner
        # The class that holds this (a subclass that is no dataclass inherits it).
        holder = next(c for c in owner.__mro__ if c.__dict__.get("__init__") is self)
        method = self._build(*self._arguments)
        method.__qualname__ = f"{holder.__qualname__}.__init__"
        type.__setattr__(holder, "__init__", method)
        return method if instance is None else method.__get__(instance, owner)


def _deferred_init(
    build: Callable[..., Any],
    fields: list[dataclasses.Field[Any]],
    std_fields: list[dataclasses.Field[Any]],
    *arguments: Any,
) -> _DeferredInit:
    """What dataclasses' ``_init_fn`` (*build*) would make, made on first use; the one
    check it does first (a field without a default after one with) is done now."""
    after_default = False
    for f in std_fields:
        if not f.init:
            continue
        defaulted = f.default is not MISSING or f.default_factory is not MISSING
        if after_default and not defaulted:  # the message dataclasses gives
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        after_default = after_default or defaulted
    return _DeferredInit(build, (fields, std_fields, *arguments))


def _made(cls: type, options: dict[str, Any]) -> type:
    """*cls* made a dataclass without its ``__eq__``, ``__hash__``, ``__repr__``."""
    if not _SWAP:
        return dataclasses.dataclass(cls, eq=False, repr=False, **options)
    frozen = bool(options.get("frozen"))
    with _swapping:
        init, attrs = getattr(dataclasses, _INIT), getattr(dataclasses, _FROZEN_METHODS)
        setattr(dataclasses, _INIT, functools.partial(_deferred_init, init))
        if frozen:
            setattr(dataclasses, _FROZEN_METHODS, _frozen_methods)
        try:
            return dataclasses.dataclass(cls, eq=False, repr=False, **options)
        finally:
            setattr(dataclasses, _INIT, init)
            setattr(dataclasses, _FROZEN_METHODS, attrs)


def _shared(
    cls: type,
    *,
    eq: bool = True,
    repr: bool = True,
    order: bool = False,
    **options: Any,
) -> type:
    own = cls.__dict__
    if order and (not eq or any(name in own for name in _ORDER)):
        # An error (order without eq, or a comparison of its own): dataclasses' words.
        return dataclasses.dataclass(cls, eq=eq, repr=repr, order=order, **options)
    class_hash = own.get("__hash__", MISSING)
    explicit_hash = not (class_hash is MISSING or (class_hash is None and "__eq__" in own))
    defines_eq, defines_repr = "__eq__" in own, "__repr__" in own
    made = _made(cls, options)
    if repr and not defines_repr:
        made.__repr__ = _repr  # type: ignore[assignment]
    if eq:
        if not defines_eq:
            made.__eq__ = _eq  # type: ignore[assignment]
        if not explicit_hash:
            # As a dataclass: hashable by its fields when frozen, not at all otherwise.
            made.__hash__ = _hash if options.get("frozen") else None  # type: ignore[assignment]
    if order:
        for name, method in _ORDER.items():
            setattr(made, name, method)
    return made


def _dataclass(cls: type | None = None, /, **options: Any) -> Any:
    if options.get("unsafe_hash"):
        return dataclasses.dataclass(cls, **options)  # rare: the standard library's alone

    def wrap(cls: type) -> type:
        return _shared(cls, **options)

    return wrap if cls is None else wrap(cls)


if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    dataclass = _dataclass
