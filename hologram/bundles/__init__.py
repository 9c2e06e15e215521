"""Bundles: kernels compiled ahead of time and shipped as versioned archives (.hgb).
`build` compiles documents into one; `load` turns one into a Library with no compiler
work, holding each file to its name and each manifest to its programs (`folds`: the
min/max reductions a program shows); `manifest` and `archive` are the format.
docs/bundles.md is the reference."""
