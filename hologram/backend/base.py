"""What a backend is: `Backend`, the base class every backend plugin subclasses.

The required members are abstract (a subclass that lacks one cannot be instantiated);
every optional capability is declared here with the default a backend without it gets,
so the runtime calls it on any backend instead of asking whether it exists. A plugin
registers instances through `hologram_register_backends(register)`; the compiler and the
runtime never import a backend, they find them through the plugin manager, so the
in-repo backends are exactly as pluggable as a third party's (docs/backends.md).
"""

from __future__ import annotations

import abc
import types
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from hologram.backend.capabilities import Capabilities
from hologram.backend.device import DeviceArray
from hologram.backend.fault_guard import FaultGuard
from hologram.core.errors import ArgumentError, PluginError, UnsupportedProgram
from hologram.core.types import DType
from hologram.isa.program import Program

__all__ = ["Backend", "Run", "AccessObserver"]

Run = Callable[..., Any]  # run(*buffers, *scalars) -> None, or False having run nothing (see `Backend.launcher`)


class AccessObserver(Protocol):
    """What `Backend.observe` reports a launch's memory accesses to (the differential
    fuzzer's race check, hologram.testing.fuzz_trace). A lane is named by its global
    coordinates (`gid`, one per domain axis) and its block by `ctaid`; `k` is the
    instruction's index in the stage body (labels counted, as messages count them).
    Raising from a method stops the launch; the exception reaches `observe`'s caller."""

    def stage(self, name: str) -> None:
        """A stage starts (its accesses follow)."""

    def access(self, gid: tuple[int, ...], ctaid: tuple[int, ...], kind: str, space: str, buffer: str,
               index: int, k: int) -> None:
        """Lane `gid` of block `ctaid` is about to `kind` ('load', 'store' or 'reduce')
        element `index` of `buffer` in `space` ('global' or 'shared')."""

    def barrier(self, gid: tuple[int, ...], ctaid: tuple[int, ...]) -> None:
        """Lane `gid` has passed a BarSync with the rest of its block."""


