"""The compile API users call: `hologram.compile`, `compile_file`, `compile_all`,
`@hologram.kernel`: a document or a decorated function through a translator and the
compiler into kernels, cached by source and pipeline."""
