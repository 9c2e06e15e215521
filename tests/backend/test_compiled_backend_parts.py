"""The SDK's parts for compiled backends that need no LLVM: the disk cache
(hologram.backend.disk_cache) and the error record's decoding (hologram.backend.error_record)."""

from __future__ import annotations

import os

import pytest

from hologram.backend import disk_cache, error_record
from hologram.errors import ExecutionError
from hologram.isa.asm import parse_program
from isa_helpers import OOB


class TextCache(disk_cache.DiskCache[str]):
    """Entries are the key, a newline and the text."""

    suffix = ".txt"
    max_entry_bytes = 1 << 10

    def encode(self, key: str, entry: str) -> bytes:
        return f"{key}\n{entry}".encode()

    def decode(self, key: str, data: bytes) -> str | None:
        stored, _, text = data.decode().partition("\n")
        return text if stored == key else None


def test_a_stored_entry_is_read_back_and_no_temporary_file_is_left(tmp_path):
    cache = TextCache(tmp_path / "c")
    assert cache.load("k") is None
    assert cache.store("k", "hello") and cache.load("k") == "hello"
    assert [p.name for p in (tmp_path / "c").iterdir()] == [cache.path("k").name]
    assert cache.path("k").suffix == ".txt"


def test_an_entry_the_format_refuses_is_deleted_and_a_miss(tmp_path):
    cache = TextCache(tmp_path)
    cache.path("k").write_bytes(b"other key\nhello")
    assert cache.load("k") is None and not cache.path("k").exists()


def test_what_is_not_a_regular_file_of_bounded_size_is_a_miss(tmp_path):
    cache = TextCache(tmp_path)
    cache.path("big").write_bytes(b"big\n" + b"x" * 2048)  # over max_entry_bytes
    assert cache.load("big") is None and not cache.path("big").exists()
    if hasattr(os, "mkfifo"):
        os.mkfifo(cache.path("fifo"))
        assert cache.load("fifo") is None and not cache.path("fifo").exists()


def test_an_unwritable_root_is_only_a_miss_and_discard_forgets(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    assert TextCache(tmp_path / "file" / "sub").store("k", "x") is False
    cache = TextCache(tmp_path)
    cache.store("k", "x")
    cache.discard("k")
    assert cache.load("k") is None



@pytest.mark.parametrize("code, value, expected", [
    (error_record.ERR_OOB_GLOBAL, 8, "index 8 is out of bounds for global buffer 'x' of 8 elements"),
    (error_record.ERR_CLASS, 200, "200 is not an Atlas class (0..95)"),
    (error_record.ERR_RECURSION, 0, "recursive call to"),
    (99, 5, "native code reported error 99 (value 5)"),
])
def test_a_record_is_worded_as_the_interpreter_words_it(code, value, expected):
    got = error_record.execution_error(parse_program(OOB), [code, 0, 2, value], {"x": 8},
                                       backend="b", reporter="native code")
    assert isinstance(got, ExecutionError)
    assert str(got).startswith("stage 's': instruction 2 `LDG.f32.chk %v, [x + %j]`: ") and expected in str(got)


def test_scratch_cancel_and_a_record_naming_no_instruction():
    program = parse_program(OOB)
    scratch = error_record.execution_error(program, [error_record.ERR_SCRATCH, 0, -1, 4096], {}, backend="b",
                                           reporter="r")
    assert isinstance(scratch, MemoryError) and str(scratch).startswith("b: stage 's'")
    cancelled = error_record.execution_error(program, [error_record.ERR_CANCELLED, 0, 2, 0], {}, backend="b",
                                             reporter="r")
    assert isinstance(cancelled, KeyboardInterrupt)
    lost = error_record.execution_error(program, [1, 7, 40, 3], {}, backend="b", reporter="the device")
    assert str(lost) == "program 'oob': the device reported error 1 at stage 7, instruction 40 (value 3)"
