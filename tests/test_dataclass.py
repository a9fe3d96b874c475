"""mockskill._dataclass: the shared __eq__, __hash__ and __repr__ do what generated ones do.

Each case is declared twice, by :func:`dataclasses.dataclass` and by mockskill's,
and the two classes' instances must compare, hash and print alike (the class
names aside), across the options mockskill uses and the corners a dataclass has.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import math
import operator
import types
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from mockskill import _dataclass

Declare = Callable[..., Any]


def both(body: Callable[[Declare], tuple[type, list[tuple[Any, ...]]]]) -> list[Any]:
    """The instances *body* makes with each decorator: [(standard, ours), ...]."""
    std_cls, args = body(dataclasses.dataclass)
    our_cls, _ = body(_dataclass.dataclass)
    return [(std_cls(*a), our_cls(*a)) for a in args]


def plain(dc: Declare) -> tuple[type, list[tuple[Any, ...]]]:
    @dc
    class Plain:
        a: int
        b: str = "b"

    return Plain, [(1, "x"), (1, "x"), (2, "x"), (1, "y")]


def frozen(dc: Declare) -> tuple[type, list[tuple[Any, ...]]]:
    @dc(frozen=True)
    class Frozen:
        a: float
        b: tuple[int, ...] = ()
        c: int = dataclasses.field(default=0, compare=False)
        d: int = dataclasses.field(default=0, repr=False)
        e: int = dataclasses.field(default=0, hash=False)
        k: ClassVar[int] = 3

    nan = math.nan
    return Frozen, [(1.0, (1,), 1, 1, 1), (1.0, (1,), 2, 1, 2), (nan, ()), (nan, ()), (2.0,)]


def slotted(dc: Declare) -> tuple[type, list[tuple[Any, ...]]]:
    @dc(frozen=True, slots=True)
    class Slotted:
        a: int
        b: Any = None

    return Slotted, [(1,), (1,), (1, [2]), (1, [2]), (2, 3)]


def one_field(dc: Declare) -> tuple[type, list[tuple[Any, ...]]]:
    @dc(frozen=True)
    class One:
        a: float

    return One, [(math.nan,), (math.nan,), (1.0,)]


def no_field(dc: Declare) -> tuple[type, list[tuple[Any, ...]]]:
    @dc(frozen=True)
    class Empty:
        pass

    return Empty, [(), ()]


def own_methods(dc: Declare) -> tuple[type, list[tuple[Any, ...]]]:
    @dc(frozen=True)
    class Own:
        a: int

        def __eq__(self, other: object) -> bool:
            return True

        def __repr__(self) -> str:
            return "own"

    return Own, [(1,), (2,)]


def own_hash(dc: Declare) -> tuple[type, list[tuple[Any, ...]]]:
    @dc
    class OwnHash:
        a: int

        def __hash__(self) -> int:
            return 7

    return OwnHash, [(1,), (2,)]


def unequal(dc: Declare) -> tuple[type, list[tuple[Any, ...]]]:
    @dc(frozen=True, eq=False)
    class Unequal:
        a: int

    return Unequal, [(1,), (1,)]


def inherited(dc: Declare) -> tuple[type, list[tuple[Any, ...]]]:
    @dc(frozen=True)
    class Base:
        a: int

    @dc(frozen=True)
    class Derived(Base):
        b: int = 0

    class Undecorated(Derived):
        pass

    return Undecorated, [(1, 2), (1, 2), (1, 3)]


def ordered(dc: Declare) -> tuple[type, list[tuple[Any, ...]]]:
    @dc(frozen=True, order=True)
    class Ordered:
        a: int
        b: str = ""
        c: int = dataclasses.field(default=0, compare=False)

    return Ordered, [(1, "b", 9), (1, "b"), (1, "a"), (0, "z"), (2, "")]


def ordered_one(dc: Declare) -> tuple[type, list[tuple[Any, ...]]]:
    @dc(order=True)
    class OrderedOne:
        a: float

    return OrderedOne, [(math.nan,), (1.0,), (1.0,), (0.5,)]


CASES = [
    plain,
    frozen,
    slotted,
    one_field,
    no_field,
    own_methods,
    own_hash,
    unequal,
    inherited,
    ordered,
    ordered_one,
]


def shown(obj: Any) -> str:
    return repr(obj).replace(type(obj).__qualname__, "C", 1)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_shared_methods_do_what_generated_ones_do(case: Any) -> None:
    pairs = both(case)
    for std, ours in pairs:
        assert shown(ours) == shown(std)
        assert (type(ours).__hash__ is None) == (type(std).__hash__ is None)
        assert (ours == ours) == (std == std)  # a NaN field: identity first
        assert (ours == 1) == (std == 1)
        assert (ours != 1) == (std != 1)
    for (std_a, ours_a), (std_b, ours_b) in itertools.product(pairs, repeat=2):
        assert (ours_a == ours_b) == (std_a == std_b)
        assert (ours_a != ours_b) == (std_a != std_b)
        for compare in (operator.lt, operator.le, operator.gt, operator.ge):
            assert _outcome(compare, ours_a, ours_b) == _outcome(compare, std_a, std_b)
            assert _outcome(compare, ours_a, 1) == _outcome(compare, std_a, 1)
    std_hashable = [std for std, _ in pairs if _hashable(std)]
    our_hashable = [ours for _, ours in pairs if _hashable(ours)]
    assert len(our_hashable) == len(std_hashable)
    if vars(object)["__hash__"] is not getattr(type(pairs[0][0]), "__hash__", None):  # by value
        assert [hash(o) for o in our_hashable] == [hash(o) for o in std_hashable]


def _hashable(obj: Any) -> bool:
    try:
        hash(obj)
    except TypeError:
        return False
    return True


def test_a_recursive_repr_stops_as_a_dataclass_does() -> None:
    def make(dc: Declare) -> Any:
        @dc
        class Node:
            child: Any = None

        node = Node()
        node.child = [node]
        return node

    assert shown(make(_dataclass.dataclass)) == shown(make(dataclasses.dataclass))


def test_order_is_shared_and_unsafe_hash_is_the_standard_librarys() -> None:
    @_dataclass.dataclass(order=True, frozen=True)
    class Ordered:
        a: int

    @_dataclass.dataclass(unsafe_hash=True)
    class Hashed:
        a: int

    assert Ordered(1) < Ordered(2)
    assert Ordered.__lt__ is _dataclass._ORDER["__lt__"]
    assert Hashed.__eq__ is not _dataclass._eq
    assert hash(Hashed(1)) == hash((1,))


def test_order_without_eq_or_with_a_comparison_of_its_own_is_refused_as_a_dataclass_does() -> None:
    def without_eq(dc: Declare) -> None:
        @dc(order=True, eq=False)
        class WithoutEq:
            a: int

    def own_lt(dc: Declare) -> None:
        @dc(order=True)
        class OwnLt:
            a: int

            def __lt__(self, other: object) -> bool:
                return True

    for declare in (without_eq, own_lt):
        refused = _outcome(declare, _dataclass.dataclass)
        assert refused == _outcome(declare, dataclasses.dataclass)
        assert refused[0] in ("ValueError", "TypeError")


def _outcome(action: Callable[..., object], *args: object) -> tuple[str, str]:
    """What *action(*args)* raised (type name and message), or ("", "") if nothing."""
    try:
        action(*args)
    except Exception as error:
        return type(error).__name__, str(error)
    return "", ""


@pytest.mark.parametrize("case", [frozen, slotted, one_field, no_field, inherited])
def test_a_frozen_class_refuses_assignment_and_deletion_as_a_dataclass_does(case: Any) -> None:
    for std, ours in both(case):
        for name in ("a", "b", "new"):
            assert _outcome(setattr, ours, name, 5) == _outcome(setattr, std, name, 5)
            assert _outcome(delattr, ours, name) == _outcome(delattr, std, name)
        assert shown(ours) == shown(std)  # nothing was changed by what was refused


def test_frozen_methods_are_closures_not_compiled_and_dataclasses_is_left_as_it_was() -> None:
    before = getattr(dataclasses, "_frozen_get_del_attr", None)

    @_dataclass.dataclass(frozen=True)
    class Frozen:
        a: int

    assert getattr(dataclasses, "_frozen_get_del_attr", None) is before
    if _dataclass._SWAP:  # Python 3.10-3.12: the two methods are ours, made without exec
        assert Frozen.__setattr__.__code__ is _dataclass._frozen_methods(Frozen, [], {})[0].__code__
        assert Frozen.__setattr__.__qualname__ == f"{Frozen.__qualname__}.__setattr__"
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'a'"):
        Frozen(1).a = 2  # type: ignore[misc]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_init_has_the_signature_and_names_a_dataclass_gives_it(case: Any) -> None:
    std_cls, args = case(dataclasses.dataclass)
    our_cls, _ = case(_dataclass.dataclass)
    # These classes have no docstring: dataclasses reads the signature for one, which
    # compiles __init__ at once (the next test's class has one, and waits).
    assert inspect.signature(our_cls) == inspect.signature(std_cls)
    assert our_cls.__doc__ == std_cls.__doc__
    assert our_cls.__init__.__qualname__ == std_cls.__init__.__qualname__
    assert isinstance(our_cls.__init__, types.FunctionType)
    assert [shown(our_cls(*a)) for a in args] == [shown(std_cls(*a)) for a in args]


def test_an_instance_made_first_compiles_its_classs_init_and_a_subclass_reads_its_bases() -> None:
    @_dataclass.dataclass(frozen=True)
    class Base:
        """Has a doc (else dataclasses reads the signature, compiling __init__ at once)."""

        a: int
        b: list[int] = dataclasses.field(default_factory=list)

    class Undecorated(Base):
        pass

    if _dataclass._SWAP:  # Python 3.10-3.12: nothing compiled yet
        assert isinstance(Base.__dict__["__init__"], _dataclass._DeferredInit)
    first = Undecorated(1)  # a subclass's first instance compiles its base's
    assert (first.a, first.b) == (1, [])
    # The compiled method is set in place of the deferred one: later instances are made
    # by it alone, as a dataclass's are.
    assert isinstance(Base.__dict__["__init__"], types.FunctionType)
    assert Base.__init__.__qualname__ == f"{Base.__qualname__}.__init__"
    assert "__init__" not in Undecorated.__dict__
    assert Base(2, [3]).b == [3]
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'a'"):
        Base()  # type: ignore[call-arg]
    assert isinstance(vars(dataclasses).get("_init_fn"), types.FunctionType)  # as it was


def test_a_field_without_default_after_one_with_is_refused_when_the_class_is_made() -> None:
    def declare(dc: Declare) -> None:
        @dc(frozen=True)
        class Wrong:
            a: int = 0
            b: int

    assert _outcome(declare, _dataclass.dataclass) == _outcome(declare, dataclasses.dataclass)
    assert _outcome(declare, _dataclass.dataclass)[0] == "TypeError"
