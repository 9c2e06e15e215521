"""Damaged, tampered and hostile bundles: each is refused with a BundleError, or loads and
computes what the intact bundle computes. Every case runs in one child process, so a
crash (a segfault in a decoder, an abort) fails the test instead of the test run.

Byte-level damage (flipped bits, truncation, overwritten ranges) must be refused or be
harmless. Tampering that keeps every hash consistent (a rewritten manifest or program
with RECORD rebuilt to match) is what an attacker can do: then the bundle is refused,
or, when the result is still a valid program, runs safely (the verifier's promise),
without any other exception."""

from __future__ import annotations

import io
import json
import re
import struct
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hologram.bundles import archive
from hologram.bundles.build import build
from hologram.bundles.manifest import MANIFEST

DOCUMENT = '''
[[kernels]]
name = "vadd"
version = "1.0.0"
inputs = { x = "f32[n]", y = "f32[n]" }
outputs = { z = "f32[n]" }
body = "z = x + y"

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
'''

# Runs in the child: load each case, call every kernel on fixed inputs, compare with the
# intact bundle; one JSON line per case.
CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import hologram as hg
    from hologram.core.errors import BundleError, HologramError

    def results(lib):
        x = np.linspace(-2, 2, 37, dtype=np.float32)
        return {(name, backend): np.asarray(k.on(backend)(*([x, x][:len(k.signature.inputs)]))).tolist()
                for name, k in sorted(lib.items()) for backend in hg.list_backends()
                if hg.get_backend(backend).capabilities.uncovered(k.program) is None}  # what each declares

    expected = results(hg.load_bundle(sys.argv[1]))
    for path in sys.argv[2:]:
        try:
            got = results(hg.load_bundle(path, trust_native=True))
            outcome = "same" if got == expected else "different"
        except BundleError as exc:
            outcome = "refused: " + exc.message
        except HologramError as exc:
            outcome = f"other {type(exc).__name__}: {exc.message}"
        except Exception as exc:
            outcome = f"crash {type(exc).__name__}: {exc}"
        print(json.dumps([path, outcome]), flush=True)
