"""fork() while another thread compiles or launches (issue 21): the child must compile and
run a new kernel. Before the fix a fork during a compile hung the child at its first new
kernel (CpuLlvmBackend.prepare's lock stayed held by a thread the child does not have),
and a fork during a parallel launch left the child's launches one-threaded for good
(the native pool's busy lock stayed held). A fork while the other thread was importing
the JIT (the first compile's `import llvmlite.binding`) hung the child at its own import
of it, on the module lock CPython gives a child as it was: the import now runs under
the SDK's fork guard, which a fork waits for.

Each scenario runs in a child process (it forks, and a hang must be contained): one
thread compiles a slow kernel (forking inside prepare, or inside the lazy import of
the JIT), or runs a long parallel launch, while the main thread forks; the grandchild compiles a new kernel, runs it on the native pool, and runs the
kernel the other thread was busy with.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(r'''
    import os, sys, threading, time, traceback, warnings
    import numpy as np
    import hologram as hg
    from hologram.isa.asm import parse_program
    from hologram.registry.lookups import get_backend
    from hologram_cpu_llvm import threads

    warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork() with threads
    SCENARIO = sys.argv[1]
    backend = get_backend("cpu_llvm")

    def kernel(name, body):
        return hg.compile(f'[kernel]\nname = "{name}"\nversion = "1.0.0"\ninputs = {{ x = "f32[n]" }}\n'
                          f'outputs = {{ y = "f32[n]" }}\nbody = """\n{body}\n"""\n').on("cpu_llvm")

    # slow to compile (~3 s: long enough that the fork lands inside the compile, which
    # wait_until_held sees begin): a chain the verifier, the code generator and LLVM all walk
    SLOW = kernel("slow", "\n".join(["t0 = x"] + [f"t{i} = sin(t{i - 1}) * 0.5 + x" for i in range(1, 60)]
                                    + ["y = t59"]))
    SPIN = parse_program("""
    .program spin
    .symbols n
    .param in c: i64[n]
    .param out y: i64[n]
    .stage main domain [n] block [64]
        .reg %i, %c, %acc: i64
        MOV.i64 %i, %gid.x
        LDG.i64 %c, [c + %i]
        MOV.i64 %acc, %i
    top:
        MUL.i64 %acc, %acc, 3
        ADD.i64 %acc, %acc, 1
        LOOP %c, top
        STG.i64 [y + %i], %acc
        EXIT
    """)
    x = np.linspace(-1, 1, 1 << 20, dtype=np.float32)  # past the inline cost: a parallel launch

    def wait_until_held(lock):
        """Until another thread holds `lock` (at most 60 s)."""
        for _ in range(60_000):
            if not lock.acquire(blocking=False):
                return
            lock.release()
            time.sleep(0.001)
        sys.exit("the other thread never got to work")

    def wait_until_importing(name):
        """Until another thread has begun importing module `name` (at most 60 s)."""
        for _ in range(60_000):
            if name in sys.modules:
                return
            time.sleep(0.001)
        sys.exit(f"the other thread never imported {name}")

    if SCENARIO == "compile":
        busy = threading.Thread(target=SLOW, args=(x,))
        busy.start()
        wait_until_held(backend._lock)  # the other thread is inside prepare
    elif SCENARIO == "import":
        assert "hologram_cpu_llvm.jit" not in sys.modules, "the JIT was imported before the compile"
        busy = threading.Thread(target=SLOW, args=(x,))
        busy.start()
        wait_until_importing("hologram_cpu_llvm.jit")  # its llvmlite.binding takes ~60 ms to import
    else:
        spin = backend.prepare(SPIN)
        lanes = 1 << 19  # enough for two chunks, on the native pool (trips read from data count as 1)
        c = np.full(lanes, 1 << 11, np.int64)  # a launch of a second or more
        busy = threading.Thread(target=backend.launch, args=(spin, {"c": c, "y": np.zeros(lanes, np.int64)},
                                                              {}, {"n": lanes}))
        busy.start()
        wait_until_held(threads.native(2)._busy)  # the other thread's launch holds the workers

    pid = os.fork()
    if pid == 0:
        try:
            y = kernel("fresh", "y = x * 3 + 1")(x)  # new: compiled in the child, run on two threads
            assert np.array_equal(y, x * np.float32(3) + np.float32(1))
            assert threads.native(2)._pid == os.getpid(), "the child's parallel launch did not run on workers"
            assert np.allclose(SLOW(x[:64]), SLOW.on("interp")(x[:64]), rtol=1e-4, atol=1e-4)
            print("child ok", flush=True)
            os._exit(0)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
    for _ in range(9000):  # 90 s
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.01)
    else:
        os.kill(pid, 9)
        print("the child hung", flush=True)
        sys.exit(3)
    busy.join()
    sys.exit(os.waitstatus_to_exitcode(status))
''')


@pytest.mark.parametrize("scenario", ["compile", "import", "launch"])
def test_a_child_forked_while_another_thread_works_compiles_and_runs(scenario, tmp_path):
    env = dict(os.environ, HOLOGRAM_NUM_THREADS="2", HOLOGRAM_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, scenario], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "child ok" in proc.stdout
