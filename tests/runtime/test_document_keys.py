"""Document keys a translator plugin handles in place of `body` (hookspecs.BodyKey), and
the notes a translator attaches to a kernel (KernelDef.notes): the generic extension the
sigil plugin's `circuit` key uses, checked with a toy plugin that core knows nothing of."""

from __future__ import annotations

import json
import zipfile

import attrs
import numpy as np
import pytest

import hologram
from hologram.bundles.build import build
from hologram.core.errors import CompileError, DocumentError, PluginError
from hologram.core.hookspecs import BodyKey, Translator
from hologram.dsl.document import KernelDef
from hologram.dsl.schema import kernels_from_mapping, parse_type
from hologram.dsl.translators import parse_toml

pytestmark = pytest.mark.usefixtures("fresh_plugins")


def _twice(header: KernelDef) -> KernelDef:
    """`twice = "EXPR"`: the kernel y = 2 * (EXPR) over the inputs the document declares;
    the expression keeps its position, so errors in it point into the document."""
    if "!" in header.body:
        col = header.body.index("!") + 1
        raise CompileError("'!' is not allowed here", header.origin.span(1, col, col + 1))
    if "boom" in header.body:
        raise ValueError("boom")
    body = f"y = 2 * ({header.body})"  # 9 characters before the expression
    origin = attrs.evolve(header.origin, lines=tuple((line, col - 9) for line, col in header.origin.lines))
    return attrs.evolve(header, body=body, origin=origin, notes=(("twice", "doubled"),))


def _square(header: KernelDef) -> KernelDef:
    """`square = "n"`: the whole kernel (inputs and outputs too) from the key: y = x * x on f32[n]."""
    dtype, shape = parse_type(f"f32[{header.body}]")
    x = hologram.dsl.document.ParamSpec("x", dtype, shape, header.span)
    y = hologram.dsl.document.ParamSpec("y", dtype, shape, header.span)
    return attrs.evolve(header, inputs=(x,), outputs=(y,), body="y = x * x")


TWICE = BodyKey("twice", "an expression to double", _twice)
SQUARE = BodyKey("square", "the length of the vector to square", _square, interface=True)
SHADOW = BodyKey("body", "a plugin may not take over a key of the schema's own", _twice)


class KeysPlugin:
    @staticmethod
    @hologram.hookimpl
    def hologram_register_translators(register):
        register(Translator("keys", (".keys",), lambda text, file, keys: [], body_keys=(TWICE, SQUARE, SHADOW),
                            api=2))


@pytest.fixture
def keys_plugin(register_plugin):
    register_plugin(KeysPlugin(), "test-document-keys")


TWICE_DOC = '''[kernel]
name = "k"
version = "1.0.0"
inputs = { a = "f32[n]" }
outputs = { y = "f32[n]" }
twice = """
a + 1"""
'''


def test_a_claimed_key_is_handed_to_its_plugin_in_every_format(keys_plugin):
    a = np.arange(4, dtype=np.float32)
    toml = hologram.compile(TWICE_DOC)
    assert np.array_equal(toml(a), 2 * (a + 1))
    assert toml.kdef.notes == (("twice", "doubled"),)
    yaml = hologram.compile("kernel:\n  name: k\n  version: 1.0.0\n  inputs: {a: 'f32[n]'}\n"
                            "  outputs: {y: 'f32[n]'}\n  twice: a - 1\n", format="yaml")
    assert np.array_equal(yaml(a), 2 * (a - 1))
    doc = {"kernel": {"name": "k", "version": "1.0.0", "square": "3"}}
    assert np.array_equal(hologram.compile(json.dumps(doc), format="json")(a[:3]), a[:3] ** 2)


def test_errors_inside_a_claimed_key_point_at_the_document(keys_plugin):
    with pytest.raises(CompileError) as e:
        hologram.compile(TWICE_DOC.replace("a + 1", "a + !"), file="k.toml")
    assert (e.value.span.file, e.value.span.line, e.value.span.col) == ("k.toml", 7, 5)
    with pytest.raises(CompileError, match="unknown name 'b'") as e:  # found by the DSL, in the body built
        hologram.compile(TWICE_DOC.replace("a + 1", "b + 1"), file="k.toml")
    assert (e.value.span.line, e.value.span.col) == (7, 1)


def test_the_schema_checks_a_claimed_key_as_it_checks_body(keys_plugin):
    with pytest.raises(DocumentError, match="one body: 'twice' and 'body' cannot both"):
        hologram.compile(TWICE_DOC + 'body = "y = a"\n')
    with pytest.raises(DocumentError, match="'twice' of kernel 'k' must be a string") as e:
        hologram.compile(TWICE_DOC.replace('"""\na + 1"""', "3"))
    assert "an expression to double" in e.value.hint
    with pytest.raises(DocumentError, match="missing the required key 'body'") as e:
        hologram.compile(TWICE_DOC.split("twice")[0])
    assert "'twice', an expression to double" in e.value.hint
    with pytest.raises(DocumentError, match="takes its inputs and outputs from 'square': remove 'inputs'"):
        hologram.compile('[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {}\nsquare = "3"\n')
    with pytest.raises(DocumentError, match="missing the required key 'outputs'"):  # only `square` defines them
        hologram.compile('[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {}\ntwice = "1"\n')
    with pytest.raises(DocumentError, match=r"unknown key 'twise'.*did you mean 'twice'") as e:
        hologram.compile(TWICE_DOC.replace("twice", "twise"))
    assert "square" in e.value.hint  # the claimed keys are among those expected


