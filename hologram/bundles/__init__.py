"""Bundles: kernels compiled ahead of time and shipped as versioned archives (.hgb).
`build` compiles documents into one; `load` turns one into a Library with no compiler
work; `manifest` and `archive` are the format. docs/bundles.md is the reference."""
