"""The call path: a `Kernel` called with Python arguments, checked against its signature,
its outputs allocated, its loop dimensions mapped, and launched on a backend; the fast
path for repeated calls and the trace spans of a call."""
