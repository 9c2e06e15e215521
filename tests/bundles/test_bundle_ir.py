"""A bundle keeps each kernel's IR as the front end built it (docs/bundles.md, "The IR
member"): a bundle's kernel, or a pickled one, streams along a shape symbol from that
IR, without the front end; loading does not decode it; a damaged or foreign IR member
is refused naming the member."""

from __future__ import annotations

import hashlib
import json
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hologram as hg
from hologram.bundles import archive
from hologram.bundles.build import build
from hologram.bundles.load import library, load_bundle, open_bundle
from hologram.bundles.manifest import IR_INDEX, MANIFEST
from hologram.core.errors import BundleError, HologramError

DOCUMENT = '''
[[kernels]]
name = "softmax"
version = "1.0.0"
inputs = { x = "f32[n]" }
outputs = { y = "f32[n]" }
body = """
m = max(x)
e = exp(x - m)
y = e / sum(e)
"""

[[kernels]]
name = "vadd"
version = "1.0.0"
inputs = { x = "f32[n]", y = "f32[n]" }
outputs = { z = "f32[n]" }
body = "z = x + y"
'''
SMALL = 1 << 12  # pool bytes: chunks of a few hundred rows, so softmax takes two passes
X = np.linspace(-3, 3, 2_001, dtype=np.float32)


