"""Atlas ISA stages as WGSL compute shaders (docs/gpu.md, "wgpu").

A stage is one compute dispatch; a block is a workgroup (`@workgroup_size` is the stage's
block); a lane is an invocation. Each workgroup loops over the blocks it owns (a grid
axis may have more blocks than a dispatch may name), and a lane outside the domain (a
partial block) takes part in the block's barriers but runs nothing. Registers are
`var<private>`s, reset at the start of every block (every register is zero when a lane
starts); 64-bit integers are `vec2<u32>` (wgsl_lib). Straight-line code is emitted as
it is; any other body is a `loop` over a `switch` on the basic block to run next (`pc`),
the general form of a control-flow graph. A `BarSync` ends a basic block: the lane stops
there, and the workgroup passes a barrier in uniform control flow (`workgroupUniformLoad`
of "is any lane still running") before every lane resumes, so a barrier inside a loop
works too. Shared arrays are `var<workgroup>` arrays, zeroed by the block's lanes (the
software Vulkan driver does not zero workgroup memory) before a barrier.

A failed bounds check writes an error record (code, instruction, index, lane) into the
`err` buffer, first failure wins, and ends the lane; every later lane and stage sees the
flag and runs nothing; the backend reads the record after the launch and raises the
interpreter's ExecutionError (backend.py).
"""

from __future__ import annotations

import math
import re

import attrs

from hologram.backend import (OPCODES, DType, Imm, Instr, Label, Program, Reg, ScalarParam, Special, Stage, Sym, atlas,
                              gathered_sums)
from hologram.errors import UnsupportedProgram

from .wgsl_exprs import (ATLAS_BINDING, ATLAS_OPS, NARROW, PACKED, PARTIALS_BINDING, STORAGE_TYPES, WGSL_TYPES, WIDE,
                         atlas_table, binary, compare, convert, imm_literal, small, unary, zero)
from .wgsl_lib import helpers_for
from .wgsl_math import math_call

__all__ = ["StageShader", "ShaderSet", "generate", "layout", "SUM_GROUPS", "ERR_OOB_GLOBAL",
           "ERR_OOB_SHARED", "ERR_CLASS", "ERR_OOB_POOL",
           "ERR_POOL_FULL", "ERR_POOL_FREE", "ERR_POOL_DEPTH", "ERR_LOOP_BUDGET", "NOTHING_ALLOCATED", "MAX_LIVE_ALLOCATIONS", "ERR_WORDS"]


ERR_OOB_GLOBAL = 1
ERR_OOB_SHARED = 2
ERR_CLASS = 3  # ResAccum's class register outside 0..95
REDUCTIONS = {"ReduceAdd": "ADD", "ReduceMin": "MIN", "ReduceMax": "MAX", "ReduceMul": "MUL", "ResAccum": "ADD"}
ERR_OOB_POOL = 4  # aux: the pool's top
ERR_POOL_FULL = 5  # index: the pool's top
ERR_POOL_FREE = 6  # index: the handle; aux: the most recent allocation's base, or NOTHING_ALLOCATED
ERR_POOL_DEPTH = 7  # more live allocations than the allocation stack holds
ERR_LOOP_BUDGET = 8  # index: the invocation's loop iterations (the adapter's budget: ShaderSet.budget_word)
NOTHING_ALLOCATED = 0xFFFFFFFF
MAX_LIVE_ALLOCATIONS = 64
ERR_WORDS = 10  # [failures, code, stage, instruction, index lo, index hi, gid x, gid y, gid z, aux]

OPCODE_SOURCES = {name: spec.sources for name, spec in OPCODES.items()}  # each source's type kind
TERMINATORS = ("BRA", "LOOP", "EXIT", "RET", "CALL", "BarSync")  # each ends a basic block
BRANCHING = ("BRA", "LOOP", "RET", "CALL", "BarSync")  # a body without these is straight-line code
MAX_CALL_DEPTH = 64  # the verifier's nesting bound (docs/isa.md, "Control flow")
NEGATIVE_ZERO = "bitcast<f32>(0x80000000u)"  # a sum's identity (-0.0 + -0.0 is -0.0)
# Workgroups a stage with full f32 sums (hologram.backend.gathered_sums) is dispatched as, at most (each loops over its
# share of the blocks): its partials, one per workgroup, fold in two passes of 256. Few
# enough that the per-workgroup tree is rare on a CPU driver, enough to fill a GPU.
SUM_GROUPS = 2048


@attrs.frozen
class StageShader:
    """One stage's shader: its WGSL text and the global buffers it binds, in binding
    order (binding 0 is the error record, 1 the launch info, then these; ATLAS_BINDING
    names the Atlas tables, PARTIALS_BINDING the per-workgroup partials of its full f32
    sums)."""

    code: str
    buffers: tuple[str, ...]


