"""The Atlas ISA: program values and the opcode table, how programs are built, written
as text (asm, asm_lexer), encoded in binary (encoding), and the structure of their
control flow (structure). docs/isa.md is the reference."""
