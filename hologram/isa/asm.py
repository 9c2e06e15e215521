"""`.hasm`: the text assembly of the Atlas ISA, with an exact round trip.

`format_program(p)` writes one canonical text for every program; `parse_program(text)`
reads it back so that `parse_program(format_program(p)) == p`, and formatting the parse of
any accepted text gives the canonical text. The syntax (docs/hasm.md) is line-oriented:

    .program saxpy                      ; header directives, then stages
    .isa 1
    .symbols n
    .param a: f32                       ; scalar parameter
    .param in x: f32[n]                 ; buffer parameter: role name: dtype[shape]
    .stage main domain [n] block [256]
        .reg %i: i64
        .reg %xv, %yv: f32
        MOV.i64     %i, %gid.x
        LDG.f32     %xv, [x + %i]
        ...
        EXIT

Operands are laid out by `OPCODES[op].form`, so the parser needs no per-opcode code.
Names that are not identifiers are written as JSON strings (`%"a b"`), immediates keep
their Python type (`1`, `1.0`, `true`) and floats are exact (`repr`, plus `nan(0x...)`
for NaNs with a payload), which is what makes the round trip exact.
"""

from __future__ import annotations

import json
import math
import re
import struct
from typing import Iterator

import attrs

from hologram.core.errors import ISAError, Site, Span, did_you_mean
from hologram.core.types import Affine, DType, python_scalar
from hologram.isa.asm_lexer import DTYPES, QNAN_BITS, LineReader
from hologram.isa.opcodes import OPCODES
from hologram.isa.program import (ISA_VERSION, Addr, BufferParam, Imm, Init, Instr, Item, Label, MemDecl, Operand, Pred,
                                  Program, Reg, RegDecl, ScalarParam, Special, Stage, Sym)
from hologram.isa.structure import structure_problem

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


# ============================================================================ format
def format_name(name: str) -> str:
    """`name` bare when it is an identifier, else as a JSON string literal."""
    return name if IDENT.match(name) else json.dumps(name)


