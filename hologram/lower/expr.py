"""Lowering, part 2: scalar expression codegen for one stage.

`ExprGen.value(e)` emits the instructions computing the IR expression `e` for the current
lane and returns the operand holding it: a register, an immediate (constants) or a `$`
operand (shape symbols and scalar parameters). It value-numbers by `Expr`, so a
subexpression used twice in a stage is computed once; a scope stack keeps values computed
inside a loop body or a branch from leaking to code that may run without them.

Each IR op maps onto the instruction the op table says it lowers to (`DIRECT`, from each
entry's `lowers`); the ops with no single opcode
(float FLOORDIV, integer FMOD and POW, SIGN, ISNAN, comparisons, WHERE) are expanded here
with numpy's exact semantics. Memory access: `address`; the loops of reductions: hologram.lower.loops.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from hologram.core.errors import MISSED_DIMENSION, CompileError
from hologram.core.dims import DimAlgebra
from hologram.core.types import Affine, DType, convert_const, promote
from hologram.ir import LEAF_OPS, Expr, TensorDecl
from hologram.isa.builder import StageBuilder
from hologram.isa.opcodes import OPCODES, ir_ops
from hologram.isa.program import Imm, Operand, Reg, Sym
from hologram.lower.plan import I64, affine_expr, flat_index, free_vars

CMP_MOD = {"CMPEQ": "eq", "CMPNE": "ne", "CMPLT": "lt", "CMPLE": "le", "CMPGT": "gt", "CMPGE": "ge"}
# IR op -> the instruction it lowers to, from the op table's `lowers`
DIRECT = ir_ops()
BOOL_ALIAS = {"ADD": "OR", "MUL": "AND", "MIN": "AND", "MAX": "OR"}  # numpy's ufuncs on bool
INTEGER_IDENTITY = frozenset({"FLOOR", "CEIL", "TRUNC", "RINT", "ABS"})  # on ints (ABS: on bool)
Number = bool | int | float


def imm(x: Operand | Number, dtype: DType) -> Operand:
    """A Python number as an immediate of `dtype` (so `0` in a float op is `0.0`)."""
    return Imm(convert_const(x, dtype)) if isinstance(x, (bool, int, float)) else x


def _from_data(ix: Expr) -> bool:
    """Does index `ix` depend on array or scalar-parameter values (so it may be any i64)?"""
    return any(n.op in ("LOAD", "SCALAR") for n in ix.walk())


def _largest(ix: Expr, extents: Mapping[str, Affine]) -> Affine | None:
    """The largest value of an i64 index built of non-negative terms (variables, constants,
    shape symbols, each possibly times a non-negative constant), or None when `ix` is not
    such a sum (then nothing is claimed). An explicit stack, as kernels may nest deeply."""
    top, stack = Affine(0), [(ix, 1)]
    while stack:
        n, times = stack.pop()
        if n.dtype is not I64:
            return None
        if n.op == "ADD":
            stack.extend((s, times) for s in n.srcs)
        elif n.op == "MUL" and n.srcs[1].op == "CONST" and n.srcs[1].arg >= 0:
            stack.append((n.srcs[0], times * n.srcs[1].arg))
        elif n.op == "IDX" and n.arg in extents:
            top = top + (extents[n.arg] - 1) * times
        elif n.op == "CONST" and n.arg >= 0:
            top = top + n.arg * times
        elif n.op == "SYM":
            top = top + Affine.of(n.arg) * times
        else:
            return None
    return top


class ExprGen:
    """Codegen state for one stage.

    decls    every tensor by name (shapes and dtypes of loads and stores)
    direct   `(var, extent)` on a 1-D stage: `var` is the copy of `%gid.x` and the domain
             is `extent`, so a load/store `t[var]` of a tensor of shape `(extent,)` is in
             bounds by construction and is emitted without `.chk`
    """

    def __init__(self, sb: StageBuilder, decls: Mapping[str, TensorDecl],
                 reduce_in_lane: Callable[["ExprGen", Expr], Operand], direct: tuple[str, Affine] | None = None):
        self.sb = sb
        self.decls = decls
        # the loops of a REDUCE one lane computes (hologram.lower.loops, which builds on this
        # module: the caller hands it over rather than this module importing its user)
        self.reduce_in_lane = reduce_in_lane
        self.direct = direct
        self.env: dict[str, Reg] = {}
        self.extents: dict[str, Affine] = {}
        self.scopes: list[dict[Expr, Operand]] = [{}]
        self._risky: dict[Expr, bool] = {}
        self._free: dict[Expr, frozenset[str]] = {}

    # -- bookkeeping ------------------------------------------------------------------
    def bind(self, var: str, reg: Reg, extent: Affine) -> None:
        """Index variable `var` lives in `reg` and ranges over [0, extent)."""
        self.env[var], self.extents[var] = reg, extent

    def push(self) -> None:
        self.scopes.append({})

    def pop(self) -> None:
        self.scopes.pop()

    def _lookup(self, e: Expr) -> Operand | None:
        for scope in reversed(self.scopes):
            if e in scope:
                return scope[e]
        return None

    def isa(self, op: str, dtype: DType, *srcs: Operand | Number, dst: Reg | None = None) -> Reg:
        """`op.dtype` on `srcs`; Python numbers become immediates of `dtype`."""
        if not OPCODES[op].admits(dtype):
            raise CompileError(f"cannot lower {op} on {dtype}: the Atlas ISA's {op} takes "
                               f"{OPCODES[op].types} types")
        return self.sb.alu(op, dtype, *(imm(s, dtype) for s in srcs), dst=dst)

    def setp(self, cmp: str, dtype: DType, a: Operand | Number, b: Operand | Number) -> Reg:
        return self.sb.setp(cmp, dtype, imm(a, dtype), imm(b, dtype))

    def sel(self, dtype: DType, p: Operand, a: Operand | Number, b: Operand | Number,
            dst: Reg | None = None) -> Reg:
        return self.sb.sel(dtype, p, imm(a, dtype), imm(b, dtype), dst=dst)

    def reg(self, x: Operand, dtype: DType) -> Reg:
        return x if isinstance(x, Reg) else self.sb.mov(dtype, x)

    def convert(self, x: Operand, frm: DType, to: DType) -> Operand:
        if frm is to:
            return x
        if isinstance(x, Imm):
            return Imm(convert_const(x.value, to))
        return self.sb.cvt(to, frm, x)

    # -- values -----------------------------------------------------------------------
    def value(self, e: Expr) -> Operand:
        """The operand holding `e` (of type `e.dtype`) for this lane."""
        hit = self._lookup(e)
        if hit is not None:
            return hit
        # children first, iteratively: `_gen` then finds its operands in the cache, so
        # codegen recursion stays shallow however deep the expression is
        for n in self._eager(e):
            if self._lookup(n) is None:
                self.scopes[-1][n] = self._gen(n)
        return self.scopes[-1][e]

    def _eager(self, e: Expr) -> list[Expr]:
        """Uncached nodes that evaluating `e` evaluates unconditionally, children first.
        Not inside: reductions (their loops), lazy WHERE sides, load indices (`address`
        folds `i + 1` into an offset) and the operand of ISNAN on integers (unused)."""
        order: list[Expr] = []
        seen: set[int] = set()
        stack = [(e, False)]
        while stack:
            n, expanded = stack.pop()
            if expanded:
                order.append(n)
                continue
            if id(n) in seen or self._lookup(n) is not None:
                continue
            seen.add(id(n))
            stack.append((n, True))
            if n.op in ("REDUCE", "LOAD") or (n.op == "ISNAN" and not n.srcs[0].dtype.is_float):
                continue
            srcs = n.srcs[:1] if self.lazy(n) else n.srcs
            stack.extend((s, False) for s in reversed(srcs))
        return order

    def value_as(self, e: Expr, dtype: DType) -> Operand:
        # a conversion is a CAST node, so value numbering shares it too
        return self.value(e if e.dtype is dtype else Expr("CAST", dtype, (e,)))

    def _gen(self, e: Expr) -> Operand:
        op, dt = e.op, e.dtype
        if op in _SPECIAL:
            return _SPECIAL[op](self, e)
        if op in CMP_MOD:
            a, b = e.srcs
            t = a.dtype if a.dtype is b.dtype else promote(a.dtype, b.dtype)
            p = self.setp(CMP_MOD[op], t, self.value_as(a, t), self.value_as(b, t))
            return self.convert(p, DType.BOOL, dt)
        spec = DIRECT.get(op)
        if spec is None:
            raise CompileError(f"cannot lower IR op {op} ({e})")
        if spec.group == "atlas":  # integer operands of any type, computed in i64
            res = self.isa(spec.name, I64, *(self.value_as(s, I64) for s in e.srcs))
            return self.convert(res, spec.result_type(I64), dt)
        if spec.result == "bool":  # a test of its operand's value, in the operand's type
            (x,) = e.srcs
            return self.convert(self.isa(spec.name, x.dtype, self.value(x)), DType.BOOL, dt)
        if spec.arity == 1:
            x = self.value_as(e.srcs[0], dt)
            if op in INTEGER_IDENTITY and not dt.is_float and (op != "ABS" or dt.is_bool):
                return x
            return self.isa(spec.name, dt, x)
        return self._binary(e, spec.name)

    def _binary(self, e: Expr, name: str) -> Operand:
        op, dt = e.op, e.dtype
        if op == "FLOORDIV" and dt.is_float:
            return self._floordiv_float(e)
        if op == "POW" and not dt.is_float:
            return self._pow_int(e)
        a, b = (self.value_as(s, dt) for s in e.srcs)
        if op == "FMOD" and dt.is_int:
            return self._fmod_int(a, b, dt)
        return self.isa(BOOL_ALIAS.get(op, name) if dt.is_bool else name, dt, a, b)

    # -- leaves and memory ------------------------------------------------------------
    def _const(self, e: Expr) -> Operand:
        return Imm(convert_const(e.arg, e.dtype))

    def _idx(self, e: Expr) -> Operand:
        if e.arg not in self.env:
            raise CompileError(f"index variable '{e.arg}' is not bound here ({e})")
        return self.convert(self.env[e.arg], I64, e.dtype)

    def _sym(self, e: Expr) -> Operand:
        return self.convert(Sym(e.arg), I64, e.dtype)

    def _scalar(self, e: Expr) -> Operand:
        return self.convert(Sym(e.arg), self._decl(e.arg).dtype, e.dtype)

    def _decl(self, name: str) -> TensorDecl:
        if name not in self.decls:
            raise CompileError(f"unknown tensor '{name}'")
        return self.decls[name]

    def in_range(self, ix: Expr, dim: Affine, extents: Mapping[str, Affine] | None = None) -> bool:
        """Is index `ix` provably inside [0, dim)? A variable ranging over exactly `dim`, a
        constant below a constant dim (everything broadcasting and plain indexing make), or
        a sum of non-negative terms (variables, constants, shape symbols, each possibly
        times a non-negative constant) whose largest value is below `dim` for every value
        of the symbols: a window's `img[i + di, j + 2]` on a target of `h - 2` rows
        (`(h - 3) + 2 <= h - 1`), a split reduction's `4096*s + r` over its slices
        (split.py: `4096*(n//4096 - 1) + 4095 <= n - 1`)."""
        extents = extents or self.extents
        if ix.op == "IDX" and extents.get(ix.arg) == dim:
            return True
        if ix.op == "CONST":
            return dim.is_const and 0 <= ix.arg < dim.const
        top = _largest(ix, extents)
        return top is not None and DimAlgebra().nonneg(dim - 1 - top)

    def address(self, decl: TensorDecl, index: Sequence[Expr]) -> tuple[Reg | None, int, bool]:
        """(index register, constant offset, checked) of element `decl[index...]`.

        Only the flat index is bounds-checked at run time, so when an index on an inner
        dim is not provably in range (`x[i, j + 1]`) the flat index is replaced by
        MISSED_DIMENSION on a per-dim miss: out-of-range accesses raise, they never wrap into the next row. An
        index computed from data (a gather, `x[idx[i], j]`) is checked against its own
        dimension on dim 0 too: it may be large enough that the flat index overflows."""
        if len(index) != len(decl.shape):
            raise CompileError(f"'{decl.name}' has {len(decl.shape)} dims but is indexed with {len(index)}")
        if (self.direct and len(index) == 1 and index[0].op == "IDX" and index[0].arg == self.direct[0]
                and decl.shape == (self.direct[1],)):
            return self.env[self.direct[0]], 0, False
        flat = flat_index(index, decl.shape)
        unsafe = [k for k, (ix, dim) in enumerate(zip(index, decl.shape)) if not self.in_range(ix, dim)]
        if unsafe and (unsafe != [0] or len(index) > 1 and _from_data(index[0])):
            ok: Operand = Imm(True)
            for k in unsafe:
                ix = self.value_as(index[k], I64)
                inside = self.isa("AND", DType.BOOL, self.setp("ge", I64, ix, 0),
                                  self.setp("lt", I64, ix, self.value(affine_expr(decl.shape[k]))))
                ok = inside if isinstance(ok, Imm) else self.isa("AND", DType.BOOL, ok, inside)
            return self.sel(I64, ok, self.value_as(flat, I64), MISSED_DIMENSION), 0, True
        offset = 0
        if flat.op == "ADD" and flat.dtype is I64 and flat.srcs[1].op == "CONST":
            flat, offset = flat.srcs[0], flat.srcs[1].arg
        if flat.op == "CONST":
            return None, offset + flat.arg, True
        return self.reg(self.value_as(flat, I64), I64), offset, True

    def _load(self, e: Expr) -> Operand:
        d = self._decl(e.arg)
        if d.kind == "scalar":
            return self.convert(Sym(d.name), d.dtype, e.dtype)
        idx, off, chk = self.address(d, e.srcs)
        return self.convert(self.sb.ldg(d.dtype, d.name, idx, off, checked=chk, site=e.site), d.dtype, e.dtype)

    def store(self, decl: TensorDecl, index: Sequence[Expr], value: Operand) -> None:
        idx, off, chk = self.address(decl, index)
        self.sb.stg(decl.dtype, decl.name, value, idx, off, checked=chk)

    # -- structured ops ---------------------------------------------------------------
    def _cast(self, e: Expr) -> Operand:
        return self.convert(self.value(e.srcs[0]), e.srcs[0].dtype, e.dtype)

    def _fma(self, e: Expr) -> Operand:
        return self.isa("FMA", e.dtype, *(self.value_as(s, e.dtype) for s in e.srcs))

    def risky(self, e: Expr) -> bool:
        """Does `e` load through an index not provably in range (so it may raise)?"""
        if e not in self._risky:
            ext = dict(self.extents)
            for n in e.walk():
                if n.op == "REDUCE":
                    ext.update(n.arg[1])
            self._risky[e] = any(n.op == "LOAD" and self._decl(n.arg).kind != "scalar" and
                                 not all(self.in_range(ix, dim, ext)
                                         for ix, dim in zip(n.srcs, self._decl(n.arg).shape))
                                 for n in e.walk())
        return self._risky[e]

    def lazy(self, e: Expr) -> bool:
        """WHERE evaluates only the chosen side when a side could fault (`where(i > 0,
        x[i - 1], 0)` must not read x[-1]); otherwise both sides and a SEL."""
        return e.op == "WHERE" and (self.risky(e.srcs[1]) or self.risky(e.srcs[2]))

    def _where(self, e: Expr) -> Operand:
        c, a, b = e.srcs
        cond = self.value_as(c, DType.BOOL)
        if not self.lazy(e):
            return self.sel(e.dtype, cond, self.value_as(a, e.dtype), self.value_as(b, e.dtype))
        out, other, done = self.sb.reg(e.dtype), self.sb.label("else"), self.sb.label("endif")
        self.sb.bra(other, pred=self.reg(cond, DType.BOOL), negate=True)
        for side, label in ((a, done), (b, None)):
            self.push()
            self.sb.mov(e.dtype, self.value_as(side, e.dtype), dst=out)
            self.pop()
            if label:
                self.sb.bra(label)
                self.sb.place(other)
        self.sb.place(done)
        return out

    def _isnan(self, e: Expr) -> Operand:
        x = e.srcs[0]
        if not x.dtype.is_float:
            return Imm(convert_const(False, e.dtype))
        v = self.value(x)
        return self.convert(self.setp("ne", x.dtype, v, v), DType.BOOL, e.dtype)

    def _sign(self, e: Expr) -> Operand:
        """numpy's sign: -1/0/1, sign(±0) = +0, sign(NaN) = NaN; bool is its own sign."""
        dt = e.dtype
        x = self.value_as(e.srcs[0], dt)
        if dt.is_bool:
            return x
        s = self.sel(dt, self.setp("gt", dt, x, 0), 1, 0)
        if dt.is_unsigned:
            return s
        s = self.sel(dt, self.setp("lt", dt, x, 0), -1, s)
        if dt.is_float:
            s = self.sel(dt, self.setp("ne", dt, x, x), x, s)
        return s

    def _floordiv_float(self, e: Expr) -> Operand:
        """numpy's npy_divmod quotient, step by step (f16 computes in f32, as numpy does):
        mod = fmod(a, b); div = (a - mod) / b, less 1 when mod and b differ in sign;
        snap floor(div) to the nearest integer; a zero quotient takes the sign of a/b;
        b == 0 gives a/b."""
        dt = e.dtype
        ct = DType.F32 if dt is DType.F16 else dt
        a, b = (self.value_as(s, ct) for s in e.srcs)
        i = self.isa
        mod, q = i("FMOD", ct, a, b), i("DIV", ct, a, b)
        div = i("DIV", ct, i("SUB", ct, a, mod), b)
        flip = i("XOR", DType.BOOL, self.setp("lt", ct, b, 0), self.setp("lt", ct, mod, 0))
        div = self.sel(ct, i("AND", DType.BOOL, self.setp("ne", ct, mod, 0), flip), i("SUB", ct, div, 1.0), div)
        fl = i("FLOOR", ct, div)
        fl = self.sel(ct, self.setp("gt", ct, i("SUB", ct, div, fl), 0.5), i("ADD", ct, fl, 1.0), fl)
        res = self.sel(ct, self.setp("ne", ct, div, 0.0), fl, i("COPYSIGN", ct, 0.0, q))
        res = self.sel(ct, self.setp("eq", ct, b, 0.0), q, res)
        return self.convert(res, ct, dt)

    def _fmod_int(self, a: Operand, b: Operand, dt: DType) -> Operand:
        """C's fmod (sign of the dividend) from REM (sign of the divisor); by zero gives 0."""
        r = self.isa("REM", dt, a, b)
        if dt.is_unsigned:
            return r
        differ = self.isa("XOR", DType.BOOL, self.setp("lt", dt, a, 0), self.setp("lt", dt, r, 0))
        fix = self.isa("AND", DType.BOOL, self.setp("ne", dt, r, 0), differ)
        return self.sel(dt, fix, self.isa("SUB", dt, r, b), r)

    def _pow_int(self, e: Expr) -> Operand:
        """Integer power, wrapping. A constant exponent unrolls into square-and-multiply;
        otherwise a counted loop over the exponent's bits. A negative exponent (an error
        in numpy) gives the truncated 1 / a**-b: 1 for a = 1, ±1 for a = -1, else 0."""
        dt = e.dtype
        a = self.value_as(e.srcs[0], dt)
        b_e = e.srcs[1]
        if b_e.op == "CONST" and convert_const(b_e.arg, dt) >= 0:
            n, result, base = convert_const(b_e.arg, dt), None, a
            while n:
                if n & 1:
                    result = base if result is None else self.isa("MUL", dt, result, base)
                n >>= 1
                if n:
                    base = self.isa("MUL", dt, base, base)
            return Imm(convert_const(1, dt)) if result is None else result
        sb = self.sb
        b = self.value_as(b_e, dt)
        ex = sb.mov(dt, b)
        neg = self.setp("lt", dt, ex, 0) if dt.is_signed else None
        if neg is not None:
            self.sel(dt, neg, self.isa("NEG", dt, ex), ex, dst=ex)
        res, base = sb.mov(dt, imm(1, dt)), sb.mov(dt, a)
        count, top = sb.mov(I64, dt.bits, hint="bits"), sb.label("pow")
        sb.place(top)
        odd = self.setp("ne", dt, self.isa("AND", dt, ex, 1), 0)
        self.sel(dt, odd, self.isa("MUL", dt, res, base), res, dst=res)
        self.isa("MUL", dt, base, base, dst=base)
        self.isa("SHR", dt, ex, 1, dst=ex)
        sb.loop(count, top)
        if neg is None:
            return res
        unit = self.isa("OR", DType.BOOL, self.setp("eq", dt, a, 1), self.setp("eq", dt, a, -1))
        return self.sel(dt, neg, self.sel(dt, unit, res, 0), res)

    def _reduce(self, e: Expr) -> Operand:
        return self.reduce_in_lane(self, e)

    # -- loop-invariant code motion ---------------------------------------------------
    def prefetch(self, e: Expr, variant: set[str]) -> None:
        """Compute now every maximal subexpression of `e` that does not depend on the
        `variant` loop variables, so a loop body finds it in the cache. Only looks where
        `e` is always evaluated (not into inner reductions or lazy WHERE sides)."""
        seen: set[Expr] = set()
        stack = [e]
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if not free_vars(n, self._free) & variant:
                if n.op not in LEAF_OPS:
                    self.value(n)
            elif n.op == "LOAD":
                d = self._decl(n.arg)
                if d.kind != "scalar" and len(n.srcs) == len(d.shape):
                    stack.append(flat_index(n.srcs, d.shape))
            elif n.op == "WHERE" and self.lazy(n):
                stack.append(n.srcs[0])
            elif n.op != "REDUCE":
                stack.extend(n.srcs)


_SPECIAL = {
    "CONST": ExprGen._const, "IDX": ExprGen._idx, "SYM": ExprGen._sym, "SCALAR": ExprGen._scalar,
    "LOAD": ExprGen._load, "CAST": ExprGen._cast, "FMA": ExprGen._fma, "WHERE": ExprGen._where,
    "ISNAN": ExprGen._isnan, "SIGN": ExprGen._sign, "REDUCE": ExprGen._reduce,
}
