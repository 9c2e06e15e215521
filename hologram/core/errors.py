"""The exceptions Hologram raises, and source spans that point into documents.

Every user-facing error is a `HologramError`. Errors about a document carry a `Span`
(file, 1-based line and column, end column) and render with the offending source line
and a caret underline, as compilers do:

    kernels/bad.toml:7:9: error: unknown function 'expp'; did you mean 'exp'?
       7 | y = expp(x)
         |     ^^^^
"""

from __future__ import annotations

from typing import Iterable

import attrs


@attrs.frozen
class Span:
    """A region of a source file. Lines and columns are 1-based; `end_col` is exclusive."""

    file: str
    line: int
    col: int
    end_line: int | None = None
    end_col: int | None = None
    source: str | None = attrs.field(default=None, eq=False, repr=False)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def excerpt(self) -> str:
        """The source line with the span underlined, or '' when the text is unknown."""
        if self.source is None:
            return ""
        lines = self.source.splitlines()
        if not 1 <= self.line <= len(lines):
            return ""
        text = lines[self.line - 1]
        end = self.end_col if (self.end_line in (None, self.line) and self.end_col) else len(text) + 1
        width = max(1, end - self.col)
        gutter = f"{self.line:>4} | "
        pad = " " * (len(gutter) - 2) + "| "
        return f"{gutter}{text}\n{pad}{' ' * (self.col - 1)}{'^' * width}"


@attrs.frozen
class Site:
    """Where in a kernel document a run-time check comes from: the access's file, line
    and columns (`end_col` exclusive, on `line`) and the text of that line, so an
    ExecutionError can point at the document as a compile error does without the
    document at hand. `file` is the name the document was compiled under (a bundle
    stores its member name, never an absolute path)."""

    file: str
    line: int
    col: int
    end_col: int
    text: str

    MAX_TEXT = 500  # of a line; a JSON document's body is one (long) line

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    @staticmethod
    def of(span: Span) -> "Site":
        """The site of `span` (its first line, when it spans several)."""
        lines = span.source.splitlines() if span.source is not None else []
        text = lines[span.line - 1][:Site.MAX_TEXT] if 1 <= span.line <= len(lines) else ""
        end = span.end_col if span.end_line in (None, span.line) and span.end_col else len(text) + 1
        return Site(span.file, span.line, span.col, max(end, span.col + 1), text)

    def span(self) -> Span:
        """A span that renders this site's line with the access underlined."""
        return Span(self.file, self.line, self.col, self.line, self.end_col, source="\n" * (self.line - 1) + self.text)


def render(message: str, span: Span | None, hint: str | None, kind: str) -> str:
    """`file:line:col: <kind>: message`, the source line underlined, then the hint."""
    parts = [f"{span}: {kind}: {message}" if span else message]
    if span is not None and (ex := span.excerpt()):
        parts.append(ex)
    if hint:
        parts.append(f"  hint: {hint}")
    return "\n".join(parts)


class HologramError(Exception):
    """Base of every error Hologram reports to a user."""

    def __init__(self, message: str, span: Span | None = None, hint: str | None = None):
        self.message = message
        self.span = span
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        return render(self.message, self.span, self.hint, "error")


class HologramWarning(UserWarning):
    """Base of Hologram's warnings: rendered like errors, with a span when there is one."""

    def __init__(self, message: str, span: Span | None = None, hint: str | None = None):
        self.message, self.span, self.hint = message, span, hint
        super().__init__(self.render())

    def render(self) -> str:
        return render(self.message, self.span, self.hint, "warning")


class CompileWarning(HologramWarning):
    """A kernel compiles but something in it is almost surely wrong: an access out of
    bounds at every size the statement runs at (docs/dsl.md, decision 15)."""


class DocumentError(HologramError):
    """A kernel document is malformed: bad TOML/YAML/JSON, unknown key, bad type."""


class CompileError(HologramError):
    """A kernel body is ill-formed: syntax, unknown name, type or shape mismatch."""


class ISAError(HologramError):
    """Malformed assembly text or binary program encoding."""


class VerifyError(HologramError):
    """The verifier rejected a program."""


