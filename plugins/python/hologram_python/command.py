"""`hologram translate FILE.py [-o FILE.toml]`: a module's kernels as a kernel document."""

from __future__ import annotations

import os
import sys

from hologram.translator import DocumentError, check_definition, read_text_file
from hologram_python.document import to_toml
from hologram_python.translate import translate_module

MAX_BYTES = 16 << 20  # as compile_file reads a document


def translate_command(path: str, output: str | None) -> int:
    text = read_text_file(path, MAX_BYTES, DocumentError)
    kdefs = translate_module(text, path)
    if not kdefs:
        raise DocumentError(f"{path}: no @hologram.kernel functions in this module",
                            hint="decorate a function with @hologram.kernel (import hologram as hg: @hg.kernel)")
    for kdef in kdefs:  # the front end: the body's errors point into the .py file now
        check_definition(kdef)
    document = to_toml(kdefs, os.path.basename(path))
    if output is None:
        sys.stdout.write(document)
        return 0
    try:
        with open(output, "w", encoding="utf-8", newline="\n") as f:
            f.write(document)
    except OSError as exc:
        raise DocumentError(f"cannot write {output}: {exc.strerror or exc}") from None
    names = ", ".join(k.name for k in kdefs)
    print(f"{path} -> {output}: {len(kdefs)} kernel{'s' if len(kdefs) != 1 else ''} ({names})", file=sys.stderr)
    return 0
