"""The document keys plugins handle in place of `body`, in effect while a document is read.

The schema (hologram.dsl.schema) cannot ask the plugin registry (it sits below the
runtime), and a translator's `parse(text, file)` has no room for them, so the runtime
puts the registered keys in effect around every translation (`hologram.runtime.compile.
translate`) and the schema reads them here. Outside that, none are: a key no plugin
claims stays an unknown key.
"""

from __future__ import annotations

import contextlib
import contextvars
from types import MappingProxyType
from typing import Iterator, Mapping

from hologram.core.hookspecs import BodyKey

_IN_EFFECT: contextvars.ContextVar[Mapping[str, BodyKey]] = contextvars.ContextVar(
    "hologram_body_keys", default=MappingProxyType({}))


def in_effect() -> Mapping[str, BodyKey]:
    """The keys the document being read may use instead of `body`, by name."""
    return _IN_EFFECT.get()


@contextlib.contextmanager
def use(keys: Mapping[str, BodyKey]) -> Iterator[None]:
    """Put `keys` in effect for the documents read inside the `with` block."""
    token = _IN_EFFECT.set(MappingProxyType(dict(keys)))
    try:
        yield
    finally:
        _IN_EFFECT.reset(token)