# The flat index a checked access is given when the lowering (or a loop-dimension
# rewrite) found it out of range before it reached the address: far outside any buffer,
# so it fails the access's check, and distinct from every index a program computes, so
# the error can say what failed instead of printing a number nobody wrote.
MISSED_DIMENSION = -(1 << 62)  # an index left its own dimension (x[idx[i], j] with idx[i] = 7 of 5 rows)
MISSED_ITEM = -(1 << 62) + 1  # an access left its item's part of a buffer (kernel.map)


def out_of_bounds(index: int, what: str, size: object) -> str:
    """The words for a failed bounds check of `index` into `what` ("global buffer 'x'")
    of `size` elements."""
    if index == MISSED_DIMENSION:
        return (f"an index is out of bounds for its dimension of {what} ({size} elements); each dimension "
                "is checked on its own, so the access never reads another row")
    if index == MISSED_ITEM:
        return (f"an index is out of bounds for its dimension or for its item's part of {what} ({size} "
                "elements); a call with loop dimensions checks each item on its own")
    return f"index {index} is out of bounds for {what} of {size} elements"


class ExecutionError(HologramError):
    """A program failed while running: a guarded access out of bounds, a bad pool handle."""

    @classmethod
    def at(cls, site: Site | None, message: str) -> "ExecutionError":
        """The error of a failed run-time check, pointing at the document line `site`
        (the instruction's) when the program knows it."""
        return cls(message, None if site is None else site.span())


class ArgumentError(HologramError, TypeError):
    """A kernel was called with wrong arguments: dtype, contiguity, shape, count."""


class StreamError(HologramError):
    """`hologram.stream` cannot run a kernel through a fixed pool: the statement (or
    array) that stops it is named, with its document line when the kernel knows it."""


class BundleError(HologramError):
    """A bundle is corrupt, incompatible or not found."""


class PluginError(HologramError):
    """A plugin is misconfigured or a requested plugin/backend does not exist."""


class UnsupportedProgram(PluginError):
    """A backend declines a verified program it does not cover: a backend that runs part
    of the ISA raises it from `prepare`, naming what it cannot run (docs/plugins.md, "A
    backend that runs part of the ISA"). A declared refusal, not a fault: the
    differential harness counts such an example as not covered by that backend, never as
    a failure (docs/difftest.md). A PluginError, so code that catches those still does."""


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate close to `name`, if one is."""
    import difflib  # only when a name is wrong (~1 ms to import)

    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`"; did you mean 'exp'?"` when a candidate is close to `name`, else '': for the
    end of a message."""
    close = closest(name, candidates)
    return f"; did you mean {close!r}?" if close else ""


def meant(name: str, candidates: Iterable[str]) -> str:
    """`" (did you mean 'O2'?)"` when a candidate is close to `name`, else '': for the
    middle of a sentence (`unknown optimization level 'O22' (did you mean 'O2'?): the
    levels are O0, O1 and O2`)."""
    close = closest(name, candidates)
    return f" (did you mean {close!r}?)" if close else ""


def in_words(items: Iterable[str]) -> str:
    """`a, b and c`."""
    items = list(items)
    return " and ".join(filter(None, (", ".join(items[:-1]), items[-1]))) if items else "none"


def shorten(value: object, limit: int = 40) -> str:
    """`repr(value)` for a message, abbreviated past `limit` characters. An integer too
    large for Python to write in decimal (over 4300 digits: ValueError), which a bundle
    may hold, is described by its size instead."""
    try:
        text = repr(value)
    except ValueError:
        if isinstance(value, int):
            bits = value.bit_length()
            return f"{'-' if value < 0 else ''}<{bits}-bit integer, about 10**{int(bits * 0.30103)}>"
        return f"<{type(value).__name__} holding a huge integer>"
    keep = (limit - 3) // 2
    return text if len(text) <= limit else f"{text[:keep]}...{text[-keep:]}"


class EmptyReductionError(ArgumentError, ValueError):
    """min/max/argmin/argmax over an empty extent: no identity (numpy raises ValueError)."""


class KernelNotFoundError(HologramError, KeyError, AttributeError):
    """A library has no kernel of that name: a KeyError for `lib[name]`, an
    AttributeError for `lib.name` (so `hasattr` and `getattr(lib, name, None)` work)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.render()
