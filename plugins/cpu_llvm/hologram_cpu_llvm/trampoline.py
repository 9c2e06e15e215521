"""A native entry point for small launches: one Python builtin call per kernel launch.

Calling a stage through ctypes costs ~1 µs (seven arguments converted one by one), and
reading each array's data pointer, packing them and allocating an error slot in Python
costs about as much again. `native_launcher` instead makes a real builtin function
(`PyCFunction_NewEx` over one `METH_FASTCALL` function compiled here, once per process)
that is called with the arrays and numpy scalars themselves and, in native code:

1. checks every argument against the plan it was made for, from numpy's C struct: an
   exact `ndarray` with the expected dtype object, rank and dimensions, C-contiguous,
   writeable if the program writes it; a numpy scalar of exactly the declared type.
   On any difference it runs nothing and returns False (the caller then takes its
   full, fully explained path). So native code never trusts the caller for sizes;
2. reads each array's data pointer (`PyArray_DATA`) and each scalar's value (`obval`);
3. tests every (written, other) buffer pair for overlapping address ranges; on any
   overlap it runs nothing and calls `fallback(*args)` instead (the general path,
   which copies or refuses as `launch` does);
4. calls each stage function in order (the stage ABI of runtime.py, with the GIL held:
   only stages small enough to run inline use this), the program's temporaries (arrays
   the launcher allocated once, zeroed here) after the parameters; when a stage sets its error
   slot it calls `on_error(record)` with the 32-byte record, which raises. Returns None.
   On the main thread (`PyThread_get_thread_ident()`, Python's thread id, is the one in
   the cancel block, cancel.py) the error slot
   carries the CANCELLABLE mark, and a cancel flag left from an earlier Ctrl-C is
   dropped first, as `cancel.begin` does for the Python path.

The function is data-driven: its `self` is a tuple (block, fallback, on_error, keep),
where `block` is a bytes object of i64 words describing the launch (counts, symbol
values, alias pairs with byte sizes, stage function addresses and grids, per buffer
the dtype, flags, rank and dimensions it accepts, per scalar its type and size, and the
addresses of the few C-API functions and objects it uses) and `keep` holds the objects
whose addresses the block records. Nothing is compiled per kernel or per shape. The
object layouts it relies on (object type, tuple items, bytes data, the ndarray fields,
scalar values) are checked at first use against what Python and numpy report; if any
differs, `available()` is False and the Python launcher is used.
"""

from __future__ import annotations

import ctypes
import struct
import sys
import threading
from typing import Any, Callable, Sequence

import numpy as np

from hologram.backend import FORK_GUARD, Value, renew_in_child

from .abi import CANCEL_MAIN_THREAD, CANCEL_SYMBOL, CANCELLABLE

_OB_TYPE = 8  # PyObject: ob_refcnt, then ob_type
_TUPLE_ITEMS = tuple.__basicsize__  # PyTupleObject: header, ob_size, then ob_item[]
_BYTES_DATA = bytes.__basicsize__ - 1  # PyBytesObject: header, ob_size, ob_shash, then ob_sval[1]
# PyArrayObject_fields (numpy's public struct): PyObject_HEAD, then char *data, int nd,
# npy_intp *dimensions, npy_intp *strides, PyObject *base, PyArray_Descr *descr, int flags
_ARRAY_DATA = object.__basicsize__
_ARRAY_ND = _ARRAY_DATA + 8
_ARRAY_DIMS = _ARRAY_DATA + 16
_ARRAY_DESCR = _ARRAY_DATA + 40
_ARRAY_FLAGS = _ARRAY_DATA + 48
C_CONTIGUOUS, WRITEABLE = 0x0001, 0x0400  # NPY_ARRAY_C_CONTIGUOUS, NPY_ARRAY_WRITEABLE
_SCALAR_VALUE = object.__basicsize__  # numpy scalar objects: PyObject_HEAD, then `obval`
_HEADER = 20  # words before the variable parts of the block
_IDENT_BITS = 8 * ctypes.sizeof(ctypes.c_ulong)  # PyThread_get_thread_ident's unsigned long

