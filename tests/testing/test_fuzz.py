"""The fuzzers of hologram.testing.fuzz: their parts, then a bounded run of each.

The bounded runs (a few hundred mutants each) fail on any finding that no entry of
`KNOWN_ISSUES` recognizes; the known ones (defects reported and being fixed) are listed
as warnings so a run shows whether they are still there. `make fuzz` runs the same
fuzzers long (docs/testing.md, "Fuzzing").
"""

from __future__ import annotations

import os
import sys
import textwrap
import warnings

import numpy as np
import pytest

from hologram.core.errors import ExecutionError, ISAError, VerifyError
from hologram.core.types import Affine
from hologram.isa.asm import parse_program
from hologram.isa.encoding import decode, encode
from hologram.testing.fuzz import Finding, _findings, _run, fuzz_documents, fuzz_objects, fuzz_programs, replay
from hologram.testing.fuzz_common import CANARY, CRASH, TIMEOUT, VERIFIER_HOLE, CaseResult, Guarded, Problem
from hologram.testing.fuzz_mutate_documents import seed_documents, to_toml
from hologram.testing import scratch_cases
from hologram.testing.fuzz_mutate_programs import m_loop_extreme, m_nest, mutate_affine
from hologram.testing.fuzz_mutate_scratch import m_scratch
from hologram.testing.fuzz_pool import WorkerPool
from hologram.testing.fuzz_program_cases import corpus_programs, mutants, mutate_binary, seed_programs
from hologram.testing.fuzz_program_oracle import ProgramCase, check_program_case, unchecked_fault
from hologram.testing.fuzz_trace import find_race
from hologram.testing.precision import EXACT, OPEN, ULPS, precision
from hologram.verify.decl_rules import MAX_BLOCK_SCRATCH_BYTES, MAX_SHARED_BYTES, block_scratch
from hologram.verify.verifier import verify

PROGRAM_CASES = 300
DOCUMENT_CASES = 250
OBJECT_CASES = 300


def program(body: str, params: str = ".param in x: f32[n]\n.param out y: f32[n]", extra: str = "",
            block: str = "4") -> str:
    return (f".program p\n.isa 1\n.symbols n\n{params}\n.stage s domain [n] block [{block}]\n"
            + textwrap.indent(textwrap.dedent(extra + body), "    "))


def launch_args(n: int = 6) -> tuple[dict, dict, dict]:
    return {"x": np.arange(n, dtype=np.float32), "y": np.zeros(n, np.float32)}, {}, {"n": n}


# ------------------------------------------------------------------ the race check
OWN = """\
.reg %i: i64
.reg %v: f32
MOV.i64 %i, %gid.x
LDG.f32 %v, [x + %i]
STG.f32 [y + %i], %v
EXIT
"""
ALL_TO_ONE = OWN.replace("STG.f32 [y + %i], %v", "STG.f32 [y], %v")
READ_NEIGHBOUR = """\
.reg %i, %j: i64
.reg %p: bool
.reg %v: f32
MOV.i64 %i, %gid.x
STG.f32 [y + %i], 1.0
SET.gt.i64 %p, %i, 0
@!%p BRA L
SUB.i64 %j, %i, 1
LDG.f32 %v, [y + %j]
L:
EXIT
"""
SHARED = """\
.reg %t: i64
.reg %v: f32
MOV.i64 %t, %tid.x
STS.f32 [sh + %t], 2.0
{barrier}
LDS.f32 %v, [sh]
EXIT
"""


@pytest.mark.parametrize("body,racy", [
    (OWN, False), (ALL_TO_ONE, True), (READ_NEIGHBOUR, True),
    (SHARED.format(barrier="BarSync"), False), (SHARED.format(barrier="MemFence"), True),
], ids=["own-element", "all-store-one", "read-neighbour", "shared-with-barrier", "shared-without"])
def test_the_race_check_tells_racy_launches_apart(body, racy):
    extra = ".shared sh: f32[4]\n" if "sh" in body else ""
    p = parse_program(program(body, extra=extra))
    found = find_race(p, *launch_args())
    assert (found is not None) == racy, found


