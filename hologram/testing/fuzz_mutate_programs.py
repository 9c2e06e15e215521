"""The structure-aware program mutator: valid Atlas programs, perturbed.

Seeds are verified programs (fuzz_program_cases.py): the repository's kernel documents
compiled (`kernels/`, `tests/heldout/kernels/`, or the document fuzzer's built-in seeds
when the repository is not at hand) and programs drawn from `isa_strategies.programs()`.
A mutant applies one to three `MUTATORS` to a seed, each a small change that keeps the
program a well-formed value (so it reaches the verifier rather than the structure check)
while perturbing what the verifier must reason about:

| mutator | what it changes |
|---|---|
| `imm` | an immediate: the type's extremes, one past them, 2**64, a 5,000-digit integer, NaN, infinities, -0.0, numpy scalars, another Python kind |
| `reg`, `operand` | a register for another of the same or another type; an operand for a special, a symbol, an immediate |
| `opcode`, `dtype`, `mod`, `checked` | an opcode for one of the same form; a type suffix; a comparison or `.reassoc`; `.chk` dropped or added |
| `offset`, `address` | an address offset (small steps and +-2**31..2**63); the buffer or index register of an address |
| `shape`, `domain` | a dimension: a repeated symbol (`-n + 2*n`), a zero or negative coefficient, a scaled or shifted term, another symbol |
| `block` | block sizes: numpy integers (`np.int32(65536)`), 0, huge, more or fewer axes |
| `loop`, `nest` | a loop counter's start value (0, negative, larger); a nest of loops (5-30 deep, 50-300 with `scale="long"`) |
| `loop-extreme` | a loop counter's start at an integer extreme (-2**63, -2**63 + 1, 0, 1, near the 1024-trip strips of cpu_llvm's polls); a new loop counting from -2**63 to 2**63 - 1 that a branch leaves after three trips |
| `drop`, `duplicate`, `swap`, `move`, `insert` | instructions and labels: removed, repeated, reordered, new ones (stores, loads, branches, EXIT, RET, BarSync, CALL, LOOP, pools) |
| `label`, `pred` | branch, loop and call targets; labels renamed or duplicated; predicates |
| `decl`, `init`, `param`, `symbols`, `stage` | declarations (register types, shared and pool sizes), inits, parameter roles, dtypes and shapes, the symbol list, whole stages |
| `scratch` | a stage's block scratch to the limit or one element past it: the largest block, padding pools, shared arrays or registers across a barrier; fuzz_mutate_scratch.py |
| `binary` | bytes of the encoding (a bit, a byte, an inserted or deleted byte), with the length and checksum made consistent again (sometimes not); fuzz_program_cases.py |
| `text` | the `.hasm` text: a line deleted, repeated or swapped, a token replaced; fuzz_program_cases.py |

The oracle is fuzz_program_oracle.py's.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import attrs
import numpy as np

from hologram.core.names import fresh_name
from hologram.core.types import Affine, DType
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import (COMPARE_MODS, REASSOC, SPECIALS, Addr, BufferParam, Imm, Init, Instr, Label, Pred,
                                  Program, Reg, RegDecl, ScalarParam, Special, Stage, Sym)
from hologram.testing.fuzz_common import pick
from hologram.testing.fuzz_mutate_scratch import m_scratch

Rng = np.random.Generator
Mutation = tuple[Program, str]

INT_EXTREMES = (0, 1, -1, 7, 95, 96, 127, 128, 255, 256, 65535, 65536, 2**31 - 1, 2**31, 2**32, 2**62, 2**63 - 1,
                2**63, -2**63, -2**63 - 1, 2**64 - 1, 2**64, -2**64, 10**30)
HUGE_INT = 10**5000  # past Python's int-to-str digit limit: messages must still format
FLOAT_EXTREMES = (0.0, -0.0, math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, 0.1, 65504.0, 65520.0,
                  3.4028234663852886e38, 1e39, 2.5, -1.5)
NUMPY_VALUES = (np.int32(65536), np.int64(-1), np.uint64(2**64 - 1), np.float32(1.5), np.float16(np.inf),
                np.bool_(True), np.int8(-128), np.float64(np.nan))


def _instrs(p: Program) -> list[tuple[int, int, Instr]]:
    return [(s, k, it) for s, st in enumerate(p.stages) for k, it in enumerate(st.body) if isinstance(it, Instr)]


def _with_stage(p: Program, s: int, stage: Stage) -> Program:
    return attrs.evolve(p, stages=p.stages[:s] + (stage,) + p.stages[s + 1:])


def _with_body(p: Program, s: int, body: list | tuple) -> Program:
    return _with_stage(p, s, attrs.evolve(p.stages[s], body=tuple(body)))


def _with_item(p: Program, s: int, k: int, item: Any) -> Program:
    body = list(p.stages[s].body)
    body[k] = item
    return _with_body(p, s, body)


def _symbols(p: Program) -> list[str]:
    return list(p.symbols) or ["n"]


def _value(rng: Rng, dtype: DType | None) -> Any:
    r = rng.random()
    if r < 0.05:
        return HUGE_INT if rng.random() < 0.5 else -HUGE_INT
    if r < 0.15:
        return pick(rng, NUMPY_VALUES)
    if r < 0.25:
        return bool(rng.integers(2))
    if dtype is not None and dtype.is_int:
        edges = [int(dtype.min), int(dtype.max), int(dtype.min) - 1, int(dtype.max) + 1]
        return pick(rng, edges + list(INT_EXTREMES)) if rng.random() < 0.8 else float(pick(rng, edges))
    if dtype is not None and dtype.is_float:
        return pick(rng, FLOAT_EXTREMES) if rng.random() < 0.8 else pick(rng, INT_EXTREMES)
    return pick(rng, INT_EXTREMES + FLOAT_EXTREMES)


# ================================================================= instruction level
def m_imm(rng: Rng, p: Program) -> Mutation | None:
    sites = [(s, k, i, j) for s, k, i in _instrs(p) for j, o in enumerate(i.srcs) if isinstance(o, Imm)]
    if not sites:
        return None
    s, k, ins, j = pick(rng, sites)
    spec = OPCODES.get(ins.op)
    typed = spec.source_type(j, ins.dtype, ins.dtype2) if spec is not None and j < spec.arity else None
    value = _value(rng, typed or ins.dtype)  # of the type the operand is read as
    srcs = ins.srcs[:j] + (Imm(value),) + ins.srcs[j + 1:]
    return _with_item(p, s, k, attrs.evolve(ins, srcs=srcs)), f"imm stage {s} item {k} src {j} = {_short(value)}"


def _safe(obj: Any) -> str:
    """str(obj), also for values holding integers past Python's int-to-str digit limit."""
    try:
        return str(obj)
    except ValueError:
        return f"<{type(obj).__name__} with a huge integer>"