_IR = r"""
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
@CANCEL_SYMBOL = external global i8

define internal i64 @word(ptr %base, i64 %k) alwaysinline {
  %p = getelementptr i64, ptr %base, i64 %k
  %v = load i64, ptr %p
  ret i64 %v
}

define internal i64 @field(ptr %obj, i64 %offset) alwaysinline {
  %p = getelementptr i8, ptr %obj, i64 %offset
  %v = load i64, ptr %p
  ret i64 %v
}

define internal i64 @field32(ptr %obj, i64 %offset) alwaysinline {
  %p = getelementptr i8, ptr %obj, i64 %offset
  %v = load i32, ptr %p
  %w = sext i32 %v to i64
  ret i64 %w
}

; probed: its arrays of pointers and scalars grow with the program's parameters
define ptr @hologram_launch(ptr %self, ptr %args, i64 %nargsf) "probe-stack"="inline-asm" {
entry:
  %selfitems = getelementptr i8, ptr %self, i64 TUPLE_ITEMS
  %blockobj = load ptr, ptr %selfitems
  %blk = getelementptr i8, ptr %blockobj, i64 BYTES_DATA
  %nbufs = call i64 @word(ptr %blk, i64 0)
  %nscal = call i64 @word(ptr %blk, i64 1)
  %npairs = call i64 @word(ptr %blk, i64 2)
  %nstages = call i64 @word(ptr %blk, i64 3)
  %incref.i = call i64 @word(ptr %blk, i64 4)
  %incref = inttoptr i64 %incref.i to ptr
  %none.i = call i64 @word(ptr %blk, i64 5)
  %none = inttoptr i64 %none.i to ptr
  %vcall.i = call i64 @word(ptr %blk, i64 6)
  %vcall = inttoptr i64 %vcall.i to ptr
  %mkbytes.i = call i64 @word(ptr %blk, i64 7)
  %mkbytes = inttoptr i64 %mkbytes.i to ptr
  %decref.i = call i64 @word(ptr %blk, i64 8)
  %decref = inttoptr i64 %decref.i to ptr
  %soff = call i64 @word(ptr %blk, i64 9)
  %syms = getelementptr i64, ptr %blk, i64 %soff
  %poff = call i64 @word(ptr %blk, i64 10)
  %pairs = getelementptr i64, ptr %blk, i64 %poff
  %goff = call i64 @word(ptr %blk, i64 11)
  %stages = getelementptr i64, ptr %blk, i64 %goff
  %arraytype = call i64 @word(ptr %blk, i64 12)
  %false.i = call i64 @word(ptr %blk, i64 13)
  %false = inttoptr i64 %false.i to ptr
  %roff = call i64 @word(ptr %blk, i64 14)
  %recs = getelementptr i64, ptr %blk, i64 %roff
  %toff = call i64 @word(ptr %blk, i64 15)
  %stypes = getelementptr i64, ptr %blk, i64 %toff
  %zoff = call i64 @word(ptr %blk, i64 16)
  %ident.i = call i64 @word(ptr %blk, i64 17)
  %ident = inttoptr i64 %ident.i to ptr
  %sizes = getelementptr i64, ptr %blk, i64 %zoff
  %ntemps = call i64 @word(ptr %blk, i64 18)
  %tpoff = call i64 @word(ptr %blk, i64 19)
  %tptrs = getelementptr i64, ptr %blk, i64 %tpoff
  %nargs = and i64 %nargsf, 9223372036854775807
  %want = add i64 %nbufs, %nscal
  %argsok = icmp eq i64 %nargs, %want
  %nptrs = add i64 %nbufs, %ntemps
  %ptrs = alloca i64, i64 %nptrs, align 8
  %parts = alloca i64, i64 %nptrs, align 8
  %scal = alloca i64, i64 %nscal, align 8
  %err = alloca [4 x i64], align 8
  call void @llvm.memset.p0.i64(ptr %err, i8 0, i64 32, i1 false)
  br i1 %argsok, label %bufloop, label %decline

bufloop:
  %i = phi i64 [0, %entry], [%i1, %bufnext]
  %bdone = icmp sge i64 %i, %nbufs
  br i1 %bdone, label %scalloop, label %buftype
buftype:
  %argp = getelementptr ptr, ptr %args, i64 %i
  %obj = load ptr, ptr %argp
  %type = call i64 @field(ptr %obj, i64 OB_TYPE)
  %tok = icmp eq i64 %type, %arraytype
  br i1 %tok, label %bufdescr, label %decline
bufdescr:
  %r4 = mul i64 %i, 4
  %rec = getelementptr i64, ptr %recs, i64 %r4
  %descr = call i64 @field(ptr %obj, i64 ARRAY_DESCR)
  %wantdescr = call i64 @word(ptr %rec, i64 0)
  %dok = icmp eq i64 %descr, %wantdescr
  br i1 %dok, label %bufflags, label %decline
bufflags:
  %flags = call i64 @field32(ptr %obj, i64 ARRAY_FLAGS)
  %req = call i64 @word(ptr %rec, i64 1)
  %has = and i64 %flags, %req
  %fok = icmp eq i64 %has, %req
  br i1 %fok, label %bufnd, label %decline
bufnd:
  %nd = call i64 @field32(ptr %obj, i64 ARRAY_ND)
  %wantnd = call i64 @word(ptr %rec, i64 2)
  %ndok = icmp eq i64 %nd, %wantnd
  br i1 %ndok, label %dimstart, label %decline
dimstart:
  %dims.i = call i64 @field(ptr %obj, i64 ARRAY_DIMS)
  %dims = inttoptr i64 %dims.i to ptr
  %doff = call i64 @word(ptr %rec, i64 3)
  %wantdims = getelementptr i64, ptr %blk, i64 %doff
  br label %dimloop
dimloop:
  %k = phi i64 [0, %dimstart], [%k1, %dimnext]
  %kdone = icmp sge i64 %k, %nd
  br i1 %kdone, label %bufnext, label %dimbody
dimbody:
  %got = call i64 @word(ptr %dims, i64 %k)
  %exp = call i64 @word(ptr %wantdims, i64 %k)
  %kok = icmp eq i64 %got, %exp
  br i1 %kok, label %dimnext, label %decline
dimnext:
  %k1 = add i64 %k, 1
  br label %dimloop
bufnext:
  %data = call i64 @field(ptr %obj, i64 ARRAY_DATA)
  %dst = getelementptr i64, ptr %ptrs, i64 %i
  store i64 %data, ptr %dst
  %i1 = add i64 %i, 1
  br label %bufloop

scalloop:
  %s = phi i64 [0, %bufloop], [%s1, %scalbody]
  %sdone = icmp sge i64 %s, %nscal
  br i1 %sdone, label %temploop, label %scaltype
scaltype:
  %ai = add i64 %s, %nbufs
  %sargp = getelementptr ptr, ptr %args, i64 %ai
  %sobj = load ptr, ptr %sargp
  %stype = call i64 @field(ptr %sobj, i64 OB_TYPE)
  %wanttype = call i64 @word(ptr %stypes, i64 %s)
  %stok = icmp eq i64 %stype, %wanttype
  br i1 %stok, label %scalbody, label %decline
scalbody:
  %valp = getelementptr i8, ptr %sobj, i64 SCALAR_VALUE
  %sz = call i64 @word(ptr %sizes, i64 %s)
  %sdst = getelementptr i64, ptr %scal, i64 %s
  store i64 0, ptr %sdst
  call void @llvm.memcpy.p0.p0.i64(ptr %sdst, ptr %valp, i64 %sz, i1 false)
  %s1 = add i64 %s, 1
  br label %scalloop

decline:
  call void %incref(ptr %false)
  ret ptr %false

; the temporaries: memory the launcher owns, after the parameters, zeroed per launch
temploop:
  %u = phi i64 [0, %scalloop], [%u1, %tempbody]
  %udone = icmp sge i64 %u, %ntemps
  br i1 %udone, label %pairloop, label %tempbody
tempbody:
  %u2 = mul i64 %u, 2
  %tp = call i64 @word(ptr %tptrs, i64 %u2)
  %u2a = add i64 %u2, 1
  %tbytes = call i64 @word(ptr %tptrs, i64 %u2a)
  %tmem = inttoptr i64 %tp to ptr
  call void @llvm.memset.p0.i64(ptr %tmem, i8 0, i64 %tbytes, i1 false)
  %ui = add i64 %u, %nbufs
  %tdst = getelementptr i64, ptr %ptrs, i64 %ui
  store i64 %tp, ptr %tdst
  %u1 = add i64 %u, 1
  br label %temploop

pairloop:
  %q = phi i64 [0, %temploop], [%q1, %pairnext]
  %qdone = icmp sge i64 %q, %npairs
  br i1 %qdone, label %cancelmark, label %pairbody
pairbody:
  %q4 = mul i64 %q, 4
  %bi = call i64 @word(ptr %pairs, i64 %q4)
  %q4a = add i64 %q4, 1
  %bj = call i64 @word(ptr %pairs, i64 %q4a)
  %q4b = add i64 %q4, 2
  %ni = call i64 @word(ptr %pairs, i64 %q4b)
  %q4c = add i64 %q4, 3
  %nj = call i64 @word(ptr %pairs, i64 %q4c)
  %pi = call i64 @word(ptr %ptrs, i64 %bi)
  %pj = call i64 @word(ptr %ptrs, i64 %bj)
  %endi = add i64 %pi, %ni
  %endj = add i64 %pj, %nj
  %c1 = icmp ult i64 %pj, %endi
  %c2 = icmp ult i64 %pi, %endj
  %ov = and i1 %c1, %c2
  br i1 %ov, label %fallback, label %pairnext
pairnext:
  %q1 = add i64 %q, 1
  br label %pairloop

; the main thread's launch: Ctrl-C may stop it (see the module docstring)
cancelmark:
  CALL_IDENT
  %mainp = getelementptr i8, ptr @CANCEL_SYMBOL, i64 CANCEL_MAIN_THREAD
  %main = load i64, ptr %mainp, align 8
  %ismain = icmp eq i64 %me, %main
  br i1 %ismain, label %mainlaunch, label %marked
mainlaunch:
  %stale = load atomic i8, ptr @CANCEL_SYMBOL monotonic, align 1
  %isstale = icmp ne i8 %stale, 0
  br i1 %isstale, label %dropstale, label %markit
dropstale:
  store atomic i8 0, ptr @CANCEL_SYMBOL monotonic, align 1
  br label %markit
markit:
  %markp = getelementptr i64, ptr %err, i64 3
  store i64 CANCELLABLE, ptr %markp, align 8
  br label %marked
marked:
  br label %stageloop

fallback:
  %fbp = getelementptr i8, ptr %self, i64 TUPLE_ITEMS_1
  %fb = load ptr, ptr %fbp
  %rf = call ptr %vcall(ptr %fb, ptr %args, i64 %nargs, ptr null)
  ret ptr %rf

; a stage: (function, blocks, inits, their offset, reduced buffers, their offset)
stageloop:
  %g = phi i64 [0, %marked], [%g1, %stageok]
  %gdone = icmp sge i64 %g, %nstages
  br i1 %gdone, label %done, label %stagebody
stagebody:
  %g6 = mul i64 %g, 6
  %fn.i = call i64 @word(ptr %stages, i64 %g6)
  %fn = inttoptr i64 %fn.i to ptr
  %g6a = add i64 %g6, 1
  %nb = call i64 @word(ptr %stages, i64 %g6a)
  %g6b = add i64 %g6, 2
  %ninits = call i64 @word(ptr %stages, i64 %g6b)
  %g6c = add i64 %g6, 3
  %ioff = call i64 @word(ptr %stages, i64 %g6c)
  %inits = getelementptr i64, ptr %blk, i64 %ioff
  %g6d = add i64 %g6, 4
  %nred = call i64 @word(ptr %stages, i64 %g6d)
  %g6e = add i64 %g6, 5
  %rdoff = call i64 @word(ptr %stages, i64 %g6e)
  %reds = getelementptr i64, ptr %blk, i64 %rdoff
  br label %initloop
; .init: `bytes` bytes of a value word at a byte offset of a buffer (checked when made)
initloop:
  %q0 = phi i64 [0, %stagebody], [%q01, %initbody]
  %q0done = icmp sge i64 %q0, %ninits
  br i1 %q0done, label %redloop, label %initbody
initbody:
  %q04 = mul i64 %q0, 4
  %ib = call i64 @word(ptr %inits, i64 %q04)
  %q04a = add i64 %q04, 1
  %iofs = call i64 @word(ptr %inits, i64 %q04a)
  %q04b = add i64 %q04, 2
  %isz = call i64 @word(ptr %inits, i64 %q04b)
  %q04c = add i64 %q04, 3
  %ival = getelementptr i64, ptr %inits, i64 %q04c
  %ibase = call i64 @word(ptr %ptrs, i64 %ib)
  %iaddr.i = add i64 %ibase, %iofs
  %iaddr = inttoptr i64 %iaddr.i to ptr
  call void @llvm.memcpy.p0.p0.i64(ptr %iaddr, ptr %ival, i64 %isz, i1 false)
  %q01 = add i64 %q0, 1
  br label %initloop
; a reduced buffer is its own partial: one thread, and its every element seeded (made so)
redloop:
  %r1 = phi i64 [0, %initloop], [%r11, %redbody]
  %r1done = icmp sge i64 %r1, %nred
  br i1 %r1done, label %stagecall, label %redbody
redbody:
  %rb = call i64 @word(ptr %reds, i64 %r1)
  %rp = call i64 @word(ptr %ptrs, i64 %rb)
  %rdst = getelementptr i64, ptr %parts, i64 %r1
  store i64 %rp, ptr %rdst
  %r11 = add i64 %r1, 1
  br label %redloop
stagecall:
  %some = icmp sgt i64 %nb, 0
  br i1 %some, label %stagerun, label %stageok
stagerun:
  call void %fn(i64 0, i64 %nb, ptr %ptrs, ptr %syms, ptr %scal, ptr %parts, ptr %err)
  %e = load i64, ptr %err
  %bad = icmp ne i64 %e, 0
  br i1 %bad, label %failed, label %stageok
stageok:
  %g1 = add i64 %g, 1
  br label %stageloop

failed:
  %rec.b = call ptr %mkbytes(ptr %err, i64 32)
  %recok = icmp ne ptr %rec.b, null
  br i1 %recok, label %report, label %nomem
report:
  %ehp = getelementptr i8, ptr %self, i64 TUPLE_ITEMS_2
  %eh = load ptr, ptr %ehp
  %argv = alloca ptr, align 8
  store ptr %rec.b, ptr %argv
  %re = call ptr %vcall(ptr %eh, ptr %argv, i64 1, ptr null)
  call void %decref(ptr %rec.b)
  ret ptr %re
nomem:
  ret ptr null

done:
  call void %incref(ptr %none)
  ret ptr %none
}
"""