@pytest.fixture(scope="module")
def intact(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ir")
    (folder / "k.toml").write_text(DOCUMENT)
    out = folder / "k-1.0.0.hgb"
    build([folder / "k.toml"], "k", "1.0.0", out, cache_dir=False, jobs=1, native="none")
    return out


@pytest.fixture(autouse=True)
def forget_unpickled():
    """The kernels unpickled here are forgotten after each test: a process keeps the first
    kernel unpickled per (program, signature, version), and this softmax's are the stdlib's."""
    yield
    hg.clear_cache()


def streamed(kernel: hg.Kernel) -> np.ndarray:
    y = np.empty_like(X)
    hg.stream(kernel, X, out=y, pool_bytes=SMALL)
    return y


def without_the_front_end(monkeypatch) -> None:
    """The analyzer and the parser made unimportable: using them is an ImportError."""
    for name in ("hologram.dsl.analyze", "hologram.dsl.parser"):
        monkeypatch.setitem(sys.modules, name, None)


def test_a_bundle_kernel_streams_along_a_symbol_without_the_front_end(intact, monkeypatch):
    want = streamed(hg.compile_all(DOCUMENT)["softmax"].on("interp"))
    lib = load_bundle(intact)
    without_the_front_end(monkeypatch)
    from hologram.streaming.stream import plan_for

    assert len(plan_for(lib.softmax).steps) == 2  # it did cut the kernel into passes
    np.testing.assert_array_equal(streamed(lib.softmax.on("interp")), want)


def test_a_pickled_kernel_streams_without_the_front_end(intact, monkeypatch):
    hg.clear_cache()
    doc = hg.compile_all(DOCUMENT)["softmax"].on("interp")
    want = streamed(doc)
    copies = [pickle.loads(pickle.dumps(k)) for k in (doc, load_bundle(intact).softmax.on("interp"))]
    without_the_front_end(monkeypatch)
    for copy in copies:
        np.testing.assert_array_equal(streamed(copy), want)


CHILD = """
import sys
import numpy as np
import hologram as hg
FRONT_END = ("hologram.dsl.analyze", "hologram.dsl.parser", "lark")
lib = hg.load_bundle(sys.argv[1])
x = np.linspace(-3, 3, 2_001, dtype=np.float32)
lib.softmax.on("interp")(x)
loaded = sorted(m for m in sys.modules if m.startswith(("hologram.ir_codec", *FRONT_END)))
y = np.empty_like(x)
hg.stream(lib.softmax.on("interp"), x, out=y, pool_bytes=1 << 12)
streamed = sorted(m for m in sys.modules if m.startswith(FRONT_END))
print(loaded, streamed, "hologram.ir_codec" in sys.modules)
"""


def test_loading_and_calling_never_decode_the_ir_and_streaming_never_imports_the_front_end(intact):
    done = subprocess.run([sys.executable, "-c", CHILD, str(intact)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["[]", "[]", "True"]


# ----------------------------------------------------------------------- damage
def rewritten(intact: Path, out: Path, kernel: str, data: bytes, rehash: bool = True) -> Path:
    """`intact` with `kernel`'s IR member replaced by `data`, the hashes made to agree
    (RECORD always; the IR index's, and the manifest's of the index, when `rehash`)."""
    members = archive.read(intact.read_bytes())
    member = f"ir/{kernel}.json"
    assert member in members
    members[member] = data
    if rehash:
        index = json.loads(members[IR_INDEX])
        index[kernel] = hashlib.sha256(data).hexdigest()
        members[IR_INDEX] = json.dumps(index, sort_keys=True, separators=(",", ":")).encode()
        members[MANIFEST] = re.sub(r'(ir_index_sha256 = )"[0-9a-f]+"',
                                   rf'\1"{hashlib.sha256(members[IR_INDEX]).hexdigest()}"',
                                   members[MANIFEST].decode(), count=1).encode()
    out.write_bytes(archive.write(members))
    return out


def test_an_ir_member_the_index_disagrees_with_is_refused_at_load(intact, tmp_path):
    path = rewritten(intact, tmp_path / "k.hgb", "softmax", b"{}", rehash=False)
    with pytest.raises(BundleError, match=r"ir/softmax.json: its sha256 is not the one ir/index.json gives"):
        load_bundle(path)


@pytest.mark.parametrize("index, message", [
    (b"[]", "expected an object with one entry per kernel"),
    (b'{"softmax": "00"}', "expected an object with one entry per kernel"),
    (b"\xff", "not JSON"),
])
def test_a_damaged_ir_index_is_refused_at_load(intact, tmp_path, index, message):
    members = archive.read(intact.read_bytes())
    members[IR_INDEX] = index
    members[MANIFEST] = re.sub(r'(ir_index_sha256 = )"[0-9a-f]+"', rf'\1"{hashlib.sha256(index).hexdigest()}"',
                               members[MANIFEST].decode(), count=1).encode()
    (tmp_path / "k.hgb").write_bytes(archive.write(members))
    with pytest.raises(BundleError, match=rf"ir/index.json: {message}"):
        load_bundle(tmp_path / "k.hgb")


def test_a_bundle_without_its_ir_index_is_refused_at_load(intact, tmp_path):
    members = archive.read(intact.read_bytes())
    del members[IR_INDEX]
    (tmp_path / "k.hgb").write_bytes(archive.write(members))
    with pytest.raises(BundleError, match=r"no ir/index.json member, which bundle.toml names"):
        load_bundle(tmp_path / "k.hgb")


def test_an_ir_index_the_manifest_disagrees_with_is_refused_at_load(intact, tmp_path):
    members = archive.read(intact.read_bytes())
    index = json.loads(members[IR_INDEX])
    members[IR_INDEX] = json.dumps(index, indent=1).encode()  # the same digests, other bytes
    (tmp_path / "k.hgb").write_bytes(archive.write(members))
    with pytest.raises(BundleError, match=r"ir/index.json: its sha256 is not the one bundle.toml gives"):
        load_bundle(tmp_path / "k.hgb")


@pytest.mark.parametrize("damage, message", [
    (lambda ir: b"\x00" + ir, "not JSON"),
    (lambda ir: ir.replace(b'"format_version":1', b'"format_version":9'), "format_version: 9 is newer"),
    (lambda ir: ir.replace(b'"name":"softmax"', b'"name":"other"'), "is not this kernel's: its name is 'other'"),
    (lambda ir: ir.replace(b'"name":"x","shape":[[0,[["n",1]]]]', b'"name":"x","shape":[[0,[["n",2]]]]'),
     "is not this kernel's: its interface is"),
    (lambda ir: ir.replace(b'"LOAD","f32"', b'"LOAD","f64"', 1), "a load of 'x'"),
])
def test_a_damaged_ir_member_is_refused_naming_it_when_the_kernel_streams(intact, tmp_path, damage, message):
    good = archive.read(intact.read_bytes())["ir/softmax.json"]
    bad = damage(good)
    assert bad != good
    lib = load_bundle(rewritten(intact, tmp_path / "k.hgb", "softmax", bad))  # loading does not read it
    np.testing.assert_allclose(lib.softmax(X).sum(), 1, rtol=1e-5)  # nor does a call
    with pytest.raises(BundleError, match=rf"kernel 'softmax': ir/softmax.json: .*{message}"):
        streamed(lib.softmax)


def test_another_kernels_ir_is_refused(intact, tmp_path):
    other = archive.read(intact.read_bytes())["ir/vadd.json"]
    lib = load_bundle(rewritten(intact, tmp_path / "k.hgb", "softmax", other))
    with pytest.raises(BundleError, match="ir/softmax.json: .*is not this kernel's"):
        streamed(lib.softmax)


def test_the_ir_member_holds_the_front_ends_ir(intact):
    members = archive.read(intact.read_bytes())
    doc = json.loads(members["ir/softmax.json"])
    assert doc["format"] == "hologram-kernel-ir" and doc["name"] == "softmax"
    from hologram.ir_codec import decode

    assert decode(members["ir/softmax.json"]) == hg.compile_all(DOCUMENT, file="sources/k.toml")["softmax"]._c.source_ir


def test_bundle_verify_decodes_every_ir_and_a_pickle_carries_it_undecoded(intact, tmp_path):
    path = rewritten(intact, tmp_path / "k.hgb", "softmax", b"[]")
    with pytest.raises(BundleError, match=r"ir/softmax.json: not a kernel IR .*expected an object"):
        library(open_bundle(path), verify_now=True)
    hg.clear_cache()
    copy = pickle.loads(pickle.dumps(load_bundle(path).softmax))  # pickling does not read it either
    with pytest.raises(HologramError, match=r"a pickled kernel 'softmax': not a kernel IR .*expected an object"):
        streamed(copy)
