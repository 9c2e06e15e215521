"""`hologram.backend.llvm`: what backends that generate LLVM IR with llvmlite share.

Every module here imports llvmlite, which `hologram-kernels` does not depend on: only a
backend that depends on llvmlite itself imports this package (cpu_llvm, cuda), and
nothing of `hologram` does (tests/test_layout.py holds both; `import hologram`, loading
a bundle and a launch never reach it). What it holds (docs/backends.md, "Compiled
backends: the shared parts"):

- `types`: the LLVM types of the ISA's dtypes, intrinsic calls, and `convert`, the CVT
  rules as IR (with the software f16 path a host without f16 arithmetic needs);
- `ops`: the value-op emitters whose IR is the same on every target (integer division,
  MIN/MAX, shifts, comparisons, the value tests, the Atlas tables); a backend builds
  its `VALUE_OPS` table from them and its own f16 and math-library choices;
- `control`: `LaneCode`, the lane's basic blocks per (call context, pc), operands,
  loads/stores/CVT/SET and BRA/CALL/RET/EXIT, mixed into a backend's stage emitter;
- `lane_state`: `PoolsAndPhase`, PhaseAdv and the pools' allocation stack.
"""
