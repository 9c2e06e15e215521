"""The verifier's rules on declarations (rules 1 and 2 of verifier.py), and the scope of a
stage that the later rules look names up in and report failures through.

Program: ISA version, names, symbols, parameter roles and shapes (dimensions over the
declared symbols, within 64 bits, within the rank and size limits). Stage: domain and
block, registers, shared and pool arrays (and the block scratch they add up to), inits
(values representable, offsets proven in bounds even for an empty domain), labels.
`representable` is the rule on immediates that inits share with instructions.
"""

from __future__ import annotations

import math
import re

import attrs
import numpy as np

from hologram.core.dims import is_derived, parse_derived
from hologram.core.errors import VerifyError, did_you_mean, shorten
from hologram.core.types import Affine, DType, python_scalar
from hologram.isa.asm import format_instr
from hologram.isa.encoding import SUPPORTED_ISA_VERSIONS
from hologram.isa.program import BufferParam, Instr, Label, Program, ScalarParam, Stage
from hologram.verify.intervals import Domain, Poly

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
PARAM_ROLES = ("in", "out", "inout")
MAX_BLOCK_THREADS = 1024
MAX_SHARED_ELEMENTS = 1 << 16  # per array (the stage's total is bounded in bytes, below)
MAX_POOL_ELEMENTS = 1 << 12  # per pool
# A stage's block scratch (docs/isa.md, "Block scratch"): its shared arrays must fit a
# GPU's workgroup memory, and everything a block holds at once must fit any backend.
MAX_SHARED_BYTES = 32 << 10
MAX_BLOCK_SCRATCH_BYTES = 1 << 20
REGISTER_BYTES = 8  # what one register counts for in the block scratch, whatever its type
MAX_DIMS = 3
# Limits on a program's shape that keep verification cheap (docs/hasm.md, "Limits"), far
# above what the DSL makes (rank <= 32: the front end's own limit).
MAX_RANK = 64  # dimensions of a buffer (numpy's own limit)
MAX_SIZE_TERMS = 256  # the product of a buffer's dimensions' term counts
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1  # the range of dimension terms and memory offsets


def representable(value: object, t: DType) -> bool:
    """True when the immediate `value` denotes exactly one value of type `t`: bools for
    bool, in-range ints for integers, and for floats an int or float the type holds
    exactly (NaN and infinities included), so no backend ever rounds a constant."""
    v = python_scalar(value)
    if t is DType.BOOL:
        return isinstance(v, bool)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    if t.is_int:
        return isinstance(v, int) and t.min <= v <= t.max
    try:
        x = float(v)
    except OverflowError:
        return False
    if math.isnan(x) or math.isinf(x):
        return isinstance(v, float)
    with np.errstate(over="ignore"):
        return x == v and float(t.np.type(x)) == x


@attrs.frozen
class BlockScratch:
    """What one block of a stage holds at once (docs/isa.md, "Block scratch"): its shared
    arrays' bytes, and per lane its pools' bytes and, when the stage has a BarSync (every
    lane of the block is then suspended at once), its registers' bytes."""

    shared: int
    lanes: int
    pool: int  # per lane
    registers: int  # per lane; 0 without a BarSync

    @property
    def total(self) -> int:
        return self.shared + self.lanes * (self.pool + self.registers)

    def describe(self) -> str:
        lanes = f"{self.lanes:,} lane{'s' if self.lanes != 1 else ''}"
        return f"{lanes} x ({self.pool:,} pool + {self.registers:,} register bytes) + {self.shared:,} shared bytes"


def block_scratch(s: Stage) -> BlockScratch:
    """The block scratch of `s`, whose block and array sizes are already checked."""
    barrier = any(isinstance(item, Instr) and item.op == "BarSync" for item in s.body)
    return BlockScratch(shared=sum(m.size * m.dtype.itemsize for m in s.shared), lanes=math.prod(s.block),
                        pool=sum(m.size * m.dtype.itemsize for m in s.pools),
                        registers=REGISTER_BYTES * len(s.regs) if barrier else 0)


