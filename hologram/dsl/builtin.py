"""The built-in translators as a plugin (entry point `builtin_translators`): TOML, YAML
and JSON documents. They are registered without importing their parsers
(hologram.dsl.translators: PyYAML, the locators, the schema), which load at the first
document read: a process that only loads bundles never pays for them (~12 ms)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Callable, Mapping, Sequence

from hologram.core.hookspecs import BodyKey, Translator, hookimpl

FORMATS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("toml", (".toml",), "declare one with [kernel] or several with [[kernels]]"),
    ("yaml", (".yaml", ".yml"), "declare one under a `kernel:` key or several under `kernels:`"),
    ("json", (".json",), 'declare one as {"kernel": {...}} or several as {"kernels": [...]}'))


def _parser(name: str) -> Callable[[str, str, Mapping[str, BodyKey]], Sequence[object]]:
    def parse(text: str, file: str, keys: Mapping[str, BodyKey] = MappingProxyType({})) -> Sequence[object]:
        from hologram.dsl import translators

        return {"toml": translators.parse_toml, "yaml": translators.parse_yaml,
                "json": translators.parse_json}[name](text, file, keys)
    parse.__name__ = parse.__qualname__ = f"parse_{name}"
    return parse


@hookimpl
def hologram_register_translators(register: Callable[[Translator], None]) -> None:
    for name, extensions, declaring in FORMATS:
        register(Translator(name, extensions, _parser(name), declaring=declaring, api=2))