_METH_FASTCALL = 0x80


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]


_LOCK = threading.Lock()
renew_in_child(sys.modules[__name__], "_LOCK")
_STATE: dict[str, Any] = {}  # "keep" (what holds the code), "methoddef", "api": set once, kept for the process


def _layout_ok() -> bool:
    """The object layouts the native code reads, checked against this interpreter and numpy."""
    probe_t = (object(), object())
    probe_b = b"\x01\x02hologram"
    read = ctypes.c_void_p.from_address
    read32 = ctypes.c_int32.from_address
    try:
        if tuple.__itemsize__ != 8 or read(id(probe_t) + _TUPLE_ITEMS + 8).value != id(probe_t[1]):
            return False
        if read(id(probe_t) + _OB_TYPE).value != id(tuple):
            return False
        if ctypes.string_at(id(probe_b) + _BYTES_DATA, len(probe_b)) != probe_b:
            return False
        base = np.zeros((3, 4), np.float32)
        readonly = np.arange(3, dtype=np.int64)[1:]
        readonly.flags.writeable = False
        for a, flags in ((base, C_CONTIGUOUS | WRITEABLE), (base[:, ::2], WRITEABLE), (readonly, C_CONTIGUOUS)):
            if read(id(a) + _ARRAY_DATA).value != a.ctypes.data or read(id(a) + _ARRAY_DESCR).value != id(a.dtype):
                return False
            if read32(id(a) + _ARRAY_ND).value != a.ndim or read32(id(a) + _ARRAY_FLAGS).value & 0x0401 != flags:
                return False
            dims = read(id(a) + _ARRAY_DIMS).value
            if tuple(ctypes.c_int64.from_address(dims + 8 * k).value for k in range(a.ndim)) != a.shape:
                return False
        for t in (np.bool_, np.int8, np.uint16, np.int32, np.uint64, np.float16, np.float32, np.float64):
            v = t(1)
            if ctypes.string_at(id(v) + _SCALAR_VALUE, v.itemsize) != v.tobytes():
                return False
    except (OSError, ValueError):  # pragma: no cover - an unreadable probe
        return False
    return ctypes.sizeof(ctypes.c_void_p) == 8


