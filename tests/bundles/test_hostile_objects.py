"""Object code in a trusted bundle, damaged with every hash made to agree: the loader
refuses it with a reason, and the kernel is compiled from its program instead, in the
same process, computing the right answer (docs/bundles.md, "Native code").

The objects are softmax's, hand-edited (hologram.testing.fuzz_mutate_objects): issue
21's reproducers, which took the process down before the loader checked them (MCJIT's
assertion, a jump to unmapped memory, gigabytes for a 40 KB file). Each runs in a child
process with a time limit and an address-space limit, so a crash or a runaway
allocation fails its test instead of the test run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hologram.bundles import archive
from hologram.bundles.build import build
from hologram.bundles.manifest import MANIFEST
from hologram.testing import fuzz_mutate_objects as objects

DOCUMENT = '''
[kernel]
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
ADDRESS_SPACE = 3 << 30  # the child's: far below what the zero-filled reproducers asked for

# Runs in the child: load the (damaged) bundle trusting its native code, call softmax on
# cpu_llvm twice, and say what happened: the answers against the interpreter's, the
# warnings, whether LLVM compiled the program, whether MCJIT was handed an object.
CHILD = textwrap.dedent(f"""
    import json, resource, sys, warnings
    resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE}, resource.getrlimit(resource.RLIMIT_AS)[1]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    import numpy as np
    import hologram as hg
    from hologram_cpu_llvm import jit, loader

    mcjit = []
    real = jit.load_object
    jit.load_object = lambda obj, symbols: mcjit.append(1) or real(obj, symbols)

    x = np.linspace(-2, 2, 37, dtype=np.float32)
    want = hg.load_bundle(sys.argv[1]).softmax.on("interp")(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = hg.load_bundle(sys.argv[1], trust_native=True).softmax.on("cpu_llvm")
        first, second = kernel(x), kernel(x[::-1].copy())
    print(json.dumps({{"right": bool(np.allclose(first, want, rtol=1e-5, atol=0)
                                     and np.allclose(second, want[::-1], rtol=1e-5, atol=0)),
                       "warnings": [str(w.message) for w in caught],
                       "compiled": jit.STATS["emit"], "mcjit": len(mcjit)}}))
""")


@pytest.fixture(scope="module")
def intact(tmp_path_factory) -> Path:
    target = objects.native_target()
    if target is None:
        pytest.skip("cpu_llvm ships no object code this machine runs")
    folder = tmp_path_factory.mktemp("intact")
    (folder / "one.toml").write_text(DOCUMENT)
    out = folder / "one-1.0.0.hgb"
    build([folder / "one.toml"], "one", "1.0.0", out, cache_dir=False, jobs=1, native=target)
    return out


def reshipped(bundle: Path, out: Path, damage) -> Path:
    """`bundle` with softmax's object replaced by `damage(object)`, its index, the
    manifest and RECORD rewritten to agree: only the loader can tell."""
    members = archive.read(bundle.read_bytes())
    index = next(name for name in members if name.startswith("native/cpu_llvm/") and name.endswith("/index.json"))
    member = index.replace("index.json", "softmax.o")
    members[member] = damage(members[member])
    table = json.loads(members[index])
    table["softmax"]["object_sha256"] = hashlib.sha256(members[member]).hexdigest()
    members[index] = json.dumps(table, sort_keys=True, separators=(",", ":")).encode()
    members[MANIFEST] = re.sub(rb'(?m)^index_sha256 = "[0-9a-f]+"',
                               f'index_sha256 = "{hashlib.sha256(members[index]).hexdigest()}"'.encode(),
                               members[MANIFEST])
    out.write_bytes(archive.write(members))
    return out


def run_child(path: Path) -> dict:
    """What CHILD says of the bundle at `path`, run with an empty cache of its own."""
    env = {**os.environ, "HOLOGRAM_NUM_THREADS": "2", "HOLOGRAM_CACHE_DIR": str(path.parent / f"{path.stem}-cache")}
    done = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=180,
                          env=env)
    assert done.returncode == 0, f"the child died ({done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.splitlines()[-1])


REPRODUCERS = {  # (damage, what the refusal says): ISSUE_21's, as reported, and their parts alone
    **{name: (damage, reason) for (name, damage), reason in zip(objects.ISSUE_21.items(), (
        "alignment 8192",  # checked first; the relocation outside .text would be refused too
        "symbol 'hg_softmax_0_m'", "zero-filled", "zero-filled"))},
    "relocation-outside": (lambda o: objects.misplace_relocation(o, ".text", 1), "a relocation outside its section"),
    "alignment-8192": (lambda o: objects.set_alignment(o, ".text", 8192), "alignment 8192"),
}


@pytest.mark.parametrize("label", list(REPRODUCERS))
def test_damaged_object_code_is_refused_and_the_program_compiled(intact, tmp_path, label):
    damage, reason = REPRODUCERS[label]
    said = run_child(reshipped(intact, tmp_path / f"one-{label}.hgb", damage))
    assert said["right"], said
    assert said["compiled"] >= 1 and said["mcjit"] == 0, said  # compiled here; MCJIT never saw the object
    refused = [w for w in said["warnings"] if "object code" in w and "not used" in w]
    assert len(refused) == 1 and reason in refused[0] and "softmax" in refused[0], said


def test_intact_object_code_is_used_without_a_warning(intact):
    said = run_child(intact)
    assert said == {"right": True, "warnings": [], "compiled": 0, "mcjit": 0}
