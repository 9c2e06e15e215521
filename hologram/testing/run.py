"""A small harness: compile a kernel document, run it on a named backend, check it.

    outputs = run_kernel_text(toml_text, {"x": x}, backend="interp")   # name -> array
    check_case(case, backend="cpu_llvm")                               # a generated KernelCase

Everything goes through the public API (`hologram.compile`, `Kernel.on(backend)`), so a
backend plugin is exercised exactly as users reach it.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from hologram.core.errors import HologramError, UnsupportedProgram
from hologram.testing.cases import KernelCase

__all__ = ["run_kernel_text", "check_case", "fresh_backend"]


def fresh_backend(name: str, **options: Any) -> Any:
    """A new instance of the registered backend `name`'s class, made with `options` (its
    constructor's keywords): nothing prepared or cached, shared with no kernel. The test
    kit finds backends through the registry, never by importing their plugins."""
    from hologram.registry.lookups import backends

    registered = backends().get(name)
    if registered is None:
        raise HologramError(f"backend {name!r} is not installed (registered: {', '.join(sorted(backends())) or 'none'})")
    return type(registered)(**options)


def run_kernel_text(text: str, inputs: Mapping[str, Any] | Sequence[Any], backend: str | None = "interp",
                    format: str = "toml", opt: str | None = None,
                    passes: Sequence[str] | None = None, mapped: bool = False) -> dict[str, np.ndarray]:
    """Compile the one-kernel document `text`, run it on `backend`, return its outputs by name.

    inputs   by name, or positionally in declaration order
    backend  a registered backend name; None lets the runtime choose
    opt      the optimization level ("O0", "O1", "O2"); None: the default
    passes   run exactly these passes instead (see hologram.compile)
    mapped   call `kernel.map` (over the inputs' loop dimensions) instead of the kernel
    """
    import hologram

    kernel = hologram.compile(text, format=format, opt=opt, passes=passes)
    if not isinstance(kernel, hologram.Kernel):
        raise HologramError(f"run_kernel_text expects a document with one kernel, got {len(kernel)}: "
                            f"{', '.join(kernel)}")
    if backend is not None:
        kernel = kernel.on(backend)
    call = kernel.map if mapped else kernel
    result = call(**inputs) if isinstance(inputs, Mapping) else call(*inputs)
    names = [p.name for p in kernel.signature.outputs]
    results = (result,) if len(names) == 1 else tuple(result)
    return {name: np.asarray(r) for name, r in zip(names, results)}


def run_case(case: KernelCase, backend: str | None = "interp", opt: str | None = None,
             passes: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """The case's outputs on `backend`: called (or mapped), or streamed, or called with
    Dask arrays, as the case says."""
    if case.stream is None and case.dask is None:
        return run_kernel_text(case.source, case.args, backend, format=case.format, opt=opt, passes=passes,
                               mapped=case.mapped)
    import hologram

    kernel = hologram.compile(case.source, format=case.format, opt=opt, passes=passes)
    kernel = kernel.on(backend) if backend is not None else kernel
    if case.dask is not None:
        from hologram.testing.dask_cases import run_chunked

        return run_chunked(kernel, case.args, case.dask, case.mapped)
    from hologram.testing.stream_cases import run_streamed

    return run_streamed(kernel, case.args, case.stream, [np.shape(val.v) for _, val in case.expected])


def check_case(case: KernelCase, backend: str | None = "interp", opt: str | None = None,
               passes: Sequence[str] | None = None) -> dict[str, np.ndarray] | None:
    """Run a generated case on `backend`, compiled at optimization level `opt`, and hold
    it to the oracle under the accuracy contract (`passes`: exactly these passes instead). Raises AssertionError (AccuracyError
    for wrong values) describing the kernel and its inputs; returns the outputs (None
    when the case expects an error). A backend's declared refusal, UnsupportedProgram,
    is raised as it is."""
    if case.format == "python":
        from hologram.testing.python_cases import check_python_twin

        check_python_twin(case, opt, passes)
    try:
        outputs = run_case(case, backend, opt, passes)
    except UnsupportedProgram:
        raise  # the backend declined the program (docs/backends.md): not a verdict on the case
    except case.error or ():
        return None
    except HologramError as exc:
        raise AssertionError(f"the kernel raised {type(exc).__name__}: {exc}\n{case.describe()}") from exc
    if case.error:
        names = " or ".join(e.__name__ for e in case.error)
        raise AssertionError(f"expected {names}, but the kernel ran and returned "
                             f"{ {k: v.tolist() for k, v in outputs.items()} }\n{case.describe()}")
    case.check(outputs)
    return outputs
