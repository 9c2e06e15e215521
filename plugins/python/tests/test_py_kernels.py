"""@hologram.kernel: decorated functions are Kernels, on both backends, against numpy."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hologram as hg
from hologram.core.errors import CompileError, DocumentError, ExecutionError, PluginError
from py_helpers import load, source, underline
from repo_paths import EXAMPLES

BACKENDS = ["interp", "cpu_llvm"]


@pytest.fixture(scope="module")
def examples():
    """examples/python_kernels.py, imported (every kernel compiled by its decorator)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("python_kernels", EXAMPLES / "python_kernels.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["python_kernels"] = module
    spec.loader.exec_module(module)
    return module


def test_the_decorated_function_is_a_kernel(examples):
    k = examples.softmax
    assert isinstance(k, hg.Kernel) and k.name == "softmax" and k.version == "1.0.0"
    assert str(k.signature) == "softmax(x: f32[n]) -> out: f32[n]"
    assert k.kdef.span.file.endswith("python_kernels.py")
    assert "EXP" in k.emit("asm") and "softmax" in k.emit("ir")
    stats = k.stats(n=1000)
    assert set(stats) >= {"O0", "O2"} and stats["O2"].instructions <= stats["O0"].instructions


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_examples_agree_with_numpy(examples, backend, monkeypatch):
    monkeypatch.setattr(hg, "list_backends", lambda: [backend])
    examples.check()


@pytest.mark.parametrize("backend", BACKENDS)
def test_kernels_against_numpy_at_many_sizes(examples, backend):
    rng = np.random.default_rng(1)
    for n in (0, 1, 7, 64, 1000):
        x = rng.standard_normal(n).astype(np.float32)
        a = rng.standard_normal(n).astype(np.float32)
        np.testing.assert_array_equal(examples.vector_add.on(backend)(x, a), x + a)
        if n:  # (an empty x: no max, and n - 1 elements is a negative shape, an ArgumentError)
            e = np.exp(x - x.max())
            np.testing.assert_allclose(examples.softmax.on(backend)(x), e / e.sum(), rtol=1e-5)
            total, diff = examples.running_diff.on(backend)(x)
            np.testing.assert_array_equal(diff, np.diff(x))
    for m, k, n in ((1, 1, 1), (5, 3, 7), (33, 17, 9)):
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        np.testing.assert_allclose(examples.matmul.on(backend)(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_map_out_and_pickling(examples):
    x = np.random.default_rng(2).standard_normal((3, 4, 10)).astype(np.float32)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(examples.softmax.map(x), e / e.sum(-1, keepdims=True), rtol=1e-5)
    y = np.empty(10, np.float32)
    assert examples.vector_add(x[0, 0], x[0, 0], out=y) is y
    again = pickle.loads(pickle.dumps(examples.softmax.on("interp")))
    np.testing.assert_allclose(again(x[0, 0]), examples.softmax(x[0, 0]), rtol=1e-6)
    assert pickle.loads(pickle.dumps(examples.take)).program == examples.take.program


def test_a_gathers_run_time_error_points_at_the_py_line(examples):
    with pytest.raises(ExecutionError) as info:
        examples.take.on("interp")(np.zeros(4, np.float32), np.array([9]))
    assert info.value.span.file.endswith("python_kernels.py")
    assert "return x[idx]" in str(info.value)


def test_a_stream_error_names_the_users_expression_and_line(tmp_path):
    """What stops `hologram.stream` is named as the function writes it, at its .py line:
    never a compiler temporary (`matmul_arg0`, `cumsum0`)."""
    from hologram.core.errors import StreamError

    m = load(tmp_path, '''
        @hg.kernel
        def gram(a: f32["n", "k"]) -> f32["k", "k"]:
            return (a * 2).T @ (a * 2)

        @hg.kernel
        def running(x: f32["n"]) -> f32["n"]:
            return x + (x * 2)[::-1]

        @hg.kernel
        def steps(x: f32["n"]) -> f32:
            d = x[1:] - x[:-1]
            return d @ d
    ''')
    for k, args, words, line in ((m.gram, [np.ones((6, 3), np.float32)], "`(a * 2).T` has shape [k, n]", 6),
                                 (m.running, [np.ones(6, np.float32)], "another row of 'x'", 10),
                                 (m.steps, [np.ones(6, np.float32)], "temp 'd' has shape [max(n - 1, 0)]", 14)):
        with pytest.raises(StreamError) as info:
            hg.stream(k.on("interp"), *args, out=np.empty(6, np.float32) if k is m.running else None)
        text = str(info.value)
        assert words in text and "matmul_arg" not in text and "cumsum0" not in text, text
        assert info.value.span.file.endswith(".py") and info.value.span.line == line, text


def test_options_of_the_decorator(tmp_path):
    m = load(tmp_path, '''
        @hg.kernel(backend="interp", opt="O0")
        def double(x: f32["n"]) -> f32["n"]:
            return x * 2

        @hg.kernel(passes="fold,dce", version="2.0.0")
        def triple(x: f32["n"]) -> f32["n"]:
            return x * 3
    ''')
    assert m.double.backend.name == "interp" and m.double._c.pipeline.name == "O0"
    assert m.triple.version == "2.0.0" and m.triple._c.pipeline.name == "custom"
    np.testing.assert_array_equal(m.double(np.ones(3, np.float32)), [2, 2, 2])
    with pytest.raises(PluginError, match="unknown backend"):
        load(tmp_path, '''
            @hg.kernel(backend="nope")
            def f(x: f32["n"]) -> f32["n"]:
                return x
        ''')


def test_the_decorators_arguments_are_read_from_the_call(tmp_path):
    """name=, version= and reassociate= take the values the call gives them, however they
    are written: the translator never reads them from the decorator's text."""
    m = load(tmp_path, '''
        import os
        NAME = "sca" + "led"                   # computed: known only once the module runs
        VERSIONS = {"scaled": "2.1.0"}
        FAST = os.sep != ""

        @hg.kernel(name=NAME, version=VERSIONS[NAME], reassociate=FAST)
        def total(x: f32["n"]) -> f32:
            return x.sum()

        OPTIONS = dict(name="spread", version="3.0.0")

        @hg.kernel(**OPTIONS)
        def plain(x: f32["n"]) -> f32:
            return x.sum()

        @hg.kernel
        def bare(x: f32["n"]) -> f32:
            return x.sum()
    ''')
    assert (m.total.name, m.total.version, m.total.kdef.reassociate) == ("scaled", "2.1.0", True)
    assert (m.plain.name, m.plain.version, m.plain.kdef.reassociate) == ("spread", "3.0.0", False)
    assert (m.bare.name, m.bare.version, m.bare.kdef.reassociate) == ("bare", "0.0.0", False)
    assert "reassoc" in m.total.emit("asm") and "reassoc" not in m.plain.emit("asm")  # it reaches the compiler
    x = np.arange(5, dtype=np.float32)
    assert m.total(x) == m.plain(x) == m.bare(x) == 10


def test_the_calls_arguments_are_checked_where_the_decorator_is(tmp_path):
    for options, message, underlined in (('name=NAME', "invalid kernel name '2fast'", "name=NAME"),
                                         ('version=VERSION', "invalid version '1.0'", "version=VERSION"),
                                         ('reassociate=FLAG', "'reassociate' of kernel 'f' must be a boolean",
                                          "reassociate=FLAG"),
                                         ('**OPTIONS', "invalid version 'x'", "**OPTIONS")):
        with pytest.raises(DocumentError) as info:
            load(tmp_path, f'''
                NAME, VERSION, FLAG, OPTIONS = "2" + "fast", "1" + ".0", "yes", {{"version": "x"}}

                @hg.kernel({options})
                def f(x: f32["n"]) -> f32:
                    return x.sum()
            ''')
        err = info.value
        assert message in err.message and err.span.line == 6, (options, str(err))
        assert underline(err) == underlined, str(err)


def test_a_compile_error_is_raised_at_the_definition(tmp_path):
    with pytest.raises(CompileError) as info:
        load(tmp_path, '''
            @hg.kernel
            def f(x: f32["n"]) -> f32["n"]:
                return x + y
        ''')
    assert info.value.span.file.startswith(str(tmp_path)) and info.value.span.line == 6


def test_a_function_not_decorated_in_its_source_is_refused(tmp_path):
    m = load(tmp_path, '''
        def plain(x: f32["n"]) -> f32["n"]:
            return x

        @hg.kernel
        def decorated(x: f32["n"]) -> f32["n"]:
            return x
    ''')
    with pytest.raises(DocumentError, match="not decorated with @hologram.kernel"):
        hg.kernel(m.plain)
    with pytest.raises(DocumentError, match="decorates a function"):
        hg.kernel(len)


def test_a_function_without_source_is_refused():
    with pytest.raises(DocumentError, match="cannot read the source"):
        exec(compile(source('''
            @hg.kernel
            def f(x: f32["n"]) -> f32["n"]:
                return x
        '''), "<no file>", "exec"), {})


def test_a_notebook_cell_is_read_through_linecache():
    import linecache

    text = source('''
        @hg.kernel
        def cell(x: f32["n"]) -> f32["n"]:
            return x + 1
    ''')
    name = "<ipython-input-1-abc>"
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    namespace = {}
    exec(compile(text, name, "exec"), namespace)
    np.testing.assert_array_equal(namespace["cell"](np.zeros(2, np.float32)), [1, 1])


def test_without_the_plugin_the_error_names_the_distribution(tmp_path):
    module = tmp_path / "k.py"
    module.write_text(source('''
        @hg.kernel
        def f(x: f32["n"]) -> f32["n"]:
            return x
    '''))
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(tmp_path)!r})
        try:
            import k
        except Exception as exc:
            print(json.dumps([type(exc).__name__, str(exc)]))
    """)
    env = {**os.environ, "HOLOGRAM_PLUGINS": "-python"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    kind, message = json.loads(done.stdout.strip().splitlines()[-1])
    assert kind == "PluginError" and "pip install hologram-translator-python" in message


def test_import_hologram_types_imports_nothing():
    code = "import sys, hologram.types; print(sorted(m for m in sys.modules if m.startswith(('hologram', 'numpy'))))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "['hologram', 'hologram.types']"


def test_an_unused_local_is_a_warning_at_its_line_in_the_py_file(tmp_path):
    from hologram.core.errors import CompileWarning

    with pytest.warns(CompileWarning) as record:
        m = load(tmp_path, '''
            @hg.kernel
            def f(x: f32["n"]) -> f32["n"]:
                t = x * 2
                return x + 1
        ''')
    np.testing.assert_array_equal(m.f(np.ones(2, np.float32)), [2, 2])
    (w,) = [r.message for r in record if isinstance(r.message, CompileWarning)]
    assert w.span.file.startswith(str(tmp_path)) and w.span.file.endswith(".py")
    assert (w.span.line, w.span.col) == (6, 5), w.render()  # `t` in `    t = x * 2`, after the 3-line header
    assert "temporary 't' is assigned but never used" in w.message
