"""What a new process pays: `import hologram` imports nothing heavy, and loading a
bundle and calling a kernel imports neither the compiler nor LLVM (docs/decisions.md,
"Start-up"; benchmarks/startup.py has the figures)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import hologram

HEAVY = ("numpy", "attr", "attrs", "lark", "llvmlite", "pluggy", "rich", "hypothesis", "packaging", "yaml")


def _child(code: str, **env: str) -> list:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_hologram_imports_nothing_heavy():
    loaded = _child(f"""
        import json, sys
        import hologram
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r})))
    """)
    assert loaded == []


def test_every_public_name_is_found_when_first_used():
    for name in hologram.__all__:
        assert getattr(hologram, name) is not None
    from hologram import Kernel, compile_file, errors

    assert callable(compile_file) and isinstance(Kernel, type) and errors.HologramError
    assert hologram.compile.__module__ == "hologram.runtime.compile"
    assert set(hologram.__all__) <= set(dir(hologram))
    try:
        hologram.not_a_name
    except AttributeError as e:
        assert "not_a_name" in str(e)
    else:
        raise AssertionError("an unknown name must raise AttributeError")
