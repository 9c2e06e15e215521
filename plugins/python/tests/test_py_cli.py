"""`hologram translate`, the round trip through the written document (the program hash without sites), and
.py kernel files in bundles."""

from __future__ import annotations

import tomllib
import zipfile

import numpy as np
import pytest

import hologram as hg
from hologram.bundles.build import build, collect
from hologram.cli import main as cli
from hologram.isa.encoding import program_hash
from hologram.isa.program import without_sites
from hologram_python.document import to_toml
from py_helpers import source, translate
from repo_paths import EXAMPLES

EXAMPLE = EXAMPLES / "python_kernels.py"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plugins_lists_the_translator_and_help_its_command(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # one row a plugin
    code, out, err = run_cli(capsys, "plugins")
    assert code == 0, err
    lines = out.splitlines()
    at = next(k for k, line in enumerate(lines) if line.split()[1:2] == ["python"])
    assert "hologram-translator-python" in lines[at] and "translator python (.py)" in lines[at]
    assert lines[at].split()[-2] == "ok" and "commands translate" in lines[at + 1]  # one registration a line
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0 and "translate" in out


def test_translate_writes_every_kernel_and_the_round_trip_has_the_same_code(tmp_path, capsys):
    out = tmp_path / "python_kernels.toml"
    code, _, err = run_cli(capsys, "translate", str(EXAMPLE), "-o", str(out))
    assert code == 0 and "10 kernels" in err
    doc = tomllib.loads(out.read_text())
    assert len(doc["kernels"]) == 10
    from_py = hg.compile_file_all(EXAMPLE)
    from_toml = hg.compile_file_all(out)
    assert list(from_py) == list(from_toml)
    for name in from_py:
        a, b = from_py[name].program, from_toml[name].program
        assert program_hash(without_sites(a)) == program_hash(without_sites(b)), name
        assert (program_hash(a) == program_hash(b)) == (not a.sites), name  # sites name each file
        assert from_py[name].signature == from_toml[name].signature
    assert from_py["take"].program.sites[0].file == str(EXAMPLE)
    assert from_toml["take"].program.sites[0].file == str(out)


def test_one_kernel_is_a_kernel_table_and_stdout_without_output(tmp_path, capsys):
    path = tmp_path / "one.py"
    path.write_text(source('''
        @hg.kernel(version="1.0.0", reassociate=True)
        def total(x: f32["n"]) -> f32:
            """The sum, any order."""
            return x.sum()
    '''))
    code, out, _ = run_cli(capsys, "translate", str(path))
    assert code == 0 and out.startswith("# Translated from one.py")
    doc = tomllib.loads(out)
    assert doc == {"kernel": {"name": "total", "version": "1.0.0", "summary": "The sum, any order.",
                              "reassociate": True, "inputs": {"x": "f32[n]"}, "outputs": {"out": "f32"},
                              "body": "out = x.sum()\n"}}
    text = tmp_path / "one.toml"
    text.write_text(out)
    assert program_hash(without_sites(hg.compile_file(text).program)) == \
        program_hash(without_sites(hg.compile_file(path).program))


def test_translate_reports_errors_at_the_py_file(tmp_path, capsys):
    path = tmp_path / "bad.py"
    path.write_text(source('''
        @hg.kernel
        def f(x: f32["n"]) -> f32["n"]:
            return x + zz
    '''))
    code, out, err = run_cli(capsys, "translate", str(path))
    assert code == 1 and out == ""
    assert f"{path}:6:16: error: unknown name 'zz'" in err
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    code, _, err = run_cli(capsys, "translate", str(empty))
    assert code == 1 and "no @hologram.kernel functions" in err
    code, _, err = run_cli(capsys, "translate", str(tmp_path / "missing.py"))
    assert code == 1 and "cannot read" in err


def test_the_document_writer_escapes_what_toml_needs():
    (k,) = translate('''
        @hg.kernel
        def f(x: f32["n"]) -> f32["n"]:
            """Quotes " and \\\\ and \'\'\' in the summary."""
            y = x * 2  # a comment with \'\'\' and a backslash \\\\
            return y
    ''')
    text = to_toml([k])
    doc = tomllib.loads(text)["kernel"]
    assert doc["summary"] == k.summary and doc["body"] == k.body + "\n"


def test_compile_file_and_run_read_py_files(tmp_path, capsys):
    code, out, _ = run_cli(capsys, "run", str(EXAMPLE), "--kernel", "vector_add", "--bind", "n=4", "--print",
                           "--backend", "interp")
    assert code == 0 and "c" in out
    code, out, _ = run_cli(capsys, "compile", str(EXAMPLE), "--kernel", "softmax", "--emit", "ast")
    assert code == 0 and "(= out (/ e (sum e)))" in out


# ---------------------------------------------------------------------------- bundles
def _folder(tmp_path):
    lib = tmp_path / "lib"
    (lib / "sub").mkdir(parents=True)
    (lib / "kernels.py").write_text(EXAMPLE.read_text())
    (lib / "helpers.py").write_text("def helper(x):\n    return x\n")  # no kernels: not a document
    (lib / "__init__.py").write_text("")
    (lib / "sub" / "scale.toml").write_text('[kernel]\nname = "scale"\nversion = "1.0.0"\n'
                                            'inputs = { x = "f32[n]" }\noutputs = { y = "f32[n]" }\n'
                                            'body = "y = 2 * x"\n')
    return lib


def test_a_folder_of_py_and_toml_sources_builds_a_bundle_byte_for_byte(tmp_path):
    lib = _folder(tmp_path)
    assert sorted(collect([lib])) == ["sources/kernels.py", "sources/sub/scale.toml"]
    first = build([lib], "pylib", "1.0.0", tmp_path / "a.hgb", jobs=1, cache_dir=False, native="none")
    again = build([lib], "pylib", "1.0.0", tmp_path / "b.hgb", jobs=2, cache_dir=tmp_path / "cache", native="none")
    cached = build([lib], "pylib", "1.0.0", tmp_path / "c.hgb", jobs=1, cache_dir=tmp_path / "cache", native="none")
    assert first.data == again.data == cached.data
    assert len(first.manifest.kernels) == 11
    with zipfile.ZipFile(tmp_path / "a.hgb") as z:
        assert "sources/kernels.py" in z.namelist() and "sources/helpers.py" not in z.namelist()
    bundle = hg.load_bundle(tmp_path / "a.hgb", backend="interp")
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(bundle.vector_add(x, x), x + x)
    assert bundle.take.program.sites[0].file == "sources/kernels.py"
    assert bundle.softmax.kdef.span.file.endswith(":sources/kernels.py")  # the source translated again, on demand


def test_a_py_file_named_without_kernels_is_an_error(tmp_path):
    from hologram.core.errors import HologramError

    lib = _folder(tmp_path)
    with pytest.raises(HologramError, match="no kernels"):
        build([lib / "helpers.py"], "pylib", "1.0.0", cache_dir=False, native="none")
