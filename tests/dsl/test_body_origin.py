"""BodyOrigin: body positions to file positions, by a line offset or by a column table
(what a translator that rewrites text gives, docs/plugins.md)."""

from __future__ import annotations

from hologram.dsl.document import BodyOrigin

SOURCE = "    return x * EPS + zz\n"


def test_offsets_shift_every_column_of_a_line():
    origin = BodyOrigin("k.py", SOURCE, ((1, 4),))
    span = origin.span(1, 1, 7)
    assert (span.line, span.col, span.end_col) == (1, 5, 11)


def test_a_column_table_maps_rewritten_text_back_onto_what_it_replaced():
    # body "out = x * 1e-06 + zz": "out =" points at "return", "1e-06" at "EPS"
    body = "out = x * 1e-06 + zz"
    cols = [5, 6, 7, 8, 9] + [11, 12, 13, 14, 15] + [16, 17, 18, 18, 18] + [19, 20, 21, 22, 23] + [24]
    assert len(cols) == len(body) + 1
    origin = BodyOrigin("k.py", SOURCE, ((1, 4),), (tuple(cols),))
    zz = body.index("zz") + 1
    span = origin.span(1, zz, zz + 2)
    assert SOURCE.splitlines()[0][span.col - 1:span.end_col - 1] == "zz"
    lit = body.index("1e-06") + 1
    span = origin.span(1, lit, lit + 5)
    assert SOURCE.splitlines()[0][span.col - 1:span.end_col - 1] == "EPS"
    out = origin.span(1, 1, 4)
    assert SOURCE.splitlines()[0][out.col - 1:out.end_col - 1] == "ret"
    past = origin.span(1, len(body) + 3)  # beyond the table: counted on from its end
    assert past.col == 26