""")

# (kind, tampering keeps the hashes consistent)
KINDS = ["flip", "truncate", "overwrite", "rename", "traversal", "absolute", "duplicate", "bomb",
         "manifest-hash", "manifest-type", "manifest-format", "manifest-isa", "swap-programs", "program-bytes",
         "drop-member", "extra-member", "native-other-cpu", "native-index", "native-index-lies",
         # issue 21: a program writing its input, a manifest dropping a reduction, a reader exhausted
         "program-writes-input", "manifest-drops-reduction", "manifest-deep", "manifest-huge-int", "overlap"]


@pytest.fixture(scope="module")
def intact(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("intact")
    (folder / "two.toml").write_text(DOCUMENT)
    out = folder / "two-1.0.0.hgb"
    build([folder / "two.toml"], "two", "1.0.0", out, cache_dir=False, jobs=1, native=_native_target())
    return out


def _native_target() -> str:
    """One CPU level this machine runs, so the child (trusting the bundle) uses its objects."""
    try:
        from hologram_cpu_llvm import cpu, jit
    except ImportError:
        return "none"
    runs = [t for t in jit.level_targets() if jit.has_features(cpu.X86_64_LEVELS[t])]
    return runs[0] if runs else "none"


def corrupt(data: bytes, kind: str, a: int, b: int, noise: bytes) -> bytes:
    """`data` damaged the `kind` way; `a`, `b` and `noise` pick where and with what."""
    n = len(data)
    if kind == "flip":
        out = bytearray(data)
        out[a % n] ^= 1 << (b % 8)
        return bytes(out)
    if kind == "truncate":
        return data[: a % n]
    if kind == "overwrite":
        start = a % n
        return data[:start] + noise + data[start + len(noise):]
    members = archive.read(data)
    names = sorted(members)
    pick = names[a % len(names)]
    if kind in ("rename", "traversal", "absolute", "duplicate"):
        new = {"rename": pick + "x", "traversal": "../" + pick, "absolute": "/" + pick, "duplicate": pick}[kind]
        return _raw_zip([*((k, v) for k, v in sorted(members.items()) if k != pick), (new, members[pick]),
                         *([(pick, members[pick] + noise)] if kind == "duplicate" else []),
                         (archive.RECORD, archive.record(members))])
    if kind == "bomb":  # a member that inflates far past the member limit
        return _bomb(members)
    if kind == "overlap":  # a second directory entry pointing into the first member's bytes
        return _overlapping(data, a)
    manifest = members[MANIFEST].decode()
    if kind == "manifest-hash":  # RECORD rebuilt, so only the manifest lies
        line = [ln for ln in manifest.splitlines() if "_sha256" in ln][a % 4]
        manifest = manifest.replace(line, line[:-5] + "0000\"")
    elif kind == "manifest-type":
        manifest = manifest.replace('type = "f32[n]"', ['type = "f64[n]"', 'type = "f32[n, n]"',
                                                       'type = "f32[m]"', 'type = "f32"'][a % 4], 1)
    elif kind == "manifest-format":
        manifest = manifest.replace("format = 3", f"format = {[1, 2, 4, 7, 99][b % 5]}")
    elif kind == "manifest-isa":
        manifest = manifest.replace("isa = 1", f"isa = {[0, 2, 99, -1][a % 4]}")
    elif kind == "swap-programs":
        members["programs/vadd.hbc"], members["programs/softmax.hbc"] = (members["programs/softmax.hbc"],
                                                                         members["programs/vadd.hbc"])
        manifest = _rehash(manifest, members)
    elif kind == "program-bytes":  # a flipped bit in a program, every hash made to agree
        prog = "programs/" + ["vadd", "softmax"][a % 2] + ".hbc"
        body = bytearray(members[prog])
        body[b % len(body)] ^= 1 << (a % 8)
        members[prog] = bytes(body)
        manifest = _rehash(manifest, members)
    elif kind == "program-writes-input":  # vadd declares x inout and stores its sum there too
        from hologram.isa.asm import format_program, parse_program
        from hologram.isa.encoding import decode, encode

        asm = format_program(decode(members["programs/vadd.hbc"]))
        store = next(ln for ln in asm.splitlines() if ln.strip().startswith("STG"))
        members["programs/vadd.hbc"] = encode(parse_program(
            asm.replace(".param in x", ".param inout x").replace(store, store + "\n" + store.replace("[z", "[x"))))
        manifest = _rehash(manifest, members)
    elif kind == "manifest-drops-reduction":  # softmax's max over n: an empty x would give -inf's softmax
        manifest = re.sub(r"reductions = \[\n[^\]]*\]\]\s*},\n\]", "reductions = []", manifest, count=1)
    elif kind == "manifest-deep":
        manifest = manifest.replace('opt = "', "opt = " + "[" * (100 + a % 5000) + "]" * (100 + a % 5000) + '\nx = "')
    elif kind == "manifest-huge-int":
        manifest = manifest.replace("isa = 1", "isa = " + "9" * (20 + a % 6000))
    elif kind == "drop-member":
        del members[[k for k in names if k != MANIFEST][a % (len(names) - 1)]]
    elif kind == "extra-member":
        members["sources/extra.toml"] = noise
    elif kind == "native-other-cpu":  # objects that claim to need a feature no CPU has: never loaded
        manifest = manifest.replace('features = [', 'features = ["a-feature-no-cpu-has", ')
    elif kind in ("native-index", "native-index-lies"):  # a target's index altered (RECORD rebuilt)
        index = next((k for k in names if k.startswith("native/") and k.endswith("/index.json")), None)
        if index is not None:
            import hashlib

            body = members[index].decode()
            if kind == "native-index":  # the manifest's index_sha256 left as it was: it disagrees
                members[index] = body.replace('"meta":', '"meta" :', 1).encode()
            else:  # an object's digest that lies, the manifest made to agree with the index
                members[index] = re.sub(r'"object_sha256":"[0-9a-f]{4}', '"object_sha256":"0000', body, 1).encode()
                manifest = re.sub(r'(?m)^index_sha256 = "[0-9a-f]+"',
                                  f'index_sha256 = "{hashlib.sha256(members[index]).hexdigest()}"', manifest)
    members[MANIFEST] = manifest.encode()
    return archive.write(members)


def _rehash(manifest: str, members: dict[str, bytes]) -> str:
    import hashlib

    def fix(m: re.Match) -> str:
        return f'{m[1]}_sha256 = "{hashlib.sha256(members[m[2]]).hexdigest()}"'
    for field in ("program", "source"):
        manifest = re.sub(rf'({field}) = "([^"]+)"\n{field}_sha256 = "[0-9a-f]+"',
                          lambda m: f'{m[1]} = "{m[2]}"\n' + fix(m), manifest)
    return manifest


def _overlapping(data: bytes, a: int) -> bytes:
    """`data` with one more central directory entry, a copy of member `a`'s, pointing at
    the same local header: two members sharing their bytes."""
    end = len(data) - 22
    _, _, _, here, count, cd_size, cd_offset, _ = struct.unpack_from("<IHHHHIIH", data, end)
    entries, at = [], cd_offset
    for _ in range(count):
        nlen, xlen, clen = struct.unpack_from("<HHH", data, at + 28)
        entries.append(data[at:at + 46 + nlen + xlen + clen])
        at += 46 + nlen + xlen + clen
    pick = entries[a % len(entries)]
    directory = b"".join(entries) + pick
    return data[:cd_offset] + directory + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count + 1, count + 1,
                                                       len(directory), cd_offset, 0)


def _bomb(members: dict[str, bytes]) -> bytes:
    """The bundle plus a deflated member of MAX_MEMBER_BYTES + 1 zeros (~256 KB in the
    archive); built once, the intact bundle being the same in every case."""
    global _BOMB
    if _BOMB is None:
        _BOMB = _raw_zip([*sorted(members.items()), ("ir/bomb.ir", b"\0" * (archive.MAX_MEMBER_BYTES + 1)),
                          (archive.RECORD, archive.record(members))], compress=True)
    return _BOMB


_BOMB: bytes | None = None


def _raw_zip(items: list[tuple[str, bytes]], compress: bool = False) -> bytes:
    import warnings

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as zf, \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names: the point of the case
        for name, body in items:
            zf.writestr(name, body)
    return buf.getvalue()


CASE = st.tuples(st.sampled_from(KINDS), st.integers(0, 1 << 20), st.integers(0, 1 << 20),
                 st.binary(min_size=1, max_size=64))


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(cases=st.lists(CASE, min_size=len(KINDS), max_size=40))
def test_damaged_bundles_are_refused_or_harmless(intact, tmp_path, cases):
    cases = [(kind, *rest) for kind, (_, *rest) in zip(KINDS, cases)] + cases[len(KINDS):]  # every kind, each run
    data = intact.read_bytes()
    paths = []
    for i, (kind, a, b, noise) in enumerate(cases):
        path = tmp_path / f"case{i}-{kind}.hgb"
        path.write_bytes(corrupt(data, kind, a, b, noise))
        paths.append(str(path))
    done = subprocess.run([sys.executable, "-c", CHILD, str(intact), *paths], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"the child process died: {done.returncode}\n{done.stderr[-3000:]}"
    outcomes = dict(json.loads(line) for line in done.stdout.splitlines())
    assert len(outcomes) == len(paths)
    for path, outcome in outcomes.items():
        kind = Path(path).stem.split("-", 1)[1]
        consistent = kind in ("program-bytes", "swap-programs")
        ok = outcome.startswith("refused: ") or outcome == "same" or (consistent and outcome == "different")
        assert ok, f"{kind}: {outcome}"
        natives = _native_target() != "none"
        if kind in ("traversal", "absolute", "duplicate", "bomb", "manifest-format", "manifest-isa", "manifest-type",
                    "manifest-hash", "drop-member", "extra-member", "rename", "swap-programs", "program-writes-input",
                    "manifest-drops-reduction", "manifest-deep", "manifest-huge-int", "overlap") \
                or natives and kind in ("native-index", "native-index-lies"):  # the child trusts native code
            assert outcome.startswith("refused: "), f"{kind}: {outcome}"
