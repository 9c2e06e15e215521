"""Generated kernels written as Python functions: the Python front end under the harness.

`as_python(case)` rewrites a generated case's TOML document as a module with one
`@hologram.kernel` function (inputs as annotated parameters; outputs as out-parameters,
`y[...] = e` for a whole-array output, or, for a kernel whose last statement computes its
only output, `y = e` then `return y`), the TOML kept as the module's docstring. The case
then compiles through whatever translator is registered for the `python` format, so
`hologram diff-test` holds that translator to the oracle on every backend, and
`check_python_twin` holds it to the TOML: both must compile to the same code
(the `program_hash` of the program `without_sites`, its source positions).

`with_python_forms(strategy)` draws one case in four as Python when that translator is
installed (the others, and every case without it, stay TOML); a failure shrinks towards
the TOML form, so its reproducer is a `.py` file only when the Python form is needed.
"""

from __future__ import annotations

import ast
import keyword
import re
import tomllib

import attrs
from hypothesis import strategies as st

from hologram.testing.cases import KernelCase

__all__ = ["as_python", "python_available", "with_python_forms", "check_python_twin"]

_ASSIGN = re.compile(r"(\s*)([A-Za-z_][A-Za-z0-9_]*)(\s*)=(?!=)")


def python_available() -> bool:
    """Whether a translator of the `python` format is registered."""
    from hologram.core.errors import HologramError
    from hologram.registry.lookups import find_translator

    try:
        find_translator("python")
    except HologramError:
        return False
    return True


def _annotation(type_text: str) -> str:
    head, _, dims = type_text.partition("[")
    if not dims:
        return head
    parts = [d.strip() for d in dims.rstrip("]").split(",")]
    return f"{head}[{', '.join(repr(d) for d in parts)}]"


def as_python(case: KernelCase) -> KernelCase:
    """The case with its kernel written as a Python function (format "python")."""
    doc = tomllib.loads(case.source)["kernel"]
    name = doc["name"] if doc["name"].isidentifier() and not keyword.iskeyword(doc["name"]) else "k"
    inputs, outputs = doc["inputs"], doc["outputs"]
    lines = doc["body"].rstrip("\n").split("\n")
    assigned = [m.group(2) if (m := _ASSIGN.match(line)) else None for line in lines]
    # the return form: one output, computed by the last statement alone
    ret = (len(outputs) == 1 and assigned and assigned[-1] in outputs
           and assigned.count(assigned[-1]) == 1 and not any(n in outputs for n in assigned[:-1])
           and not any(line.lstrip().startswith(f"{assigned[-1]}[") for line in lines))
    body = []
    for line, target in zip(lines, assigned):
        m = _ASSIGN.match(line)
        if m and target in outputs and not ret:
            line = f"{m.group(1)}{target}[...]{m.group(3)}={line[m.end():]}"
        body.append(line)
    params = [f"{p}: {_annotation(t)}" for p, t in inputs.items()]
    if ret:
        (out, out_type), = outputs.items()
        head = f"def {name}({', '.join(params)}) -> {_annotation(out_type)}:"
        body.append(f"return {out}")
    else:
        params += [f"{p}: {_annotation(t)}" for p, t in outputs.items()]
        head = f"def {name}({', '.join(params)}):"
    options = f'version="{doc["version"]}"' + (", reassociate=True" if doc.get("reassociate") else "")
    twin = case.source.replace("\\", "\\\\").replace('"""', '\\"""')
    text = (f'"""{twin}"""\n\nimport numpy as np\n\nimport hologram as hg\nfrom hologram.types import *\n\n\n'
            f"@hg.kernel({options})\n{head}\n" + "".join(f"    {line}\n" for line in body))
    return attrs.evolve(case, source=text, format="python")


def with_python_forms(strategy: st.SearchStrategy[KernelCase]) -> st.SearchStrategy[KernelCase]:
    if not python_available():
        return strategy
    # the Python form at the far end of the integer: shrinking goes towards 0, so a failure
    # shrinks to the TOML form (the reproducer a backend's author reads) unless it needs Python
    return st.tuples(strategy, st.integers(0, 3)).map(lambda p: as_python(p[0]) if p[1] == 3 else p[0])


def check_python_twin(case: KernelCase, opt: str | None = None, passes=None) -> None:
    """The Python form compiles to the code its TOML twin (the module's docstring) does."""
    import hologram
    from hologram.isa.encoding import program_hash
    from hologram.isa.program import without_sites

    twin = ast.get_docstring(ast.parse(case.source), clean=False)
    if twin is None:
        return  # a module written by hand: there is nothing to compare with
    py = hologram.compile(case.source, format="python", opt=opt, passes=passes)
    toml = hologram.compile(twin, format="toml", opt=opt, passes=passes)
    if program_hash(without_sites(py.program)) != program_hash(without_sites(toml.program)):
        raise AssertionError("the Python form compiles to other code than its TOML document:\n"
                             f"--- python ---\n{case.source}\n--- its IR ---\n{py.emit('ir')}\n"
                             f"--- the TOML's IR ---\n{toml.emit('ir')}")