def _short(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**20:
        return f"{'-' if value < 0 else ''}<{len(str(abs(value))) if abs(value) < 10**4000 else 'huge'}-digit int>"
    return repr(value)


def _stage_regs(st: Stage, same_as: DType | None, rng: Rng) -> str:
    regs = [r for r in st.regs if same_as is None or r.dtype == same_as] or list(st.regs)
    if not regs or rng.random() < 0.05:
        return "undeclared"
    return pick(rng, regs).name


def m_reg(rng: Rng, p: Program) -> Mutation | None:
    sites = []
    for s, k, ins in _instrs(p):
        sites += [(s, k, ins, "src", j) for j, o in enumerate(ins.srcs) if isinstance(o, Reg)]
        if ins.dst is not None:
            sites.append((s, k, ins, "dst", 0))
        if ins.addr is not None and ins.addr.index is not None:
            sites.append((s, k, ins, "index", 0))
        if ins.pred is not None:
            sites.append((s, k, ins, "pred", 0))
    if not sites:
        return None
    s, k, ins, where, j = pick(rng, sites)
    st = p.stages[s]
    types = st.reg_types()
    old = {"src": lambda: ins.srcs[j], "dst": lambda: ins.dst, "index": lambda: ins.addr.index,
           "pred": lambda: ins.pred.reg}[where]()
    new = Reg(_stage_regs(st, types.get(old.name) if rng.random() < 0.6 else None, rng))
    if where == "src":
        ins = attrs.evolve(ins, srcs=ins.srcs[:j] + (new,) + ins.srcs[j + 1:])
    elif where == "dst":
        ins = attrs.evolve(ins, dst=new)
    elif where == "index":
        ins = attrs.evolve(ins, addr=attrs.evolve(ins.addr, index=new))
    else:
        ins = attrs.evolve(ins, pred=attrs.evolve(ins.pred, reg=new))
    return _with_item(p, s, k, ins), f"reg stage {s} item {k} {where} {old} -> {new}"


def m_operand(rng: Rng, p: Program) -> Mutation | None:
    sites = [(s, k, i, j) for s, k, i in _instrs(p) for j in range(len(i.srcs))]
    if not sites:
        return None
    s, k, ins, j = pick(rng, sites)
    names = _symbols(p) + list(p.scalars()) + ["nope"]
    choice = rng.integers(3)
    new = Special(pick(rng, SPECIALS)) if choice == 0 else Sym(pick(rng, names)) if choice == 1 \
        else Imm(_value(rng, ins.dtype))
    return _with_item(p, s, k, attrs.evolve(ins, srcs=ins.srcs[:j] + (new,) + ins.srcs[j + 1:])), \
        f"operand stage {s} item {k} src {j} -> {_safe(new)}"


def m_opcode(rng: Rng, p: Program) -> Mutation | None:
    sites = _instrs(p)
    if not sites:
        return None
    s, k, ins = pick(rng, sites)
    form = OPCODES[ins.op].form if ins.op in OPCODES else ""
    same = [o for o, spec in OPCODES.items() if spec.form == form and o != ins.op]
    op = pick(rng, same) if same and rng.random() < 0.9 else pick(rng, OPCODES)
    return _with_item(p, s, k, attrs.evolve(ins, op=op)), f"opcode stage {s} item {k} {ins.op} -> {op}"


def m_dtype(rng: Rng, p: Program) -> Mutation | None:
    sites = [(s, k, i) for s, k, i in _instrs(p) if i.dtype is not None]
    if not sites:
        return None
    s, k, ins = pick(rng, sites)
    t = pick(rng, DType)
    converts = ins.op in OPCODES and "S" in OPCODES[ins.op].sources  # reads a second (source) type
    field = "dtype2" if converts and rng.random() < 0.5 else "dtype"
    return _with_item(p, s, k, attrs.evolve(ins, **{field: t})), f"dtype stage {s} item {k} {field} -> {t}"


def m_mod(rng: Rng, p: Program) -> Mutation | None:
    # where a modifier belongs, and arithmetic where it does not
    sites = [(s, k, i) for s, k, i in _instrs(p) if i.op in OPCODES and (OPCODES[i.op].modifier is not None
                                                                          or OPCODES[i.op].group == "arith")]
    if not sites:
        return None
    s, k, ins = pick(rng, sites)
    mod = pick(rng, list(COMPARE_MODS) + [REASSOC, None, "bogus"])
    return _with_item(p, s, k, attrs.evolve(ins, mod=mod)), f"mod stage {s} item {k} -> {mod}"


def m_checked(rng: Rng, p: Program) -> Mutation | None:
    sites = [(s, k, i) for s, k, i in _instrs(p) if i.addr is not None]
    if not sites:
        return None
    checked = [x for x in sites if x[2].checked]
    s, k, ins = pick(rng, checked if checked and rng.random() < 0.7 else sites)
    return _with_item(p, s, k, attrs.evolve(ins, checked=not ins.checked)), \
        f"checked stage {s} item {k} -> {not ins.checked}"


def m_offset(rng: Rng, p: Program) -> Mutation | None:
    sites = [(s, k, i) for s, k, i in _instrs(p) if i.addr is not None]
    if not sites:
        return None
    s, k, ins = pick(rng, sites)
    off = ins.addr.offset
    new = off + int(rng.integers(-3, 4)) if rng.random() < 0.6 else \
        pick(rng, [-1, 2**31, -2**31, 2**62, -2**62, 2**63 - 1, -2**63, 2**63, np.int64(2**62), np.int32(-1)])
    return _with_item(p, s, k, attrs.evolve(ins, addr=attrs.evolve(ins.addr, offset=new))), \
        f"offset stage {s} item {k} {off} -> {_short(new)}"


def m_address(rng: Rng, p: Program) -> Mutation | None:
    sites = [(s, k, i) for s, k, i in _instrs(p) if i.addr is not None]
    if not sites:
        return None
    s, k, ins = pick(rng, sites)
    st = p.stages[s]
    if rng.random() < 0.6:
        names = list(p.buffers()) + [m.name for m in st.shared + st.pools] + ["nowhere"]
        new = attrs.evolve(ins.addr, buffer=pick(rng, names))
    else:
        new = attrs.evolve(ins.addr, index=None if ins.addr.index is not None and rng.random() < 0.5
                           else Reg(_stage_regs(st, DType.I64, rng)))
    return _with_item(p, s, k, attrs.evolve(ins, addr=new)), f"address stage {s} item {k} {ins.addr} -> {new}"


# ================================================================= shapes and launches
def mutate_affine(rng: Rng, a: Affine, symbols: list[str]) -> tuple[Affine, str]:
    """A perturbed dimension. `repeated-symbol` keeps the last term of the original and
    puts another term of the same symbol before it (`-n + 2*n` style): read term by term
    that is the same coefficient, summed it is not; the constructor must canonicalize."""
    terms = list(a.terms)
    kind = pick(rng, ["repeated-symbol", "repeated-symbol", "zero-coefficient", "negative-coefficient", "scale",
                       "shift", "other-symbol", "constant"])
    if kind == "repeated-symbol":
        if terms:
            j = int(rng.integers(len(terms)))
            name, c = terms[j]
        else:
            name, c = pick(rng, symbols), 1
        extra = pick(rng, [-c, -1, 1, -2 * c, c, 1 - c]) or -1
        terms = terms[:j] + [(name, extra), (name, c)] + terms[j + 1:] if a.terms else [(name, extra), (name, c)]
    elif kind == "zero-coefficient":
        terms.append((pick(rng, symbols), 0))
    elif kind == "negative-coefficient":
        terms = [(n, -c) for n, c in terms] or [(pick(rng, symbols), -1)]
    elif kind == "scale":
        k = pick(rng, [2, 3, 1000, 2**31, 2**62])
        terms = [(n, c * k) for n, c in terms] or [(pick(rng, symbols), k)]
    elif kind == "other-symbol":
        terms.append((pick(rng, symbols + ["zz"]), 1))
    elif kind == "constant":
        return Affine(int(pick(rng, [0, 1, 96, -1, 2**40, 2**62]))), kind
    const = a.const + (int(pick(rng, [-3, -1, 1, 2, 2**62])) if kind == "shift" else 0)
    return Affine(const, tuple(terms)), kind


def m_shape(rng: Rng, p: Program) -> Mutation | None:
    bufs = [(where, j, b) for where, seq in (("params", p.params), ("temps", p.temps))
            for j, b in enumerate(seq) if isinstance(b, BufferParam)]
    if not bufs:
        return None
    where, j, b = pick(rng, bufs)
    if not b.shape or rng.random() < 0.1:
        shape = b.shape + (Affine.of(pick(rng, _symbols(p))),) if rng.random() < 0.5 else b.shape[:-1]
        kind = "rank"
    else:
        d = int(rng.integers(len(b.shape)))
        dim, kind = mutate_affine(rng, b.shape[d], _symbols(p))
        shape = b.shape[:d] + (dim,) + b.shape[d + 1:]
    seq = list(getattr(p, where))
    seq[j] = attrs.evolve(b, shape=shape)
    return attrs.evolve(p, **{where: tuple(seq)}), f"shape:{kind} {b.name} -> [{', '.join(map(str, shape))}]" \
        f" terms {[d.terms for d in shape]}"


def m_domain(rng: Rng, p: Program) -> Mutation | None:
    if not p.stages:
        return None
    s = int(rng.integers(len(p.stages)))
    st = p.stages[s]
    if not st.domain or rng.random() < 0.1:
        dom = st.domain + (Affine.of(pick(rng, _symbols(p))),) if rng.random() < 0.5 else st.domain[:-1]
        kind = "rank"
    else:
        d = int(rng.integers(len(st.domain)))
        dim, kind = mutate_affine(rng, st.domain[d], _symbols(p))
        dom = st.domain[:d] + (dim,) + st.domain[d + 1:]
    return _with_stage(p, s, attrs.evolve(st, domain=dom)), \
        f"domain:{kind} stage {s} -> [{', '.join(map(str, dom))}] terms {[d.terms for d in dom]}"


def m_block(rng: Rng, p: Program) -> Mutation | None:
    if not p.stages:
        return None
    s = int(rng.integers(len(p.stages)))
    st = p.stages[s]
    kind = pick(rng, ["numpy-int", "numpy-int", "value", "axes"])
    if kind == "numpy-int":
        big = pick(rng, [np.int32(65536), np.int16(256), np.int64(2), np.int32(1), np.uint8(255), np.int32(-1)])
        block = tuple(type(big)(big) for _ in st.block) if rng.random() < 0.5 else \
            tuple(pick(rng, [np.int32(int(b)), big]) for b in st.block)
        if len(block) < len(st.domain) and rng.random() < 0.5:
            block += (big,)
    elif kind == "value":
        block = tuple(pick(rng, [0, 1, 3, 1024, 1025, 65536, 2**31, -1, int(b)]) for b in st.block)
    else:
        block = st.block + (2,) if rng.random() < 0.5 else st.block[:-1]
    return _with_stage(p, s, attrs.evolve(st, block=block)), f"block:{kind} stage {s} -> {block!r}"


def m_loop(rng: Rng, p: Program) -> Mutation | None:
    counters = {(s, i.srcs[0].name) for s, _, i in _instrs(p)
                if i.op == "LOOP" and i.srcs and isinstance(i.srcs[0], Reg)}
    sites = [(s, k, i) for s, k, i in _instrs(p) if i.op in ("MOV_IMM", "MOV") and i.dst is not None
             and (s, i.dst.name) in counters and i.srcs and isinstance(i.srcs[0], Imm)]
    if not sites:
        return None
    s, k, ins = pick(rng, sites)
    n = pick(rng, [0, -1, -5, 1, 2, 7, 33, 100])
    return _with_item(p, s, k, attrs.evolve(ins, srcs=(Imm(n),))), f"loop stage {s} item {k} count -> {n}"


LOOP_STARTS = (-2**63, -2**63 + 1, -2**62, -1, 0, 1, 2, 1023, 1024, 1025)  # each runs a loop briefly
TOP_LEVEL_STARTS = (2049, 4097)  # two or more of cpu_llvm's polling strips: only for a loop in no other
FRESH_COUNTS = (-2**63, -2**63 + 1, -1, 0, 1, 3, 4, 2**31, 2**32 + 1, 2**62, 2**63 - 2, 2**63 - 1)


def m_loop_extreme(rng: Rng, p: Program) -> Mutation | None:
    """LOOP counters at the integer extremes (issue 21: -2**63 wrapped to 2**63 - 1 and ran
    ~2**63 trips): an existing counter's start (an immediate or a symbol it is set from)
    made an extreme that runs the loop briefly, or a new loop at a stage's start counting
    from any extreme, which a branch leaves after three trips, so the huge counts are
    verified and decremented but never run out."""
    if not p.stages:
        return None
    loops = [(s, k, i) for s, k, i in _instrs(p) if i.op == "LOOP" and i.srcs and isinstance(i.srcs[0], Reg)]
    starts = [(s, k, i) for s, k, i in _instrs(p) if i.op in ("MOV_IMM", "MOV") and i.dst is not None
              and any(ls == s and li.srcs[0] == i.dst for ls, _, li in loops)]
    if starts and rng.random() < 0.6:
        s, k, ins = pick(rng, starts)
        body = p.stages[s].body
        labels = {it.name: j for j, it in enumerate(body) if isinstance(it, Label)}
        spans = [(labels.get(li.target, lk), lk) for ls, lk, li in loops if ls == s]
        outermost = not any(lo <= k <= hi for lo, hi in spans)
        n = pick(rng, LOOP_STARTS + (TOP_LEVEL_STARTS if outermost else ()))
        return _with_item(p, s, k, attrs.evolve(ins, op="MOV_IMM", srcs=(Imm(n),))), \
            f"loop-extreme:start stage {s} item {k} count -> {n}"
    s = int(rng.integers(len(p.stages)))
    st = p.stages[s]
    taken = {r.name for r in st.regs} | {it.name for it in st.body if isinstance(it, Label)}
    c, k, flag, top, end = (fresh_name(n, taken) for n in ("xc", "xk", "xp", "XTOP", "XEND"))
    n = pick(rng, FRESH_COUNTS)
    head = [Instr("MOV_IMM", DType.I64, Reg(c), (Imm(n),)), Instr("MOV_IMM", DType.I64, Reg(k), (Imm(0),)),
            Label(top), Instr("ADD", DType.I64, Reg(k), (Reg(k), Imm(1))),
            Instr("SET", DType.I64, Reg(flag), (Reg(k), Imm(3)), mod="ge"),
            Instr("BRA", target=end, pred=Pred(Reg(flag))), Instr("LOOP", srcs=(Reg(c),), target=top), Label(end)]
    regs = st.regs + (RegDecl(c, DType.I64), RegDecl(k, DType.I64), RegDecl(flag, DType.BOOL))
    return _with_stage(p, s, attrs.evolve(st, regs=regs, body=tuple(head) + st.body)), \
        f"loop-extreme:new stage {s} counting from {n}, left after 3 trips"


# ================================================================= body structure
def _pick_item(rng: Rng, p: Program) -> tuple[int, int, list] | None:
    """A stage, an item of its body, and the body as a list to edit."""
    sites = [(s, k) for s, st in enumerate(p.stages) for k in range(len(st.body))]
    if not sites:
        return None
    s, k = pick(rng, sites)
    return s, k, list(p.stages[s].body)


def m_drop(rng: Rng, p: Program) -> Mutation | None:
    if (at := _pick_item(rng, p)) is None:
        return None
    s, k, body = at
    item = body.pop(k)
    return _with_body(p, s, body), f"drop stage {s} item {k} ({_safe(item)})"


def m_duplicate(rng: Rng, p: Program) -> Mutation | None:
    if (at := _pick_item(rng, p)) is None:
        return None
    s, k, body = at
    body.insert(k + int(rng.integers(0, 3)), body[k])
    return _with_body(p, s, body), f"duplicate stage {s} item {k} ({_safe(body[k])})"


def m_swap(rng: Rng, p: Program) -> Mutation | None:
    if (at := _pick_item(rng, p)) is None or len(at[2]) < 2:
        return None
    s, k, body = at
    j = min(k + 1, len(body) - 1) if rng.random() < 0.7 else int(rng.integers(len(body)))
    body[k], body[j] = body[j], body[k]
    return _with_body(p, s, body), f"swap stage {s} items {k} and {j}"


def m_move(rng: Rng, p: Program) -> Mutation | None:
    if (at := _pick_item(rng, p)) is None:
        return None
    s, k, body = at
    item = body.pop(k)
    j = int(rng.integers(len(body) + 1))
    body.insert(j, item)
    return _with_body(p, s, body), f"move stage {s} item {k} to {j}"


def _labels(st: Stage) -> list[str]:
    return [it.name for it in st.body if isinstance(it, Label)]


def m_label(rng: Rng, p: Program) -> Mutation | None:
    sites = [(s, k, i) for s, k, i in _instrs(p) if i.target is not None and i.op != "PoolAlloc"]
    labels = [(s, k) for s, st in enumerate(p.stages) for k, it in enumerate(st.body) if isinstance(it, Label)]
    if not sites and not labels:
        return None
    if sites and (not labels or rng.random() < 0.6):
        s, k, ins = pick(rng, sites)
        target = pick(rng, _labels(p.stages[s]) + ["nowhere"])
        return _with_item(p, s, k, attrs.evolve(ins, target=target)), \
            f"label stage {s} item {k} {ins.op} {ins.target} -> {target}"
    s, k = pick(rng, labels)
    body = list(p.stages[s].body)
    if rng.random() < 0.5:
        body[k] = Label(pick(rng, _labels(p.stages[s]) + ["L_new"]))
        return _with_body(p, s, body), f"label stage {s} item {k} renamed -> {body[k].name}"
    body.insert(int(rng.integers(len(body) + 1)), body[k])
    return _with_body(p, s, body), f"label stage {s} item {k} defined again"


def m_pred(rng: Rng, p: Program) -> Mutation | None:
    sites = [(s, k, i) for s, k, i in _instrs(p) if i.op in OPCODES and OPCODES[i.op].predicated]
    if not sites:
        return None
    s, k, ins = pick(rng, sites)
    st = p.stages[s]
    if ins.pred is not None and rng.random() < 0.5:
        new = None if rng.random() < 0.3 else attrs.evolve(ins.pred, negate=not ins.pred.negate)
    else:
        new = Pred(Reg(_stage_regs(st, DType.BOOL, rng)), bool(rng.integers(2)))
    return _with_item(p, s, k, attrs.evolve(ins, pred=new)), f"pred stage {s} item {k} -> {new}"


def _new_instr(rng: Rng, p: Program, st: Stage) -> Instr | Label:
    regs = {t: [r.name for r in st.regs if r.dtype == t] for t in DType}
    ints = regs[DType.I64] or ["undeclared"]
    buffers = list(p.buffers()) or ["x"]
    labels = _labels(st) or ["L0"]
    t = pick(rng, [r.dtype for r in st.regs] or [DType.F32])
    val = Reg(pick(rng, regs[t])) if regs[t] else Imm(0)
    kind = pick(rng, ["STG", "LDG", "BRA", "EXIT", "RET", "BarSync", "CALL", "LOOP", "PoolAlloc", "PoolFree",
                       "MOV_IMM", "ReduceAdd", "Label", "MemFence", "LDS"])
    index = Reg(pick(rng, ints)) if rng.random() < 0.8 else None
    checked = bool(rng.random() < 0.3)
    if kind == "STG":
        return Instr("STG", t, srcs=(val,), addr=Addr(pick(rng, buffers), index, int(rng.integers(-1, 2))),
                     checked=checked)
    if kind == "LDG" and regs[t]:
        return Instr("LDG", t, Reg(pick(rng, regs[t])), addr=Addr(pick(rng, buffers), index), checked=checked)
    if kind == "LDS" and st.shared and regs[t]:
        m = pick(rng, st.shared)
        return Instr("LDS", t, Reg(pick(rng, regs[t])), addr=Addr(m.name, index), checked=checked)
    if kind in ("BRA", "CALL"):
        return Instr(kind, target=pick(rng, labels))
    if kind == "LOOP":
        return Instr("LOOP", srcs=(Reg(pick(rng, ints)),), target=pick(rng, labels))
    if kind == "PoolAlloc" and st.pools:
        return Instr("PoolAlloc", None, Reg(pick(rng, ints)), target=pick(rng, st.pools).name,
                     count=int(pick(rng, [0, 1, 4, 4096, 2**31])))
    if kind == "PoolFree":
        return Instr("PoolFree", srcs=(Reg(pick(rng, ints)),))
    if kind == "MOV_IMM" and regs[t]:
        return Instr("MOV_IMM", t, Reg(pick(rng, regs[t])), (Imm(_value(rng, t)),))
    if kind == "ReduceAdd" and t is not DType.BOOL:
        return Instr("ReduceAdd", t, srcs=(val,), addr=Addr(pick(rng, buffers), index), checked=checked)
    if kind == "Label":
        return Label(pick(rng, ["L_new", *labels]))
    if kind in ("EXIT", "RET", "BarSync", "MemFence"):
        return Instr(kind)
    return Instr("EXIT")


def m_insert(rng: Rng, p: Program) -> Mutation | None:
    if not p.stages:
        return None
    s = int(rng.integers(len(p.stages)))
    body = list(p.stages[s].body)
    item = _new_instr(rng, p, p.stages[s])
    at = int(rng.integers(len(body) + 1))
    body.insert(at, item)
    return _with_body(p, s, body), f"insert stage {s} at {at}: {_safe(item)}"


# ================================================================= declarations
def m_decl(rng: Rng, p: Program) -> Mutation | None:
    if not p.stages:
        return None
    s = int(rng.integers(len(p.stages)))
    st = p.stages[s]
    mems = [("shared", j) for j in range(len(st.shared))] + [("pools", j) for j in range(len(st.pools))]
    if mems and rng.random() < 0.5:
        field, j = pick(rng, mems)
        seq = list(getattr(st, field))
        size = pick(rng, [0, 1, 4095, 4096, 4097, 65536, 65537, 2**40, -1, np.int32(8)])
        seq[j] = attrs.evolve(seq[j], size=size)
        return _with_stage(p, s, attrs.evolve(st, **{field: tuple(seq)})), \
            f"decl stage {s} {field}[{j}] size -> {size!r}"
    if not st.regs:
        return None
    regs = list(st.regs)
    j = int(rng.integers(len(regs)))
    if rng.random() < 0.3:
        regs.pop(j)
        what = "dropped"
    else:
        t = pick(rng, DType)
        regs[j] = attrs.evolve(regs[j], dtype=t)
        what = f"-> {t}"
    return _with_stage(p, s, attrs.evolve(st, regs=tuple(regs))), f"decl stage {s} reg {st.regs[j].name} {what}"


def m_init(rng: Rng, p: Program) -> Mutation | None:
    if not p.stages:
        return None
    s = int(rng.integers(len(p.stages)))
    st = p.stages[s]
    inits = list(st.inits)
    if inits and rng.random() < 0.7:
        j = int(rng.integers(len(inits)))
        if rng.random() < 0.5:
            inits[j] = attrs.evolve(inits[j], offset=pick(rng, [-1, 1, 2**62, np.int64(0), 96]))
        else:
            inits[j] = attrs.evolve(inits[j], value=_value(rng, None))
    else:
        j = len(inits)
        inits.append(Init(pick(rng, list(p.buffers()) or ["x"]), int(rng.integers(-1, 3)), _value(rng, None)))
    return _with_stage(p, s, attrs.evolve(st, inits=tuple(inits))), f"init stage {s} [{j}] -> {_safe(inits[j])}"


def m_param(rng: Rng, p: Program) -> Mutation | None:
    if not p.params:
        return None
    params = list(p.params)
    j = int(rng.integers(len(params)))
    prm = params[j]
    kind = pick(rng, ["role", "dtype", "drop", "duplicate", "kind"])
    if kind == "role" and isinstance(prm, BufferParam):
        params[j] = attrs.evolve(prm, role=pick(rng, ["in", "out", "inout", "temp", "bogus"]))
    elif kind == "dtype":
        params[j] = attrs.evolve(prm, dtype=pick(rng, DType))
    elif kind == "drop":
        params.pop(j)
    elif kind == "duplicate":
        params.insert(j, prm)
    elif isinstance(prm, BufferParam):
        params[j] = ScalarParam(prm.name, prm.dtype)
    else:
        params[j] = BufferParam(prm.name, prm.dtype, (Affine.of(pick(rng, _symbols(p))),), "in")
    return attrs.evolve(p, params=tuple(params)), f"param:{kind} {prm.name}"


def m_symbols(rng: Rng, p: Program) -> Mutation | None:
    syms = list(p.symbols)
    kind = pick(rng, ["drop", "duplicate", "add", "reorder"])
    if kind == "drop" and syms:
        syms.pop(int(rng.integers(len(syms))))
    elif kind == "duplicate" and syms:
        syms.append(pick(rng, syms))
    elif kind == "reorder":
        syms.reverse()
    else:
        syms.append(pick(rng, ["k", "gid", "n", "x"]))
    return attrs.evolve(p, symbols=tuple(syms)), f"symbols:{kind} -> {syms}"


def m_stage(rng: Rng, p: Program) -> Mutation | None:
    stages = list(p.stages)
    if not stages:
        return None
    j = int(rng.integers(len(stages)))
    kind = pick(rng, ["drop", "duplicate", "swap", "reassociate"])
    if kind == "drop":
        stages.pop(j)
    elif kind == "duplicate":
        stages.insert(j, stages[j])
    elif kind == "swap" and len(stages) > 1:
        stages[j], stages[-1] = stages[-1], stages[j]
    else:
        return attrs.evolve(p, reassociate=not p.reassociate), "stage:reassociate flag flipped"
    return attrs.evolve(p, stages=tuple(stages)), f"stage:{kind} {j}"


def m_nest(rng: Rng, p: Program, depth: int) -> Mutation | None:
    """`depth` loops nested inside each other, each level adding to an accumulator, with a
    count of 1, 2 or a shape symbol: the verifier's loop analysis must stay fast as nests
    deepen (issue 11: 200 levels took 34 s). The nest sits behind a branch on `%gdim.x >
    10**6`, which the verifier cannot decide and no fuzz launch takes, so running the
    program does not take 2**depth iterations."""
    if not p.stages:
        return None
    s = int(rng.integers(len(p.stages)))
    st = p.stages[s]
    counters = [f"nest{j}" for j in range(depth)]
    count = pick(rng, [Imm(1), Imm(2), *(Sym(name) for name in p.symbols)])
    acc = Reg("nest_acc")
    body: list = [Instr("SET", DType.I64, Reg("nest_skip"), (Special("gdim.x"), Imm(10**6)), mod="le"),
                  Instr("BRA", target="NEST_END", pred=Pred(Reg("nest_skip"))),
                  Instr("MOV_IMM", DType.I64, acc, (Imm(0),))]
    for j, c in enumerate(counters):
        body += [Instr("MOV", DType.I64, Reg(c), (count,)), Label(f"NEST{j}"),
                 Instr("ADD", DType.I64, acc, (acc, Imm(1)))]
    body += [Instr("LOOP", srcs=(Reg(c),), target=f"NEST{j}") for j, c in reversed(list(enumerate(counters)))]
    body.append(Label("NEST_END"))
    regs = st.regs + tuple(RegDecl(c, DType.I64) for c in counters) + (RegDecl("nest_acc", DType.I64),
                                                                        RegDecl("nest_skip", DType.BOOL))
    return _with_stage(p, s, attrs.evolve(st, regs=regs, body=tuple(body) + st.body)), \
        f"nest {depth} loops deep in stage {s}, count {count}"


# the nest depths `scale` draws from (ci: the verifier is quick; long: where it was not)
NEST_DEPTHS = {"ci": (5, 30), "long": (50, 300)}

MUTATORS: dict[str, tuple[Callable[[Rng, Program], Mutation | None], int]] = {
    "imm": (m_imm, 4), "reg": (m_reg, 3), "operand": (m_operand, 2), "opcode": (m_opcode, 2), "dtype": (m_dtype, 2),
    "mod": (m_mod, 1), "checked": (m_checked, 3), "offset": (m_offset, 3), "address": (m_address, 2),
    "shape": (m_shape, 4), "domain": (m_domain, 3), "block": (m_block, 3), "loop": (m_loop, 2),
    "loop-extreme": (m_loop_extreme, 2), "drop": (m_drop, 2),
    "duplicate": (m_duplicate, 2), "swap": (m_swap, 2), "move": (m_move, 1), "label": (m_label, 2),
    "pred": (m_pred, 1), "insert": (m_insert, 3), "decl": (m_decl, 2), "init": (m_init, 1), "param": (m_param, 2),
    "symbols": (m_symbols, 1), "stage": (m_stage, 1),
}
MUTATORS["scratch"] = (m_scratch, 2)  # issue 21: block scratch at its limits