def _f64_bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def format_value(value: object) -> str:
    """An immediate, spelled so that its Python type and exact value survive parsing."""
    value = python_scalar(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        # Python will not print (or read) decimals beyond 4300 digits; hex has no limit
        return str(value) if value.bit_length() < 4000 else f"{'-' if value < 0 else ''}0x{abs(value):x}"
    if isinstance(value, float):
        if math.isnan(value):
            bits = _f64_bits(value)
            if bits & ~(1 << 63) == QNAN_BITS:
                return "-nan" if bits >> 63 else "nan"
            return f"nan(0x{bits:016x})"
        return repr(value)  # shortest text that reads back to the same double
    return f"?{value!r}"  # not an immediate: printable for diagnostics, never parses


def format_affine(a: Affine) -> str:
    parts: list[str] = []
    for name, c in a.terms:
        term = format_name(name) if abs(c) == 1 else f"{abs(c)}*{format_name(name)}"
        parts.append(("-" + term if c < 0 else term) if not parts else ("- " if c < 0 else "+ ") + term)
    if a.const or not parts:
        parts.append(str(a.const) if not parts else ("- " if a.const < 0 else "+ ") + str(abs(a.const)))
    return " ".join(parts)


def _dims(dims: tuple) -> str:
    return "[" + ", ".join(format_affine(d) if isinstance(d, Affine) else str(d) for d in dims) + "]"


def format_type(dtype: DType, shape: tuple[Affine, ...]) -> str:
    """`f32[n, 2*m + 1]`, `i8["(n + 1)//2"]`, `f32`: a type as kernel documents spell it
    (a scalar without brackets), its dimensions as `.hasm` spells them, derived symbols
    (hologram.core.dims) quoted, so that the assembler's reader takes it back."""
    return f"{dtype}{_dims(shape)}" if shape else str(dtype)


def format_operand(op: object) -> str:
    if isinstance(op, Reg):
        return "%" + format_name(op.name)
    if isinstance(op, Special):
        return f"%{op.name}"
    if isinstance(op, Sym):
        return "$" + format_name(op.name)
    if isinstance(op, Imm):
        return format_value(op.value)
    return f"?{op!r}"


def format_addr(a: object) -> str:
    if not isinstance(a, Addr):
        return f"?{a!r}"
    text = format_name(a.buffer)
    if a.index is not None:
        text += " + " + format_operand(a.index)
    if a.offset:
        text += f" {'-' if a.offset < 0 else '+'} {abs(a.offset)}"
    return f"[{text}]"


def format_instr(ins: Instr, align: bool = True) -> str:
    """One instruction in canonical text (`align` pads the opcode to a column, as in a
    listing). Total: an instruction whose fields do not fit its opcode's form still
    prints (with `?` for missing operands), for diagnostics."""
    spec = OPCODES.get(ins.op)
    head = ins.op + "".join(f".{s}" for s in (ins.mod, ins.dtype, ins.dtype2) if s is not None)
    head += ".chk" if ins.checked else ""
    if ins.pred is not None:
        head = f"@{'!' if ins.pred.negate else ''}{format_operand(ins.pred.reg)} {head}"
    srcs = iter(ins.srcs)
    ops: list[str] = []
    for kind in spec.form if spec else "":
        if kind == "d":
            ops.append(format_operand(ins.dst) if ins.dst is not None else "?")
        elif kind == "s":
            src = next(srcs, None)
            ops.append("?" if src is None else format_operand(src))
        elif kind == "m":
            ops.append(format_addr(ins.addr) if ins.addr is not None else "?")
        elif kind in "lp":
            ops.append(format_name(ins.target) if ins.target is not None else "?")
        elif kind == "n":
            ops.append(str(ins.count) if ins.count is not None else "?")
    ops.extend(format_operand(s) for s in srcs)
    if not ops:
        return head
    return f"{head:<11} {', '.join(ops)}" if align else f"{head} {', '.join(ops)}"


def _format_item(item: Item) -> str:
    if isinstance(item, Label):
        return f"{format_name(item.name)}:"
    return "    " + format_instr(item) + ("" if item.site is None else f" site {item.site}")


def format_site(k: int, s: Site) -> str:
    """`.site 0 "kernels/g.toml" 5:8-17 "y[i] = x[idx[i]]"`: file, line:col-end_col, the line."""
    return f".site {k} {json.dumps(s.file)} {s.line}:{s.col}-{s.end_col} {json.dumps(s.text)}"


def _format_buffer(directive: str, b: BufferParam, default_role: str | None) -> str:
    role = "" if b.role == default_role else f"{format_name(b.role)} "
    return f"{directive} {role}{format_name(b.name)}: {b.dtype}{_dims(b.shape)}"


def _format_stage(s: Stage) -> Iterator[str]:
    yield f".stage {format_name(s.name)} domain {_dims(s.domain)} block {_dims(s.block)}"
    run: list[RegDecl] = []
    for r in s.regs + (None,):  # consecutive registers of one type share a line
        if run and (r is None or r.dtype != run[0].dtype):
            yield f"    .reg {', '.join('%' + format_name(x.name) for x in run)}: {run[0].dtype}"
            run = []
        if r is not None:
            run.append(r)
    for directive, decls in ((".shared", s.shared), (".pool", s.pools)):
        for m in decls:
            yield f"    {directive} {format_name(m.name)}: {m.dtype}[{m.size}]"
    for i in s.inits:
        yield f"    .init {format_name(i.buffer)}[{i.offset}] = {format_value(i.value)}"
    yield from (_format_item(item) for item in s.body)


def format_program(p: Program) -> str:
    """The canonical `.hasm` text of `p` (ISAError if `p` is not built of the right values)."""
    bad = structure_problem(p)
    if bad is not None:
        raise ISAError(f"cannot format a malformed program: {bad}")
    lines = [f".program {format_name(p.name)}", f".isa {p.isa_version}"]
    if p.symbols:
        lines.append(".symbols " + " ".join(format_name(s) for s in p.symbols))
    if p.reassociate:
        lines.append(".reassociate")
    for prm in p.params:
        if isinstance(prm, ScalarParam):
            lines.append(f".param {format_name(prm.name)}: {prm.dtype}")
        else:
            lines.append(_format_buffer(".param", prm, None))
    lines.extend(_format_buffer(".temp", t, "temp") for t in p.temps)
    lines.extend(format_site(k, site) for k, site in enumerate(p.sites))
    for s in p.stages:
        lines.append("")
        lines.extend(_format_stage(s))
    return "\n".join(lines) + "\n"


# ============================================================================ parser
_STAGE_DIRECTIVES = (".reg", ".shared", ".pool", ".init")
_HEADER_DIRECTIVES = (".program", ".isa", ".symbols", ".reassociate", ".param", ".temp", ".site")


@attrs.define
class _StageBuilder:
    name: str
    domain: tuple[Affine, ...]
    block: tuple[int, ...]
    regs: list[RegDecl] = attrs.Factory(list)
    shared: list[MemDecl] = attrs.Factory(list)
    pools: list[MemDecl] = attrs.Factory(list)
    inits: list[Init] = attrs.Factory(list)
    body: list[Item] = attrs.Factory(list)

    def build(self) -> Stage:
        return Stage(self.name, self.domain, self.block, tuple(self.regs), tuple(self.shared),
                     tuple(self.pools), tuple(self.inits), tuple(self.body))


def parse_program(text: str, file: str = "<asm>") -> Program:
    """Parse `.hasm` text. Raises ISAError pointing at the line and column, saying what
    was expected. Syntax only: a parsed program still has to pass the verifier."""
    if not isinstance(text, str):
        raise ISAError(f"parse_program expects the assembly as str, got {type(text).__name__}")
    name: str | None = None
    isa = ISA_VERSION
    symbols: list[str] = []
    reassociate = False
    params: list[BufferParam | ScalarParam] = []
    temps: list[BufferParam] = []
    sites: list[Site] = []
    stages: list[_StageBuilder] = []
    for lineno, raw in enumerate(text.split("\n"), 1):
        ln = LineReader(raw, lineno, file, text)
        first = ln.peek()
        if first is None:
            continue
        if first.kind == "directive":
            d = first.text
            if d in _HEADER_DIRECTIVES:
                if stages:
                    raise ISAError(f"{d} belongs in the program header, before the first .stage",
                                   ln.span(first.col, first.end))
                if d != ".program" and name is None:
                    raise ISAError("a program starts with '.program <name>'", ln.span(first.col, first.end))
            elif d in _STAGE_DIRECTIVES and not stages:
                raise ISAError(f"{d} outside a stage; start one with '.stage <name> domain [...] block [...]'",
                               ln.span(first.col, first.end))
            ln.i = 1
            if d == ".program":
                if name is not None:
                    raise ISAError("a second .program directive (one program per text)", ln.span(first.col, first.end))
                name = ln.name("the program name")
            elif d == ".isa":
                isa = ln.int("the ISA version (an integer)")
            elif d == ".symbols":
                while ln.peek() is not None:
                    symbols.append(ln.name("a symbol name"))
            elif d == ".reassociate":
                if reassociate:
                    raise ISAError("a second .reassociate directive", ln.span(first.col, first.end))
                reassociate = True
            elif d in (".param", ".temp"):
                _parse_param(ln, d, params, temps)
            elif d == ".site":
                sites.append(_parse_site(ln, len(sites)))
            elif d == ".stage":
                if name is None:
                    raise ISAError("a program starts with '.program <name>'", ln.span(first.col, first.end))
                stages.append(_parse_stage_header(ln))
            elif d == ".reg":
                regs = [ln.reg()]
                while ln.accept(","):
                    regs.append(ln.reg())
                ln.punct(":")
                dt = ln.dtype()
                stages[-1].regs.extend(RegDecl(r.name, dt) for r in regs)
            elif d in (".shared", ".pool"):
                mname = ln.name("an array name")
                ln.punct(":")
                dt = ln.dtype()
                ln.punct("[")
                size = ln.int("the number of elements")
                ln.punct("]")
                (stages[-1].shared if d == ".shared" else stages[-1].pools).append(MemDecl(mname, dt, size))
            elif d == ".init":
                buf = ln.name("a buffer name")
                ln.punct("[")
                off = ln.int("an element offset")
                ln.punct("]")
                ln.punct("=")
                stages[-1].inits.append(Init(buf, off, ln.value()))
            else:
                known = _HEADER_DIRECTIVES + (".stage",) + _STAGE_DIRECTIVES
                raise ISAError(f"unknown directive {d!r} (expected one of {', '.join(known)})"
                               f"{did_you_mean(d, known)}", ln.span(first.col, first.end))
            ln.end()
            continue
        if not stages:
            raise ISAError("instruction outside a stage; start one with '.stage <name> domain [...] block [...]'"
                           if name is not None else "a program starts with '.program <name>'",
                           ln.span(first.col, first.end))
        nxt = ln.peek(1)
        if first.kind in ("word", "str") and nxt is not None and nxt.text == ":" and nxt.kind == "punct":
            stages[-1].body.append(Label(ln.name("a label")))
            ln.i += 1
            if ln.peek() is None:
                continue
        stages[-1].body.append(_parse_instr(ln))
        ln.end()
    if name is None:
        raise ISAError("empty program: expected '.program <name>'", Span(file, 1, 1, source=text))
    return Program(name, tuple(params), tuple(temps), tuple(symbols), tuple(s.build() for s in stages), isa,
                   reassociate, tuple(sites))


def _parse_site(ln: LineReader, k: int) -> Site:
    """`.site K "file" line:col-end "text"`, numbered 0, 1, 2... in order."""
    t = ln.peek()
    if ln.int("the site's number") != k:
        raise ISAError(f"sites are numbered in order: expected .site {k}", ln.span(t.col, t.end) if t else ln.span(1))
    file = ln.string("the site's file name (a string)")
    line = ln.int("the line number")
    ln.punct(":")
    col = ln.int("the column")
    ln.punct("-")
    end = ln.int("the end column")
    return Site(file, line, col, end, ln.string("the text of the line (a string)"))


def _parse_param(ln: LineReader, d: str, params: list, temps: list) -> None:
    role: str | None = None
    pname = ln.name("a parameter name" if d == ".param" else "a temporary's name")
    if not ln.at("punct", ":"):
        role, pname = pname, ln.name("the name after the role")
    ln.punct(":")
    dt = ln.dtype()
    if ln.at("punct", "["):
        if d == ".param" and role is None:
            raise ISAError(f"buffer parameter {pname!r} needs a role: '.param in|out|inout {pname}: ...'",
                           ln.span(ln.toks[1].col, ln.toks[1].end))
        buf = BufferParam(pname, dt, ln.dims("a shape"), "temp" if role is None else role)
        (params if d == ".param" else temps).append(buf)
    elif d == ".temp" or role is not None:
        raise ln.error("a shape '[...]' (buffers have shapes; write [] for a 0-d buffer)")
    else:
        params.append(ScalarParam(pname, dt))


def _parse_stage_header(ln: LineReader) -> _StageBuilder:
    sname = ln.name("the stage name")
    ln.take("word", "'domain'", "domain")
    domain = ln.dims("the domain")
    ln.take("word", "'block'", "block")
    ln.punct("[")
    block: list[int] = []
    if not ln.accept("]"):
        block.append(ln.int("a block size (integer)"))
        while ln.accept(","):
            block.append(ln.int("a block size (integer)"))
        ln.take("punct", "',' or ']' in the block", "]")
    return _StageBuilder(sname, domain, tuple(block))


_KIND_NAMES = {"d": "destination register", "s": "source operand", "m": "memory operand [buf + %r + k]",
               "l": "label", "p": "pool name", "n": "element count"}


def _parse_instr(ln: LineReader) -> Instr:
    pred = None
    if ln.at("pred"):
        negate = ln.take("pred", "a predicate").text == "@!"
        pred = Pred(ln.reg(), negate)
    t = ln.take("word", "an instruction or label")
    op, *suffixes = t.text.split(".")
    spec = OPCODES.get(op)
    if spec is None:
        raise ISAError(f"unknown opcode {op!r}{did_you_mean(op, OPCODES)}", ln.span(t.col, t.col + len(op)))
    dtypes: list[DType] = []
    mod: str | None = None
    checked = False
    for s in suffixes:
        if s in DTYPES and len(dtypes) < 2:
            dtypes.append(DTYPES[s])
        elif s == "chk" and not checked:
            checked = True
        elif s not in DTYPES and s != "chk" and mod is None:
            mod = s
        else:
            raise ISAError(f"unexpected suffix .{s} on {op} (expected at most a modifier, a type, "
                           f"a second type for CVT, and .chk)", ln.span(t.col, t.end))
    fields: dict = {"dst": None, "addr": None, "target": None, "count": None}
    srcs: list[Operand] = []
    for k, kind in enumerate(spec.form):
        if k and not ln.accept(","):
            raise ln.error(f"',' and a {_KIND_NAMES[kind]} ({op} takes {_form_text(spec.form)})")
        if ln.peek() is None:
            raise ln.error(f"a {_KIND_NAMES[kind]} ({op} takes {_form_text(spec.form)})")
        if kind == "d":
            fields["dst"] = ln.reg()
        elif kind == "s":
            srcs.append(ln.operand())
        elif kind == "m":
            fields["addr"] = ln.addr()
        elif kind in "lp":
            fields["target"] = ln.name(f"a {_KIND_NAMES[kind]}")
        else:
            fields["count"] = ln.int("an element count")
    site = None
    if ln.at("word", "site"):
        ln.i += 1
        site = ln.int("the site number")
    if ln.peek() is not None:
        raise ln.error(f"end of instruction ({op} takes {_form_text(spec.form) or 'no operands'}, then "
                       f"optionally `site N`)", rest=True)
    return Instr(op, dtypes[0] if dtypes else None, fields["dst"], tuple(srcs), fields["addr"], fields["target"],
                 mod, dtypes[1] if len(dtypes) > 1 else None, fields["count"], pred, checked, site)


def _form_text(form: str) -> str:
    return ", ".join(_KIND_NAMES[k] for k in form)