def test_a_reduction_is_no_race_but_a_plain_access_beside_it_is():
    reduce = ".reg %v: f32\nMOV_IMM.f32 %v, 1.0\nReduceAdd.f32 [y], %v\nEXIT\n"
    assert find_race(parse_program(program(reduce)), *launch_args()) is None
    mixed = reduce.replace("EXIT", "LDG.f32 %v, [y]\nEXIT")
    assert find_race(parse_program(program(mixed)), *launch_args()) is not None


# ------------------------------------------------------------------ oracle parts
def test_guarded_arrays_see_a_write_next_to_them():
    g = Guarded(np.arange(5, dtype=np.int16))
    assert g.inner.flags.c_contiguous and g.intact() and g.unchanged()
    g.inner[4] = 7
    assert g.intact() and not g.unchanged()
    g.backing[g.guard + 5] = 1  # one past the end
    assert not g.intact()


def test_an_out_of_bounds_unchecked_access_is_a_verifier_hole():
    p = parse_program(program(OWN))
    message = "stage 's': instruction {} `...` (lane gid=(3,)): index 9 is out of bounds for global buffer 'y' of 6"
    assert unchecked_fault(p, ExecutionError(message.format(2))) == "stage 's' instruction 2"  # STG, unchecked
    checked = parse_program(program(OWN.replace("STG.f32 [y", "STG.f32.chk [y")))
    assert unchecked_fault(checked, ExecutionError(message.format(2))) is None
    assert unchecked_fault(p, ExecutionError("stage 's': something else")) is None


def test_precision_levels_follow_the_isa_licences():
    base = OWN.replace(".reg %v: f32", ".reg %v, %w, %u: f32").replace("STG.f32 [y + %i], %v", "{op}\nSTG.f32 [y + %i], %w")

    def level(op: str, flags: str = "") -> int:
        text = program(base.format(op=op)).replace(".symbols n", ".symbols n" + flags)
        return precision(parse_program(text))["y"]

    assert level("ADD.f32 %w, %v, 1.0") == EXACT
    assert level("EXP.f32 %w, %v") == ULPS
    assert level("EXP.f32 %u, %v\nEXP.f32 %w, %u") == OPEN
    assert level("ADD.reassoc.f32 %w, %v, 1.0") == OPEN
    assert level("ADD.f32 %w, %v, 1.0", "\n.reassociate") == OPEN
    assert level("COPYSIGN.f32 %w, 1.0, %v") == OPEN


def test_a_verified_mutant_runs_on_both_backends_and_is_compared():
    case = ProgramCase("test", (), 1, program=parse_program(program(OWN)))
    result = check_program_case(case, lambda *a: None)
    assert result.outcome == "ran" and not result.problems
    assert dict(result.facts)["compared"] == 1


def _numpy_offsets() -> "object":
    """OWN with its load's address offset and its reduction seed's offset and value as
    numpy scalars, as the program mutator writes them."""
    import attrs
    text = program(OWN.replace("EXIT", "ReduceAdd.f32 [z], %v\nEXIT"),
                   ".param in x: f32[n]\n.param out y: f32[n]\n.param out z: f32[1]", ".init z[0] = 0.0\n")
    p = parse_program(text)
    st = p.stages[0]
    body = list(st.body)
    body[1] = attrs.evolve(body[1], addr=attrs.evolve(body[1].addr, offset=np.int64(0)))
    init = attrs.evolve(st.inits[0], offset=np.int32(0), value=np.float32(0.0))
    return attrs.evolve(p, stages=(attrs.evolve(st, body=tuple(body), inits=(init,)),))


FUZZ_FOUND = {  # where verify() and a backend disagreed: now the backends run it or verify refuses it
    "numpy-int-fields": (_numpy_offsets, "ran"),
    "resaccum-without-index": (lambda: parse_program(program(
        ".reg %v: f32\nMOV_IMM.f32 %v, 1.0\nResAccum.f32.chk [y + 2], %v\nEXIT\n")), "refused"),
    "mixed-reductions": (lambda: parse_program(program(
        ".reg %v: f32\nMOV_IMM.f32 %v, 1.0\nReduceAdd.f32 [y], %v\nReduceMax.f32 [y], %v\nEXIT\n")), "refused"),
}