ENTRY = "hologram_launch"
_ENTRY_NAME = ENTRY.encode()  # the method's name: C keeps a pointer to these bytes


def ir() -> str:
    """The entry point's LLVM IR, with this interpreter's object layout written in (so
    code built by one Python serves another only when `LAYOUT` is the same)."""
    return (_IR.replace("TUPLE_ITEMS_1", str(_TUPLE_ITEMS + 8)).replace("TUPLE_ITEMS_2", str(_TUPLE_ITEMS + 16))
            .replace("TUPLE_ITEMS", str(_TUPLE_ITEMS)).replace("BYTES_DATA", str(_BYTES_DATA))
            .replace("ARRAY_DATA", str(_ARRAY_DATA)).replace("ARRAY_ND", str(_ARRAY_ND))
            .replace("ARRAY_DIMS", str(_ARRAY_DIMS)).replace("ARRAY_DESCR", str(_ARRAY_DESCR))
            .replace("ARRAY_FLAGS", str(_ARRAY_FLAGS)).replace("OB_TYPE", str(_OB_TYPE))
            .replace("SCALAR_VALUE", str(_SCALAR_VALUE)).replace("CANCEL_SYMBOL", CANCEL_SYMBOL)
            .replace("CALL_IDENT", "%me = call i64 %ident()" if _IDENT_BITS == 64 else
                     f"%me.c = call i{_IDENT_BITS} %ident()\n  %me = zext i{_IDENT_BITS} %me.c to i64")
            .replace("CANCEL_MAIN_THREAD", str(CANCEL_MAIN_THREAD)).replace("CANCELLABLE", str(CANCELLABLE)))


