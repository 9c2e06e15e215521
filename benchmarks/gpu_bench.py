"""The GPU benchmarks, one backend at a time: what `make gpu-check` (gpu_check.py) and
`make bench` (bench.py, its GPU table) both run.

Each function measures one kernel on one GPU backend and returns a `Figure`: the table's
cell, the seconds behind it and whether the result agreed with numpy's (`agrees`, the
check bench.py holds every column to). A kernel the backend does not declare is a
`Figure` saying "not declared (why)", not a failure. benchmarks/README.md, "GPU columns".
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, Callable

import attrs
import numpy as np

import hologram
from hologram.backend import BufferParam
from hologram.errors import UnsupportedProgram
from hologram.registry.lookups import backends as registered, get_backend, unavailable_reason

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(os.path.dirname(HERE), "kernels")
GPU_BACKENDS = ("cuda", "wgpu")
LARGE = 10 ** 8  # the streaming kernels' elements on a device with the memory for them

FUSED = '''[kernel]
name = "fused"
version = "1.0.0"
inputs  = { x = "f32[n]", y = "f32[n]", z = "f32[n]" }
outputs = { w = "f32[n]" }
body = "w = sqrt(x*x + y*y) * exp(-z)"
'''

SOFTMAX_ROWS = '''[kernel]
name = "softmax_rows"
version = "1.0.0"
inputs  = { x = "f32[r, c]" }
outputs = { y = "f32[r, c]" }
body = """
m[i] = max(x[i, j], j)
e[i, j] = exp(x[i, j] - m[i])
y[i, j] = e[i, j] / sum(e[i, k], k)
"""
'''


@attrs.frozen
class Figure:
    """One benchmark on one backend: the cell a table shows and the numbers behind it."""

    cell: str
    seconds: float | None = None  # per call: the device time where one was measured, else the whole call
    ok: bool = True  # False: the result disagreed with numpy's
    values: dict[str, float] = attrs.field(factory=dict)  # GB/s, fraction of peak, TFLOP/s, ... (for JSON)


def agrees(got: Any, want: Any, terms: int = 1) -> bool:
    """The benchmarks' sanity check of a result against numpy's: within 1e-3 of the
    largest |want| (times sqrt(terms) for sums of `terms` products), plus 1e-5 relative."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return False
    scale = max(float(np.abs(want).max(initial=0)), 1.0)
    tol = 1e-3 * scale * np.sqrt(terms)
    return bool(np.all(np.abs(got - want) <= tol + 1e-5 * np.abs(want)))


def median_seconds(fn: Callable[[], Any], repeat: int = 5) -> float:
    """Median seconds of `repeat` calls after one untimed call (GPU calls are long: no batches)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# ------------------------------------------------------------------------ the devices
def gpu_status() -> dict[str, str | None]:
    """Each GPU backend: None when it runs here, else why not."""
    table = registered()
    status: dict[str, str | None] = {}
    for name in GPU_BACKENDS:
        backend = table.get(name)
        status[name] = (f"hologram-backend-{name} is not installed (pip install -e plugins/{name})" if backend is None
                        else None if backend.available() else unavailable_reason(backend))
    return status


@attrs.frozen
class Device:
    """What the benchmarks read of a backend's device."""

    description: str
    peak_bandwidth: float | None  # bytes per second; None: the backend cannot say (wgpu)
    memory_bytes: int | None  # what one array may take at most (cuda: the device's memory; wgpu: a binding)
    cpu: bool  # a software device (lavapipe): host memory, ~1-2 GB/s; only correctness matters