@pytest.mark.parametrize("label", list(FUZZ_FOUND))
def test_what_the_fuzzers_found_is_agreed_on(label):
    """Each was a KNOWN_ISSUES entry (`fuzz/<label>`): a program verify() accepted and
    one backend refused (interp: numpy offsets; both: ResAccum without an index;
    cpu_llvm: two reduction kinds on one buffer)."""
    make, outcome = FUZZ_FOUND[label]
    result = check_program_case(ProgramCase(label, (), 0, program=make()), lambda *a: None)
    assert (result.outcome, result.problems) == (outcome, ()), result.problems


def test_the_issue_11_dimension_reproducer_is_refused_or_safe():
    """x, y: f32[2*n] re-spelt `-n + 2*n`: whatever Affine makes of it, the oracle sees
    no stray access (the verifier and the runtimes agree on the size)."""
    p = parse_program(program(OWN, ".param in x: f32[2*n]\n.param out y: f32[2*n]").replace(
        "domain [n]", "domain [2*n]"))
    spelt = Affine(0, (("n", -1), ("n", 2)))
    import attrs
    from hologram.isa.program import BufferParam
    p = attrs.evolve(p, params=tuple(attrs.evolve(b, shape=(spelt,)) if isinstance(b, BufferParam) else b
                                     for b in p.params))
    for seed in range(4):
        assert not check_program_case(ProgramCase("issue-11", (), seed, program=p), lambda *a: None).problems


# ------------------------------------------------------------------ mutators
def test_the_mutators_reach_the_shapes_and_blocks_issue_11_named():
    rng = np.random.default_rng(0)
    spellings = {mutate_affine(rng, Affine.of("n"), ["n"])[1] for _ in range(200)}
    assert {"repeated-symbol", "zero-coefficient", "negative-coefficient"} <= spellings
    seeds = seed_programs(10, 0)
    drawn = [mutants(rng, seeds).mutations for _ in range(1500)]
    flat = [m for ms in drawn for m in ms]
    assert any(m.startswith("shape:repeated-symbol") for m in flat)
    assert any(m.startswith("block:numpy-int") and "np.int32(65536)" in m for m in flat)
    assert any("binary payload changed" in m for m in flat) and any(m.startswith("text:") for m in flat)


def test_a_loop_nest_verifies_and_no_launch_enters_it():
    seed = parse_program(program(OWN))
    nested, what = m_nest(np.random.default_rng(0), seed, 12)
    assert what.startswith("nest 12 loops deep")
    result = check_program_case(ProgramCase("nest", (what,), 0, program=nested), lambda *a: None)
    assert result.outcome == "ran" and not result.problems, result


# ------------------------------------------------------------------ block scratch (issue 21)
def _scratch_seeds() -> list:
    return [scratch_cases.at_limit(name) for name in scratch_cases.AT_LIMIT] + [parse_program(program(OWN))]


def test_the_scratch_mutation_takes_a_stage_to_its_limit_or_one_element_past_it():
    rng = np.random.default_rng(0)
    seeds, seen = _scratch_seeds(), set()
    for _ in range(150):
        mutant, what = m_scratch(rng, seeds[int(rng.integers(len(seeds)))])
        lever, over = what.split()[0], " over the limit " in what
        seen.add((lever, over))
        if over:
            with pytest.raises(VerifyError) as refused:
                verify(mutant)
            assert refused.value.rule == "scratch", what
        else:
            assert verify(mutant), what
            scratch = block_scratch(mutant.stages[int(what.split()[2])])
            assert scratch.total <= MAX_BLOCK_SCRATCH_BYTES and scratch.shared <= MAX_SHARED_BYTES
    assert seen == {(f"scratch:{lever}", over) for lever in ("block", "pools", "shared", "registers")
                    for over in (False, True)}


