"""The verifier: nothing runs, and nothing loads from a bundle, until it passes here.

`verify(p)` returns `p` or raises `VerifyError` naming the stage, the instruction (its
index in `stage.body`, labels included, and its assembly text) and the rule broken. The
error also carries them as attributes: `rule` (a short id, listed in docs/hasm.md),
`stage` and `index` (None where they do not apply).

Checks run in this order, and the first failure is reported:
0. structure: every field holds the Python type its class declares (structure.py);
1. program: ISA version, names, parameter roles and shapes, sites (decl_rules.py);
2. per stage: domain and block, declarations, the block scratch they add up to, inits
   (decl_rules.py);
3. per instruction: operand kinds by `OPCODES[op].form`, types by `types` and `result`,
   immediates representable, memory spaces and element types, labels and pools, one
   combining operation per buffer a stage reduces into (instr_rules.py);
4. control flow: branch directions, loop counters and nesting, calls (no recursion),
   RET only in subroutines, no BarSync in subroutines, no path falls off the end
   (control_rules.py);
5. dataflow (dataflow.py): registers written before read, every unchecked memory access
   proven in bounds (intervals.py), under the launch contract that every shape symbol is
   below 2**62 and every dimension evaluates to a size >= 0.
Together with the ISA's semantics this makes every verified program terminate and never
touch memory outside its arrays, on any backend. Rules 4 and 5 share one budget of
analysis steps per stage, and the stages of a program one budget in all.
"""

from __future__ import annotations

import weakref

from hologram.isa.program import Program, Stage
from hologram.isa.structure import ByIdentity, structure_problem
from hologram.verify.control_rules import check_control
from hologram.verify.dataflow import MAX_ANALYSIS_STEPS, StageAnalysis
from hologram.verify.decl_rules import StageScope, check_program, verify_error
from hologram.verify.instr_rules import check_instructions
from hologram.verify.intervals import Meter, TooComplex

# Analysis steps for all the stages of a program together (each stage has at most
# dataflow.MAX_ANALYSIS_STEPS): a program of many stages cannot add up to a long wait.
MAX_PROGRAM_STEPS = 2 * MAX_ANALYSIS_STEPS

# Programs that passed: the front end verifies what it lowers and a backend re-verifies
# what it is handed; this makes the second check free (1-6 ms of a warm cpu_llvm prepare).
_PASSED = ByIdentity()
# Stages that passed, by value, with the signatures (params, temps, symbols) they passed
# under: a stage's checks read nothing else of its program, so the ISA passes' checks of
# a rewritten stage (isa_flow.stage_verifies) make the final verify of the same stage
# free. Weak: an entry lives as long as some program holds the stage.
_STAGES_PASSED: "weakref.WeakKeyDictionary[Stage, list[tuple]]" = weakref.WeakKeyDictionary()


def verify(p: Program) -> Program:
    """`p` itself when it satisfies every rule (docs/hasm.md), else VerifyError."""
    if p in _PASSED:
        return p
    if not isinstance(p, Program):
        raise verify_error("structure", f"verify expects a Program, got {type(p).__name__}")
    bad = structure_problem(p)
    if bad is not None:
        raise verify_error("structure", f"malformed program: {bad}")
    check_program(p)
    signature = (p.params, p.temps, p.symbols)
    steps_left = MAX_PROGRAM_STEPS
    for stage in p.stages:
        passed = _STAGES_PASSED.get(stage)
        if passed is not None and signature in passed:
            continue
        steps_left -= _StageChecker(p, stage, steps_left).run()
        _STAGES_PASSED.setdefault(stage, []).append(signature)
    _PASSED.add(p)
    return p


class _StageChecker:
    """Rules 2 to 5 for one stage, with `steps_left` of the program's analysis budget."""

    def __init__(self, p: Program, s: Stage, steps_left: int = MAX_PROGRAM_STEPS):
        self.p, self.s, self.steps_left = p, s, steps_left

    def run(self) -> int:
        """Check the stage (VerifyError at the first problem); the analysis steps it took."""
        scope = StageScope(self.p, self.s)
        scope.check_launch()
        scope.check_decls()
        check_instructions(scope)
        # one budget for the control checks and the dataflow, within what the program has left
        meter = Meter(min(MAX_ANALYSIS_STEPS, self.steps_left))
        try:
            check_control(scope, meter)
            problems = StageAnalysis(self.p, self.s, meter).run()
        except TooComplex as e:
            if meter.spent > meter.limit and meter.limit < MAX_ANALYSIS_STEPS:
                raise scope.fail("complexity", f"the program is too complex to verify: its stages need more than "
                                               f"{MAX_PROGRAM_STEPS:,} steps of analysis in all",
                                 "split it into several programs") from None
            raise scope.fail("complexity", f"this stage is too complex to verify: {e}",
                             "split it into smaller stages or simplify its subroutine structure") from None
        if problems:
            first = problems[0]
            raise scope.fail(first.rule, first.message, first.hint, first.pc)
        return meter.spent
