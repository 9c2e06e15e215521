"""The program fuzzer's cases: seed programs, mutations of their serialized forms, and
`mutants`, which draws one `ProgramCase` (the mutators themselves are in
fuzz_mutate_programs.py)."""

from __future__ import annotations

import functools
import re
import struct
import zlib

import numpy as np

from hologram.isa.program import Program
from hologram.testing.fuzz_common import pick
from hologram.testing.fuzz_mutate_programs import MUTATORS, NEST_DEPTHS, Rng, m_nest
from hologram.testing.fuzz_program_oracle import ProgramCase


# ================================================================= serialized forms
def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _skip_varint(data: bytes, pos: int) -> int:
    while pos < len(data) and data[pos] & 0x80:
        pos += 1
    return pos + 1


def mutate_binary(rng: Rng, data: bytes) -> tuple[bytes, str]:
    """Bytes of the payload changed; then the payload length and the checksum rewritten
    to match (nine times in ten), so the decoder's structural checks are what is tested."""
    start = _skip_varint(data, _skip_varint(data, 5))  # after the ISA version and the payload length
    head, payload = data[:start], bytearray(data[start:-4])
    for _ in range(int(rng.integers(1, 4))):
        kind = pick(rng, ["bit", "byte", "insert", "delete", "repeat"])
        at = int(rng.integers(len(payload) + (1 if kind == "insert" else 0))) if payload or kind == "insert" else 0
        if kind == "bit" and payload:
            payload[at] ^= 1 << int(rng.integers(8))
        elif kind == "byte" and payload:
            payload[at] = pick(rng, [0, 0x7F, 0x80, 0xFF, int(rng.integers(256))])
        elif kind == "insert":
            payload.insert(at, pick(rng, [0, 0x80, 0xFF, int(rng.integers(256))]))
        elif kind == "delete" and payload:
            del payload[at]
        elif payload:
            payload[at:at] = payload[at:at + int(rng.integers(1, 9))]
    if rng.random() < 0.1:
        return head + bytes(payload) + data[-4:], "binary payload changed (length and checksum stale)"
    isa_end = _skip_varint(data, 5)
    body = head[:isa_end] + _uvarint(len(payload)) + bytes(payload)
    return body + struct.pack("<I", zlib.crc32(body)), "binary payload changed"


_TOKEN = re.compile(r"%[\w.]+|\$\w+|-?\d+(?:\.\d*)?(?:e[-+]?\d+)?|[A-Za-z_][\w.]*|\S")
_TEXT_SPARE = ["%gid.x", "$n", "0", "-1", "2.5", "nan", "inf", "9223372036854775808", "1e400", "[", "]", "+", ",",
               "f16", "bool", "EXIT", "LOOP", "@!%p", "domain", "block", ".chk", "\u00e9", "\x00"]


def mutate_text(rng: Rng, text: str) -> tuple[str, str]:
    lines = text.split("\n")
    kind = pick(rng, ["delete", "duplicate", "swap", "token", "token", "token"])
    k = int(rng.integers(len(lines)))
    if kind == "delete":
        del lines[k]
    elif kind == "duplicate":
        lines.insert(k, lines[k])
    elif kind == "swap":
        j = int(rng.integers(len(lines)))
        lines[k], lines[j] = lines[j], lines[k]
    else:
        tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(lines[k])]
        if tokens:
            a, b = pick(rng, tokens)
            everything = _TOKEN.findall(text)
            new = pick(rng, _TEXT_SPARE) if rng.random() < 0.5 else pick(rng, everything)
            lines[k] = lines[k][:a] + new + lines[k][b:]
    return "\n".join(lines), f"text:{kind} line {k + 1}"


# ================================================================= seeds and mutants
@functools.lru_cache(maxsize=4)
def seed_programs(strategy_examples: int = 40, seed: int = 0) -> tuple[tuple[str, Program], ...]:
    """(name, program) seeds: every stdlib kernel this installation can find, the document
    fuzzer's built-in seed documents, the programs at the block scratch limit and past it
    (scratch_cases.py), the repository's corpus of `.hasm` programs (`corpus_programs`),
    and `strategy_examples` programs drawn from
    `isa_strategies.programs()` with hypothesis seed `seed`."""
    import hologram

    from hologram.testing import scratch_cases
    from hologram.testing.fuzz_mutate_documents import seed_documents

    out: list[tuple[str, Program]] = []
    for name, fmt, text in seed_documents():
        try:
            lib = hologram.compile_all(text, format=fmt, file=name)
        except Exception:  # noqa: BLE001 - a seed that does not compile is not a seed
            continue
        out += [(f"{name}:{k}", kern.program) for k, kern in lib.items()]
    drawn = tuple((f"isa_strategies:{seed}:{k}", p) for k, p in enumerate(_strategy_programs(strategy_examples, seed)))
    return tuple(out) + scratch_cases.seeds() + corpus_programs() + drawn


CORPUS = ("tests", "fuzz_seeds")  # under the repository root: hand-written programs, one per .hasm


def corpus_programs() -> tuple[tuple[str, Program], ...]:
    """(path, program) of every `.hasm` program in the repository's corpus (reproducers
    of defects the mutators could not reach from the kernels: a LOOP counter at -2**63),
    or none when the package is installed without the repository. Each must verify: a
    seed the verifier refuses is a mistake of the corpus, and raises."""
    from hologram.isa.asm import parse_program
    from hologram.testing.fuzz_mutate_documents import _repository
    from hologram.verify.verifier import verify

    root = _repository()
    if root is None:
        return ()
    paths = sorted(root.joinpath(*CORPUS).glob("*.hasm"))
    return tuple((str(path.relative_to(root)), verify(parse_program(path.read_text(encoding="utf-8"),
                                                                     file=str(path)))) for path in paths)


def _strategy_programs(count: int, seed: int) -> list[Program]:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    from hologram.testing.isa_strategies import programs

    drawn: list[Program] = []

    @hypothesis_seed(seed)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(programs())
    def collect(p: Program) -> None:
        drawn.append(p)

    collect()
    return drawn


def mutants(rng: Rng, seeds: tuple[tuple[str, Program], ...], scale: str = "ci") -> ProgramCase:
    """One mutant of a seed: one to three mutators (one time in fifty a loop nest of a
    depth `scale` draws), then (one time in four) a binary or text mutation of the result."""
    from hologram.isa.asm import format_program
    from hologram.isa.encoding import encode

    names = list(MUTATORS)
    weights = np.array([MUTATORS[n][1] for n in names], float)
    weights /= weights.sum()
    while True:
        origin, program = seeds[int(rng.integers(len(seeds)))]
        done: list[str] = []
        for _ in range(int(rng.integers(1, 4))):
            if rng.random() < 0.02:
                lo, hi = NEST_DEPTHS[scale]
                result = m_nest(rng, program, int(rng.integers(lo, hi + 1)))
            else:
                result = MUTATORS[names[int(rng.choice(len(names), p=weights))]][0](rng, program)
            if result is not None:
                program, what = result
                done.append(what)
        r = rng.random()
        seed = int(rng.integers(2**31))
        try:
            if r < 0.15:
                data, what = mutate_binary(rng, encode(program))
                return ProgramCase(origin, tuple(done + [what]), seed, data=data)
            if r < 0.25:
                text, what = mutate_text(rng, format_program(program))
                return ProgramCase(origin, tuple(done + [what]), seed, text=text)
        except Exception:  # noqa: BLE001 - a program the encoder refuses goes as a value
            pass
        if done:
            return ProgramCase(origin, tuple(done), seed, program=program)
