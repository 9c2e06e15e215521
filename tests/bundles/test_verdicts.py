"""The verifier's verdicts (hologram.verify.verdicts): a program whose bytes this
verifier passed before is not verified again, in this process or another; one whose
bytes changed, a verdict of another verifier, a corrupt verdict or one in a folder
others can write is not believed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hologram
from hologram.bundles.load import open_bundle
from hologram.verify import verdicts, verifier


@pytest.fixture(scope="module")
def bundle(tiny_bundle) -> Path:
    return tiny_bundle


@pytest.fixture
def verified(monkeypatch) -> list[str]:
    """The names of the programs the verifier is run on."""
    seen: list[str] = []
    real = verifier.verify

    def counting(program, *args, **kwargs):
        seen.append(program.name)
        return real(program, *args, **kwargs)

    monkeypatch.setattr(verifier, "verify", counting)
    return seen


def _program(bundle: Path, kernel: str):
    b = open_bundle(bundle)
    entry = next(e for e in b.manifest.kernels if e.name == kernel)
    return b.program(entry), entry.program_sha256


def test_a_passed_program_is_recorded_by_its_sha256_and_the_verifiers_digest(bundle, cache, verified):
    _, sha = _program(bundle, "softmax")
    assert verified == ["softmax"]
    text = (cache / "verdicts" / f"{sha}.verdict").read_text().splitlines()
    assert text == ["hologram verdict 1", sha, verdicts.verifier_digest()]
    _program(bundle, "softmax")
    assert verified == ["softmax"]  # the verdict, not the verifier
    _program(bundle, "vadd")
    assert verified == ["softmax", "vadd"]  # other bytes: verified


@pytest.mark.parametrize("damage", ["another verifier", "truncated", "a folder", "others may write"])
def test_a_verdict_not_to_be_believed_means_verifying(bundle, cache, verified, damage):
    _, sha = _program(bundle, "softmax")
    path = cache / "verdicts" / f"{sha}.verdict"
    if damage == "another verifier":
        path.write_text(path.read_text().replace(verdicts.verifier_digest(), "0" * 64))
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-10])
    elif damage == "a folder":
        path.unlink()
        path.mkdir()
    else:
        os.chmod(path.parent, 0o777)
    _program(bundle, "softmax")
    assert verified == ["softmax", "softmax"]


def test_a_program_the_verifier_refuses_is_not_recorded(bundle, cache, monkeypatch):
    from hologram.core.errors import BundleError, HologramError

    def refuse(program, *args, **kwargs):
        raise HologramError("no")

    monkeypatch.setattr(verifier, "verify", refuse)
    with pytest.raises(BundleError, match="the verifier refuses it: no"):
        _program(bundle, "softmax")
    assert not list((cache / "verdicts").glob("*.verdict"))


def test_a_key_is_a_sha256_never_a_path():
    assert not verdicts.passed("../" * 20 + "etc/passwd")
    verdicts.record("../escape")  # refused quietly: nothing written anywhere


def test_the_digest_covers_every_module_the_verifier_and_decoder_import():
    """The verdict's verifier digest hashes hologram/verify, isa and core: the verifier
    and the decoder must import nothing of hologram outside them."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import json, sys
        import hologram.isa.encoding, hologram.verify.verifier
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("hologram."))))
    """)], capture_output=True, text=True, check=True)
    outside = [m for m in json.loads(done.stdout) if m.split(".")[1] not in ("verify", "isa", "core")]
    assert outside == []


def test_a_second_process_neither_imports_nor_runs_the_verifier(bundle, tmp_path):
    """With trusted native code (cpu_llvm: the interpreter verifies what it prepares)."""
    if "cpu_llvm" not in hologram.list_backends():
        pytest.skip("cpu_llvm is not available here")
    code = textwrap.dedent(f"""
        import json, sys
        import numpy as np
        import hologram

        x = np.arange(4, dtype=np.float32)
        hologram.load_bundle({str(bundle)!r}, trust_native=True).vadd.on("cpu_llvm")(x, x)
        print(json.dumps("hologram.verify.verifier" in sys.modules))
    """)
    env = {**os.environ, "HOLOGRAM_CACHE_DIR": str(tmp_path / "cache")}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
            for _ in range(2)]
    # the first process verified (and recorded), the second read the verdict
    assert [json.loads(r.stdout.strip().splitlines()[-1]) for r in runs] == [True, False]
