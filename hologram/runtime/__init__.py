"""The runtime: plugins loaded and looked up, documents compiled into kernels, kernels
called with their arguments checked and launched on a backend."""