def verify_error(rule: str, message: str, hint: str | None = None, stage: str | None = None,
                 index: int | None = None) -> VerifyError:
    """The VerifyError for a broken `rule`, with the stage and instruction index it names."""
    err = VerifyError(message, hint=hint)
    err.rule, err.stage, err.index = rule, stage, index
    return err


def _instr_text(item: Instr | Label) -> str:
    """The item's assembly text for a message, cut short when long (an immediate beyond
    64 bits prints as hundreds of digits; an offset beyond 4300 digits does not print)."""
    if isinstance(item, Label):
        return f"{item.name}:"
    try:
        text = format_instr(item, align=False)
    except ValueError:  # Python's limit on int-to-decimal conversion
        return f"{item.op} ..."
    return text if len(text) <= 120 else text[:100] + " ..."


def _is_name(x: object) -> bool:
    return isinstance(x, str) and NAME.match(x) is not None


# =========================================================================== program
def check_program(p: Program) -> None:
    """Rule 1: the program's version, names, symbols and parameters."""
    where = f"program {p.name!r}"
    fail = lambda rule, msg, hint=None: verify_error(rule, f"{where}: {msg}", hint)  # noqa: E731
    if p.isa_version not in SUPPORTED_ISA_VERSIONS:
        raise fail("isa-version", f"ISA version {shorten(p.isa_version)} is not supported (this Hologram runs "
                                  f"{', '.join(map(str, SUPPORTED_ISA_VERSIONS))})")
    if not _is_name(p.name):
        raise fail("name", "the program name must be an identifier ([A-Za-z_][A-Za-z0-9_]*)")
    seen: dict[str, str] = {}
    for n in p.symbols:
        if isinstance(n, str) and is_derived(n):
            _check_derived(n, seen, fail)
        _declare(seen, n, "symbol", fail)
    for prm in p.params:
        if isinstance(prm, ScalarParam):
            _declare(seen, prm.name, "scalar parameter", fail)
        else:
            _check_buffer(p, prm, "buffer parameter", PARAM_ROLES, seen, fail)
    for t in p.temps:
        _check_buffer(p, t, "temporary", ("temp",), seen, fail)
    stage_names: set[str] = set()
    for s in p.stages:
        if not _is_name(s.name):
            raise fail("name", f"stage name {s.name!r} is not an identifier")
        if s.name in stage_names:
            raise fail("duplicate", f"two stages are named {s.name!r}")
        stage_names.add(s.name)
    _check_sites(p)


def _check_sites(p: Program) -> None:
    """Rule `site`: each site a position in a document (line, columns >= 1, the end after
    the start), each instruction's site an index into the table."""
    for k, site in enumerate(p.sites):
        if not (1 <= site.line <= I64_MAX and 1 <= site.col < site.end_col <= I64_MAX):
            raise verify_error("site", f"program {p.name!r}: site {k} ({shorten(site.line)}:{shorten(site.col)}-"
                                       f"{shorten(site.end_col)}) is not a position in a document (line >= 1, "
                                       f"1 <= col < end col)")
    for s in p.stages:
        for pc, it in enumerate(s.body):
            if isinstance(it, Instr) and it.site is not None and not 0 <= it.site < len(p.sites):
                raise verify_error("site", f"stage '{s.name}': instruction {pc} `{_instr_text(it)}`: site "
                                           f"{shorten(it.site)} is not among the program's {len(p.sites)} site(s)",
                                   stage=s.name, index=pc)


def _check_buffer(p: Program, b: BufferParam, kind: str, roles: tuple[str, ...], seen: dict, fail) -> None:
    _declare(seen, b.name, kind, fail)
    if b.role not in roles:
        raise fail("role", f"{kind} {b.name!r} has role {b.role!r}; expected {' or '.join(map(repr, roles))}")
    _check_dims(p, b.shape, f"the shape of {b.name!r}", fail)
    if len(b.shape) > MAX_RANK:
        raise fail("limit", f"{kind} {b.name!r} has {len(b.shape)} dimensions; the verifier allows at most "
                            f"{MAX_RANK}")
    # its element count, the product of the dimensions, has at most this many terms
    terms = math.prod(len(d.terms) + (d.const != 0 or not d.terms) for d in b.shape)
    if terms > MAX_SIZE_TERMS:
        raise fail("limit", f"the element count of {kind} {b.name!r}, the product of its dimensions, is a polynomial "
                            f"of up to {terms} terms; the verifier allows at most {MAX_SIZE_TERMS}",
                   "use fewer dimensions that are sums of several symbols")


