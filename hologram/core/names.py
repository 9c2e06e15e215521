"""Fresh names for what a rewrite adds to a program or kernel (a symbol, a table, a
temporary): `base`, else `base_1`, `base_2`, ..., whichever is first not taken."""

from __future__ import annotations

__all__ = ["fresh_name"]


def fresh_name(base: str, taken: set[str]) -> str:
    """The first of `base`, `base_1`, `base_2`, ... not in `taken`, added to it."""
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name
