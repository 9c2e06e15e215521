"""`hologram.stream`: kernels over inputs larger than memory, through a fixed pool, over
loop dimensions or along a shape symbol (the planner splits the kernel's IR into passes
over the data)."""