def test_mutants_just_under_the_scratch_limit_run_on_both_backends_and_agree():
    rng = np.random.default_rng(1)
    for seed in _scratch_seeds():
        mutant, what = m_scratch(rng, seed)
        while " over the limit " in what:
            mutant, what = m_scratch(rng, seed)
        result = check_program_case(ProgramCase("scratch", (what,), 0, program=mutant), lambda *a: None)
        assert result.outcome == "ran" and not result.problems and dict(result.facts).get("compared"), \
            (what, result)


def test_a_program_past_the_scratch_limit_that_verifies_is_a_verifier_hole(monkeypatch):
    from hologram.verify import decl_rules, verifier
    monkeypatch.setattr(decl_rules.StageScope, "_check_scratch", lambda self: None)  # the hole
    for cache in ("_PASSED", "_STAGES_PASSED"):  # what passes under the hole is forgotten after
        monkeypatch.setattr(verifier, cache, type(getattr(verifier, cache))())
    past = scratch_cases.over("pool_across_barrier")
    result = check_program_case(ProgramCase("hole", (), 0, program=past), lambda *a: None)
    assert [p.kind for p in result.problems] == [VERIFIER_HOLE], result
    assert "past the scratch limit: stage 'main' holds 1,024 lanes x (969 pool" in result.problems[0].message


def test_the_program_fuzzer_is_seeded_with_the_programs_at_and_past_the_scratch_limit():
    names = {name for name, _ in seed_programs(10, 0)}  # the arguments of another test: cached
    assert {f"scratch:{n}" for n in scratch_cases.AT_LIMIT} <= names
    assert {f"scratch-reproducer:{n}" for n in scratch_cases.REPRODUCERS} <= names


def _contained(cases: list[ProgramCase]) -> dict:
    """Run `cases` through the oracle in the fuzzer's worker pool (a launch that hangs is
    a timeout there, not a hung test); no finding may come of them. The run's stats."""
    stats: dict = {}
    findings = _run("program", iter(cases), 2, None, None, stats, None, len(cases))
    assert not findings, "\n\n".join(str(f) for f in findings)
    return stats


def test_the_corpus_programs_are_seeds_and_pass_the_oracle():
    """tests/fuzz_seeds/: reproducers the mutators start from (issue 21's LOOP counters at
    -2**63 among them: they ran ~2**63 trips), each run on both backends and compared."""
    seeds = dict(seed_programs(10, 0))
    corpus = [name for name, _ in corpus_programs()]
    assert corpus and all(name in seeds for name in corpus)
    stats = _contained([ProgramCase(name, (), k, program=seeds[name]) for name in corpus for k in range(3)])
    assert stats["outcomes"] == {"ran": 3 * len(corpus)}, stats


def test_loop_counters_at_the_extremes_verify_run_and_agree():
    """Issue 21: the mutator sets an existing counter's start to an extreme, or adds a
    loop counting from one that a branch leaves after three trips; both backends must
    finish (no timeout) and agree."""
    rng = np.random.default_rng(5)
    seeds = [p for name, p in seed_programs(10, 0) if name.startswith(("kernels/", "tests/fuzz_seeds/"))]
    cases = [ProgramCase("loop-extreme", (what,), k, program=mutated)
             for k, (mutated, what) in enumerate(m_loop_extreme(rng, seeds[k % len(seeds)]) for k in range(24))]
    assert {case.mutations[0].split()[0] for case in cases} == {"loop-extreme:start", "loop-extreme:new"}
    stats = _contained(cases)
    assert set(stats["outcomes"]) <= {"ran", "refused"}, stats


def test_binary_mutants_keep_a_valid_checksum_so_decode_checks_structure():
    rng = np.random.default_rng(3)
    data = encode(parse_program(program(OWN)))
    reasons = []
    for _ in range(100):
        mutated, _ = mutate_binary(rng, data)
        try:
            decode(mutated)
            reasons.append("decoded")
        except ISAError as exc:
            reasons.append("checksum" if "checksum" in str(exc) else "structure")
    assert reasons.count("checksum") <= 20 and reasons.count("structure") >= 50, reasons


