"""hologram.core.values: the plain immutable classes of run-time values."""

from __future__ import annotations

import copy
import pickle

import pytest

from hologram.core.values import Value


class Point(Value, uncompared=("note",)):
    __slots__ = ("x", "y", "note")

    def __init__(self, x: int, y: int, note: str = "") -> None:
        self._init(x=x, y=y, note=note)


class Handle(Value, eq=False):
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self._init(name=name)


def test_a_value_is_immutable():
    p = Point(1, 2)
    with pytest.raises(AttributeError, match="immutable"):
        p.x = 3
    with pytest.raises(AttributeError, match="immutable"):
        del p.y
    with pytest.raises(AttributeError):
        p.z = 0  # no such slot either


def test_equality_and_hash_read_the_compared_fields():
    assert Point(1, 2, "a") == Point(1, 2, "b") and hash(Point(1, 2, "a")) == hash(Point(1, 2, "b"))
    assert Point(1, 2) != Point(2, 1) and Point(1, 2) != (1, 2)
    assert Handle("a") != Handle("a") and len({Handle("a"), Handle("a")}) == 2  # identity


def test_repr_pickle_and_copy_keep_every_field():
    p = Point(1, 2, "n")
    assert repr(p) == "Point(x=1, y=2, note='n')"
    for q in (pickle.loads(pickle.dumps(p)), copy.copy(p), copy.deepcopy(p)):
        assert (q.x, q.y, q.note) == (1, 2, "n")
