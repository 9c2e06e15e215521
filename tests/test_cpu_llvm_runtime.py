"""The cpu_llvm runtime: JIT, caches, thread pool, launch, aliasing, error slots.

Most tests drive the runtime with hand-written LLVM IR modules obeying the stage ABI
(codegen substituted), so a runtime failure here is never a code generator bug; the
"end to end" section goes through the real code generator and the public API.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import attrs
import numpy as np
import pytest

pytest.importorskip("llvmlite")

from hologram.isa.asm import parse_program  # noqa: E402
from hologram.core.errors import ArgumentError, ExecutionError  # noqa: E402
from hologram_cpu_llvm import CpuLlvmBackend, cache, jit, threads  # noqa: E402
from hologram_cpu_llvm import runtime as rt  # noqa: E402


@attrs.frozen
class Entry:
    name: str
    stage_index: int
    reduce_buffers: tuple[str, ...] = ()


@attrs.frozen
class Result:
    module_ir: str
    stages: tuple[Entry, ...]


def fake_codegen(module_ir: str, *entries: Entry):
    calls = []

    def codegen(program):
        calls.append(program)
        return Result(module_ir, entries)
    codegen.calls = calls
    return codegen


# A stage's lanes in [block_start * 256, min(block_end * 256, n)): the 1-D layout.
PROLOGUE = """
  %n = load i64, ptr %syms
  %lo = mul i64 %bs, 256
  %hi0 = mul i64 %be, 256
  %c = icmp slt i64 %hi0, %n
  %hi = select i1 %c, i64 %hi0, i64 %n
  %e = icmp slt i64 %lo, %hi
  br i1 %e, label %loop, label %done
