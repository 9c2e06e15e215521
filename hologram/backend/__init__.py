"""`hologram.backend`: the backend SDK, everything a backend may import.

A backend plugin imports `hologram.backend` and `hologram.errors`, nothing else of
Hologram (tests/test_layout.py holds the in-repo backends to it): the compiler's layout
may change under it, this module's names do not within an `API_VERSION`. The guide is
docs/backends.md; the conformance kit (`hologram conformance --backend NAME`,
hologram.testing.conformance) tests a backend against the reference semantics for
everything it declares.

What it holds:

- the `Backend` base class (required members abstract, every optional capability with
  its default) and `hookimpl`, to register instances through
  `hologram_register_backends(register)`;
- `Capabilities`: what a backend runs, declared (a partial backend is described,
  not failing: the runtime refuses what it leaves out before `prepare`);
- the program values (`Program`, `Stage`, `Instr`, the operands, ...), the op table
  (`OPCODES`, `OpSpec`, and the rest of `hologram.isa.opcodes`), `format_instr` for
  messages, `verify` (a program from anywhere is untrusted) and `program_hash`, the one
  identity of a program (cache by it);
- device arrays (`DeviceArray`: a backend's arrays kept in its own memory between
  launches; `host_array` what `Backend.to_device` copies, `foreign_device_array` the
  refusal of another backend's);
- the launch-argument binder (`LaunchBinding`: every check a launch must make, with the
  messages every backend gives; `exact_arguments` for a `launcher`), shape and symbol
  evaluation (`Affine`, `domain_extents`, `symbol_value`, `complete_symbols`), the
  scalar types (`DType`) and their conversion by the ISA's rules (`convert_value`);
- `FaultGuard` and `Watch`: a SIGBUS handler that lets file-mapped pages be read in
  place by a launch even if the file is truncated meanwhile (`Backend.fault_guard`);
- the full sums a GPU backend adds as trees rather than one contribution at a time
  (`gathered_sums`: docs/gpu.md, "Full float sums");
- the cost model (`lane_cost`, `lane_work`, `stage_traffic`, `Formula`: what a launch costs, from the
  ISA alone);
- the trace hooks: `trace` (spans in `hologram.trace` recordings: `trace.span`,
  `trace.complete`, `trace.now`, `trace.recorder`) and `AccessObserver` (a launch's
  memory accesses, for backends that can report them: `Backend.observe`);
- what a backend's caches and threads need: `LRUCache`, `renew_in_child` (locks a
  forked child gets back free), `FORK_GUARD` (held around work a fork must wait for: a
  call into a native compiler, the import of a heavy module on first need),
  `read_regular_file`, `user_cache_root`,
  `UnreadableFileError`; `Value` (the base of a plain immutable class, for run-time
  values); and `atlas` (the Atlas tables its instructions compute with).

Submodules for compiled backends, imported by name: `error_record` (the error record's
codes and their decoding), `disk_cache` (`DiskCache`), and `llvm` (for backends that
depend on llvmlite themselves: types, CVT, value ops, lane code; docs/backends.md).

Versioning: `API_VERSION` grows when a name here changes meaning or goes away (never
for an addition); a backend that needs a given version checks it at import.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from hologram.isa import opcodes

if TYPE_CHECKING:  # the modules the names below come from (the layout test reads these imports)
    from hologram.backend import base, binding, capabilities, device, fault_guard, gathered
    from hologram.core import atlas, files, forks, hookspecs, lru, trace, types
    from hologram.isa import asm, encoding, program
    from hologram.passes import work
    from hologram.verify import verifier

API_VERSION = 1

# module -> the names it gives this one. Each is imported at its first use (PEP 562): a
# plugin module pulls in what it reads, so registering a backend costs no more than its
# own imports (docs/decisions.md, "Start-up").
_EXPORTS = {
    "hologram.backend.base": "AccessObserver Backend Run",
    "hologram.backend.device": "DeviceArray",
    "hologram.backend.fault_guard": "FaultGuard Watch",
    "hologram.backend.gathered": "gathered_sums",
    "hologram.backend.lazy": "LazyBackend",
    "hologram.backend.capabilities": "Capabilities Instruction table_conversions table_instructions",
    "hologram.backend.binding": "SYMBOL_MAX SYMBOL_RANGE Accepts Bound Dim LaunchBinding ScalarSlot Slot compile_dim "
                                "complete_symbols convert_value describe_bytes domain_extents eval_dim "
                                "exact_arguments foreign_device_array host_array plain_array symbol_value "
                                "written_buffers zeroed_temporary",
    "hologram.core.files": "UnreadableFileError read_regular_file user_cache_root",
    "hologram.core.forks": "FORK_GUARD renew_in_child",
    "hologram.core.hookspecs": "hookimpl",
    "hologram.core.lru": "LRUCache",
    "hologram.core.types": "Affine DType",
    "hologram.core.values": "Value",
    "hologram.isa.asm": "format_instr",
    "hologram.isa.encoding": "program_hash",
    "hologram.isa.program": "AXES COMPARE_MODS REASSOC SPECIALS Addr BufferParam Imm Init Instr Item "
                            "Label MemDecl Operand Pred Program Reg RegDecl ScalarParam Special Stage Sym "
                            "lead_lane_axes without_sites",
    "hologram.passes.work": "Formula lane_cost lane_work stage_traffic",
    "hologram.verify.verifier": "verify",
}
_MODULES = {"atlas": "hologram.core.atlas", "trace": "hologram.core.trace"}  # names that are modules
_HOME = {name: module for module, names in _EXPORTS.items() for name in names.split()} | _MODULES


def _op_table_names() -> dict[str, object]:
    """The op table's public names (`OPCODES`, `OpSpec`, ...): whatever hologram.isa.opcodes
    defines (its `__all__` when it has one), so an entry or helper added there is here too."""
    names = getattr(opcodes, "__all__", None)
    if names is None:
        names = [n for n, v in vars(opcodes).items() if not n.startswith("_") and not isinstance(v, type(opcodes))
                 and getattr(v, "__module__", opcodes.__name__) == opcodes.__name__]
    return {n: getattr(opcodes, n) for n in names}


globals().update(_op_table_names())


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'hologram.backend' has no attribute {name!r} (the SDK's names are its "
                             f"__all__: docs/backends.md)")
    module = import_module(home)
    value = module if name in _MODULES else getattr(module, name)
    globals()[name] = value  # found once: later look-ups do not come back here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = sorted({"API_VERSION", "opcodes", *_HOME, *_op_table_names()})
