"""Plain immutable value classes for what is not IR or ISA, without attrs.

The IR and ISA values are frozen attrs classes (a project rule: validators, `evolve`,
field introspection). The run-time values a loading process builds (a bundle's
manifest, the registry's tables, the hook values plugins register) need none of that,
and an attrs class costs ~0.3-1 ms to create at import (it compiles its methods), which
a process that loads a bundle and calls a kernel pays for every one it imports
(docs/decisions.md, "Start-up"). A `Value` is a `__slots__` class: its subclass lists its
fields in `__slots__` and writes its own `__init__`; the base makes it immutable and
gives it a repr, and equality and hashing over its fields (identity with `eq=False`;
a field in `uncompared` is left out, as attrs' `eq=False` field is).
"""

from __future__ import annotations

from typing import Any, ClassVar


class Value:
    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()  # every slot, base classes' first: repr, pickling
    _compared: ClassVar[tuple[str, ...]] = ()  # the fields equality and hashing read

    def __init_subclass__(cls, eq: bool = True, uncompared: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._fields = tuple(f for c in reversed(cls.__mro__) for f in c.__dict__.get("__slots__", ()))
        cls._compared = tuple(f for f in cls._fields if f not in uncompared)
        if not eq:  # identity, as object has it
            cls.__eq__ = object.__eq__  # type: ignore[method-assign]
            cls.__hash__ = object.__hash__  # type: ignore[method-assign]

    def _init(self, **fields: Any) -> None:
        """Set the fields (for `__init__`: the instance is immutable afterwards)."""
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._compared)

    def __hash__(self) -> int:
        return hash((self.__class__, *(getattr(self, f) for f in self._compared)))

    def __repr__(self) -> str:
        fields = ", ".join(f"{f.lstrip('_')}={getattr(self, f, None)!r}" for f in self._fields)
        return f"{type(self).__name__}({fields})"

    # pickling and copying set the fields as __init__ does (object's default would setattr)
    def __getstate__(self) -> tuple:
        return tuple(getattr(self, f) for f in self._fields)

    def __setstate__(self, state: tuple) -> None:
        for name, value in zip(self._fields, state):
            object.__setattr__(self, name, value)