"""
SIG = "(i64 %bs, i64 %be, ptr %bufs, ptr %syms, ptr %sc, ptr %parts, ptr %err)"

# z[i] = x[n - 1 - i] * $a  (reversal shows aliasing: in place, the second half would
# read what the first half already wrote)
REV_ASM = """
.program rev
.symbols n
.param in x: f32[n]
.param a: f32
.param out z: f32[n]
.stage s domain [n] block [256]
.reg %i, %j: i64
.reg %v: f32
MOV.i64 %i, %gid.x
SUB.i64 %j, $n, %i
SUB.i64 %j, %j, 1
LDG.f32 %v, [x + %j]
MUL.f32 %v, %v, $a
STG.f32 [z + %i], %v
EXIT
"""
REV_IR = f"""
define void @rev_s{SIG} {{
entry:
  %x = load ptr, ptr %bufs
  %pz = getelementptr ptr, ptr %bufs, i64 1
  %z = load ptr, ptr %pz
  %a = load float, ptr %sc
{PROLOGUE}
loop:
  %i = phi i64 [%lo, %entry], [%i1, %loop]
  %nm = sub i64 %n, 1
  %j = sub i64 %nm, %i
  %px = getelementptr float, ptr %x, i64 %j
  %v = load float, ptr %px
  %w = fmul float %v, %a
  %q = getelementptr float, ptr %z, i64 %i
  store float %w, ptr %q
  %i1 = add i64 %i, 1
  %k = icmp slt i64 %i1, %hi
  br i1 %k, label %loop, label %done
done:
  ret void
}}
"""

# out[0] = sum(x) and m[0] = max(x), through partials (ReduceAdd.i64, ReduceMax.i64).
SUM_ASM = """
.program total
.symbols n
.param in x: i64[n]
.param out s: i64[1]
.param out m: i64[1]
.stage s domain [n] block [256]
.init s[0] = 0
.init m[0] = -9223372036854775808
.reg %i, %v: i64
MOV.i64 %i, %gid.x
LDG.i64 %v, [x + %i]
ReduceAdd.i64 [s + 0], %v
ReduceMax.i64 [m + 0], %v
EXIT
"""
SUM_IR = f"""
define void @total_s{SIG} {{
entry:
  %x = load ptr, ptr %bufs
  %ps = load ptr, ptr %parts
  %pm1 = getelementptr ptr, ptr %parts, i64 1
  %pm = load ptr, ptr %pm1
{PROLOGUE}
loop:
  %i = phi i64 [%lo, %entry], [%i1, %loop]
  %px = getelementptr i64, ptr %x, i64 %i
  %v = load i64, ptr %px
  %acc = load i64, ptr %ps
  %acc1 = add i64 %acc, %v
  store i64 %acc1, ptr %ps
  %mx = load i64, ptr %pm
  %gt = icmp sgt i64 %v, %mx
  %mx1 = select i1 %gt, i64 %v, i64 %mx
  store i64 %mx1, ptr %pm
  %i1 = add i64 %i, 1
  %k = icmp slt i64 %i1, %hi
  br i1 %k, label %loop, label %done
done:
  ret void
}}
"""

# float sum through a partial, for the thread-count contract
FSUM_ASM = """
.program fsum
.symbols n
.param in x: f64[n]
.param out s: f64[1]
.stage s domain [n] block [256]
.init s[0] = 0.0
.reg %i: i64
.reg %v: f64
MOV.i64 %i, %gid.x
LDG.f64 %v, [x + %i]
ReduceAdd.f64 [s + 0], %v
EXIT
"""
FSUM_IR = f"""
define void @fsum_s{SIG} {{
entry:
  %x = load ptr, ptr %bufs
  %ps = load ptr, ptr %parts
{PROLOGUE}
loop:
  %i = phi i64 [%lo, %entry], [%i1, %loop]
  %px = getelementptr double, ptr %x, i64 %i
  %v = load double, ptr %px
  %acc = load double, ptr %ps
  %acc1 = fadd double %acc, %v
  store double %acc1, ptr %ps
  %i1 = add i64 %i, 1
  %k = icmp slt i64 %i1, %hi
  br i1 %k, label %loop, label %done
done:
  ret void
}}
"""

# y[i] = x[i + 5] with a checked load: lanes past n - 5 report ERR_OOB_GLOBAL.
CHK_ASM = """
.program chk
.symbols n
.param in x: f32[n]
.param out y: f32[n]
.stage s domain [n] block [256]
.reg %i, %j: i64
.reg %v: f32
MOV.i64 %i, %gid.x
ADD.i64 %j, %i, 5
LDG.f32.chk %v, [x + %j]
STG.f32 [y + %i], %v
EXIT
"""
CHK_IR = f"""
define void @chk_s{SIG} {{
entry:
  %x = load ptr, ptr %bufs
  %py = getelementptr ptr, ptr %bufs, i64 1
  %y = load ptr, ptr %py
{PROLOGUE}
loop:
  %i = phi i64 [%lo, %entry], [%i1, %ok]
  %j = add i64 %i, 5
  %in = icmp ult i64 %j, %n
  br i1 %in, label %ok, label %fail
ok:
  %px = getelementptr float, ptr %x, i64 %j
  %v = load float, ptr %px
  %q = getelementptr float, ptr %y, i64 %i
  store float %v, ptr %q
  %i1 = add i64 %i, 1
  %k = icmp slt i64 %i1, %hi
  br i1 %k, label %loop, label %done
fail:
  store i64 {rt.ERR_OOB_GLOBAL}, ptr %err
  %e1 = getelementptr i64, ptr %err, i64 1
  store i64 0, ptr %e1
  %e2 = getelementptr i64, ptr %err, i64 2
  store i64 2, ptr %e2
  %e3 = getelementptr i64, ptr %err, i64 3
  store i64 %j, ptr %e3
  ret void
done:
  ret void
}}
"""


def backend(tmp_path, asm_ir, *entries, threads_=2, **kw):
    codegen = fake_codegen(asm_ir, *entries)
    b = CpuLlvmBackend(num_threads=threads_, cache_dir=tmp_path / "cache", codegen=codegen,
                       codegen_version="test-1", **kw)
    return b, codegen


@pytest.fixture
def rev(tmp_path):
    return parse_program(REV_ASM), backend(tmp_path, REV_IR, Entry("rev_s", 0))[0]


# ---------------------------------------------------------------------- launching
def test_stage_runs_and_scalars_are_passed(rev):
    program, b = rev
    exe = b.prepare(program)
    x = np.arange(1000, dtype=np.float32)
    z = np.zeros_like(x)
    b.launch(exe, {"x": x, "z": z}, {"a": np.float32(2.0)}, {"n": 1000})
    np.testing.assert_array_equal(z, x[::-1] * 2)
    b.launch(exe, {"x": x, "z": z}, {"a": 3}, {"n": 1000})  # a Python number is converted
    np.testing.assert_array_equal(z, x[::-1] * 3)


def test_empty_domain_runs_nothing(rev):
    program, b = rev
    z = np.zeros(0, np.float32)
    b.launch(b.prepare(program), {"x": z.copy(), "z": z}, {"a": 1.0}, {"n": 0})


@pytest.fixture
def parallel_runs(monkeypatch):
    """The chunk count of every parallel run, through whichever pool launches use."""
    seen: list[int] = []
    native, python = threads.NativePool.run, threads.ThreadPool.run

    def spy_native(self, fn, address, bufs, syms, scalars, chunks):
        seen.append(len(chunks))
        return native(self, fn, address, bufs, syms, scalars, chunks)

    def spy_python(self, tasks):
        seen.append(len(tasks))
        return python(self, tasks)
    monkeypatch.setattr(threads.NativePool, "run", spy_native)
    monkeypatch.setattr(threads.ThreadPool, "run", spy_python)
    return seen


def test_large_launch_is_split_across_threads(rev, parallel_runs):
    program, b = rev
    seen = parallel_runs
    n = rt.INLINE_WORK * 4 + 77  # a partial last block
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    z = np.zeros_like(x)
    b.launch(b.prepare(program), {"x": x, "z": z}, {"a": 1.5}, {"n": n})
    assert seen == [2]
    np.testing.assert_array_equal(z, x[::-1] * np.float32(1.5))
    small = np.ones(100, np.float32)
    b.launch(b.prepare(program), {"x": small, "z": small.copy()}, {"a": 1.0}, {"n": 100})
    assert seen == [2]  # small launches run inline


def test_few_lanes_with_long_loops_are_split_across_threads(monkeypatch, parallel_runs):
    """Threading is decided by work (lanes x loop iterations per lane), not by lanes:
    512 rows of a matvec are too few lanes to split, 512 x 2048 iterations are not."""
    import hologram as hg
    seen = parallel_runs
    k = hg.compile_file("kernels/matvec.toml").on("cpu_llvm")
    monkeypatch.setattr(k.backend, "num_threads", 2)
    rng = np.random.default_rng(1)
    a, x = rng.random((512, 2048), dtype=np.float32), rng.random(2048, dtype=np.float32)
    np.testing.assert_allclose(k(a, x), a.astype(np.float64) @ x, rtol=1e-6)
    assert seen == [2]
    k(a[:, :16].copy(), x[:16])  # 512 x 17: inline
    assert seen == [2]


def test_aliased_input_is_copied_first(rev):
    program, b = rev
    x = np.arange(1001, dtype=np.float32)
    expected = x[::-1] * 2
    b.launch(b.prepare(program), {"x": x, "z": x}, {"a": 2.0}, {"n": 1001})  # in place
    np.testing.assert_array_equal(x, expected)
    buf = np.arange(20, dtype=np.float32)
    lo, hi = buf[:10], buf[5:15]  # partial overlap
    expected = hi[::-1].copy()
    b.launch(b.prepare(program), {"x": hi, "z": lo}, {"a": 1.0}, {"n": 10})
    np.testing.assert_array_equal(lo, expected)


def test_two_written_buffers_may_not_overlap(tmp_path):
    program = parse_program(SUM_ASM)
    b, _ = backend(tmp_path, SUM_IR, Entry("total_s", 0, ("s", "m")))
    x = np.arange(10, dtype=np.int64)
    out = np.zeros(1, np.int64)
    with pytest.raises(ArgumentError, match="overlap in memory"):
        b.launch(b.prepare(program), {"x": x, "s": out, "m": out}, {}, {"n": 10})


def test_argument_checks(rev):
    program, b = rev
    exe = b.prepare(program)
    x, z = np.ones(8, np.float32), np.zeros(8, np.float32)
    cases = [
        ({"x": x.astype(np.float64), "z": z}, {"a": 1.0}, {"n": 8}, "expected dtype f|float32"),
        ({"x": x, "z": z}, {"a": 1.0}, {"n": 9}, "expected 9 elements"),
        ({"x": x[::2], "z": z[::2]}, {"a": 1.0}, {"n": 4}, "C-contiguous"),
        ({"x": x, "z": z}, {}, {"n": 8}, "scalar parameter 'a'"),
        ({"x": x, "z": z}, {"a": "one"}, {"n": 8}, "scalar parameter 'a'"),
        ({"x": x, "z": z}, {"a": 1.0}, {"n": 8.0}, "shape symbol 'n'"),
        ({"x": x, "z": z}, {"a": 1.0}, {"n": 2**64}, "outside the range a launch may bind a symbol to: 0 to 2"),
        ({"x": x}, {"a": 1.0}, {"n": 8}, "needs buffer"),
        ({"x": x, "z": z, "w": z}, {"a": 1.0}, {"n": 8}, "no buffer parameter"),
        ({"x": x, "z": [0.0] * 8}, {"a": 1.0}, {"n": 8}, "numpy array"),
    ]
    for bufs, scalars, syms, message in cases:
        with pytest.raises(ArgumentError, match=message):
            b.launch(exe, bufs, scalars, syms)
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ArgumentError, match="read-only"):
        b.launch(exe, {"x": x, "z": ro}, {"a": 1.0}, {"n": 8})


# --------------------------------------------------------------------- reductions
@pytest.mark.parametrize("n", [1, 300, rt.INLINE_WORK * 3 + 5])
def test_reductions_combine_partials(tmp_path, n):
    program = parse_program(SUM_ASM)
    x = np.random.default_rng(n).integers(-2**62, 2**62, n, dtype=np.int64)
    results = []
    for t in (1, 2, 3):
        b, _ = backend(tmp_path, SUM_IR, Entry("total_s", 0, ("s", "m")), threads_=t)
        s, m = np.full(1, 99, np.int64), np.zeros(1, np.int64)
        b.launch(b.prepare(program), {"x": x, "s": s, "m": m}, {}, {"n": n})
        results.append((s[0], m[0]))
    with np.errstate(over="ignore"):
        expected = (np.add.reduce(x), x.max())  # wrapping, as the ISA's integer ADD
    assert results == [expected] * 3  # the init reset s; integers agree bit for bit


def test_float_reduction_thread_counts_agree_within_contract(tmp_path):
    from hologram.testing import assert_close
    program = parse_program(FSUM_ASM)
    n = rt.INLINE_WORK * 2 + 3
    x = np.random.default_rng(1).standard_normal(n)
    sums = []
    for t in (1, 2):
        b, _ = backend(tmp_path, FSUM_IR, Entry("fsum_s", 0, ("s",)), threads_=t)
        s = np.zeros(1)
        b.launch(b.prepare(program), {"x": x, "s": s}, {}, {"n": n})
        sums.append(s)
    assert_close(sums[0], np.array([x.sum()]), reduction_n=n, magnitude=np.array([np.abs(x).sum()]))
    assert_close(sums[1], sums[0], reduction_n=n, magnitude=np.array([np.abs(x).sum()]))


def test_identities_leave_memory_bit_exact():
    assert np.signbit(np.float32(-0.0) + np.float32(rt.identity("add", np.dtype(np.float32))))
    for dt in (np.int8, np.uint64, np.float16, np.float64):
        d = np.dtype(dt)
        for kind, ufunc in (("add", np.add), ("mul", np.multiply), ("min", np.minimum), ("max", np.maximum)):
            probe = np.array([0, 1, 7], dt)
            np.testing.assert_array_equal(ufunc(probe, np.array(rt.identity(kind, d), dt)), probe)


# ------------------------------------------------------------------------- errors
def test_error_slot_becomes_execution_error(tmp_path):
    program = parse_program(CHK_ASM)
    for t in (1, 2):
        b, _ = backend(tmp_path, CHK_IR, Entry("chk_s", 0), threads_=t)
        n = 40000 if t == 2 else 10
        x, y = np.ones(n, np.float32), np.zeros(n, np.float32)
        with pytest.raises(ExecutionError, match=rf"stage 's': instruction 2 `LDG.f32.chk %v, \[x \+ %j\]`: index "
                                                 rf"{n} is out of bounds for global buffer 'x' of {n} elements"):
            b.launch(b.prepare(program), {"x": x, "y": y}, {}, {"n": n})


def test_execution_error_wording_per_code(tmp_path):
    program = parse_program(CHK_ASM)
    b, _ = backend(tmp_path, CHK_IR, Entry("chk_s", 0))
    exe = b.prepare(program)
    arrays = [np.zeros(4, np.float32)] * 2
    assert "is not an Atlas class (0..95)" in str(rt.execution_error(exe, (rt.ERR_CLASS, 0, 2, 200), arrays))
    assert "different barriers (instructions 2, 4)" in str(rt.execution_error(exe, (rt.ERR_BARRIER, 0, 4, 2), arrays))
    assert "PoolFree of handle 3" in str(rt.execution_error(exe, (rt.ERR_POOL_FREE, 0, 2, 3), arrays))
    assert "error 99" in str(rt.execution_error(exe, (99, 5, 77, 1), arrays))  # never crashes on garbage


# --------------------------------------------------------------------- caches
def test_memory_cache_and_disk_cache(tmp_path):
    program = parse_program(REV_ASM)
    b, codegen = backend(tmp_path, REV_IR, Entry("rev_s", 0))
    before = jit.STATS.copy()
    exe = b.prepare(program)
    assert b.prepare(program) is exe and len(codegen.calls) == 1 and not exe.from_cache
    assert jit.STATS["optimize"] == before["optimize"] + 1
    files = list((tmp_path / "cache").glob("*.hgo"))
    assert len(files) == 1
    # a fresh backend (empty memory cache) loads the object: no codegen, no optimizer
    b2, codegen2 = backend(tmp_path, REV_IR, Entry("rev_s", 0))
    exe2 = b2.prepare(program)
    assert exe2.from_cache and codegen2.calls == []
    assert jit.STATS["optimize"] == before["optimize"] + 1
    x = np.arange(5, dtype=np.float32)
    z = np.zeros_like(x)
    b2.launch(exe2, {"x": x, "z": z}, {"a": 1.0}, {"n": 5})
    np.testing.assert_array_equal(z, x[::-1])
    # another codegen version is another key
    b3 = CpuLlvmBackend(cache_dir=tmp_path / "cache", codegen=fake_codegen(REV_IR, Entry("rev_s", 0)),
                        codegen_version="test-2")
    assert not b3.prepare(program).from_cache
    assert len(list((tmp_path / "cache").glob("*.hgo"))) == 2


def test_a_disk_hit_is_not_verified_again_and_a_bad_program_is_still_refused(tmp_path, monkeypatch):
    from hologram.core.errors import VerifyError
    from hologram_cpu_llvm import backend as backend_module
    b, _ = backend(tmp_path, REV_IR, Entry("rev_s", 0))
    b.prepare(parse_program(REV_ASM))
    calls = []
    real = backend_module.verify
    monkeypatch.setattr(backend_module, "verify", lambda p: calls.append(p) or real(p))
    b2, codegen2 = backend(tmp_path, REV_IR, Entry("rev_s", 0))
    assert b2.prepare(parse_program(REV_ASM)).from_cache and calls == [] and codegen2.calls == []
    # the entry certifies its own program only: an unprovable access is refused as before
    bad = parse_program(REV_ASM.replace("[x + %", "[x + 1 + %", 1))
    with pytest.raises(VerifyError):
        b2.prepare(bad)
    assert len(calls) == 1


# Ways an entry can go bad: each takes (key, file bytes) and returns the new bytes.
CORRUPTIONS = {
    "truncated": lambda key, data: data[: len(data) // 2],
    "flipped": lambda key, data: data[:-10] + bytes([data[-10] ^ 0x40]) + data[-9:],
    "foreign": lambda key, data: cache.encode_entry("some other key", cache.decode_entry(key, data)),
    "stale stage table": lambda key, data: cache.encode_entry(key, cache.Entry(
        {"stages": [{"name": "nope", "stage_index": 0, "reduce_buffers": []}]}, cache.decode_entry(key, data).obj)),
    "no stage table": lambda key, data: cache.encode_entry(key, cache.Entry([], cache.decode_entry(key, data).obj)),
    "not an object": lambda key, data: cache.encode_entry(key, cache.Entry(
        cache.decode_entry(key, data).meta, b"\x7fELF\x02\x01" + bytes(100))),
    "empty": lambda key, data: b"",
    "garbage": lambda key, data: b"garbage" * 100,
}


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_corrupt_disk_entry_is_rebuilt(tmp_path, corruption):
    program = parse_program(REV_ASM)
    b, _ = backend(tmp_path, REV_IR, Entry("rev_s", 0))
    key = b.cache_key(b.prepare(program).key)
    path = b.disk.path(key)
    path.write_bytes(CORRUPTIONS[corruption](key, path.read_bytes()))
    b2, codegen2 = backend(tmp_path, REV_IR, Entry("rev_s", 0))
    exe = b2.prepare(program)
    assert not exe.from_cache and len(codegen2.calls) == 1
    assert cache.decode_entry(key, path.read_bytes()) is not None  # rewritten whole
    x = np.arange(4, dtype=np.float32)
    z = np.zeros_like(x)
    b2.launch(exe, {"x": x, "z": z}, {"a": 1.0}, {"n": 4})
    np.testing.assert_array_equal(z, x[::-1])


def test_disk_cache_entry_format(tmp_path):
    entry = cache.Entry({"stages": [1, 2]}, b"\x7fELF" + bytes(range(256)))
    data = cache.encode_entry("k", entry)
    assert data.startswith(cache.MAGIC) and cache.decode_entry("k", data) == entry
    assert cache.decode_entry("k2", data) is None
    for cut in range(len(data)):
        assert cache.decode_entry("k", data[:cut]) is None
    d = cache.DiskCache(tmp_path / "c")
    assert d.load("k") is None and d.store("k", entry) and d.load("k") == entry
    assert [p.name for p in (tmp_path / "c").iterdir()] == [d.path("k").name]  # no temp files left


def test_unwritable_cache_dir_is_only_a_miss(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    d = cache.DiskCache(blocker / "sub")
    assert d.store("k", cache.Entry({}, b"x")) is False and d.load("k") is None


def test_cache_dir_and_thread_count_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HOLOGRAM_CACHE_DIR", str(tmp_path / "here"))
    assert cache.default_cache_dir() == tmp_path / "here"
    monkeypatch.delenv("HOLOGRAM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert cache.default_cache_dir() == tmp_path / "xdg" / "hologram" / "cpu_llvm"
    for value, expected in (("3", 3), ("1", 1), ("0", os.cpu_count()), ("many", os.cpu_count())):
        monkeypatch.setenv("HOLOGRAM_NUM_THREADS", value)
        assert threads.thread_count() == expected
        assert CpuLlvmBackend(cache_dir=False).num_threads == expected


def test_memory_cache_is_bounded():
    m = cache.MemoryCache(2)
    m.put("a", 1), m.put("b", 2), m.get("a"), m.put("c", 3)
    assert (m.get("a"), m.get("b"), m.get("c"), len(m)) == (1, None, 3, 2)


# ------------------------------------------------------------------- thread pool
def test_thread_pool_runs_everything_and_reports_errors():
    pool = threads.ThreadPool(3)
    out = []
    pool.run([lambda i=i: out.append(i) for i in range(10)])
    assert sorted(out) == list(range(10))

    def boom():
        raise ValueError("boom")
    with pytest.raises(ValueError, match="boom"):
        pool.run([lambda: None, boom, lambda: None])
    pool.run([lambda: out.append("after")])  # still usable
    assert out[-1] == "after"
    with pytest.raises(ValueError):
        threads.ThreadPool(0)


# --------------------------------------------------------------------- the backend
def test_backend_protocol_and_registration():
    from hologram.runtime.backend import Backend
    b = CpuLlvmBackend(cache_dir=False)
    assert isinstance(b, Backend) and b.name == "cpu_llvm" and b.priority == 100 and b.available()
    a = b.allocate((2, 3), np.dtype(np.float32))
    assert a.shape == (2, 3) and not a.any()
    with pytest.raises(ArgumentError):
        b.prepare("not a program")


def test_host_key_names_the_toolchain_and_cpu():
    key = jit.host().key
    assert "llvmlite" in key and "LLVM" in key and jit.host().cpu in key


def test_convert_value_follows_cvt():
    cv = rt.convert_value
    assert cv(300, np.dtype(np.uint8)) == 44 and cv(-1, np.dtype(np.uint16)) == 65535
    assert cv(float("nan"), np.dtype(np.int32)) == 0 and cv(1e30, np.dtype(np.int8)) == 127
    assert cv(-2.7, np.dtype(np.int64)) == -2 and cv(float("-inf"), np.dtype(np.int16)) == -32768
    assert cv(2, np.dtype(np.bool_)) and cv(True, np.dtype(np.float32)) == 1.0
    assert cv(2**63 + 1, np.dtype(np.float32)) == np.float32(2.0**63)
    assert cv(np.float64(0.1), np.dtype(np.float16)) == np.float16(0.1)


# ------------------------------------------------- end to end: real codegen, public API
AXPY = """
[kernel]
name = "axpy"
version = "1.0.0"
inputs = { a = "f32", x = "f32[n]" }
outputs = { y = "f32[n]" }
body = "y = a * x + 1"
"""

TOTALS = """
[kernel]
name = "totals"
version = "1.0.0"
inputs = { x = "i64[n]", f = "f64[n]" }
outputs = { s = "i64", m = "i64", t = "f64" }
body = '''
s = sum(x)
m = max(x)
t = sum(f)
'''
"""


def test_public_api_runs_on_cpu_llvm():
    import hologram as hg
    k = hg.compile(AXPY, format="toml").on("cpu_llvm")
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    np.testing.assert_array_equal(k(np.float32(2.5), x), np.float32(2.5) * x + np.float32(1))
    y = np.empty_like(x)
    k(np.float32(2.5), x, out=(y,))
    np.testing.assert_array_equal(y, np.float32(2.5) * x + np.float32(1))
    assert k.backend.name == "cpu_llvm"


def test_real_reductions_agree_across_thread_counts(tmp_path):
    import hologram as hg
    program = hg.compile(TOTALS, format="toml").program
    n = rt.INLINE_WORK * 3 + 11
    rng = np.random.default_rng(7)
    x = rng.integers(-2**40, 2**40, n, dtype=np.int64)
    f = rng.standard_normal(n)
    out = {}
    for t in (1, 2):
        b = CpuLlvmBackend(num_threads=t, cache_dir=tmp_path)
        bufs = {"x": x, "f": f, "s": np.zeros((), np.int64), "m": np.zeros((), np.int64), "t": np.zeros(())}
        b.launch(b.prepare(program), bufs, {}, {"n": n})
        out[t] = bufs
    for t in (1, 2):
        assert out[t]["s"] == x.sum() and out[t]["m"] == x.max()
    from hologram.testing import assert_close
    mag = np.array(np.abs(f).sum())
    assert_close(out[2]["t"], out[1]["t"], reduction_n=n, magnitude=mag)
    assert_close(out[1]["t"], np.array(f.sum()), reduction_n=n, magnitude=mag)


_CHILD = """
import json, sys
import numpy as np
import hologram as hg
from hologram_cpu_llvm import jit
k = hg.compile(sys.argv[1], format="toml").on("cpu_llvm")
n = int(sys.argv[2])
x = (np.arange(n, dtype=np.int64) * 2654435761) % 1000003 - 500000
f = np.sin(np.arange(n, dtype=np.float64))
s, m, t = k(x, f)
print(json.dumps({"stats": dict(jit.STATS), "s": int(s), "m": int(m), "t": float(t),
                  "threads": k.backend.num_threads}))
