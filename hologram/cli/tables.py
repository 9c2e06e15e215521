"""Tables the commands print: a rich table on a terminal, plain rows anywhere else.

rich fits a table to the terminal's width, folding cells onto several lines; piped (to
`cat`, `grep`, a file) it assumes 80 columns and splits a kernel's name or a path across
lines, where a script cannot find it. So when stdout is not a terminal a table is
printed as tab-separated rows, one line per row, the header first, nothing folded or
shortened; `--json` gives the same facts as data.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Sequence


def print_table(console: Any, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[str]],
                title: str | None = None) -> None:
    """`rows` under `columns` ((heading, "left" | "right") each): a rich table on a
    terminal; otherwise the title (when given) on its own line, then tab-separated rows."""
    if not console.is_terminal:
        lines = ([title] if title else []) + ["\t".join(plain(c) for c, _ in columns)]
        lines += ["\t".join(plain(cell) for cell in row) for row in rows]
        print("\n".join(lines))
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_justify="left")
    for heading, justify in columns:
        table.add_column(heading, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # Text: a name like [x] is not rich markup
    console.print(table)


def plain(cell: str) -> str:
    """A cell on one line of a tab-separated row: tabs and newlines become spaces."""
    return " ".join(str(cell).split("\t")).replace("\r", " ").replace("\n", " ")


def print_json(value: Any) -> None:
    """`value` as JSON on stdout (what `--json` prints): indented, keys in the order given."""
    json.dump(value, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