def _check_derived(name: str, seen: dict[str, str], fail) -> None:
    """A derived symbol (hologram.core.dims): its name is the canonical text of its
    definition, over symbols declared before it; its value is computed at launch."""
    d = parse_derived(name)
    if d is None:
        raise fail("name", f"symbol name {shorten(name)!r} is neither an identifier nor a derived symbol's "
                           "definition (max(A, B), min(A, B), P//K, P*Q)")
    for k in (d.a.const, d.b.const, *(c for _, c in d.a.terms + d.b.terms)):
        if not I64_MIN <= k <= I64_MAX:
            raise fail("range", f"derived symbol {name!r} has the integer {shorten(k)}, beyond 64 bits")
    for s in d.symbols:
        if seen.get(s) != "symbol":
            raise fail("symbol", f"derived symbol {name!r} reads {s!r}, which is not a symbol declared before it")


def _declare(seen: dict[str, str], name: object, kind: str, fail) -> None:
    if not (_is_name(name) or kind == "symbol" and isinstance(name, str) and is_derived(name)):
        raise fail("name", f"{kind} name {name!r} is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")
    if name in seen:
        raise fail("duplicate", f"{name!r} is declared twice (as a {seen[name]} and as a {kind})")
    seen[name] = kind


def _check_dims(p: Program, dims: tuple[Affine, ...], what: str, fail) -> None:
    for d in dims:
        for k in (d.const, *(c for _, c in d.terms)):
            if not I64_MIN <= k <= I64_MAX:
                raise fail("range", f"{what} has the integer {shorten(k)} in a dimension, beyond 64 bits")
        for sym in d.symbols:
            if sym not in p.symbols:
                raise fail("symbol", f"{what} uses symbol {sym!r}, which is not among the program's symbols "
                                     f"({', '.join(p.symbols) or 'none'}){did_you_mean(sym, p.symbols)}")