"""


def _child(tmp_path, env_extra, n=100_000):
    env = {**os.environ, "HOLOGRAM_CACHE_DIR": str(tmp_path / "cache"), **env_extra}
    env.pop("HOLOGRAM_BACKEND", None)
    proc = subprocess.run([sys.executable, "-c", _CHILD, TOTALS, str(n)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_fresh_process_hits_the_disk_cache_and_thread_counts_agree(tmp_path):
    cold = _child(tmp_path, {"HOLOGRAM_NUM_THREADS": "1"})
    assert cold["stats"].get("optimize") == 1 and cold["threads"] == 1
    warm = _child(tmp_path, {"HOLOGRAM_NUM_THREADS": "2"})
    assert warm["threads"] == 2
    assert warm["stats"].get("optimize", 0) == 0 and warm["stats"].get("emit", 0) == 0
    assert warm["stats"]["load"] == 1
    assert (warm["s"], warm["m"]) == (cold["s"], cold["m"])  # integers: bit for bit
    from hologram.testing import assert_close
    mag = np.array(np.abs(np.sin(np.arange(100_000, dtype=np.float64))).sum())
    assert_close(np.array(warm["t"]), np.array(cold["t"]), reduction_n=100_000, magnitude=mag)


def test_real_codegen_reports_errors_and_survives_aliasing(tmp_path):
    b = CpuLlvmBackend(num_threads=2, cache_dir=tmp_path)
    n = 40000
    with pytest.raises(ExecutionError, match=rf"instruction 2 `LDG.f32.chk %v, \[x \+ %j\]`: index {n} is out of "
                                             rf"bounds for global buffer 'x' of {n} elements"):
        b.launch(b.prepare(parse_program(CHK_ASM)), {"x": np.ones(n, np.float32), "y": np.zeros(n, np.float32)},
                 {}, {"n": n})
    x = np.arange(n + 1, dtype=np.float32)
    expected = x[::-1] * 2
    b.launch(b.prepare(parse_program(REV_ASM)), {"x": x, "z": x}, {"a": 2.0}, {"n": n + 1})
    np.testing.assert_array_equal(x, expected)
    x = np.arange(n, dtype=np.int64)
    s, m = np.zeros(1, np.int64), np.zeros(1, np.int64)
    b.launch(b.prepare(parse_program(SUM_ASM)), {"x": x, "s": s, "m": m}, {}, {"n": n})
    assert (s[0], m[0]) == (x.sum(), n - 1)


def test_o3_pipeline_vectorizes_for_the_host():
    import hologram as hg
    from hologram_cpu_llvm.codegen import compile_program
    optimized: list[str] = []
    obj = jit.compile_object(compile_program(hg.compile(AXPY, format="toml").program).module_ir, optimized)
    assert obj and "x float>" in optimized[0]  # a vector loop: <4 x float>, <8 x float>, ...


def test_text_forms_show_each_step_of_the_native_compile(tmp_path):
    import hologram as hg
    from hologram.core.errors import CompileError
    b = CpuLlvmBackend(cache_dir=tmp_path)
    program = hg.compile(AXPY, format="toml").program
    llvm_ir = b.emit(program, "llvm")
    assert "define void @\"hg_axpy_0_" in llvm_ir and "x float>" not in llvm_ir  # as generated: scalar
    assert "x float>" in b.emit(program, "llvm-opt")  # the O3 pipeline vectorized it
    native = b.emit(program, "native")
    assert "hg_axpy_0_" in native and ("ret" in native or "blr" in native)
    assert not list(tmp_path.iterdir())  # emitting prepares and caches nothing
    with pytest.raises(ArgumentError, match="no text form 'ptx'; expected one of llvm, llvm-opt, native"):
        b.emit(program, "ptx")

    def broken(program):
        raise TypeError("cannot store i64")
    with pytest.raises(CompileError, match="code generator failed"):
        CpuLlvmBackend(cache_dir=False, codegen=broken, codegen_version="x").emit(program, "llvm")


def test_loaded_objects_are_independent():
    # two loads of one object (two programs exporting the same symbol) are two engines
    # with their own copy of the code; dropping one leaves the other callable
    import gc
    obj = jit.compile_object(REV_IR)
    first, second = jit.load_object(obj, ["rev_s"]), jit.load_object(obj, ["rev_s"])
    assert first.addresses["rev_s"] != second.addresses["rev_s"]
    fn = rt.STAGE_FN(second.addresses["rev_s"])
    del first
    gc.collect()
    x = np.arange(3, dtype=np.float32)
    z = np.zeros_like(x)
    bufs = np.array([x.ctypes.data, z.ctypes.data], np.uint64).tobytes()
    fn(0, 1, bufs, np.array([3], np.int64).tobytes(), np.float32(2).tobytes() + bytes(4), None, rt.ErrSlot())
    np.testing.assert_array_equal(z, x[::-1] * 2)
    with pytest.raises(RuntimeError, match="nope"):
        jit.load_object(obj, ["rev_s", "nope"])


def test_unresolvable_symbols_are_a_compile_error_not_an_abort(tmp_path):
    from hologram.core.errors import CompileError
    ir_text = REV_IR + """
