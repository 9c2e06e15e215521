"""Block-uniform reduction indices (codegen_blocks.block_uniform): a register is uniform
only when every lane of a block must hold the same value in it."""

from __future__ import annotations

from hologram.core.types import DType
from hologram.isa.builder import ProgramBuilder, gid
from hologram.isa.program import Instr, Special, Sym

from hologram_cpu_llvm.codegen_blocks import block_uniform

I64 = DType.I64


def _uniform(block: tuple[int, ...], build) -> set[str]:
    pb = ProgramBuilder("p", symbols=("n",))
    pb.buffer("x", DType.F32, ("n", "n"), "in")
    pb.buffer("t", I64, ("n",), "in")
    s = pb.stage("s", ("n", "n")[:len(block)], block)
    build(s)
    st = pb.build().stages[0]
    return set(block_uniform(st, [i for i in st.body if isinstance(i, Instr)]))


def test_what_a_whole_block_shares():
    def build(s):
        s.mov(I64, gid("y"), hint="item")                       # block y is 1: uniform
        s.alu("MUL", I64, s.mov(I64, gid("y"), hint="b"), Sym("n"), hint="base")
        s.mov(I64, gid("x"), hint="lane")                        # varies along x
        s.ldg(I64, "t", s.mov(I64, gid("y"), hint="k"), hint="table")  # a read-only table at a uniform index
        s.mov(I64, Special("ntid.x"), hint="width")
    found = _uniform((256, 1), build)
    assert {"item", "b", "base", "k", "table", "width"} <= found and "lane" not in found


def test_nothing_after_a_branch_and_nothing_written_twice():
    def build(s):
        r = s.mov(I64, gid("y"), hint="twice")
        s.mov(I64, 3, dst=r)
        s.bra(s.label("end"))
        s.mov(I64, gid("y"), hint="late")
    found = _uniform((256, 1), build)
    assert "twice" not in found and "late" not in found
    assert _uniform((16, 16), lambda s: s.mov(I64, gid("y"), hint="item")) == set()
