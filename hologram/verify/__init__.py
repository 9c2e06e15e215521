"""The verifier: every program is proven safe before any backend runs it (verifier, with
its rules in decl_rules, instr_rules and control_rules), and the analyses it rests on:
control flow (control), dataflow (dataflow, over abstract_values and loops) and
intervals (intervals). docs/isa.md, "Verification", lists its rules."""