def test_a_plugin_cannot_take_over_a_schema_key(keys_plugin):
    k = hologram.compile(TWICE_DOC.replace("twice", "body").replace("a + 1", "y = a"))
    assert k.kdef.body == "y = a" and not k.kdef.notes


def test_a_failing_handler_is_a_plugin_error(keys_plugin):
    with pytest.raises(PluginError, match="handler of document key 'twice' failed on kernel 'k': ValueError: boom"):
        hologram.compile(TWICE_DOC.replace("a + 1", "boom"))
    with pytest.raises(PluginError, match="returned str; expected hologram.dsl.document.KernelDef"):
        parse_toml(TWICE_DOC, "k.toml", {"twice": BodyKey(TWICE.key, TWICE.summary, lambda header: "not a kernel")})


def test_the_keys_are_an_argument_of_parse(keys_plugin, register_plugin):
    """The runtime hands a translator the registered keys with the text: `parse(text,
    file, keys)` (api=2); the builtin translators take them the same way."""
    seen = []

    class Recording:
        @staticmethod
        @hologram.hookimpl
        def hologram_register_translators(register):
            register(Translator("rec", (".rec",), lambda text, file, keys: seen.append(dict(keys)) or
                                parse_toml(text, file, keys), api=2))

    register_plugin(Recording(), "test-recording")
    a = np.arange(3, dtype=np.float32)
    assert np.array_equal(hologram.compile(TWICE_DOC, format="rec")(a), 2 * (a + 1))
    assert {"twice", "square"} <= set(seen[0]) and seen[0]["twice"] is TWICE
    (kdef,) = parse_toml(TWICE_DOC, "k.toml", {"twice": TWICE})  # no runtime in between
    assert kdef.body == "y = 2 * (a + 1)" and kdef.notes == (("twice", "doubled"),)


def test_a_translator_of_the_first_form_still_works(register_plugin):
    """`parse(text, file)`, the form before the keys were an argument (api=1, the
    default): still called so, with a DeprecationWarning when it registers."""
    class Old:
        @staticmethod
        @hologram.hookimpl
        def hologram_register_translators(register):
            register(Translator("old", (".old",), lambda text, file: parse_toml(text, file)))

    register_plugin(Old(), "test-old-form")
    with pytest.warns(DeprecationWarning, match=r"translator 'old' takes parse\(text, file\).*api=2"):
        k = hologram.compile(TWICE_DOC.replace('twice = """\na + 1"""', 'body = "y = a"'), format="old")
    assert np.array_equal(k(np.ones(2, np.float32)), [1, 1])


def test_unclaimed_keys_stay_unknown(keys_plugin):
    # a translator called without the keys sees none
    with pytest.raises(DocumentError, match="unknown key 'twice'"):
        parse_toml(TWICE_DOC, "k.toml")
    with pytest.raises(DocumentError, match="unknown key 'twice'"):
        kernels_from_mapping({"kernel": {"name": "k", "version": "1.0.0", "inputs": {}, "outputs": {"y": "f32"},
                                         "twice": "1"}})


def test_unclaimed_keys_stay_unknown_without_the_plugin():
    with pytest.raises(DocumentError, match="unknown key 'twice'"):
        hologram.compile(TWICE_DOC)


def test_plugins_lists_the_keys(keys_plugin, run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    code, out, _ = run_cli("plugins")
    assert code == 0 and "translator keys (.keys; key twice; key square; key body)" in out


def test_notes_are_printed_and_kept_in_bundles(keys_plugin, run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    doc = tmp_path / "k.toml"
    doc.write_text(TWICE_DOC)
    code, out, _ = run_cli("compile", str(doc), "--emit", "stats")
    assert code == 0 and out.rstrip().endswith("twice: doubled")
    report = build([doc], "keys", "1.0.0", cache_dir=False, jobs=1, native="none")
    assert report.kernels[0].entry.stats["notes"] == [["twice", "doubled"]]
    with zipfile.ZipFile(__import__("io").BytesIO(report.data)) as z:
        assert 'notes = [["twice", "doubled"]]' in z.read("bundle.toml").decode()
    code, out, _ = run_cli("bundle", "build", str(doc), "--name", "keys", "--version", "1.0.0", "--native", "none",
                           "--no-cache", "-o", str(tmp_path / "keys.hgb"))
    assert code == 0 and "notes" in out and "twice: doubled" in out
    code, out, _ = run_cli("bundle", "inspect", str(tmp_path / "keys.hgb"), "--kernel", "k")
    assert code == 0 and "notes = twice: doubled" in out


def test_a_kernel_without_notes_keeps_its_manifest(tmp_path):
    doc = tmp_path / "k.toml"
    doc.write_text(TWICE_DOC.replace('twice = """\na + 1"""', 'body = "y = a"'))
    report = build([doc], "plain", "1.0.0", cache_dir=False, jobs=1, native="none")
    assert "notes" not in report.kernels[0].entry.stats