def test_documents_written_back_as_toml_parse_the_same():
    import tomllib
    for name, fmt, text in seed_documents():
        if fmt == "toml":
            data = tomllib.loads(text)
            assert tomllib.loads(to_toml(data)) == data, name


# ------------------------------------------------------------------ the worker pool
CHECKERS = '''
import ctypes, time
from hologram.testing.fuzz_common import CaseResult

def fine(case, phase):
    phase("work", True)
    return CaseResult("ran")

def crash(case, phase):
    phase("work", True)
    ctypes.string_at(0)

def hang(case, phase):
    phase("work", case[1])  # the case says whether a timeout is a defect
    time.sleep(60)
'''


def test_the_pool_survives_crashes_and_hangs(tmp_path):
    (tmp_path / "fuzz_test_checkers.py").write_text(CHECKERS)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    handlers = {k: f"fuzz_test_checkers:{k}" for k in ("fine", "crash", "hang")}
    with WorkerPool(2, {"work": 2.0}, env, handlers=handlers) as pool:
        results = list(pool.run([("fine", ("a", 0)), ("crash", ("b", 0)), ("hang", ("c", True)),
                                 ("hang", ("d", False)), ("fine", ("e", 0))]))
    by_case = {case[0]: r for case, r in results}
    assert by_case["a"].outcome == by_case["e"].outcome == "ran"
    assert by_case["b"].outcome == "crash" and by_case["b"].problems[0].kind == CRASH
    assert "SIGSEGV" in by_case["b"].problems[0].message
    assert by_case["c"].outcome == "timeout" and by_case["c"].problems[0].kind == TIMEOUT
    assert by_case["d"].outcome == "timeout" and not by_case["d"].problems


def test_a_finding_is_written_and_replayed(tmp_path):
    case = ProgramCase("test", ("none",), 1, program=parse_program(program(OWN)))
    found = _findings("program", case, CaseResult("ran", (Problem(CANARY, "cpu_llvm", "pretend"),)), str(tmp_path))
    assert len(found) == 1 and found[0].reproducer.startswith(".program p")
    files = found[0].files
    assert {os.path.splitext(f)[1] for f in files} == {".hasm", ".hbc", ".pkl", ".txt"}
    assert replay(next(f for f in files if f.endswith(".case.pkl"))) == []  # the case itself passes


def test_a_known_issue_tags_its_findings_and_no_other(monkeypatch):
    import hologram.testing.fuzz as fuzz

    def finding(kind, message="m"):
        return Finding(kind, "interp", message, "program", "seed", (), "")
    issue = fuzz.KnownIssue("fuzz/example", "canaries on a symbol past 2**62",
                            lambda f: f.kind == CANARY and "k=9223372036854775807" in f.message)
    monkeypatch.setattr(fuzz, "KNOWN_ISSUES", (issue,))
    assert fuzz._known(finding(CANARY, "x [symbols n=3, k=9223372036854775807]")).known == "fuzz/example"
    assert fuzz._known(finding(CANARY, "x [symbols n=3]")).known is None
    assert fuzz._known(finding(VERIFIER_HOLE, "k=9223372036854775807")).known is None


# ------------------------------------------------------------------ bounded runs
def _judge(findings: list[Finding], stats: dict) -> None:
    known = [f for f in findings if f.known]
    if known:
        labels = sorted({f.known for f in known})
        warnings.warn(f"{len(known)} findings of known open issues: {', '.join(labels)}", stacklevel=2)
    new = [f for f in findings if not f.known]
    assert not new, f"{len(new)} new findings ({stats}):\n\n" + "\n\n".join(map(str, new[:5]))


def test_bounded_program_fuzzing():
    stats: dict = {}
    findings = fuzz_programs(PROGRAM_CASES, seed=1, stats=stats, strategy_examples=30)
    _judge(findings, stats)
    outcomes, facts = stats["outcomes"], stats["facts"]
    assert stats["cases"] == PROGRAM_CASES
    # every layer of the oracle was reached, so a pass means something
    assert outcomes.get("refused", 0) > 30 and outcomes.get("refused-by-decode", 0) > 10
    assert outcomes.get("refused-by-parse", 0) > 5 and outcomes.get("ran", 0) > 30
    assert facts.get("compared", 0) > 30


