"""Tables for 80 columns and pipes: what every CLI table and the app's leaderboard are built with.

A pipe gives Rich 80 columns. Left to itself Rich shrinks every column in proportion when a
table is too wide, which cuts numbers (`3.4e-…`) and squeezes a column to nothing; `fitted`
decides instead: numbers and ids stay whole, optional columns go, text folds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text


def plain_table(**kw: Any) -> Table:
    """The CLI's table: a rule under the header and no outer frame, so that 80 columns (a pipe's
    width) go to the cells. Number columns are added with `number_column`, never cut."""
    return Table(
        header_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1, 0, 0),
        **kw,
    )


def number_column(table: Table, name: str) -> None:
    table.add_column(name, justify="right", no_wrap=True)


@dataclass(frozen=True)
class Col:
    """A column of a `fitted` table. A number (right-aligned) or a `whole` text (an id a person
    copies) is never cut; other text folds into the width left. `drop` > 0: an optional column,
    left out (highest first) where the width is short; `--json` always has it."""

    name: str
    number: bool = False
    whole: bool = False
    drop: int = 0


MIN_TEXT = 8  # a folded text column narrower than this is unreadable: fold a whole one instead
COMFORT_TEXT = (
    16  # optional columns are dropped until each folding one gets this much (or all it needs)
)


def _cell_len(cell: str) -> int:
    return max((Text.from_markup(line).cell_len for line in str(cell).splitlines()), default=0)


def _word_len(cell: str) -> int:
    """The longest word of a cell: a folded column narrower than it breaks the word (`(simulat`
    / `ed)`), so its floor is that word, up to COMFORT_TEXT."""
    return max((len(w) for w in Text.from_markup(str(cell)).plain.split()), default=0)


def fitted(width: int, cols: list[Col], rows: list[list[str] | None], **kw: Any) -> Table:
    """A table that fits `width` (a console's, 80 in a pipe, or an app pane's): numbers and
    whole texts at their full width; optional columns dropped until each folding text column gets
    COMFORT_TEXT (or all it needs); if even MIN_TEXT each does not fit, the widest whole text
    folds too. The rest of the width is shared among the folding columns, and Rich is given the
    exact widths, so it has nothing to ellipsize. A row of None starts a new section (a rule)."""
    sections, rows = rows, [r for r in rows if r is not None]
    keep = list(range(len(cols)))
    gap = 2  # the box's column divider and the right padding

    def fixed(i: int) -> int:
        return max([_cell_len(cols[i].name)] + [_cell_len(r[i]) for r in rows])

    tight = [False]  # even MIN_TEXT a column is all there is room for: words may break

    def least(i: int) -> int:
        """The narrowest a folding column may be: its longest word (capped at COMFORT_TEXT), at
        least MIN_TEXT; MIN_TEXT alone where the width has no room for whole words."""
        word = max([_word_len(cols[i].name)] + [_word_len(r[i]) for r in rows])
        return min(fixed(i), MIN_TEXT if tight[0] else max(MIN_TEXT, min(word, COMFORT_TEXT)))

    folded: set[int] = set()  # whole texts that must fold after all: nothing else was left to drop
    while True:
        rigid = [i for i in keep if (cols[i].number or cols[i].whole) and i not in folded]
        soft = [i for i in keep if i not in rigid]
        room = width - gap * (len(keep) - 1) - sum(fixed(i) for i in rigid)
        wanted = {i: fixed(i) for i in soft}
        floor = sum(least(i) for i in soft)
        comfort = sum(min(COMFORT_TEXT, wanted[i]) for i in soft)
        droppable = [i for i in keep if cols[i].drop]
        wholes = [i for i in rigid if cols[i].whole]
        if droppable and room < comfort:
            keep.remove(max(droppable, key=lambda i: cols[i].drop))
        elif room >= floor:
            break
        elif not tight[0]:
            tight[0] = True  # words break before a whole text (an id) does
        elif wholes:
            folded.add(max(wholes, key=fixed))
        else:
            break
    widths: dict[int, int] = {i: fixed(i) for i in rigid}
    left = room
    for n, i in enumerate(
        sorted(soft, key=lambda i: wanted[i])
    ):  # narrow ones first take what they need
        share = max(least(i), left // (len(soft) - n))
        widths[i] = min(wanted[i], share)
        left -= widths[i]
    table = plain_table(**kw)
    for i in keep:
        c = cols[i]
        table.add_column(
            c.name,
            justify="right" if c.number else "left",
            no_wrap=i in rigid,
            overflow="fold",
            width=widths[i],
        )
    for r in sections:
        if r is None:
            table.add_section()
        else:
            table.add_row(*(r[i] for i in keep))
    return table