define i128 @needs_compiler_rt(i128 %a, i128 %b) {
  %c = sdiv i128 %a, %b
  ret i128 %c
}
"""
    b, _ = backend(tmp_path, ir_text, Entry("rev_s", 0))
    with pytest.raises(CompileError, match="__divti3"):
        b.prepare(parse_program(REV_ASM))
    broken, _ = backend(tmp_path, "define void @oops(", Entry("oops", 0))
    with pytest.raises(CompileError, match="LLVM rejected"):
        broken.prepare(parse_program(REV_ASM))
    assert jit.undefined_symbols(b"not an object") is None
    with pytest.raises(RuntimeError, match="malformed"):
        jit.undefined_symbols(b"\x7fELF\x02\x01" + bytes(10))


def test_a_crashing_code_generator_is_a_compile_error(tmp_path):
    from hologram.core.errors import CompileError

    def broken(program):
        raise TypeError("cannot store i64")
    b = CpuLlvmBackend(cache_dir=tmp_path, codegen=broken, codegen_version="x")
    with pytest.raises(CompileError, match="code generator failed on program 'rev'.*TypeError: cannot store i64"):
        b.prepare(parse_program(REV_ASM))


@pytest.mark.parametrize("nthreads", [2, 3, 7])
def test_native_pool_runs_every_chunk_once(rev, parallel_runs, nthreads, tmp_path):
    """Every lane written (a reversed copy into NaNs), and every lane counted exactly once
    (an integer count: a chunk run twice, by a worker and by a caller stealing it, would
    add its lanes twice to its partial). With 7 threads on this 2-core machine most
    chunks are stolen."""
    program, b = rev
    b.num_threads = nthreads
    exe = b.prepare(program)
    counting = CpuLlvmBackend(num_threads=nthreads, cache_dir=tmp_path / "sum")
    summing = counting.prepare(parse_program(SUM_ASM))
    for n in (rt.INLINE_WORK * 3 + 17, rt.INLINE_WORK + 1):
        x = np.random.default_rng(n).random(n, dtype=np.float32)
        z = np.full_like(x, np.nan)
        b.launch(exe, {"x": x, "z": z}, {"a": np.float32(3)}, {"n": n})
        np.testing.assert_array_equal(z, x[::-1] * np.float32(3))
        s, m = np.zeros(1, np.int64), np.zeros(1, np.int64)
        counting.launch(summing, {"x": np.ones(n, np.int64), "s": s, "m": m}, {}, {"n": n})
        assert s[0] == n
    blocks = -(-(rt.INLINE_WORK + 1) // program.stages[0].block[0])
    assert parallel_runs == [nthreads, nthreads, min(nthreads, blocks), min(nthreads, blocks)]


def test_native_pool_wakes_workers_that_went_to_sleep(rev):
    """Between launches further apart than the workers spin, they sleep on their
    condition variable (word 2 of the control block says so); the next launch must wake
    them, every time (word 6 counts wakeups: the caller may have run the chunk itself
    by then, so the result alone would not tell)."""
    import ctypes
    import time
    program, b = rev
    b.num_threads = 2
    exe = b.prepare(program)
    n = rt.INLINE_WORK * 2
    x = np.arange(n, dtype=np.float32)
    b.launch(exe, {"x": x, "z": np.zeros_like(x)}, {"a": np.float32(2)}, {"n": n})  # the workers exist
    pool = threads.native(2)

    def word(k: int) -> int:
        return ctypes.c_int64.from_address(pool._blocks + 8 * k).value

    def eventually(test) -> bool:
        deadline = time.monotonic() + 5
        while not test() and time.monotonic() < deadline:
            time.sleep(0.0005)
        return test()

    for _ in range(3):
        assert eventually(lambda: word(2) == 1)  # asleep once its spin ran out
        wakes = word(6)
        z = np.zeros_like(x)
        b.launch(exe, {"x": x, "z": z}, {"a": np.float32(2)}, {"n": n})
        np.testing.assert_array_equal(z, x[::-1] * 2)
        assert eventually(lambda: word(6) == wakes + 1)  # woken by the launch: no wakeup is lost


def test_without_the_native_pool_python_threads_run_the_chunks(rev, monkeypatch):
    from hologram_cpu_llvm import native_pool
    program, b = rev
    b.num_threads = 2
    monkeypatch.setattr(native_pool, "available", lambda: False)
    used = []
    real = threads.ThreadPool.run
    monkeypatch.setattr(threads.ThreadPool, "run", lambda self, tasks: used.append(len(tasks)) or real(self, tasks))
    n = rt.INLINE_WORK * 2
    x = np.arange(n, dtype=np.float32)
    z = np.zeros_like(x)
    b.launch(b.prepare(program), {"x": x, "z": z}, {"a": np.float32(2)}, {"n": n})
    np.testing.assert_array_equal(z, x[::-1] * 2)
    assert used == [2]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_parallel_launches_work_after_fork(rev):
    program, b = rev
    b.num_threads = 2
    exe = b.prepare(program)
    n = rt.INLINE_WORK * 2
    x = np.arange(n, dtype=np.float32)
    z = np.zeros_like(x)
    b.launch(exe, {"x": x, "z": z}, {"a": np.float32(2)}, {"n": n})  # the parent's workers exist
    pid = os.fork()
    if pid == 0:  # the child: the workers are gone and must be started again
        ok = False
        try:
            z = np.zeros_like(x)
            b.launch(exe, {"x": x, "z": z}, {"a": np.float32(5)}, {"n": n})
            ok = bool(np.array_equal(z, x[::-1] * 5))
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_concurrent_launches_from_python_threads(rev):
    import threading as th
    program, b = rev
    exe = b.prepare(program)
    n = rt.INLINE_WORK * 2
    failures = []

    def work(seed):
        x = np.random.default_rng(seed).random(n, dtype=np.float32)
        for _ in range(5):
            z = np.zeros_like(x)
            b.launch(exe, {"x": x, "z": z}, {"a": np.float32(seed)}, {"n": n})
            if not np.array_equal(z, x[::-1] * np.float32(seed)):
                failures.append(seed)
    workers = [th.Thread(target=work, args=(s,)) for s in range(1, 5)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert failures == []


def test_geometry_is_memoized_and_refuses_impossible_domains(tmp_path):
    program = parse_program("""
