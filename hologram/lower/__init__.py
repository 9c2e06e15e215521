"""The lowering: KernelIR -> Program. `stages` drives it; `plan` decides stages and
launch domains, `expr` emits expressions, `loops` the loops of in-lane reductions,
`contract` register-tiled contractions, `online` the one-pass softmax."""