@attrs.frozen
class ShaderSet:
    """A program's shaders and the layout of the launch-info words they read: per stage
    6 words (domain extents, blocks per axis), then each global buffer's size, then each
    symbol and scalar as two words (low, high), then the loop budget: the loop iterations
    one invocation may run (docs/gpu.md, "Traps": llvmpipe's limit)."""

    stage_count: int
    buffer_names: tuple[str, ...]
    symbol_names: tuple[str, ...]
    scalar_names: tuple[str, ...]
    stages: tuple[StageShader, ...] = ()

    @property
    def size_base(self) -> int:
        return 6 * self.stage_count

    @property
    def value_base(self) -> int:
        return self.size_base + len(self.buffer_names)

    @property
    def budget_word(self) -> int:
        return self.value_base + 2 * (len(self.symbol_names) + len(self.scalar_names))


def generate(program: Program) -> ShaderSet:
    """The WGSL of every stage of a verified program the capabilities cover. A register
    or buffer of a type WGSL cannot hold that no declared instruction reads (so the
    capability check passed it) is refused here, the same way every time."""
    shape = layout(program)
    shaders = tuple(_StageWriter(program, shape, k, stage).shader() for k, stage in enumerate(program.stages))
    return attrs.evolve(shape, stages=shaders)


def layout(program: Program) -> ShaderSet:
    """The launch-info layout of `program`'s shaders, without the shaders: a function of
    its parameters alone (what shipped shaders are held to, native.py)."""
    buffers = tuple(b.name for b in (*program.params, *program.temps) if not isinstance(b, ScalarParam))
    scalars = tuple(s.name for s in program.params if isinstance(s, ScalarParam))
    return ShaderSet(len(program.stages), buffers, tuple(program.symbols), scalars)


def _ident(name: str) -> str:
    return re.sub(r"\W", "_", name)