# the offsets `ir()` writes into the code: object code carrying the entry point is
# adopted only by a process whose layout is the same
LAYOUT = (f"launch 4; ob_type {_OB_TYPE}; tuple {_TUPLE_ITEMS}; bytes {_BYTES_DATA}; array {_ARRAY_DATA}; "
          f"scalar {_SCALAR_VALUE}; thread id {_IDENT_BITS}")


def adopt(address: int, keep: Any) -> None:
    """Use the entry point at `address` (built from `ir()` into a kernel's object code,
    which `keep` holds alive) if none is in use yet: launches then need no LLVM."""
    with _LOCK:
        if "ok" not in _STATE:
            _finish(address, keep)


def _compiled() -> tuple[int, Any]:
    """The entry point compiled here by MCJIT (no IR pass pipeline: jit.STATS counts
    kernel compilations, and this hand-written function needs no optimizing)."""
    import llvmlite.binding as llvm

    with FORK_GUARD:  # the import too: a fork must not land inside it (hologram.core.forks)
        from . import jit

        module = llvm.parse_assembly(ir())
        module.verify()
        engine = llvm.create_mcjit_compiler(module, jit.target_machine())
        engine.finalize_object()
        return engine.get_function_address(ENTRY), engine


def _finish(address: int | None, keep: Any) -> dict[str, Any] | None:
    """Make the entry point at `address` (compiled here when None) usable; the caller
    holds `_LOCK`. Sets `_STATE["ok"]` once, for the process."""
    _STATE["ok"] = False
    if not _layout_ok():
        return None
    api = ctypes.pythonapi
    try:
        addresses = [ctypes.cast(getattr(api, n), ctypes.c_void_p).value
                     for n in ("Py_IncRef", "PyObject_Vectorcall", "PyBytes_FromStringAndSize", "Py_DecRef",
                               "PyThread_get_thread_ident")]
        new_function = api.PyCFunction_NewEx
    except AttributeError:  # pragma: no cover - a Python without these C-API functions
        return None
    new_function.restype = ctypes.py_object
    new_function.argtypes = (ctypes.c_void_p, ctypes.py_object, ctypes.py_object)
    if address is None:
        address, keep = _compiled()
    methoddef = _MethodDef(_ENTRY_NAME, address, _METH_FASTCALL, None)
    incref, vcall, mkbytes, decref, ident = addresses
    _STATE.update(ok=True, keep=keep, methoddef=methoddef, new_function=new_function,
                  api=(incref, id(None), vcall, mkbytes, decref), ident=ident)
    return _STATE


