"""Decoding: each stage of a Program becomes a tuple of closures, once, at prepare time.

A decoded instruction is a function `step(lane) -> int | None`: None falls through to the
next instruction, a non-negative int is the next pc, `EXIT` ends the lane and `BARRIER`
suspends it at a block barrier. Everything that can be resolved statically is resolved
here (label targets, register keys, operand conversions, the dtype-specific reference
semantics each opcode's table entry points at), so running a lane is a loop of plain calls.

The decoder also refuses programs it cannot run meaningfully (undeclared registers,
unknown labels, backward BRA, forward LOOP, bad operand forms). The verifier normally
rejects these first; the checks here keep the interpreter safe even without it.

The register file is a dict: registers by name, specials under `("%", "gid.x")` and
launch constants (shape symbols and scalar parameters) under `("$", name)`, so every
operand read is one lookup and no register name can shadow them.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import attrs
import numpy as np

from hologram.backend import (OPCODES, Addr, Affine, DType, Imm, Init, Instr, Label, MemDecl, Operand, OpSpec, Program,
                              Reg, Special, Stage, Sym, atlas, const, convert, format_instr)
from hologram.errors import ExecutionError, Site, VerifyError, out_of_bounds

from .lane import Lane


Step = Callable[["Lane"], "int | None"]
Reader = Callable[[dict], Any]

EXIT = -1
BARRIER = -2


def special_key(name: str) -> tuple[str, str]:
    return ("%", name)


def const_key(name: str) -> tuple[str, str]:
    return ("$", name)



@attrs.frozen(eq=False)
class StageCode:
    """A decoded stage. `block` is padded to three axes; `regs` are the zero values every
    lane's registers start with; `code[pc]` is body item `body_index[pc]` (messages count
    body items, labels included, as the verifier does); `writes` are the global buffers
    the stage can store to."""

    name: str
    domain: tuple[Affine, ...]
    block: tuple[int, int, int]
    regs: dict[str, np.generic]
    shared: tuple[MemDecl, ...]
    pools: tuple[MemDecl, ...]
    inits: tuple[Init, ...]
    code: tuple[Step, ...]
    body_index: tuple[int, ...]
    writes: frozenset[str]


@attrs.frozen(eq=False)
class Executable:
    """What `InterpBackend.prepare` returns: the program and its decoded stages."""

    program: Program
    key: str
    stages: tuple[StageCode, ...]


_SPACE_NAMES = {"global": "global buffer", "shared": "shared array", "pool": "the allocated part of pool"}


def oob(lane: "Lane", where: str, site: Site | None, space: str, name: str, index: int, size: int) -> ExecutionError:
    return ExecutionError.at(site, f"{where} (lane gid={lane.gid}): "
                                   f"{out_of_bounds(index, f'{_SPACE_NAMES[space]} {name!r}', size)}")


def decode_program(program: Program, key: str) -> Executable:
    with np.errstate(all="ignore"):  # immediates may overflow their type (70000.0 as f16 is inf)
        return Executable(program, key, tuple(_StageDecoder(program, s).decode() for s in program.stages))


class _StageDecoder:
    def __init__(self, program: Program, stage: Stage):
        self.program, self.stage = program, stage
        self.reg_types = stage.reg_types()
        self.consts: dict[str, DType] = {s: DType.I64 for s in program.symbols}
        self.consts.update({n: p.dtype for n, p in program.scalars().items()})
        self.spaces: dict[str, dict[str, Any]] = {
            "global": program.buffers(),
            "shared": {m.name: m for m in stage.shared},
            "pool": {m.name: m for m in stage.pools},
        }
        self.labels: dict[str, int] = {}
        self.writes: set[str] = {i.buffer for i in stage.inits}
        self.pc, self.k, self.ins = -1, -1, Instr("EXIT")  # pc counts instructions, k body items

    # ------------------------------------------------------------------ diagnostics
    @property
    def where(self) -> str:
        return f"stage '{self.stage.name}': instruction {self.k} `{format_instr(self.ins, align=False)}`"

    @property
    def site(self) -> Site | None:
        """The document position of the current instruction's check, if the program has it."""
        k = self.ins.site
        return self.program.sites[k] if k is not None and 0 <= k < len(self.program.sites) else None

    def fail(self, message: str) -> VerifyError:
        return VerifyError(f"interp: {self.where}: {message}")

    # ---------------------------------------------------------------------- stage
    def decode(self) -> StageCode:
        st = self.stage
        if not 1 <= len(st.domain) <= 3:
            raise VerifyError(f"interp: stage '{st.name}': the domain has {len(st.domain)} dimensions; expected 1 to 3")
        if len(st.block) > len(st.domain) or any(not isinstance(b, int) or b < 1 for b in st.block):
            raise VerifyError(f"interp: stage '{st.name}': block {st.block} must be positive sizes, one per "
                              f"domain axis at most")
        for init in st.inits:
            if init.buffer not in self.spaces["global"]:
                raise VerifyError(f"interp: stage '{st.name}': init of unknown buffer '{init.buffer}'")
            if not isinstance(init.value, (bool, int, float)) or not isinstance(init.offset, int):
                raise VerifyError(f"interp: stage '{st.name}': init {init.buffer}[{init.offset!r}] = {init.value!r} "
                                  f"needs an integer offset and a number")
        instrs: list[tuple[int, Instr]] = []  # (index in the body, labels included; instruction)
        for k, item in enumerate(st.body):
            if isinstance(item, Label):
                if item.name in self.labels:
                    raise VerifyError(f"interp: stage '{st.name}': label '{item.name}' defined twice")
                self.labels[item.name] = len(instrs)
            else:
                instrs.append((k, item))
        code = [self.instr(pc, k, ins) for pc, (k, ins) in enumerate(instrs)]
        code.append(lambda lane: EXIT)  # the end of the body ends the lane
        block = tuple(st.block) + (1,) * (3 - len(st.block))
        regs = {r.name: r.dtype.np.type(0) for r in st.regs}
        return StageCode(st.name, tuple(st.domain), block, regs, tuple(st.shared), tuple(st.pools),
                         tuple(st.inits), tuple(code), tuple(k for k, _ in instrs), frozenset(self.writes))

    def instr(self, pc: int, k: int, ins: Instr) -> Step:
        self.pc, self.k, self.ins = pc, k, ins
        spec = OPCODES.get(ins.op)
        if spec is None:
            raise self.fail(f"unknown opcode '{ins.op}'")
        if spec.types == "none":
            t = None
        elif not isinstance(ins.dtype, DType):
            raise self.fail(f"{ins.op} needs a type suffix")
        elif not spec.admits(ins.dtype):
            raise self.fail(f"{ins.op} does not take type {ins.dtype} (expects a {spec.types} type)")
        else:
            t = ins.dtype
        if len(ins.srcs) != spec.form.count("s"):
            raise self.fail(f"{ins.op} takes {spec.form.count('s')} source operand(s), got {len(ins.srcs)}")
        if ("d" in spec.form) != (ins.dst is not None):
            raise self.fail(f"{ins.op} {'needs' if 'd' in spec.form else 'takes no'} destination register")
        if ("m" in spec.form) != (ins.addr is not None):
            raise self.fail(f"{ins.op} {'needs' if 'm' in spec.form else 'takes no'} memory operand")
        return _handler(spec)(self, ins, t)

    # ------------------------------------------------------------------- operands
    def key_type(self, operand: Operand) -> tuple[Any, DType]:
        if isinstance(operand, Reg):
            if operand.name not in self.reg_types:
                raise self.fail(f"register %{operand.name} is not declared in this stage")
            return operand.name, self.reg_types[operand.name]
        if isinstance(operand, Special):
            return special_key(operand.name), DType.I64
        if isinstance(operand, Sym):
            if operand.name not in self.consts:
                raise self.fail(f"${operand.name} is neither a shape symbol nor a scalar parameter")
            return const_key(operand.name), self.consts[operand.name]
        raise self.fail(f"bad operand {operand!r}")

    def read(self, operand: Operand, want: DType) -> Reader:
        """A reader of `operand` as a value of `want` (converted as CVT when its type differs)."""
        if isinstance(operand, Imm):
            value = const(self.literal(operand.value), want)
            return lambda r: value
        key, have = self.key_type(operand)
        get = operator.itemgetter(key)
        if have is want:
            return get
        return lambda r: convert(get(r), want)

    def literal(self, value: Any) -> bool | int | float:
        if not isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
            raise self.fail(f"an immediate must be a number or a boolean, got {value!r}")
        return value

    def read_int(self, operand: Operand | None, what: str) -> Callable[[dict], int]:
        """A reader of an integer operand as a Python int (indices, counts, handles)."""
        if isinstance(operand, Imm):
            if isinstance(operand.value, float):
                raise self.fail(f"{what} must be an integer, got {operand.value!r}")
            value = int(operand.value)
            return lambda r: value
        if operand is None:
            raise self.fail(f"missing {what}")
        key, have = self.key_type(operand)
        if have.is_float:
            raise self.fail(f"{what} {operand} must be an integer, not {have}")
        get = operator.itemgetter(key)
        return lambda r: int(get(r))

    def dst(self, result: DType) -> tuple[Any, Callable[[Any], Any] | None]:
        """The destination key and the conversion a result of type `result` needs."""
        if not isinstance(self.ins.dst, Reg):
            raise self.fail("the destination must be a register")
        key, have = self.key_type(self.ins.dst)
        return key, None if have is result else (lambda v: convert(v, have))

    def label(self) -> int:
        if self.ins.target not in self.labels:
            raise self.fail(f"unknown label '{self.ins.target}'")
        return self.labels[self.ins.target]

    def address(self, space: str) -> tuple[str, Any, Callable[[dict], int]]:
        """(name, declaration, index reader) of the memory operand, in `space`."""
        a = self.ins.addr
        if not isinstance(a, Addr) or not isinstance(a.offset, int):
            raise self.fail(f"malformed memory operand {a!r}")
        decl = self.spaces[space].get(a.buffer)
        if decl is None:
            raise self.fail(f"'{a.buffer}' is not a {space} {'buffer' if space == 'global' else 'array'}")
        off = a.offset
        if a.index is None:
            return a.buffer, decl, lambda r: off
        get = self.read_int(a.index, "an address index")
        return a.buffer, decl, lambda r: get(r) + off

    # ------------------------------------------------------------------ handlers
    def compute(self, ins: Instr, t: DType, fn: Callable, srcs_types: tuple[DType, ...], result: DType) -> Step:
        """The common shape: dst = fn(srcs...), with conversions resolved now."""
        readers = [self.read(s, want) for s, want in zip(ins.srcs, srcs_types)]
        key, conv = self.dst(result)
        f = fn if conv is None else (lambda *xs: conv(fn(*xs)))
        if len(readers) == 1:
            (a,) = readers

            def step1(lane):
                r = lane.regs
                r[key] = f(a(r))
            return step1
        if len(readers) == 2:
            a, b = readers

            def step2(lane):
                r = lane.regs
                r[key] = f(a(r), b(r))
            return step2
        a, b, c = readers

        def step3(lane):
            r = lane.regs
            r[key] = f(a(r), b(r), c(r))
        return step3

    def h_value(self, ins: Instr, t: DType) -> Step:
        """Every pure opcode: its table entry's reference semantics, on its operand types."""
        spec = OPCODES[ins.op]
        try:
            fn = spec.semantics(t, ins.mod)
        except ValueError as e:  # e.g. SET without a known comparison
            raise self.fail(str(e)) from None
        srcs_types = tuple(spec.source_type(k, t) for k in range(spec.arity))
        return self.compute(ins, t, fn, srcs_types, spec.result_type(t))

    def h_cvt(self, ins: Instr, t: DType) -> Step:
        src = ins.dtype2
        if src is not None and not isinstance(src, DType):
            raise self.fail(f"bad CVT source type {src!r}")
        if src is None:
            if isinstance(ins.srcs[0], Imm):
                raise self.fail("CVT of an immediate needs the source type (CVT.dst.src)")
            src = self.key_type(ins.srcs[0])[1]
        return self.compute(ins, t, OPCODES["CVT"].semantics(t), (src,), t)

    def h_load(self, ins: Instr, t: DType) -> Step:
        space = OPCODES[ins.op].space
        name, decl, index = self.address(space)
        key, to_dst = self.dst(t)
        conv = _chain(None if decl.dtype is t else (lambda v: convert(v, t)), to_dst)
        where, site, memory = self.where, self.site, _MEMORY[space]

        def load(lane):
            r = lane.regs
            mem = memory(lane, name)
            i = index(r)
            if not 0 <= i < len(mem):
                raise oob(lane, where, site, space, name, i, len(mem))
            r[key] = mem[i] if conv is None else conv(mem[i])
        return load

    def h_store(self, ins: Instr, t: DType) -> Step:
        space = OPCODES[ins.op].space
        name, decl, index = self.address(space)
        value = self.read(ins.srcs[0], t)
        if decl.dtype is not t:
            raw, bt = value, decl.dtype
            value = lambda r: convert(raw(r), bt)  # noqa: E731
        if space == "global":
            self.writes.add(name)
        where, site, memory = self.where, self.site, _MEMORY[space]

        def store(lane):
            r = lane.regs
            mem = memory(lane, name)
            i = index(r)
            if not 0 <= i < len(mem):
                raise oob(lane, where, site, space, name, i, len(mem))
            mem[i] = value(r)
        return store

    def h_reduce(self, ins: Instr, t: DType) -> Step:
        name, decl, index = self.address("global")
        value = self.read(ins.srcs[0], t)
        self.writes.add(name)
        op, where, site, cls = ins.op, self.where, self.site, None
        if op == "ResAccum":
            if ins.addr.index is None:
                raise self.fail("ResAccum needs an index register holding the Atlas class")
            cls = self.read_int(ins.addr.index, "the class register")

        def reduce(lane):
            r = lane.regs
            if cls is not None and not 0 <= cls(r) < atlas.NUM_CLASSES:
                raise ExecutionError.at(site, f"{where} (lane gid={lane.gid}): {cls(r)} is not an Atlas class (0..95)")
            i = index(r)
            size = len(lane.mem[name])
            if not 0 <= i < size:
                raise oob(lane, where, site, "global", name, i, size)
            lane.reductions.setdefault((op, name, i), []).append(value(r))
        return reduce

    def h_bra(self, ins: Instr, t: None) -> Step:
        target = self.label()
        if target <= self.pc:
            raise self.fail("BRA may only jump forward (use LOOP for a backward edge)")
        if ins.pred is None:
            return lambda lane: target
        p, negate = self.read(ins.pred.reg, DType.BOOL), ins.pred.negate
        return lambda lane: target if bool(p(lane.regs)) != negate else None

    def h_call(self, ins: Instr, t: None) -> Step:
        target, back, where = self.label(), self.pc + 1, self.where

        def call(lane):
            # Refusing to re-enter an active subroutine bounds the stack by the number of
            # labels, so an unverified program cannot recurse forever (or exponentially).
            if any(active == target for _, active in lane.stack):
                raise ExecutionError(f"{where} (lane gid={lane.gid}): recursive call to '{ins.target}' "
                                     f"(calls may not recurse)")
            lane.stack.append((back, target))
            return target
        return call

    def h_ret(self, ins: Instr, t: None) -> Step:
        # As PTX's `ret`: returning from the stage's entry code ends the lane.
        return lambda lane: lane.stack.pop()[0] if lane.stack else EXIT

    def h_loop(self, ins: Instr, t: None) -> Step:
        target = self.label()
        if target > self.pc:
            raise self.fail("LOOP must jump backward (to a label at or before it)")
        counter = ins.srcs[0]
        if not isinstance(counter, Reg):
            raise self.fail("the LOOP counter must be a register")
        key, ct = self.key_type(counter)
        if not ct.is_int:
            raise self.fail(f"the LOOP counter must be an integer register, not {ct}")
        one, lowest = ct.np.type(1), ct.np.type(ct.min)

        def loop(lane):
            # c = c - 1, saturating at the type's minimum (a counter there must not wrap
            # to the maximum); loop back while c > 0
            r = lane.regs
            c = r[key]
            if c > one:
                r[key] = c - one
                return target
            if c != lowest:
                r[key] = c - one
            return None
        return loop

    def h_exit(self, ins: Instr, t: None) -> Step:
        return lambda lane: EXIT

    def h_sync(self, ins: Instr, t: None) -> Step:
        # MemFence orders a lane's memory operations; one lane at a time, they are ordered.
        return (lambda lane: BARRIER) if ins.op == "BarSync" else (lambda lane: None)

    def h_phase_get(self, ins: Instr, t: None) -> Step:
        key, conv = self.dst(DType.I64)
        conv = conv or (lambda v: v)

        def phase_get(lane):
            lane.regs[key] = conv(np.int64(lane.phase))
        return phase_get

    def h_phase_adv(self, ins: Instr, t: None) -> Step:
        v = self.read_int(ins.srcs[0], "the phase increment")

        def phase_adv(lane):
            lane.phase = (lane.phase + v(lane.regs)) % atlas.PHASE_MODULUS
        return phase_adv

    def h_pool_alloc(self, ins: Instr, t: None) -> Step:
        pool, n = ins.target, ins.count
        if pool not in self.spaces["pool"]:
            raise self.fail(f"'{pool}' is not a pool of this stage")
        if not isinstance(n, int) or n < 0:
            raise self.fail(f"PoolAlloc needs a non-negative element count, got {n!r}")
        key, conv = self.dst(DType.I64)
        conv = conv or (lambda v: v)
        where = self.where

        def pool_alloc(lane):
            p = lane.pools[pool]
            base = p.top
            if base + n > len(p.data):
                raise ExecutionError(f"{where} (lane gid={lane.gid}): pool '{pool}' of {len(p.data)} elements "
                                     f"cannot allocate {n} more ({base} in use)")
            p.data[base:base + n] = 0
            p.top = base + n
            lane.allocs.append((pool, base))
            lane.regs[key] = conv(np.int64(base))
        return pool_alloc

    def h_pool_free(self, ins: Instr, t: None) -> Step:
        handle, where = self.read_int(ins.srcs[0], "the pool handle"), self.where

        def pool_free(lane):
            h = handle(lane.regs)
            if not lane.allocs or lane.allocs[-1][1] != h:
                last = f"the most recent starts at {lane.allocs[-1][1]}" if lane.allocs else "nothing is allocated"
                raise ExecutionError(f"{where} (lane gid={lane.gid}): PoolFree of handle {h}, but {last}")
            pool, base = lane.allocs.pop()
            lane.pools[pool].top = base
        return pool_free