def device_of(backend: str) -> Device:
    """`backend`'s device (cuda or wgpu; it must be available)."""
    if backend == "cuda":
        from hologram_cuda.driver import device

        gpu = device()
        return Device(f"{gpu.name}, compute capability {gpu.capability[0]}.{gpu.capability[1]}, "
                      f"{gpu.memory_bytes / 2 ** 30:.0f} GiB, peak {gpu.peak_bandwidth / 1e9:.0f} GB/s",
                      gpu.peak_bandwidth, gpu.memory_bytes // 8, False)
    from hologram_wgpu.device import gpu as wgpu_device

    gpu = wgpu_device()
    info = gpu.device.adapter_info  # WebGPU does not say how fast the memory is
    kind = info.get("adapter_type", "?")
    return Device(f"{gpu.adapter_name}, adapter type {kind}, binds {gpu.max_binding_bytes / 2 ** 20:.0f} MiB, "
                  "peak bandwidth unknown (WebGPU does not say)", None, gpu.max_binding_bytes, kind == "CPU")


def streaming_size(device: Device, normal: int) -> int:
    """The streaming kernels' elements: LARGE (f32) where the device holds such arrays and is
    a real GPU; `normal` (bench.py's size) on a software device or a smaller one."""
    fits = device.memory_bytes is None or LARGE * 4 <= device.memory_bytes
    return LARGE if fits and not device.cpu else normal


class CudaTimer:
    """Device time per launch of a prepared program on device-resident buffers: the
    arguments uploaded once, `repeat` launches between two CUDA events."""

    def __init__(self) -> None:
        from cuda.bindings import driver

        from hologram_cuda.driver import call, device

        self.driver, self.call, self.gpu = driver, call, device()
        self.backend = get_backend("cuda")

    def seconds(self, program: Any, buffers: dict, scalars: dict, symbols: dict, repeat: int = 10) -> float:
        from hologram_cuda import launch

        d, call, gpu = self.driver, self.call, self.gpu
        exe = self.backend.prepare(program)
        gpu.make_current()
        loaded = self.backend._module_on_device(exe, gpu, d)
        bound = exe.binding.bind(buffers, scalars, symbols)
        on = launch.upload(exe, bound, gpu.stream, d)
        start, end = (call(d.cuEventCreate, d.CUevent_flags.CU_EVENT_DEFAULT.value) for _ in range(2))
        launch.launch_stages(exe, loaded, on, gpu.stream, d)  # warm-up
        call(d.cuEventRecord, start, gpu.stream)
        for _ in range(repeat):
            launch.launch_stages(exe, loaded, on, gpu.stream, d)
        call(d.cuEventRecord, end, gpu.stream)
        call(d.cuEventSynchronize, end)
        ms = call(d.cuEventElapsedTime, start, end)
        launch.finish(exe, bound, on, gpu.stream, d)
        for e in (start, end):
            call(d.cuEventDestroy, e)
        return ms / 1e3 / repeat


def refusal(backend: str, program: Any) -> str | None:
    """"not declared (why)" when `backend`'s declaration leaves out part of `program`
    (the reason in its words), else None. Not a failure: the backend said so."""
    try:
        get_backend(backend).check_covers(program)
    except UnsupportedProgram as e:
        return f"not declared ({str(e).splitlines()[0].split(f'{program.name!r}: ', 1)[-1]})"
    return None


def not_declared(backend: str, program: Any) -> Figure | None:
    """`refusal` as a figure, or None when `backend` declares all of `program`."""
    why = refusal(backend, program)
    return Figure(why) if why else None


def _device_resident(backend: str, kernel: Any, args: tuple, out: np.ndarray, repeat: int) -> tuple[float, Any] | None:
    """Seconds per call with every array on the device (inputs and out=) and the result
    read back, for a backend with device arrays; None for one without."""
    if not get_backend(backend).has_device_arrays:
        return None
    on = tuple(hologram.to_device(a, backend) if isinstance(a, np.ndarray) else a for a in args)
    dev_out = hologram.to_device(out, backend)
    seconds = median_seconds(lambda: kernel(*on, out=(dev_out,)), repeat)
    return seconds, dev_out.numpy()


# ---------------------------------------------------------------------- the benchmarks
def streaming_kernels() -> dict[str, tuple[Any, int]]:
    """title -> (kernel, f32 arrays it moves per element)."""
    return {"axpy": (hologram.compile_file(os.path.join(KERNELS, "axpy.toml")), 3),
            "fused sqrt(x*x+y*y)*exp(-z)": (hologram.compile(FUSED), 4)}


def streaming_inputs(n: int) -> tuple[tuple, tuple, dict[str, Any]]:
    """(axpy's arguments, the fused expression's, numpy's results by title) for n elements."""
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    with np.errstate(all="ignore"):
        want = {"axpy": 2 * x + y, "fused sqrt(x*x+y*y)*exp(-z)": np.sqrt(x * x + y * y) * np.exp(-z)}
    return (np.float32(2), x, y), (x, y, z), want


def streaming(backend: str, kernel: Any, arrays: int, args: tuple, want: np.ndarray, timer: CudaTimer | None,
              peak: float | None, repeat: int = 3) -> Figure:
    """A streaming kernel on `backend`: the device time per launch on device-resident
    buffers (cuda: CUDA events; a backend with device arrays: the call on them) as GB/s
    and a fraction of `peak` when known, and the whole call with numpy in and out."""
    skip = not_declared(backend, kernel.program)
    if skip:
        return skip
    n = want.size
    nbytes, k, out = arrays * 4 * n, kernel.on(backend), np.empty(n, np.float32)
    total = median_seconds(lambda: k(*args, out=(out,)), repeat)
    if not agrees(out, want):
        return Figure(f"WRONG RESULT (numpy in/out); call {total * 1e3:.1f} ms", total, ok=False)
    cell, seconds, values = f"call {total * 1e3:.1f} ms", total, {"call_seconds": total}
    if backend == "cuda" and timer is not None:
        program = kernel.program
        names = [p.name for p in program.params if isinstance(p, BufferParam)]
        scalars = {p.name: args[0] for p in program.params if not isinstance(p, BufferParam)}
        bufs = dict(zip(names, [a for a in args if isinstance(a, np.ndarray)] + [out]))
        seconds, label = timer.seconds(program, bufs, scalars, {"n": n}), "device"
    else:
        resident = _device_resident(backend, k, args, np.zeros(n, np.float32), repeat)
        if resident is None:
            return Figure(cell, seconds, values=values)
        seconds, got = resident
        if not agrees(got, want):
            return Figure(f"WRONG RESULT (device arrays); {cell}", seconds, ok=False, values=values)
        label = "device arrays"
    rate = nbytes / seconds
    values |= {"device_seconds": seconds, "gb_per_s": rate / 1e9}
    of_peak = ""
    if peak:
        values["of_peak"] = rate / peak
        of_peak = f" = {rate / peak:.0%} of peak"
    # a device that knows its peak moves hundreds of GB/s; one that does not may be lavapipe's 1-2
    gbps = f"{rate / 1e9:.0f}" if peak else f"{rate / 1e9:.3g}"
    return Figure(f"{label} {seconds * 1e3:.2f} ms = {gbps} GB/s{of_peak}; {cell}", seconds, values=values)


def softmax_rows(backend: str, rows: int, cols: int, repeat: int = 5) -> Figure:
    kernel = hologram.compile(SOFTMAX_ROWS)
    skip = not_declared(backend, kernel.program)
    if skip:
        return skip
    x = np.random.default_rng(1).standard_normal((rows, cols), dtype=np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    k, out = kernel.on(backend), np.empty_like(x)
    t = median_seconds(lambda: k(x, out=(out,)), repeat)
    ok = agrees(out, e / e.sum(axis=1, keepdims=True))
    return Figure(f"{'WRONG RESULT; ' if not ok else ''}call {t * 1e3:.1f} ms", t, ok, {"call_seconds": t})


def cublas_seconds(a: np.ndarray, b: np.ndarray, repeat: int = 3) -> float | None:
    """CuPy's matmul (cuBLAS) time per call on device arrays, or None without cupy."""
    try:
        import cupy
    except ImportError:
        return None
    ga, gb = cupy.asarray(a), cupy.asarray(b)
    cupy.matmul(ga, gb)
    s, e = cupy.cuda.Event(), cupy.cuda.Event()
    s.record()
    for _ in range(repeat):
        cupy.matmul(ga, gb)
    e.record()
    e.synchronize()
    return cupy.cuda.get_elapsed_time(s, e) / 1e3 / repeat


def gemm_inputs(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, a @ b) for a size x size f32 gemm."""
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((size, size), dtype=np.float32) for _ in range(2))
    return a, b, a @ b


def gemm(backend: str, a: np.ndarray, b: np.ndarray, want: np.ndarray, timer: CudaTimer | None) -> Figure:
    """gemm on `backend`, its result checked against numpy's; cuda: the device time on
    device-resident buffers as TFLOP/s, elsewhere the whole call."""
    kernel = hologram.compile_file(os.path.join(KERNELS, "gemm.toml"))
    skip = not_declared(backend, kernel.program)
    if skip:
        return skip
    size = a.shape[0]
    flops, c = 2 * size ** 3, np.empty((size, size), np.float32)
    kernel.on(backend)(np.float32(1), a, b, out=(c,))
    ok = agrees(c, want, terms=size)
    wrong = "" if ok else "WRONG RESULT; "
    if backend == "cuda" and timer is not None:
        t = timer.seconds(kernel.program, {"a": a, "b": b, "c": c}, {"alpha": np.float32(1)},
                          {"m": size, "k": size, "n": size}, repeat=3)
        return Figure(f"{wrong}device {t * 1e3:.1f} ms = {flops / t / 1e12:.2f} TFLOP/s", t, ok,
                      {"tflop_per_s": flops / t / 1e12})
    k = kernel.on(backend)
    t = median_seconds(lambda: k(np.float32(1), a, b, out=(c,)), repeat=1)
    return Figure(f"{wrong}call {t * 1e3:.0f} ms = {flops / t / 1e9:.1f} GFLOP/s", t, ok, {"gflop_per_s": flops / t / 1e9})


def cublas_note(a: np.ndarray, b: np.ndarray, cuda_seconds: float | None) -> str:
    """The gemm row's note: CuPy's cuBLAS and hologram's cuda time as a fraction of it."""
    ref = cublas_seconds(a, b)
    if ref is None:
        return "cupy not importable: no cuBLAS column"
    flops = 2 * a.shape[0] ** 3
    note = f"CuPy/cuBLAS {ref * 1e3:.1f} ms = {flops / ref / 1e12:.2f} TFLOP/s"
    return note + (f"; hologram at {ref / cuda_seconds:.0%}" if cuda_seconds else "")


def launch_overhead(backend: str, device_arrays: bool = False, calls: int = 200) -> Figure:
    """The fixed cost of a one-element vadd through the kernel API, with numpy in and out,
    or (`device_arrays`) with its arrays on the device."""
    kernel = hologram.compile_file(os.path.join(KERNELS, "vadd.toml"))
    skip = not_declared(backend, kernel.program)
    if skip:
        return skip
    if device_arrays and not get_backend(backend).has_device_arrays:
        return Figure("no device arrays")
    x, out = np.full(1, 1.5, np.float32), np.zeros(1, np.float32)
    if device_arrays:
        x, out = hologram.to_device(x, backend), hologram.to_device(out, backend)
    k = kernel.on(backend)
    t = median_seconds(lambda: [k(x, x, out=(out,)) for _ in range(calls)], repeat=3) / calls
    ok = agrees(np.asarray(out), np.full(1, 3, np.float32))
    return Figure(f"{'' if ok else 'WRONG RESULT; '}{t * 1e6:.0f} us per call", t, ok)


# --------------------------------------------------------------- bench.py's GPU table
# One column per available GPU backend, the figures above (`make gpu-check` shows them too).
GPU_ROWS = {"gpu_axpy": "a*x + y", "gpu_fused": "sqrt(x*x + y*y) * exp(-z)", "gpu_softmax_rows": "softmax rows",
            "gpu_gemm": "gemm", "gpu_launch": "launch overhead, vadd n=1, numpy in/out",
            "gpu_launch_device": "launch overhead, vadd n=1, device arrays"}
GPU_LARGE = {"softmax_rows": (4096, 4096), "gemm": 4096}  # on a GPU (a software device: bench.py's sizes)
GPU_QUICK = {"softmax_rows": (4, 64)}


def gpu_sizes(device: Device, n: int, gemm_size: int, quick: bool) -> dict[str, Any]:
    """The GPU rows' sizes on `device`: the large ones on a GPU with the memory for them;
    bench.py's (`n` elements, gemm `gemm_size`²) on a software device (lavapipe: only
    correctness matters there) and with --quick."""
    if quick:
        return {"n": n, "softmax_rows": GPU_QUICK["softmax_rows"], "gemm": gemm_size}
    real = not device.cpu
    return {"n": streaming_size(device, n), "softmax_rows": GPU_LARGE["softmax_rows"] if real else (n // 4096, 4096),
            "gemm": GPU_LARGE["gemm"] if real else gemm_size}


def _count(n: int) -> str:
    return f"{n:g}".replace("e+0", "e").replace("e+", "e")


def _gpu_cell(size: str, measure: Callable[[], Figure]) -> dict[str, Any]:
    """A GPU cell for the results: the figure at `size`, or the error a backend under
    construction raised (reported, as the CPU columns report theirs)."""
    try:
        figure = measure()
    except Exception as exc:
        figure = Figure(f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}", ok=False)
    return {"size": size, **attrs.asdict(figure)}


def time_gpu(console: Any, n: int, gemm_size: int, quick: bool) -> dict[str, Any]:
    """bench.py's GPU table at its sizes (`gpu_sizes`): devices[backend] = {description,
    peak_bandwidth, sizes} or {unavailable}; times[row][backend] = {size, cell, seconds,
    ok, values}."""
    devices: dict[str, Any] = {}
    times: dict[str, dict[str, Any]] = {row: {} for row in GPU_ROWS}
    for name, why in gpu_status().items():
        if why is not None:
            devices[name] = {"unavailable": why}
            continue
        with console.status(f"GPU columns: {name}"):
            device = device_of(name)
            sz = gpu_sizes(device, n, gemm_size, quick)
            devices[name] = {"description": device.description, "peak_bandwidth": device.peak_bandwidth, "sizes": sz}
            timer = CudaTimer() if name == "cuda" else None
            count = sz["n"]
            axpy_args, fused_args, want = streaming_inputs(count)
            for row, (title, (kernel, arrays)), args in zip(("gpu_axpy", "gpu_fused"), streaming_kernels().items(),
                                                           (axpy_args, fused_args)):
                times[row][name] = _gpu_cell(f"n={_count(count)}", lambda: streaming(
                    name, kernel, arrays, args, want[title], timer, device.peak_bandwidth))
            rows, cols = sz["softmax_rows"]
            times["gpu_softmax_rows"][name] = _gpu_cell(f"{rows}x{cols}", lambda: softmax_rows(name, rows, cols))
            a, b, product = gemm_inputs(sz["gemm"])
            matmul = _gpu_cell(f"{sz['gemm']}²", lambda: gemm(name, a, b, product, timer))
            if name == "cuda":
                matmul["note"] = cublas_note(a, b, matmul["seconds"] if matmul["ok"] else None)
            times["gpu_gemm"][name] = matmul
            for row, resident in (("gpu_launch", False), ("gpu_launch_device", True)):
                times[row][name] = _gpu_cell("n=1", lambda: launch_overhead(name, resident, calls=20 if quick else 200))
    return {"devices": devices, "times": times}


def report_gpu(console: Any, gpu: dict[str, Any]) -> None:
    """`time_gpu`'s results: a line per GPU backend (its device, or why it is not
    available) and a table with a column per available one."""
    from rich.markup import escape
    from rich.table import Table

    on = [name for name, dev in gpu["devices"].items() if "unavailable" not in dev]
    for name, dev in gpu["devices"].items():
        console.print(escape(f"GPU {name}: " + (f"not available: {dev['unavailable']}" if name not in on
                                                 else dev["description"])))
    if not on:
        return
    t = Table(title="GPU backends (device arrays or device time; checked against numpy; benchmarks/README.md)",
              title_justify="left")
    t.add_column("benchmark")
    for name in on:
        t.add_column(name)
    for row, title in GPU_ROWS.items():
        cells = []
        for name in on:
            cell = gpu["times"][row][name]
            text = escape(f"{cell['size']}: {cell['cell']}" + (f" ({cell['note']})" if cell.get("note") else ""))
            cells.append(text if cell["ok"] and not cell["cell"].startswith("not declared")
                         else f"[dim]{text}[/dim]" if cell["ok"] else f"[bold red]{text}[/bold red]")
        t.add_row(escape(title), *cells)
    console.print(t)
