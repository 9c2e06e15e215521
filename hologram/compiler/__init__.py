"""The compiler driver: a kernel definition through the front end, the IR passes, the
lowering, the ISA passes and the verifier into a `Compiled` kernel, its interface
(`Signature`) read from the IR. Everything here is imported at the first compile."""