def _chain(f: Callable | None, g: Callable | None) -> Callable | None:
    """f, then g; None stands for the identity."""
    if f is None or g is None:
        return f or g
    return lambda v: g(f(v))


def _shared(lane, name):
    return lane.shared[name]


def _pool(lane, name):
    p = lane.pools[name]
    return p.data[:p.top]  # a view: accesses must lie below the pool's current top


_MEMORY = {"global": lambda lane, name: lane.mem[name], "shared": _shared, "pool": _pool}

_HANDLERS: dict[str, Callable[[_StageDecoder, Instr, Any], Step]] = {
    "LDG": _StageDecoder.h_load, "LDS": _StageDecoder.h_load, "PoolLoad": _StageDecoder.h_load,
    "STG": _StageDecoder.h_store, "STS": _StageDecoder.h_store, "PoolStore": _StageDecoder.h_store,
    "CVT": _StageDecoder.h_cvt,
    "BRA": _StageDecoder.h_bra, "CALL": _StageDecoder.h_call, "RET": _StageDecoder.h_ret,
    "LOOP": _StageDecoder.h_loop, "EXIT": _StageDecoder.h_exit,
    "BarSync": _StageDecoder.h_sync, "MemFence": _StageDecoder.h_sync,
    "ResAccum": _StageDecoder.h_reduce,
    "PhaseGet": _StageDecoder.h_phase_get, "PhaseAdv": _StageDecoder.h_phase_adv,
    "PoolAlloc": _StageDecoder.h_pool_alloc, "PoolFree": _StageDecoder.h_pool_free,
}


def _handler(spec: OpSpec) -> Callable[[_StageDecoder, Instr, Any], Step]:
    """How an opcode is decoded: by name where the machine defines it (memory, control,
    lane state), a reduction's contribution, else its reference semantics."""
    if spec.name in _HANDLERS:
        return _HANDLERS[spec.name]
    if spec.group == "reduce":
        return _StageDecoder.h_reduce
    if spec.pure and spec.semantics is not None:
        return _StageDecoder.h_value
    return _undefined


def _undefined(self: _StageDecoder, ins: Instr, t: Any) -> Step:
    raise self.fail(f"no semantics for {ins.op}")  # an OPCODES entry the machine cannot run
