"""Bundles: kernels compiled ahead of time and shipped as versioned archives (docs/bundles.md,
filled by the bundle work; empty until then)."""