class _StageWriter:
    def __init__(self, program: Program, layout: ShaderSet, index: int, stage: Stage) -> None:
        self.program, self.layout, self.index, self.stage = program, layout, index, stage
        self.types = stage.reg_types()
        for name, dtype in self.types.items():
            if dtype not in WGSL_TYPES:
                raise UnsupportedProgram(f"backend 'wgpu' cannot run program {program.name!r}: stage {stage.name!r}: "
                                         f"register %{name} is {dtype}, which WGSL has no type for")
        for m in (*stage.shared, *stage.pools):
            if m.dtype not in WGSL_TYPES:
                raise UnsupportedProgram(f"backend 'wgpu' cannot run program {program.name!r}: stage {stage.name!r}: "
                                         f"array {m.name!r} is {m.dtype}, which WGSL has no type for")
        for init in stage.inits:  # written between dispatches by the queue, which writes whole words
            if PACKED.get({b.name: b.dtype for b in (*program.params, *program.temps)}[init.buffer]):
                raise UnsupportedProgram(f"backend 'wgpu' cannot run program {program.name!r}: stage {stage.name!r}: "
                                         f".init of {init.buffer!r}, a buffer of elements smaller than a word")
        self.regs = {name: f"r{k}_{_ident(name)}" for k, name in enumerate(self.types)}
        self.shared = {m.name: m for m in stage.shared}
        self.pools = {m.name: m for m in stage.pools}
        self.used_buffers: list[str] = []
        self.scalar_types = {s.name: s.dtype for s in program.params if isinstance(s, ScalarParam)}
        # A buffer a stage reduces into is an array of atomics there (the verifier allows one
        # combine per buffer and stage); its loads and stores in that stage are atomic too.
        self.reduced = {i.addr.buffer: REDUCTIONS[i.op] for i in stage.body
                        if isinstance(i, Instr) and i.op in REDUCTIONS}
        # full f32 sums, added as trees (docs/gpu.md, "Full float sums"): (buffer, offset) -> j,
        # the lane's registers gs<j>, gc<j> and the workgroup's array gt<j>
        self.sums = {(b, off): j for j, (b, off, _) in enumerate(gathered_sums(program, stage))}
        self.buffer_types = {b.name: b.dtype for b in (*program.params, *program.temps)}

    # ---------------------------------------------------------------------- operands
    def operand(self, op: object, dtype: DType) -> str:
        if isinstance(op, Reg):
            return self.regs[op.name]
        if isinstance(op, Imm):
            return imm_literal(op.value, dtype)
        if isinstance(op, Special):
            kind, axis = op.name.split(".")
            return f"vec2<u32>(sp_{kind}.{axis}, 0u)"
        assert isinstance(op, Sym)
        base = self.layout.value_base
        if op.name in self.layout.symbol_names:
            k = base + 2 * self.layout.symbol_names.index(op.name)
            return f"vec2<u32>(info[{k}u], info[{k + 1}u])"
        k = base + 2 * len(self.layout.symbol_names) + 2 * self.layout.scalar_names.index(op.name)
        st = self.scalar_types[op.name]
        st = DType.F32 if st is DType.F16 else NARROW.get(st, (st,))[0]  # sent as the register holds it
        if st in WIDE:
            return f"vec2<u32>(info[{k}u], info[{k + 1}u])"
        return {DType.BOOL: f"(info[{k}u] != 0u)", DType.U32: f"info[{k}u]",
                DType.I32: f"bitcast<i32>(info[{k}u])", DType.F32: f"bitcast<f32>(info[{k}u])"}[st]

    def source_type(self, ins: Instr, k: int) -> DType:
        kind = OPCODE_SOURCES.get(ins.op, "")[k: k + 1] or "t"
        return {"b": DType.BOOL, "c": DType.I64, "i": DType.I64, "S": ins.dtype2}.get(kind, ins.dtype)

    def src(self, ins: Instr, k: int) -> str:
        return self.operand(ins.srcs[k], self.source_type(ins, k))

    # ------------------------------------------------------------------------ memory
    def address(self, ins: Instr, k: int, code: int) -> list[str]:
        """Statements computing `addr` (a u32 element index) for `ins`, failing the lane
        when the index is outside its buffer or shared array. Only a `.chk` access is
        checked there: the verifier proved an unmarked one in bounds (docs/isa.md,
        "Bounds"), and the check's branch to `fail` costs lavapipe 6-7x on a streaming
        kernel (axpy: 187 -> 28 ms at 2e6 elements). Pool accesses are always checked."""
        a = ins.addr
        aux = "0u"
        checked = ins.checked
        if a.buffer in self.pools:  # checked against the pool's top, on every access (docs/isa.md, "Pools")
            size = aux = f"top_{_ident(a.buffer)}"
            code = ERR_OOB_POOL
            checked = True
        elif a.buffer in self.shared:
            size = f"{self.shared[a.buffer].size}u"
            code = ERR_OOB_SHARED
        else:
            if a.buffer not in self.used_buffers and not self.gathered(ins):  # a gathered sum's is not bound
                self.used_buffers.append(a.buffer)
            size = f"info[{self.layout.size_base + self.layout.buffer_names.index(a.buffer)}u]"
        offset = imm_literal(a.offset, DType.I64)
        if a.index is None:
            index = offset
        else:
            itype = self.types[a.index.name]
            reg = self.regs[a.index.name]
            wide = reg if itype in WIDE else convert(reg, itype, DType.I64)
            index = f"x64_add({wide}, {offset})" if a.offset else wide
        if not checked:
            return [f"let at{k} = {index};"]
        return [f"let at{k} = {index};",
                f"if (at{k}.y != 0u || at{k}.x >= {size}) {{ fail({code}u, {k}u, at{k}, {aux}); return; }}"]

    def gathered(self, ins: Instr) -> bool:
        """Whether `ins` is a contribution to one of the stage's full f32 sums."""
        return ins.op == "ReduceAdd" and ins.addr.index is None and ins.dtype is DType.F32 \
            and (ins.addr.buffer, ins.addr.offset) in self.sums

    def atomic_type(self, buffer: str) -> str:
        dtype = self.buffer_types[buffer]
        return "atomic<i32>" if dtype is DType.I32 and self.reduced[buffer] in ("MIN", "MAX") else "atomic<u32>"

    def reduce(self, ins: Instr, k: int) -> list[str]:
        """A contribution merged into memory at once: an atomic add, min or max where WGSL
        has one (integers), else a compare-exchange loop on the bits. Every order of the
        contributions is a valid combine (docs/isa.md, "Reductions")."""
        t, combine = ins.dtype, self.reduced[ins.addr.buffer]
        mem, v = f"&{self.memory_name(ins)}[at{k}.x]", self.src(ins, 0)
        lines = []
        if ins.op == "ResAccum":
            c = self.regs[ins.addr.index.name]
            cls = c if self.types[ins.addr.index.name] in WIDE else convert(c, self.types[ins.addr.index.name],
                                                                             DType.I64)
            lines.append(f"if ({cls}.y != 0u || {cls}.x >= {atlas.NUM_CLASSES}u) {{ "
                         f"fail({ERR_CLASS}u, {k}u, {cls}, 0u); return; }}")
        lines += self.address(ins, k, ERR_OOB_GLOBAL)
        if self.gathered(ins):  # the lane's share of a gathered sum, compensated (Kahan; an inf or NaN ends that)
            j = self.sums[ins.addr.buffer, ins.addr.offset]
            lost = binary("SUB", t, binary("SUB", t, f"t{k}", f"gs{j}"), f"y{k}")
            return lines + [f"let y{k} = {binary('SUB', t, v, f'gc{j}')};",
                            f"let t{k} = {binary('ADD', t, f'gs{j}', f'y{k}')};",
                            f"gc{j} = select(0.0f, {lost}, f32_isfinite(t{k}));", f"gs{j} = t{k};"]
        if t in WIDE:  # ADD only (declared): the low words' carries go into the high word, so the sum is exact
            lo, hi = f"&{self.memory_name(ins)}[2u * at{k}.x]", f"&{self.memory_name(ins)}[2u * at{k}.x + 1u]"
            return lines + [f"let v{k} = {v};", f"let old{k} = atomicAdd({lo}, v{k}.x);",
                            f"atomicAdd({hi}, v{k}.y + select(0u, 1u, old{k} + v{k}.x < old{k}));"]
        if t is not DType.F32 and (combine == "ADD" or (combine in ("MIN", "MAX") and t in (DType.I32, DType.U32))):
            word = v if combine != "ADD" or t is DType.U32 else f"bitcast<u32>({v})"
            return lines + [f"atomic{combine.capitalize()}({mem}, {word});"]
        bits = "bitcast<f32>" if t is DType.F32 else "bitcast<i32>" if t is DType.I32 else ""
        new = binary(combine, t, f"{bits}(old{k})", v)
        return lines + [f"var old{k} = atomicLoad({mem});", "loop {",
                        f"  let swap{k} = atomicCompareExchangeWeak({mem}, old{k}, bitcast<u32>({new}));",
                        f"  if (swap{k}.exchanged) {{ break; }}", f"  old{k} = swap{k}.old_value;", "}"]

    def packed(self, ins: Instr, k: int) -> list[str]:
        """LDG/STG of a bool or 8/16-bit element, packed in a word of atomics."""
        t, bits = ins.dtype, PACKED[ins.dtype]
        per, mask = 32 // bits, (1 << bits) - 1
        mem, at = self.memory_name(ins), f"at{k}.x"
        word = f"&{mem}[{at} >> {per.bit_length() - 1}u]"
        lines = [*self.address(ins, k, ERR_OOB_GLOBAL), f"let sh{k} = ({at} & {per - 1}u) * {bits}u;"]
        if ins.op == "LDG":
            raw = f"((atomicLoad({word}) >> sh{k}) & 0x{mask:x}u)"
            value = (f"({raw} != 0u)" if t is DType.BOOL else f"f16_decode({raw})" if t is DType.F16
                     else raw if NARROW[t][0] is DType.U32
                     else f"((bitcast<i32>({raw}) << {32 - bits}u) >> {32 - bits}u)")
            return lines + [f"{self.regs[ins.dst.name]} = {value};"]
        v = self.src(ins, 0)
        bits_of = (f"select(0u, 1u, {v})" if t is DType.BOOL else f"f16_encode({v})" if t is DType.F16
                   else f"(bitcast<u32>({v}) & 0x{mask:x}u)")
        return lines + [f"atomicAnd({word}, ~(0x{mask:x}u << sh{k}));", f"atomicOr({word}, {bits_of} << sh{k});"]

    def atlas(self, ins: Instr) -> list[str]:
        """The Atlas instructions, on the tables of `hologram.backend.atlas` (ATLAS_TABLES)."""
        op, t = ins.op, ins.dtype
        if op == "PhaseGet":
            return [f"{self.regs[ins.dst.name]} = vec2<u32>(phase, 0u);"]
        if op == "PhaseAdv":  # (phase + v) mod 768 for any i64 v: floor remainder, 0..767
            return [f"phase = (phase + i64_rem({self.src(ins, 0)}, vec2<u32>({atlas.PHASE_MODULUS}u, 0u)).x) "
                    f"% {atlas.PHASE_MODULUS}u;"]
        srcs = [self.src(ins, j) for j in range(len(ins.srcs))]
        dst = self.regs[ins.dst.name]
        if op == "BoundMap":  # exact, then wrapped to T: the same as wrapping arithmetic in T
            c, p, b = srcs
            scaled = binary("ADD", t, binary("MUL", t, c, imm_literal(atlas.CLASS_STRIDE, t)),
                             binary("MUL", t, p, imm_literal(atlas.BYTES_PER_PAGE, t)))
            return [f"{dst} = {binary('ADD', t, scaled, b)};"]
        if op == "ClsGet":
            low = f"(({srcs[0]}).x & 0xffu)" if t in WIDE else f"(bitcast<u32>({srcs[0]}) & 0xffu)"
            return [f"{dst} = {convert(atlas_table('ATLAS_CLASS', low), DType.U32, t)};"]
        c, inside = small(srcs[0], t, atlas.NUM_CLASSES)
        row = f"min({c}, {atlas.NUM_CLASSES - 1}u)"
        if op == "UnityTest":
            return [f"{dst} = {inside} && ({' || '.join(f'{c} == {u}u' for u in sorted(atlas.UNITY))});"]
        if op == "NbrCount":
            return [f"{dst} = select({zero(t)}, {convert(atlas_table('ATLAS_DEGREE', row), DType.U32, t)}, {inside});"]
        none = imm_literal(-1, t)
        if op == "MIRROR":
            return [f"{dst} = select({none}, {convert(atlas_table('ATLAS_MIRROR', row), DType.U32, t)}, {inside});"]
        assert op == "NbrGet"
        k, k_small = small(srcs[1], t, 6)
        found = atlas_table("ATLAS_NEIGHBOR", f"{row} * 6u + min({k}, 5u)")
        return [f"{dst} = select({none}, {convert(found, DType.U32, t)}, "
                f"{inside} && {k_small} && {k} < {atlas_table('ATLAS_DEGREE', row)});"]

    def pool_op(self, ins: Instr, k: int) -> list[str]:
        """PoolAlloc and PoolFree: a per-lane stack of (pool, base) allocations."""
        if ins.op == "PoolAlloc":
            pool = self.pools[ins.target]
            top, n = f"top_{_ident(pool.name)}", ins.count
            return [f"if ({top} + {n}u > {pool.size}u) {{ fail({ERR_POOL_FULL}u, {k}u, vec2<u32>({top}, 0u), 0u); "
                    "return; }",
                    f"if (asp >= {MAX_LIVE_ALLOCATIONS}u) {{ fail({ERR_POOL_DEPTH}u, {k}u, vec2<u32>(), 0u); "
                    "return; }",
                    f"for (var i = {top}; i < {top} + {n}u; i += 1u) {{ "
                    f"pl_{_ident(pool.name)}[i] = {zero(pool.dtype)}; }}",
                    f"astack[asp] = vec2<u32>({list(self.pools).index(pool.name)}u, {top}); asp += 1u;",
                    f"{self.regs[ins.dst.name]} = vec2<u32>({top}, 0u);", f"{top} += {n}u;"]
        h = self.src(ins, 0)
        lines = [f"if (asp == 0u) {{ fail({ERR_POOL_FREE}u, {k}u, {h}, {NOTHING_ALLOCATED}u); return; }}",
                 f"if (!x64_eq({h}, vec2<u32>(astack[asp - 1u].y, 0u))) {{ fail({ERR_POOL_FREE}u, {k}u, {h}, "
                 "astack[asp - 1u].y); return; }", "asp -= 1u;"]
        for j, name in enumerate(self.pools):
            lines.append(f"if (astack[asp].x == {j}u) {{ top_{_ident(name)} = astack[asp].y; }}")
        return lines

    def memory_name(self, ins: Instr) -> str:
        if ins.addr.buffer in self.pools:
            return f"pl_{_ident(ins.addr.buffer)}"
        return f"sh_{_ident(ins.addr.buffer)}" if ins.addr.buffer in self.shared else f"b_{_ident(ins.addr.buffer)}"

    # ------------------------------------------------------------------ instructions
    def instr(self, ins: Instr, k: int) -> list[str]:
        op, t = ins.op, ins.dtype
        if op in REDUCTIONS:
            return self.reduce(ins, k)
        if op in ("LDG", "STG") and ins.addr.buffer in self.reduced:  # unspecified values, but no data race
            mem, at = self.memory_name(ins), f"at{k}.x"
            if t in WIDE:  # two words of atomics
                words = f"&{mem}[2u * {at}]", f"&{mem}[2u * {at} + 1u]"
                if op == "LDG":
                    return [*self.address(ins, k, ERR_OOB_GLOBAL), f"{self.regs[ins.dst.name]} = "
                            f"vec2<u32>(atomicLoad({words[0]}), atomicLoad({words[1]}));"]
                return [*self.address(ins, k, ERR_OOB_GLOBAL), f"let v{k} = {self.src(ins, 0)};",
                        f"atomicStore({words[0]}, v{k}.x); atomicStore({words[1]}, v{k}.y);"]
            atomic = self.atomic_type(ins.addr.buffer)
            cast = "" if atomic == f"atomic<{WGSL_TYPES[t]}>" else f"bitcast<{WGSL_TYPES[t]}>"
            if op == "LDG":
                return [*self.address(ins, k, ERR_OOB_GLOBAL),
                        f"{self.regs[ins.dst.name]} = {cast}(atomicLoad(&{mem}[{at}]));"]
            store = self.src(ins, 0) if not cast else f"bitcast<{atomic[7:-1]}>({self.src(ins, 0)})"
            return [*self.address(ins, k, ERR_OOB_GLOBAL), f"atomicStore(&{mem}[{at}], {store});"]
        if t in PACKED and op in ("LDG", "STG") and ins.addr.buffer not in self.shared:
            return self.packed(ins, k)
        if op in ("PoolAlloc", "PoolFree"):
            return self.pool_op(ins, k)
        if op in ("LDG", "LDS", "PoolLoad"):
            return [*self.address(ins, k, ERR_OOB_GLOBAL),
                    f"{self.regs[ins.dst.name]} = {self.memory_name(ins)}[at{k}.x];"]
        if op in ("STG", "STS", "PoolStore"):
            return [*self.address(ins, k, ERR_OOB_GLOBAL), f"{self.memory_name(ins)}[at{k}.x] = {self.src(ins, 0)};"]
        if op in ATLAS_OPS:
            return self.atlas(ins)
        if op == "MemFence":
            return []  # orders this lane's own accesses, which WGSL already keeps in program order
        srcs = [self.src(ins, j) for j in range(len(ins.srcs))]
        if op in ("MOV", "MOV_IMM"):
            value = srcs[0]
        elif op == "CVT":
            value = convert(srcs[0], ins.dtype2, t)
        elif op == "SET":
            value = compare(ins.mod, t, *srcs)
        elif op == "SEL":
            value = f"select({srcs[2]}, {srcs[1]}, {srcs[0]})"
        elif op in ("ISINF", "ISFINITE"):
            value = (f"f32_{op.lower()}({srcs[0]})" if t in (DType.F32, DType.F16)
                     else "false" if op == "ISINF" else "true")
        elif op == "MAD" or (op == "FMA" and not t.is_float):  # integers: both the wrapping a*b + c
            value = binary("ADD", t, binary("MUL", t, srcs[0], srcs[1]), srcs[2])
        elif op == "FMA":
            value = math_call(op, t is DType.F16, *srcs)
        elif len(srcs) == 2:
            value = binary(op, t, *srcs)
        else:
            value = unary(op, t, srcs[0])
        return [f"{self.regs[ins.dst.name]} = {value};"]

    # ------------------------------------------------------------------------ blocks
    def blocks(self) -> tuple[list[list[tuple[int, Instr]]], dict[str, int]]:
        """The body's basic blocks (instructions with their body index) and each label's block."""
        blocks: list[list[tuple[int, Instr]]] = [[]]
        labels: dict[str, int] = {}
        for k, item in enumerate(self.stage.body):
            if isinstance(item, Label):
                if blocks[-1]:
                    blocks.append([])
                labels[item.name] = len(blocks) - 1
                continue
            blocks[-1].append((k, item))
            if item.op in TERMINATORS:
                blocks.append([])
        return blocks, labels

    def terminator(self, ins: Instr | None, here: int, labels: dict[str, int]) -> list[str]:
        nxt = f"pc = {here + 1}u;"
        if ins is None or ins.op not in TERMINATORS:
            return [nxt]
        if ins.op == "EXIT":
            return ["alive = false; return;"]
        if ins.op == "BarSync":
            return [nxt, "return;"]  # stop here; the block's barrier loop resumes the lane at pc
        if ins.op == "BRA":
            target = f"pc = {labels[ins.target]}u;"
            if ins.pred is None:
                return [target]
            cond = self.regs[ins.pred.reg.name]
            return [f"if ({'!' if ins.pred.negate else ''}{cond}) {{ {target} }} else {{ {nxt} }}"]
        if ins.op == "LOOP":  # do-while; the decrement saturates at the minimum
            c = self.regs[ins.srcs[0].name]
            return [f"if (!x64_eq({c}, vec2<u32>(0u, 0x80000000u))) {{ {c} = x64_sub({c}, vec2<u32>(1u, 0u)); }}",
                    f"if (i64_lt(vec2<u32>(), {c})) {{ pc = {labels[ins.target]}u; }} else {{ {nxt} }}"]
        if ins.op == "CALL":  # the verifier bounds the nesting: the guard only keeps the stack in bounds
            return [f"if (rsp >= {MAX_CALL_DEPTH}u) {{ alive = false; return; }}",
                    f"rstack[rsp] = {here + 1}u; rsp += 1u; pc = {labels[ins.target]}u;"]
        assert ins.op == "RET"  # with an empty return stack, the end of the lane
        return ["if (rsp == 0u) { alive = false; return; }", "rsp -= 1u; pc = rstack[rsp];"]

    def lane_body(self) -> list[str]:
        """The lane's code: as it is when straight-line, else a switch on the basic block."""
        if not any(isinstance(item, Instr) and item.op in BRANCHING for item in self.stage.body):
            lines: list[str] = []
            for k, item in enumerate(self.stage.body):
                if isinstance(item, Instr):
                    lines += ["alive = false; return;"] if item.op == "EXIT" else self.instr(item, k)
            return lines
        blocks, labels = self.blocks()
        budget = f"info[{self.layout.budget_word}u]"
        lines = ["loop {", "  iterations += 1u;",
                 f"  if (iterations >= {budget}) {{ fail({ERR_LOOP_BUDGET}u, 0u, vec2<u32>(iterations, 0u), 0u); "
                 "return; }", "  switch pc {"]
        for here, block in enumerate(blocks):
            lines.append(f"    case {here}u: {{")
            for k, ins in block:
                if ins.op not in TERMINATORS:
                    lines += ["      " + s for s in self.instr(ins, k)]
            last = block[-1][1] if block else None
            lines += ["      " + s for s in self.terminator(last, here, labels)]
            lines.append("    }")
        lines += ["    default: { alive = false; return; }", "  }", "}"]
        return lines

    def workgroup_partials(self, lanes: int) -> list[str]:
        """The end of the shader (uniform control flow): each gathered sum's lane shares
        added as a balanced tree in workgroup memory, the workgroup's partial written to
        `partials[j * workgroups + workgroup]` (sums.py folds them after the stage)."""
        if not self.sums:
            return []
        f32 = DType.F32
        lines = [f"  gt{j}[lix] = {binary('SUB', f32, f'gs{j}', f'gc{j}')};" for j in self.sums.values()]
        lines.append("  workgroupBarrier();")
        if lanes > 1:
            lines += [f"  for (var half = {1 << (lanes - 1).bit_length() - 1}u; half > 0u; half >>= 1u) {{",
                      "    iterations += 1u;",
                      f"    if (lix < half && lix + half < {lanes}u) {{",
                      *(f"      gt{j}[lix] = {binary('ADD', f32, f'gt{j}[lix]', f'gt{j}[lix + half]')};"
                        for j in self.sums.values()),
                      "    }", "    workgroupBarrier();", "  }"]
        return lines + ["  if (lix == 0u) {", "    let groups = nwg.x * nwg.y * nwg.z;",
                        "    let group = wid.x + nwg.x * (wid.y + nwg.y * wid.z);",
                        *(f"    partials[{j}u * groups + group] = gt{j}[0];" for j in self.sums.values()), "  }"]

    # ------------------------------------------------------------------------ shader
    def shader(self) -> StageShader:
        stage, s = self.stage, 6 * self.index
        block = tuple(stage.block) + (1,) * (3 - len(stage.block))
        lanes = math.prod(block)
        has_barrier = any(isinstance(i, Instr) and i.op == "BarSync" for i in stage.body)
        lane = self.lane_body()
        decls = [f"@group(0) @binding(0) var<storage, read_write> err: array<atomic<u32>, {ERR_WORDS}>;",
                 "@group(0) @binding(1) var<storage, read> info: array<u32>;"]
        dtypes = {b.name: b.dtype for b in (*self.program.params, *self.program.temps)}
        # A buffer the stage only reads is bound read-only: the driver may then keep its
        # loads apart from the stores (lavapipe: axpy 1.3x faster).
        stored = {i.addr.buffer for i in stage.body if isinstance(i, Instr) and i.addr is not None
                  and OPCODES[i.op].form.startswith("m") and OPCODES[i.op].space == "global"}
        for j, name in enumerate(self.used_buffers):
            if dtypes[name] not in STORAGE_TYPES:
                raise UnsupportedProgram(f"backend 'wgpu' cannot run program {self.program.name!r}: stage "
                                         f"{stage.name!r}: buffer {name!r} is {dtypes[name]}, which WGSL cannot store")
            element = self.atomic_type(name) if name in self.reduced else STORAGE_TYPES[dtypes[name]]
            access = "read_write" if name in stored or element.startswith("atomic") else "read"
            decls.append(f"@group(0) @binding({j + 2}) var<storage, {access}> b_{_ident(name)}: array<{element}>;")
        for m in stage.shared:
            decls.append(f"var<workgroup> sh_{_ident(m.name)}: array<{WGSL_TYPES[m.dtype]}, {m.size}>;")
        if has_barrier:
            decls.append("var<workgroup> wg_more: array<u32, 3>;")
        for j in self.sums.values():
            decls += [f"var<private> gs{j}: f32;", f"var<private> gc{j}: f32;",
                      f"var<workgroup> gt{j}: array<f32, {lanes}>;"]
        for m in stage.pools:
            decls += [f"var<private> pl_{_ident(m.name)}: array<{WGSL_TYPES[m.dtype]}, {m.size}>;",
                      f"var<private> top_{_ident(m.name)}: u32;"]
        if stage.pools:
            decls += [f"var<private> astack: array<vec2<u32>, {MAX_LIVE_ALLOCATIONS}>;", "var<private> asp: u32;"]
        for name, dtype in self.types.items():
            decls.append(f"var<private> {self.regs[name]}: {WGSL_TYPES[dtype]};")
        decls += ["var<private> sp_tid: vec3<u32>;", "var<private> sp_ctaid: vec3<u32>;",
                  "var<private> sp_gid: vec3<u32>;", "var<private> sp_ntid: vec3<u32>;",
                  "var<private> sp_nctaid: vec3<u32>;", "var<private> sp_gdim: vec3<u32>;",
                  "var<private> alive: bool;", "var<private> pc: u32;", "var<private> rsp: u32;",
                  "var<private> phase: u32;", "var<private> opaque_zero: vec2<u32>;",
                  "var<private> iterations: u32;"]
        if any(isinstance(i, Instr) and i.op in ("CALL", "RET") for i in stage.body):
            decls.append(f"var<private> rstack: array<u32, {MAX_CALL_DEPTH}>;")
        fail = ["fn fail(code: u32, instruction: u32, index: vec2<u32>, aux: u32) {",
                "  alive = false;",
                "  if (atomicAdd(&err[0], 1u) == 0u) {",
                f"    atomicStore(&err[1], code); atomicStore(&err[2], {self.index}u);",
                "    atomicStore(&err[3], instruction);",
                "    atomicStore(&err[4], index.x); atomicStore(&err[5], index.y);",
                "    atomicStore(&err[6], sp_gid.x); atomicStore(&err[7], sp_gid.y); atomicStore(&err[8], sp_gid.z);",
                "    atomicStore(&err[9], aux);",
                "  }", "}"]
        lane_fn = ["fn run_lane() {", *("  " + line for line in lane), "}"]
        resets = [f"  {self.regs[n]} = {zero(d)};" for n, d in self.types.items()]
        resets.append("  phase = 0u;")
        resets += [f"  top_{_ident(m.name)} = 0u;" for m in stage.pools] + (["  asp = 0u;"] if stage.pools else [])
        zero_shared = [f"  for (var i = lix; i < {m.size}u; i += {lanes}u) {{ "
                       f"sh_{_ident(m.name)}[i] = {zero(m.dtype)}; }}" for m in stage.shared]
        if has_barrier:
            zero_shared.append("  if (lix == 0u) { wg_more[0] = 0u; wg_more[1] = 0u; wg_more[2] = 0u; }")
        run = (["  var round = 0u;", "  loop {",
                "    if (alive) { run_lane(); }",
                "    if (lix == 0u) { wg_more[(round + 1u) % 3u] = 0u; }",  # its last reader passed a barrier since
                "    if (alive) { wg_more[round % 3u] = 1u; }",
                "    storageBarrier();",
                "    if (workgroupUniformLoad(&wg_more[round % 3u]) == 0u) { break; }",
                "    round += 1u; iterations += 1u;", "  }"] if has_barrier else ["  if (alive) { run_lane(); }"])
        block_fn = ["fn run_block(cta: vec3<u32>, lid: vec3<u32>, lix: u32) {",
                    "  sp_tid = lid; sp_ctaid = cta; sp_gid = cta * sp_ntid + lid;",
                    "  alive = all(sp_gid < sp_gdim) && atomicLoad(&err[0]) == 0u;",
                    "  pc = 0u; rsp = 0u;", *resets, *zero_shared,
                    *(["  workgroupBarrier();"] if zero_shared else []), *run,
                    *(["  workgroupBarrier();"] if stage.shared and not has_barrier else []), "}"]
        main = [f"@compute @workgroup_size({block[0]}, {block[1]}, {block[2]})",
                "fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,",
                "        @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lix: u32) {",
                f"  sp_gdim = vec3<u32>(info[{s}u], info[{s + 1}u], info[{s + 2}u]);",
                # zero (the backend launches extents below 2**31), which no compiler can know:
                # what f32_unfolded hides values from the float folding behind (wgsl_math)
                "  opaque_zero = sp_gdim.xy >> vec2<u32>(31u);",
                "  iterations = 0u;",
                f"  let nct = vec3<u32>(info[{s + 3}u], info[{s + 4}u], info[{s + 5}u]);",
                "  sp_nctaid = nct;",
                f"  sp_ntid = vec3<u32>({block[0]}u, {block[1]}u, {block[2]}u);",
                *(f"  gs{j} = {NEGATIVE_ZERO}; gc{j} = 0.0f;" for j in self.sums.values()),  # the identity
                "  for (var cz = wid.z; cz < nct.z; cz += nwg.z) {",
                "    for (var cy = wid.y; cy < nct.y; cy += nwg.y) {",
                "      for (var cx = wid.x; cx < nct.x; cx += nwg.x) {",
                "        iterations += 1u;",
                "        run_block(vec3<u32>(cx, cy, cz), lid, lix);",
                "      }", "    }", "  }", *self.workgroup_partials(lanes),
                # a loop the driver cut short leaves the count at its budget or more: said, never silent
                f"  if (iterations >= info[{self.layout.budget_word}u]) {{ "
                f"fail({ERR_LOOP_BUDGET}u, 0u, vec2<u32>(iterations, 0u), 0u); }}", "}"]
        body = "\n".join([*fail, *lane_fn, *block_fn, *main])
        bound = tuple(self.used_buffers)
        if "atlas_tables[" in body:
            decls.append(f"@group(0) @binding({len(bound) + 2}) var<storage, read> atlas_tables: array<u32>;")
            bound += (ATLAS_BINDING,)
        if self.sums:
            decls.append(f"@group(0) @binding({len(bound) + 2}) var<storage, read_write> partials: array<f32>;")
            bound += (PARTIALS_BINDING,)
        code = "\n".join([f"// program {self.program.name!r}, stage {stage.name!r}", *decls, helpers_for(body), body])
        return StageShader(code + "\n", bound)

