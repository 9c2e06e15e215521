"""Generated kernels written as Python functions (hologram.testing.python_cases): the
Python form runs as the TOML does, compiles to its code, and a translation that changed
a statement's meaning is caught."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import HealthCheck, given, settings

from hologram.testing.cases import KernelCase, kernels
from hologram.testing.difftest import _write_kernel, replay
from hologram.testing.exprgen import GenConfig
from hologram.testing.python_cases import as_python, check_python_twin, python_available, with_python_forms
from hologram.testing.run import check_case

pytestmark = pytest.mark.skipif(not python_available(), reason="hologram-translator-python is not installed")

TOML = '''[kernel]
name = "k"
version = "1.0.0"
inputs = { x = "f32[n]", s = "f32" }
outputs = { y = "f32[n]", z = "f32[n]" }
body = """
t = x * s
y = t + 1
z[i] = t[i] - y[i]
"""
'''


def test_a_document_as_a_python_function():
    import numpy as np

    case = KernelCase(TOML, (("x", np.arange(3, dtype=np.float32)), ("s", np.float32(2))), ())
    py = as_python(case)
    assert py.format == "python"
    assert '@hg.kernel(version="1.0.0")\ndef k(x: f32[\'n\'], s: f32, y: f32[\'n\'], z: f32[\'n\']):' in py.source
    assert "    y[...] = t + 1\n    z[i] = t[i] - y[i]\n" in py.source
    check_python_twin(py)
    one = TOML.replace(', z = "f32[n]"', "").replace("z[i] = t[i] - y[i]\n", "")
    ret = as_python(attrs.evolve(case, source=one))
    assert "-> f32['n']:" in ret.source and ret.source.endswith("    y = t + 1\n    return y\n")
    check_python_twin(ret)


def test_a_translation_that_changes_the_code_fails_the_twin_check():
    import numpy as np

    py = as_python(KernelCase(TOML, (("x", np.arange(3, dtype=np.float32)), ("s", np.float32(2))), ()))
    wrong = attrs.evolve(py, source=py.source.replace("    y[...] = t + 1", "    y[...] = t - 1"))
    with pytest.raises(AssertionError, match="other code than its TOML"):
        check_python_twin(wrong)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(kernels(GenConfig()))
def test_generated_kernels_as_python_functions_pass_on_the_reference(case):
    check_case(as_python(case), "interp")


def test_some_drawn_cases_are_python():
    seen = set()

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(with_python_forms(kernels(GenConfig())))
    def draw(case):
        seen.add(case.format)

    draw()
    assert seen == {"toml", "python"}


def test_a_python_reproducer_replays(tmp_path):
    import numpy as np

    from hologram.testing import bounds

    x = np.arange(3, dtype=np.float32)
    case = as_python(KernelCase(TOML, (("x", x), ("s", np.float32(2))), (
        ("y", bounds.Val.exact(x * 2 + 1)), ("z", bounds.Val.exact(x * 2 - (x * 2 + 1))))))
    path = _write_kernel(case, "interp", "O0", "a test", str(tmp_path))
    assert path.endswith(".py")
    assert replay(path, ["interp", "cpu_llvm"]) == {"interp": None, "cpu_llvm": None}