# ============================================================================= stage
class StageScope:
    """What one stage declares, once `check_launch` and `check_decls` have passed: its
    program's buffers and scalars, its register types and label positions. `fail` makes
    a VerifyError naming the stage and, given `pc`, the instruction."""

    def __init__(self, p: Program, s: Stage):
        self.p, self.s = p, s
        self.buffers = p.buffers()
        self.scalars = p.scalars()
        self.types: dict[str, DType] = {}
        self.labels: dict[str, int] = {}

    def fail(self, rule: str, msg: str, hint: str | None = None, pc: int | None = None) -> VerifyError:
        where = f"program {self.p.name!r}, stage {self.s.name!r}"
        if pc is not None:
            item = self.s.body[pc]
            where += f", instruction {pc} `{_instr_text(item)}`"
        return verify_error(rule, f"{where}: {msg}", hint, self.s.name, pc)

    def check_launch(self) -> None:
        """Rule 2: the domain and the block."""
        s, fail = self.s, lambda rule, msg, hint=None: self.fail(rule, msg, hint)  # noqa: E731
        if not 1 <= len(s.domain) <= MAX_DIMS:
            raise fail("domain", f"the domain has {len(s.domain)} dimensions; expected 1 to {MAX_DIMS}")
        _check_dims(self.p, s.domain, "the domain", fail)
        block = [int(b) for b in s.block]  # Python ints: numpy ones would wrap in the product
        shown = f"[{', '.join(map(shorten, block))}]"
        if len(block) != len(s.domain):
            raise fail("block", f"the block {shown} must have one size per domain dimension ({len(s.domain)})")
        if not all(b >= 1 for b in block):
            raise fail("block", f"block sizes must be positive integers, got {shown}")
        if math.prod(block) > MAX_BLOCK_THREADS:
            raise fail("block", f"a block of {shorten(math.prod(block))} lanes exceeds the limit of "
                                f"{MAX_BLOCK_THREADS}")

    def _check_scratch(self) -> None:
        """Rule `scratch`: the shared arrays fit a GPU's workgroup memory, and the block
        scratch (shared, and per lane pools and a barrier's registers) fits every backend."""
        scratch = block_scratch(self.s)
        if scratch.shared > MAX_SHARED_BYTES:
            raise self.fail("scratch", f"the shared arrays take {scratch.shared:,} bytes; the limit is "
                                       f"{MAX_SHARED_BYTES:,} bytes (a GPU's workgroup memory)",
                            "use fewer or smaller shared arrays")
        if scratch.total > MAX_BLOCK_SCRATCH_BYTES:
            raise self.fail("scratch", f"the block scratch is {scratch.total:,} bytes ({scratch.describe()}); "
                                       f"the limit is {MAX_BLOCK_SCRATCH_BYTES:,} bytes",
                            "use smaller blocks or pools, or fewer registers in a stage with BarSync "
                            "(docs/isa.md, \"Block scratch\")")

    def check_decls(self) -> None:
        """Rule 2: registers, shared and pool arrays, inits and labels."""
        s, fail = self.s, lambda rule, msg, hint=None: self.fail(rule, msg, hint)  # noqa: E731
        for r in s.regs:
            if not _is_name(r.name):
                raise fail("name", f"register name {r.name!r} is not an identifier")
            if r.name in self.types:
                raise fail("duplicate", f"register %{r.name} is declared twice")
            self.types[r.name] = r.dtype
        arrays: set[str] = set()
        for kind, decls, cap in (("shared", s.shared, MAX_SHARED_ELEMENTS), ("pool", s.pools, MAX_POOL_ELEMENTS)):
            for m in decls:
                if not _is_name(m.name):
                    raise fail("name", f"{kind} array name {m.name!r} is not an identifier")
                if m.name in arrays or m.name in self.buffers:
                    raise fail("duplicate", f"{kind} array {m.name!r} reuses the name of another array or buffer")
                arrays.add(m.name)
                if not 1 <= m.size <= cap:
                    raise fail("size", f"{kind} array {m.name!r} has size {shorten(m.size)}; "
                                       f"expected 1 to {cap} elements")
        self._check_scratch()
        dims_only = Domain.from_dims([d for b in self.buffers.values() for d in b.shape], ())
        for i in s.inits:
            b = self.buffers.get(i.buffer)
            if b is None:
                raise fail("init", f".init names {i.buffer!r}, which is not a global buffer"
                                   f"{did_you_mean(str(i.buffer), self.buffers)}")
            if b.role == "in":
                raise fail("readonly", f".init writes buffer {b.name!r}, whose role is 'in' (read-only)")
            if not I64_MIN <= i.offset <= I64_MAX:
                raise fail("range", f".init {b.name}[{shorten(i.offset)}]: the offset is beyond 64 bits")
            if not representable(i.value, b.dtype):
                raise fail("immediate", f".init {b.name}[{i.offset}] = {shorten(i.value)}: the value is not exactly "
                                        f"representable in {b.dtype}")
            size = Poly.const(1)
            for d in b.shape:
                size = size * Poly.of(d)
            offset = Poly.const(int(i.offset))
            if not (dims_only.nonneg(offset) and dims_only.le(offset, size - 1)):
                raise fail("bounds", f".init {b.name}[{i.offset}] may be out of bounds: {b.name} has {size} "
                                     f"element(s) and inits run even when the domain is empty")
        for pc, item in enumerate(s.body):
            if isinstance(item, Label):
                if not _is_name(item.name):
                    raise self.fail("name", f"label name {item.name!r} is not an identifier", pc=pc)
                if item.name in self.labels:
                    raise self.fail("duplicate", f"label {item.name!r} is defined twice "
                                                 f"(also at {self.labels[item.name]})",
                                    pc=pc)
                self.labels[item.name] = pc
