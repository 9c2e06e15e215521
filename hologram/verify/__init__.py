"""The verifier: every program is proven safe before any backend runs it (verifier),
with the control-flow (control), dataflow (dataflow) and interval (intervals) analyses
it rests on. docs/isa.md, "Verification", lists its rules."""
