"""Scans lowered (hologram/lower/scan.py, docs/lowering.md "Scans"): one stage of rows
for a short constant extent; otherwise a two-pass block scan whose chunk stages open
with the lead-lane test, whose chunk totals are a constant-count loop, and whose hot
loops carry no run-time bounds check once the verifier has proven them (O2); the IR
passes treat a Scan like any statement (fusion into its value, CSE, DCE, stats)."""

from __future__ import annotations

import pytest

import hologram as hg
from hologram.ir import Scan
from hologram.isa.program import Instr, Label, lead_lane_axes
from hologram.lower.scan import CHUNK
from hologram.verify.verifier import verify


def kernel(body: str, inputs: str = 'x = "f32[n]"', outputs: str = 'y = "f32[n]"', opt: str = "O2") -> hg.Kernel:
    return hg.compile(f'[kernel]\nname = "k"\nversion = "1.0.0"\ninputs = {{ {inputs} }}\n'
                      f'outputs = {{ {outputs} }}\nbody = """\n{body}\n"""\n', opt=opt, backend="interp")


def loops(stage) -> list[list[Instr]]:
    """The instructions of each innermost loop (label .. LOOP) of a stage."""
    body, out = stage.body, []
    for k, it in enumerate(body):
        if isinstance(it, Instr) and it.op == "LOOP":
            top = next(j for j, lab in enumerate(body) if isinstance(lab, Label) and lab.name == it.target)
            inner = body[top + 1:k + 1]
            if not any(isinstance(i, Instr) and i.op == "LOOP" for i in inner[:-1]):
                out.append([i for i in inner if isinstance(i, Instr)])
    return out


@pytest.mark.parametrize("dtype", ["f32", "f64", "i64", "f16"])
@pytest.mark.parametrize("kind", ["sum", "prod"])
def test_a_symbolic_extent_is_a_two_pass_block_scan(dtype, kind):
    p = kernel(f"y = cum{kind}(x)", f'x = "{dtype}[n]"', f'y = "{dtype}[n]"').program
    assert [s.name for s in p.stages] == ["y_totals", "y_offsets", "y"]
    totals, offsets, rescan = p.stages
    assert [lead_lane_axes(s) for s in p.stages] == [(0,), (), (0,)]  # one working lane per chunk
    assert totals.block == rescan.block == (CHUNK,) and offsets.domain == (hg.core.types.Affine.of(1),)
    assert [t.name for t in p.temps] == ["y_chunks"] and p.temps[0].dtype.value == (
        "f64" if dtype in ("f16", "f32") else dtype)
    # hot loops: no run-time checks (the verifier proved them), and the total's trip count is constant
    for stage in (totals, rescan):
        for body in loops(stage):
            assert not any(i.checked for i in body), stage.name
    verify(p)


def test_the_chunk_total_of_an_f32_sum_is_a_reassociable_f64_loop_of_constant_count():
    p = kernel("y = cumsum(x)").program
    (total, short) = loops(p.stages[0])
    assert any(i.op == "ADD" and i.mod == "reassoc" and i.dtype.value == "f64" for i in total)
    assert not any(i.mod == "reassoc" for i in short)  # a running value: in order
    counts = [i for i in p.stages[0].body if isinstance(i, Instr) and i.op == "MOV_IMM" and i.srcs[0].value == CHUNK]
    assert counts, "the chunk loop counts a constant CHUNK"


def test_an_f64_chunk_total_is_compensated_in_eight_accumulators():
    p = kernel("y = cumsum(x)", 'x = "f64[n]"', 'y = "f64[n]"').program
    total = loops(p.stages[0])[0]
    assert sum(i.op == "LDG" for i in total) == 8 and not any(i.mod == "reassoc" for i in total)


@pytest.mark.parametrize("shape, axis, stages", [("[n, 7]", 1, 1), ("[7, n]", 0, 1), ("[n, 2000]", 1, 3),
                                                 ("[n, m]", 0, 3), ("[3, n, 4, 5]", 3, 1), ("[3, 4, 5, n]", 3, 3)])
def test_a_constant_extent_up_to_a_chunk_is_one_stage_of_rows(shape, axis, stages):
    p = kernel(f"y = cumsum(x, axis={axis})", f'x = "i32{shape}"', f'y = "i64{shape}"').program
    assert len(p.stages) == stages and (stages == 3) == bool(p.temps)
    verify(p)


def test_a_scan_down_columns_takes_sixteen_neighbouring_columns_a_block():
    p = kernel("y = cumsum(x, axis=0)", 'x = "f32[m, n]"', 'y = "f32[m, n]"').program
    assert [s.block for s in p.stages] == [(64, 16), (256,), (64, 16)]
    p = kernel("y = cumsum(x, axis=1)", 'x = "f32[m, n]"', 'y = "f32[m, n]"').program
    assert [s.block for s in p.stages] == [(CHUNK, 1), (256,), (CHUNK, 1)]


def test_fusion_computes_an_elementwise_producer_inside_the_scan():
    k = kernel("t = exp(x) * 2\ny = cumsum(t)")
    (st,) = k.ir.body
    assert isinstance(st, Scan) and "exp" in str(st) and not k.ir.temps
    assert len(kernel("t = exp(x) * 2\ny = cumsum(t)", opt="O0").ir.body) == 2


def test_cse_merges_equal_scans_of_temporaries_but_not_a_sum_with_a_product():
    k = kernel("a = cumsum(x)\nb = cumsum(x)\nc = cumprod(x)\ny = a + b + c")
    assert sorted(s.kind for s in k.ir.body if isinstance(s, Scan)) == ["prod", "sum"]


def test_dce_drops_an_unused_scan():
    k = kernel("a = cumsum(x)\ny = x + 1")
    assert not any(isinstance(s, Scan) for s in k.ir.body)


def test_stats_count_the_scan_and_its_traffic():
    n = CHUNK * 8
    s = kernel("y = cumsum(x)").stats(n=n)["O2"]
    assert s.stages == 3 and s.ir_ops == 2  # the load and the running sum
    # the input is read twice (chunk totals, rescan: one lane per chunk is counted), the
    # output written once, plus the chunk totals; an upper bound, counting the paths a
    # branch chooses between (a short row; a full or the last chunk) as if all ran
    read, written = int(str(s.bytes_read)), int(str(s.bytes_written))
    assert not s.bytes_exact and 2 * 4 * n <= read <= 4 * 4 * n and 4 * n <= written <= 3 * 4 * n
