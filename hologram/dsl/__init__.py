"""The kernel language front end: document schema, body parser, semantic analysis.

`parse_body`, `format_ast` and `to_ir` load on first use, so importing a translator
from this package does not pull in the parser and analyzer.
"""

from importlib import import_module

_EXPORTS = {"parse_body": ".parser", "format_ast": ".ast", "to_ir": ".analyze"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