def _build() -> dict[str, Any] | None:
    with _LOCK:
        if "ok" in _STATE:
            return _STATE if _STATE["ok"] else None
        return _finish(None, None)


def available() -> bool:
    """Whether native launchers can be made in this process (built on first call)."""
    return _build() is not None


class NativeStage(Value):
    """A stage as the entry point runs it: its function, its block count, the `.init`s
    applied first ((buffer, byte offset, byte count, the value's bytes as a word) each,
    inside the buffer), and the buffers it reduces into, passed as their own partials
    (the caller makes sure that is exact: one thread, and every element they reduce into
    seeded, or an integer type)."""

    __slots__ = ("address", "blocks", "inits", "reduced")
    address: int
    blocks: int
    inits: tuple[tuple[int, int, int, int], ...]
    reduced: tuple[int, ...]

    def __init__(self, address: int, blocks: int, inits: tuple[tuple[int, int, int, int], ...] = (),
                 reduced: tuple[int, ...] = ()) -> None:
        self._init(address=address, blocks=blocks, inits=inits, reduced=reduced)


def native_launcher(buffers: Sequence[tuple[np.dtype, tuple[int, ...], bool]], scalars: Sequence[np.dtype],
                    syms: Sequence[int], pairs: Sequence[tuple[int, int, int, int]], stages: Sequence[NativeStage],
                    fallback: Callable[..., None], on_error: Callable[[bytes], None],
                    temps: Sequence[np.ndarray] = ()) -> Callable[..., Any]:
    """The builtin `run(*buffers, *scalars)` for one launch plan, returning None when it
    ran and False, having run nothing, when an argument is not exactly what it was made
    for: `buffers` gives per buffer param (dtype, shape, written), which each array must
    match exactly (type `ndarray`, that dtype object, that shape, C-contiguous, writeable
    if written); `scalars` the dtype of each scalar param (a numpy scalar of exactly
    that type). `pairs` are (buffer i, buffer j, bytes of i, bytes of j) to test for
    overlap; `stages` the stages in order; `fallback` gets the arguments
    when a pair overlaps; `on_error` gets the error record of a failed stage and must
    raise. `temps` are the program's temporaries, passed to the stages after the
    parameters and zeroed at every call (as docs/isa.md promises): the launcher owns
    them, and may reuse them from call to call because a call holds the GIL from its
    first stage to its last. Requires `available()`."""
    state = _build()
    if state is None:
        raise RuntimeError("native launchers are not available in this process")
    recs, dims = [], []
    soff = _HEADER
    poff = soff + len(syms)
    goff = poff + 4 * len(pairs)
    roff = goff + 6 * len(stages)
    toff = roff + 4 * len(buffers)
    zoff = toff + len(scalars)
    tpoff = zoff + len(scalars)
    doff = tpoff + 2 * len(temps)
    for dtype, shape, written in buffers:
        recs += [id(dtype), C_CONTIGUOUS | (WRITEABLE if written else 0), len(shape), doff + len(dims)]
        dims += shape
    extra, records = doff + len(dims), []  # each stage's inits and reduced buffers, after the dimensions
    tail: list[int] = []
    for st in stages:
        records += [st.address, st.blocks, len(st.inits), extra + len(tail), len(st.reduced),
                    extra + len(tail) + 4 * len(st.inits)]
        tail += [w for init in st.inits for w in init] + list(st.reduced)
    words = [len(buffers), len(scalars), len(pairs), len(stages), *state["api"], soff, poff, goff,
             id(np.ndarray), id(False), roff, toff, zoff, state["ident"], len(temps), tpoff, *syms,
             *(w for p in pairs for w in p), *records, *recs, *(id(d.type) for d in scalars),
             *(d.itemsize for d in scalars), *(w for t in temps for w in (t.ctypes.data, t.nbytes)), *dims, *tail]
    block = struct.pack(f"<{len(words)}q", *words)
    # what the block's ids and addresses refer to
    keep = (tuple(d for d, _, _ in buffers), tuple(d.type for d in scalars), tuple(temps))
    return state["new_function"](ctypes.addressof(state["methoddef"]), (block, fallback, on_error, keep), None)
