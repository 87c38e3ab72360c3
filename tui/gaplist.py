"""The gap list: one row per listed gap (largest first), its columns fitted to the terminal's width."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding

from . import glyphs as G
from .rowlist import RowList
from .cut import mark
from .kernelname import kernel_family, op_short
from .safe import shown
from .scene import Scene
from .timefmt import fmt_at, fmt_dur

#: gap list rows shown at most (the list is sorted by size; the rest are one `n` away in the lanes)
MAX_LIST = 500

#: terminals narrower than this get the short gap list (no row number, short cause names)
NARROW = 120
#: cause names in the gap list of a narrow terminal
SHORT_CAUSE = {"collective": "coll", "profiler": "prof", "allocator": "alloc", "host-idle": "host", "gpu-wait": "wait",
               "autotune": "tune", "user-sync": "usync"}


def cause_name(i: int) -> str:
    try:
        from ..analysis import CAUSES

        return CAUSES[i]
    except Exception:  # noqa: BLE001
        return str(i)


class GapList(RowList):
    """The gap list: one row per listed gap, drawn with the Line API (``rowlist.RowList``). When the cursor
    leaves the rows shown it pages (it lands a quarter of the way in from the edge it crossed)."""

    BINDINGS = [Binding("enter", "screen.detail", "detail", show=False),
                Binding("j", "cursor_down", "next gap", show=False),
                Binding("k", "cursor_up", "previous gap", show=False)]

    def action_last(self) -> None:
        """End: the last gap listed (not the "... more" and "not listed" lines under it)."""
        gaps = [i for i, (key, _) in enumerate(self.rows) if key is not None and key.isdigit()]
        if gaps:
            self.move_cursor(row=gaps[-1])

    narrow: bool | None = None  # the columns are those of a terminal under NARROW columns
    _filled: tuple | None = None  # what the rows were made from (``_rows_key``), while they are those

    def set_columns(self, narrow: bool) -> None:
        """The columns. A narrow terminal drops the row number (the stack panel says "gap 3/723") and shortens
        the cause names, so the next op keeps some room."""
        self.narrow = narrow
        if not narrow:
            self.add_column(Text("#"), key="n", width=3)
        self.add_column(Text("idle", justify="right"), key="dur", width=9)  # "463.30 ms" whole
        self.add_column(Text("cause"), key="cause", width=6 if narrow else 10)
        self.add_column(Text("at", justify="right"), key="at", width=9)
        self.add_column(Text("next op"), key="next")

    def fill(self, sc: Scene | None, glyphs: G.Glyphs, width: int) -> None:
        """The rows of ``sc``'s listed gaps for a terminal ``width`` columns wide."""
        ascii = glyphs.ascii
        ov = "ellipsis"  # a name cut short ends in the mark ("..." on an ASCII terminal: ``RowList.more``)
        self.more = mark(ascii)

        def d(ns) -> str:
            return fmt_dur(int(ns), ascii=ascii)

        narrow = width < NARROW
        key = _rows_key(sc, ascii, narrow)
        def cursor_to_selected() -> None:
            if 0 <= sc.gaps.selected < min(sc.gaps.order.size, MAX_LIST):
                self.move_cursor(row=sc.gaps.selected, animate=False, notify=False)  # the selected gap's row

        if narrow == self.narrow and _same_key(key, self._filled):
            # the same rows (the analysis whole after its gaps, its projection, a resize): only the cursor moves
            # (a fill of 500 rows took 0.1-0.3 s of the screen's thread at 1 GB, keys waiting behind it)
            cursor_to_selected()
            return
        self._filled = None
        if narrow != self.narrow:
            self.clear(columns=True)
            self.set_columns(narrow)
        else:
            self.clear()
        note = sc.state.provisional_note if sc is not None else None
        label = Text("next op" + (f"  ({note})" if note else ""), style="bold yellow" if note else "")
        if self.columns and self.columns[-1].label != label:  # the list's title: a preview's list is provisional
            self.columns[-1].label = label
        if sc is None or not sc.any_analysis:
            return
        origin = sc.origin
        first = [] if narrow else [Text("")]  # the "#" cell when there is a "#" column
        rows = []  # added at once: one refresh, not one a row (add_row's)
        for pos, gid in enumerate(sc.gaps.order[:MAX_LIST].tolist()):
            pt = sc.parts[int(sc.gaps.part[gid])]
            row = int(sc.gaps.row[gid])
            nxt = int(pt.analysis.gaps.next_idx[row])
            cause = cause_name(int(sc.gaps.cause[gid]))
            # the aten op that launched the next kernel says more than the kernel's name
            op = int(pt.model.op[nxt]) if nxt >= 0 else -1
            # the column is narrow: the op as people say it (mm, not aten::mm; conv, not aten::cudnn_convolution)
            name = op_short(pt.model.name(op)) if op >= 0 else (kernel_family(pt.model.name(nxt)) if nxt >= 0 else "?")
            if sc.multi:
                r = pt.model.rank
                name = f"r{r if r is not None else int(sc.gaps.part[gid])} {name}"
            rows.append((str(pos), [
                *([] if narrow else [Text(str(pos + 1))]),
                Text(d(sc.gaps.dur[gid]), justify="right"),
                Text(SHORT_CAUSE.get(cause, cause) if narrow else cause, style=G.CAUSE_COLOURS.get(cause, "")),
                Text(fmt_at(int(sc.gaps.start[gid]) - origin, ascii=ascii), justify="right"),
                Text(shown(name, ascii), no_wrap=True, overflow=ov),
            ]))
        self.rows.extend(rows)
        self._changed()
        if sc.gaps.order.size > MAX_LIST:
            self.add_row(*first, Text("...", justify="right"),
                         Text(f"{sc.gaps.order.size - MAX_LIST} more", style="dim"), Text(""),
                         Text("n walks all of them", style="dim"), key="more")
        listed, total, lim = sc.listed_counts()
        if total > listed and sc.gaps.cause_filter is None:
            # the report counts every gap; the list holds those the report lists (Analysis.listed_rows)
            self.add_row(*first, Text(f"+{total - listed}", justify="right", style="dim"),
                         Text("gaps", style="dim"), Text(f"< {d(lim)}", justify="right", style="dim"),
                         Text("not listed (in every total)", style="dim"), key="short")
        self._filled = key
        cursor_to_selected()


def _rows_key(sc: Scene | None, ascii: bool, narrow: bool) -> tuple | None:
    """What the gap list's rows are made from: the scene, its merged gaps and their order (new arrays at each
    merge and filter), each part's model and gap table, the time origin, the listed counts, the filter and the
    provisional note; objects compared by identity (``_same_key``). None: nothing to list."""
    if sc is None or not sc.any_analysis:
        return None
    g = sc.gaps
    parts = tuple((pt.model, pt.state.gaps, pt.min_listed_ns) for pt in sc.parts)
    note = sc.state.provisional_note
    return (sc, g.order, g.part, g.row, g.start, parts), (ascii, narrow, sc.origin, sc.listed_counts(),
                                                            g.cause_filter, note)


def _same_key(a: tuple | None, b: tuple | None) -> bool:
    if a is None or b is None:
        return False
    (objs_a, vals_a), (objs_b, vals_b) = a, b
    return vals_a == vals_b and all(
        x is y for x, y in zip(objs_a[:5], objs_b[:5])) and len(objs_a[5]) == len(objs_b[5]) and all(
        m1 is m2 and g1 is g2 and n1 == n2 for (m1, g1, n1), (m2, g2, n2) in zip(objs_a[5], objs_b[5]))