def test_bounded_document_fuzzing():
    stats: dict = {}
    findings = fuzz_documents(DOCUMENT_CASES, seed=1, stats=stats)
    _judge(findings, stats)
    assert stats["cases"] == DOCUMENT_CASES
    assert stats["outcomes"].get("refused", 0) > 50 and stats["outcomes"].get("ran", 0) > 20
    assert stats["facts"].get("compared", 0) > 20


def _object_seeds() -> tuple:
    from hologram.testing.fuzz_mutate_objects import seed_objects

    seeds = seed_objects()
    if not seeds:
        pytest.skip("cpu_llvm builds no object code this CPU runs")
    return seeds


def test_the_object_mutators_reach_every_structure_and_both_verdicts():
    from hologram.testing.fuzz_mutate_objects import MUTATORS, mutant

    rng = np.random.default_rng(0)
    drawn = [mutant(rng, _object_seeds()) for _ in range(400)]
    assert {m.split(":")[0] for c in drawn for m in c.mutations} == {f.__name__[2:] for f in MUTATORS}
    assert sum(c.refuse for c in drawn) > 200 and sum(not c.refuse for c in drawn) > 10


def test_an_object_finding_is_written_and_replayed(tmp_path):
    from hologram.testing.fuzz_common import UNCHECKED
    from hologram.testing.fuzz_mutate_objects import misplace_relocation
    from hologram.testing.fuzz_object_oracle import ObjectCase

    name, program, native = _object_seeds()[0]
    case = ObjectCase(name, ("a relocation past .text",), 0, program,
                      {**native, "object": misplace_relocation(native["object"])}, refuse=True)
    found = _findings("object", case, CaseResult("linked", (Problem(UNCHECKED, "load", "pretend"),)), str(tmp_path))
    assert {os.path.splitext(f)[1] for f in found[0].files} == {".o", ".hbc", ".pkl", ".txt"}
    assert f"object code of kernel '{name}'" in found[0].reproducer
    assert replay(next(f for f in found[0].files if f.endswith(".case.pkl"))) == []  # refused, saying why


def test_bounded_object_fuzzing():
    """Mutated object code of real kernels: refused with a reason, or linked and agreeing
    with the interpreter; damage the loader must refuse is never linked."""
    stats: dict = {}
    findings = fuzz_objects(OBJECT_CASES, seed=1, stats=stats)
    if stats["cases"] == 0:
        pytest.skip(stats["skipped"])
    _judge(findings, stats)
    assert stats["cases"] == OBJECT_CASES
    assert stats["outcomes"].get("refused", 0) > 150 and stats["outcomes"].get("ran", 0) > 10
    assert stats["facts"].get("linked", 0) > 10


def test_the_fuzz_command_runs_and_replays(tmp_path, capsys):
    from hologram.cli.main import main

    out = str(tmp_path / "findings")
    assert main(["fuzz", "--programs", "6", "--documents", "4", "--objects", "5", "--scale", "ci", "--workers", "1",
                 "--out", out]) == 0
    printed = capsys.readouterr().out
    assert "programs: 6 cases" in printed and "documents: 4 cases" in printed
    assert "objects: 5 cases" in printed or "objects: 0 cases" in printed and "skipped" in printed
    case = ProgramCase("test", ("none",), 1, program=parse_program(program(OWN)))
    found = _findings("program", case, CaseResult("ran", (Problem(CANARY, "cpu_llvm", "pretend"),)), out)
    pkl = next(f for f in found[0].files if f.endswith(".case.pkl"))
    assert f"replay: hologram fuzz --replay {pkl}" in open(pkl.replace(".case.pkl", ".txt")).read()
    assert main(["fuzz", "--replay", pkl]) == 0
    assert "no finding: the case passes now" in capsys.readouterr().out
