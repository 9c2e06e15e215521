"""What the cpu_llvm runtime's tests run: hand-written stage modules and small kernel documents.

Most of those tests drive the runtime with hand-written LLVM IR modules obeying the stage
ABI, returned by a code generator substituted for the real one (`fake_codegen`), so a
runtime failure there is never a code generator bug. Each `HandWritten` pairs a program
with the module a code generator could emit for it. The kernel documents go through the
real code generator and the public API.
"""

from __future__ import annotations

from typing import Callable

import attrs

from hologram.isa.asm import parse_program
from hologram.isa.program import Program
from hologram_cpu_llvm import abi


@attrs.frozen
class Entry:
    name: str
    stage_index: int
    reduce_buffers: tuple[str, ...] = ()


@attrs.frozen
class Result:
    module_ir: str
    stages: tuple[Entry, ...]


def fake_codegen(module_ir: str, *entries: Entry) -> Callable[[Program], Result]:
    """A code generator that returns `module_ir` for any program; `.calls` lists the programs."""
    calls = []

    def codegen(program):
        calls.append(program)
        return Result(module_ir, entries)
    codegen.calls = calls
    return codegen


@attrs.frozen
class HandWritten:
    """A program in `.hasm` and the LLVM module, with its stage entries, a code generator could emit for it."""
    asm: str
    module_ir: str
    entries: tuple[Entry, ...]

    def program(self) -> Program:
        return parse_program(self.asm)


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
REV = HandWritten(
    asm="""
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
""",
    module_ir=f"""
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
""",
    entries=(Entry("rev_s", 0),),
)

# out[0] = sum(x) and m[0] = max(x), through partials (ReduceAdd.i64, ReduceMax.i64).
SUM = HandWritten(
    asm="""
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
""",
    module_ir=f"""
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
""",
    entries=(Entry("total_s", 0, ("s", "m")),),
)

# float sum through a partial, for the thread-count contract
FSUM = HandWritten(
    asm="""
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
""",
    module_ir=f"""
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
""",
    entries=(Entry("fsum_s", 0, ("s",)),),
)

# y[i] = x[i + 5] with a checked load: lanes past n - 5 report ERR_OOB_GLOBAL.
CHK = HandWritten(
    asm="""
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
""",
    module_ir=f"""
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
  store i64 {abi.ERR_OOB_GLOBAL}, ptr %err
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
""",
    entries=(Entry("chk_s", 0),),
)


# ------------------------------------------------------ documents for the real code generator
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