class Backend(abc.ABC):
    """A place programs run.

    Required (abstract):

        name        short unique name (`interp`, `cpu_llvm`); what `HOLOGRAM_BACKEND` names
        priority    the highest-priority available backend is the default
        available() -> bool
        allocate(shape, dtype) -> np.ndarray
        prepare(program) -> executable
        launch(executable, buffers, scalars, symbols) -> None

    Optional, with their defaults here: `capabilities` (what it runs), `launcher` (a
    launch with the checks already done), `text_forms` and `emit` (readable forms of its
    code), `clear_cache`, shipping native code in bundles (`native_targets`,
    `runs_native`, `native_toolchain`, `compile_native`, `check_native`, `prepare_native`),
    `max_test_elements` (how large a generated test case may be), `observe` (a launch
    reporting its memory accesses), `fault_guard` (file-mapped pages read in place), `unavailable_reason` (why it cannot run here) and
    device arrays (`to_device`, `allocate_device`: arrays kept in the backend's memory
    between launches; `adopt`: another library's arrays in that memory, taken as they are).
    """

    name: str
    priority: int

    # -------------------------------------------------------------------- required
    @abc.abstractmethod
    def available(self) -> bool:
        """True when this backend can run on this machine now."""

    @abc.abstractmethod
    def allocate(self, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
        """A new C-contiguous array this backend can launch on (zeroed)."""

    @abc.abstractmethod
    def prepare(self, program: Program) -> Any:
        """A verified program made ready to launch (an executable). Backends cache this
        by program hash (`program_hash`); preparing the same program twice is cheap. A
        program from anywhere is untrusted: verify it (`verify`) before trusting it. A
        backend declining a program its `capabilities` did not rule out raises
        `UnsupportedProgram` naming what it cannot run."""

    @abc.abstractmethod
    def launch(self, executable: Any, buffers: Mapping[str, np.ndarray],
               scalars: Mapping[str, Any], symbols: Mapping[str, int]) -> None:
        """Run every stage of the program, in order.

        buffers   every buffer *param* by name: C-contiguous arrays of the declared dtype
                  whose sizes match the declared shapes under `symbols`. `Kernel` checks
                  this (with messages in the user's terms) and copies inputs that overlap
                  outputs; `launch` is public too, so a backend must still refuse wrong
                  input with an ArgumentError: `LaunchBinding.bind` does every check.
                  Temporaries are the backend's to allocate (`bind` allocates them).
        scalars   every scalar param by name, as numpy scalars of the declared dtype
        symbols   every shape symbol's value; one outside 0..2**62 - 1 (the launch contract
                  the verifier proved the program under) is refused (`bind` does)
        Raises ExecutionError (never crashes) when a checked access is out of bounds.
        """

    # -------------------------------------------------------------------- optional
    capabilities: Capabilities = Capabilities()
    """What this backend runs (hologram.backend.capabilities): the whole ISA unless it
    says otherwise. The runtime refuses a program it does not cover with
    UnsupportedProgram before `prepare` is called (`check_covers`)."""

    text_forms: Mapping[str, str] = types.MappingProxyType({})
    """Readable forms of what the backend makes of a verified program, form name -> a
    one-line description (cpu_llvm: `llvm`, `llvm-opt`, `native`), shown by
    `Kernel.emit(form)` and `hologram compile --emit form --backend name`; `emit` makes
    them. A form named like a core one (`ast`, `ir`, `asm`, `stats`) is never reached."""

    def unavailable_reason(self) -> str | None:
        """Why `available()` is False here, in words (`no CUDA driver: ...`), or None:
        available, or no reason to give. `hologram plugins` and `get_backend` show it."""
        return None

    max_test_elements: int | None = None
    """The most input elements a generated test case may hold to be run here (None: no
    limit): a backend that runs one lane at a time sets it, and the differential harness
    skips larger cases on it (hologram.testing.difftest.max_elements)."""

    def check_covers(self, program: Program) -> None:
        """UnsupportedProgram when `capabilities` do not cover `program`, naming the
        first thing they leave out; the runtime calls this before `prepare`."""
        why = self.capabilities.uncovered(program)
        if why is not None:
            raise UnsupportedProgram(f"backend {self.name!r} cannot run program {program.name!r}: {why}",
                                     hint="its capabilities do not declare it (docs/backends.md); run the kernel "
                                          "on another backend, e.g. kernel.on('interp') or --backend interp")

    def launcher(self, executable: Any, symbols: Mapping[str, int]) -> Run | None:
        """A launch with the argument checks done by the caller, for one binding of the
        shape symbols, or None (the default): then `Kernel` calls `launch`.

        `run(*buffers, *scalars)` takes the program's buffer params in declared order,
        then its scalar params in declared order, and returns None having launched, or
        False having run nothing when an argument is not exactly what it expects (an
        `ndarray` of the declared dtype and of the shape the symbols give, C-contiguous,
        writeable if written; a numpy scalar of the declared type: `exact_arguments`).
        It must still handle overlapping buffers as `launch` does (copy an input that
        overlaps a written buffer, or refuse). `Kernel` calls it on every call whose
        arguments match one it fully checked (docs/api.md, "Fast path")."""
        return None

    def emit(self, program: Program, form: str) -> str:
        """`program` in one of `text_forms`; compiles afresh, caches nothing."""
        raise ArgumentError(f"backend {self.name!r} has no text form {form!r}"
                            + (f"; expected one of {', '.join(self.text_forms)}" if self.text_forms else ""))

    def clear_cache(self) -> None:
        """Forget every prepared program held in memory (`hologram.clear_cache()` calls
        this on every loaded backend). A backend that caches what it prepares bounds the
        cache and overrides this, so a user can give the memory back."""

    # ------------------------------------------------------------------ device arrays
    def to_device(self, array: np.ndarray) -> DeviceArray:
        """`array` (a C-contiguous ndarray of a hologram dtype: `host_array` makes one)
        copied into this backend's memory, as one of its `DeviceArray`s. A backend with
        device arrays overrides this and `allocate_device`, and accepts its own device
        arrays wherever `launch` takes an array (`LaunchBinding.bind(..., owner=self)`):
        then a kernel whose inputs are device arrays gets device outputs. The default
        has none: an ArgumentError saying so."""
        raise ArgumentError(self._no_device_arrays())

    def allocate_device(self, shape: tuple[int, ...], dtype: DType) -> DeviceArray:
        """A new zeroed `DeviceArray` of this backend (the outputs of a call whose inputs
        are on the device). The default has none: an ArgumentError saying so."""
        raise ArgumentError(self._no_device_arrays())

    def adopt(self, value: Any, where: str) -> DeviceArray | None:
        """`value`, another library's array in this backend's memory (a CuPy or PyTorch
        array through `__cuda_array_interface__`, say), as one of its device arrays over
        the same memory, no copy; None when `value` is nothing this backend recognises.
        The call path asks it for an argument that is neither an ndarray nor a
        DeviceArray, before refusing it. An interface it recognises but cannot take as
        it is (strided, of another dtype, ...) is an ArgumentError that `where` ("k():
        argument 'x'") starts. The default recognises nothing."""
        return None

    @property
    def has_device_arrays(self) -> bool:
        """Not to override: whether this backend has device arrays (defines both hooks)."""
        cls = type(self)
        return cls.to_device is not Backend.to_device and cls.allocate_device is not Backend.allocate_device

    def _no_device_arrays(self) -> str:
        return (f"backend {self.name!r} has no device arrays: it runs on numpy arrays in host memory "
                "(docs/api.md, \"Device arrays\")")

    # ------------------------------------------------- native code shipped in bundles
    def native_targets(self) -> tuple[str, ...]:
        """The CPUs (or devices) `compile_native` builds object code for on this machine,
        whether or not the backend can run here (a GPU backend builds for a device the
        machine lacks); none by default: the backend ships no code in bundles
        (docs/bundles.md, "Native code")."""
        return ()

    def runs_native(self, target: str) -> bool:
        """Whether object code built for `target` runs on this machine (its CPU has
        every feature the target assumes); False by default."""
        return False

    def native_toolchain(self) -> str:
        """What built object code (the code generator's version first); shipped code is
        used only by the code generator that made it."""
        return f"{self.name} (no native code)"

    def compile_native(self, program: Program, target: str) -> dict[str, Any]:
        """Object code of the verified `program` for `target` (one of `native_targets`),
        with what loading it needs: {target, triple, cpu, features, toolchain, meta,
        object}; UnsupportedProgram when the backend does not run `program` (the bundle
        then ships no code of this backend for it)."""
        raise PluginError(f"backend {self.name!r} builds no native code (it has no native targets)")

    def check_native(self, program: Program, native: Mapping[str, Any]) -> str | None:
        """What is wrong with shipped object code for `program` (`hologram bundle
        verify`), or None when it is well formed."""
        return f"backend {self.name!r} ships no native code, so it cannot check any"

    def prepare_native(self, program: Program, natives: Sequence[Mapping[str, Any]]) -> Any | None:
        """`program` from object code shipped with it (from a trusted bundle), or None
        when none fits here (the default): then `prepare` runs."""
        return None

    # ------------------------------------------------------------ mapped files in place
    def fault_guard(self) -> FaultGuard | None:
        """The SIGBUS guard under which this backend's launches may read a file mapping's
        pages in place (hologram.backend.fault_guard), or None (the default): then
        `hologram.stream` reads a memmap's file with `pread` into its pool instead, since a
        file truncated meanwhile would kill the process at the first page past its end.
        Asked after the kernels that will read the pages are prepared."""
        return None

    # ------------------------------------------------------------------- trace hooks
    def observe(self, executable: Any, buffers: Mapping[str, np.ndarray], scalars: Mapping[str, Any],
                symbols: Mapping[str, int], observer: AccessObserver) -> bool:
        """Launch as `launch` does, reporting every global and shared memory access and
        every barrier to `observer`; False, having run nothing, for a backend that
        cannot (the default). The reference interpreter can."""
        return False