.program cube
.symbols n
.param in x: f32[n]
.stage s domain [n, n, n] block [4, 4, 4]
EXIT
""")
    b, _ = backend(tmp_path, f"define void @cube_s{SIG} {{\n  ret void\n}}\n", Entry("cube_s", 0))
    exe = b.prepare(program)
    g = exe.geometry((5,))
    assert exe.geometry((5,)) is g and g.grids == ((8, 125),) and g.sizes == (5,) and g.nbytes == (20,)
    with pytest.raises(ExecutionError, match="more than 2\\*\\*63"):
        exe.geometry((2**22,))
    with pytest.raises(ArgumentError, match="negative dimension"):
        exe.geometry((-1,))
    b.launch(exe, {"x": np.zeros(5, np.float32)}, {}, {"n": 5})


def test_deep_loop_nests_are_optimized_at_o2_and_stay_right(monkeypatch, tmp_path):
    """A full sum over a rank-10 array runs its stage through 7 nested in-lane LOOPs,
    where LLVM's O3 time grows steeply (rank 16: 9.4 s against 1.4 s at O2); gemm's
    3 LOOPs keep O3."""
    import hologram as hg
    from hologram.testing import assert_close
    from hologram_cpu_llvm.backend import _opt_level

    dims = ", ".join(f"d{i}" for i in range(10))
    k = hg.compile(f'[kernel]\nname = "r10"\nversion = "1.0.0"\ninputs = {{ x = "f64[{dims}]" }}\n'
                   'outputs = { r = "f64" }\nbody = "r = sqrt(sum(x * x))"\n', format="toml")
    gemm = hg.compile_file(os.path.join(os.path.dirname(__file__), "..", "kernels", "gemm.toml"))
    assert _opt_level(gemm.program) == jit.OPT_LEVEL
    levels: list[int] = []
    real = jit.optimize
    monkeypatch.setattr(jit, "optimize", lambda m, tm, level=jit.OPT_LEVEL: (levels.append(level), real(m, tm, level)))
    CpuLlvmBackend(cache_dir=tmp_path / "cache").prepare(k.program)
    assert levels == [jit.DEEP_NEST_OPT_LEVEL] and jit.DEEP_NEST_OPT_LEVEL < jit.OPT_LEVEL
    x = np.random.default_rng(0).random((2, 3, 1, 2, 2, 1, 3, 2, 1, 2))
    assert_close(k.on("cpu_llvm")(x), np.sqrt(np.sum(x * x)))


def test_very_deep_loop_nests_skip_the_pipeline_and_stay_right(monkeypatch, tmp_path):
    """Elementwise over rank 20 (17 in-lane LOOPs) kept LLVM busy past 30 s at O2 and O1
    alike (document fuzzer, seed 29); past jit.VERY_DEEP_NEST_LOOPS it is compiled at O0."""
    import hologram as hg
    from hologram.testing import assert_close

    dims = ", ".join(f"r{i}" for i in range(20))
    k = hg.compile(f'[kernel]\nname = "e20"\nversion = "1.0.0"\ninputs = {{ x = "f64[{dims}]", y = "f64[{dims}]" }}\n'
                   f'outputs = {{ a = "f64[{dims}]" }}\nbody = "a = x * 2 + y"\n', format="toml")
    levels: list[int] = []
    real = jit.optimize
    monkeypatch.setattr(jit, "optimize", lambda m, tm, level=jit.OPT_LEVEL: (levels.append(level), real(m, tm, level)))
    CpuLlvmBackend(cache_dir=tmp_path / "cache").prepare(k.program)
    assert levels == [jit.VERY_DEEP_NEST_OPT_LEVEL] == [0]
    x = np.random.default_rng(1).random((2, 3) + (1,) * 16 + (2, 2))
    assert_close(k.on("cpu_llvm")(x, x + 1), x * 2 + (x + 1))
    # full reductions through an unoptimized nest of 11 LOOPs
    dims = ", ".join(f"r{i}" for i in range(14))
    r = hg.compile(f'[kernel]\nname = "r14"\nversion = "1.0.0"\ninputs = {{ x = "f32[{dims}]" }}\n'
                   'outputs = { s = "f32", m = "f32" }\nbody = "s = sum(x)\\nm = max(x)"\n',
                   format="toml")
    x = np.random.default_rng(2).random((3, 2, 1, 2, 1, 3, 1, 1, 2, 1, 2, 1, 3, 2)).astype(np.float32)
    got = r.on("cpu_llvm")(x)
    assert_close(got.s, np.sum(x, dtype=np.float64).astype(np.float32), reduction_n=x.size)
    assert got.m == x.max()
