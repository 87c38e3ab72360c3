"""Glyphs and colours of the lanes. Glyphs alone tell categories apart, so NO_COLOR loses nothing essential."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from rich.style import Style

from ..analysis import causes as _causes
from .lanes import C_ALLOC, C_LAUNCH, C_OP, C_PYTHON, C_SYNC


def no_color(env=None) -> bool:
    """NO_COLOR is set (Textual's rule: set at all, whatever its value): the app's colours are turned into greys
    (Textual's monochrome filter), where a cause's colour on the dark background was as dark as it (copy and stall
    were grey 237 on 234)."""
    return "NO_COLOR" in (os.environ if env is None else env)


class _FromRegistry(Mapping):
    """cause -> one attribute of its registry entry (gapscope/analysis/causes/), always current. ``plain``: the value
    of every cause under NO_COLOR (the colours: the terminal's own foreground, "default")."""

    def __init__(self, attr: str, plain: str | None = None):
        self.attr = attr
        self.plain = plain
        self._cache: tuple[tuple, dict] = ((), {})

    def _d(self) -> dict:
        plain = self.plain if self.plain is not None and no_color() else None
        v = (_causes.version(), plain)
        if self._cache[0] != v:
            self._cache = (v, {c.name: plain if plain is not None else getattr(c, self.attr)
                               for c in _causes.all_causes()})
        return self._cache[1]

    def __getitem__(self, k):
        return self._d()[k]

    def __iter__(self):
        return iter(self._d())

    def __len__(self) -> int:
        return len(self._d())


#: cause -> the letter drawn on the gap row, and its one colour everywhere (under NO_COLOR: the terminal's
#: foreground, "default"; the letters and names tell the causes apart)
CAUSE_LETTERS = _FromRegistry("letter")
CAUSE_COLOURS = _FromRegistry("colour", plain="default")


@dataclass(frozen=True)
class Glyphs:
    ascii: bool
    density: str  # index 0..8
    cpu: dict
    gap: str  # idle cell inside a device gap, on stream rows
    bar: str
    open: str
    cursor: str
    tick: str
    rule: str
    left: str
    right: str
    expand: str
    collapse: str
    warn: str
    sep: str


UNICODE = Glyphs(
    ascii=False,
    density=" ▁▂▃▄▅▆▇█",
    cpu={0: " ", C_PYTHON: "░", C_OP: "▒", C_LAUNCH: "▓", C_SYNC: "S", C_ALLOC: "A"},
    gap="·",
    bar="─",
    open="▏",
    cursor="▼",
    tick="┬",
    rule="─",
    left="◀",
    right="▶",
    expand="▸",
    collapse="▾",
    warn="⚠",
    sep="│",
)
ASCII = Glyphs(
    ascii=True,
    density=" .:-=+*#@",
    cpu={0: " ", C_PYTHON: ".", C_OP: "o", C_LAUNCH: "#", C_SYNC: "S", C_ALLOC: "A"},
    gap="~",
    bar="-",
    open="|",
    cursor="v",
    tick="+",
    rule="-",
    left="<",
    right=">",
    expand="+",
    collapse="-",
    warn="!",
    sep="|",
)

CPU_STYLES = {
    0: Style(),
    C_PYTHON: Style(color="green"),
    C_OP: Style(color="dodger_blue1"),
    C_LAUNCH: Style(color="yellow"),
    C_SYNC: Style(color="white", bgcolor="red", bold=True),
    C_ALLOC: Style(color="white", bgcolor="magenta", bold=True),
}
KERNEL_STYLE = Style(color="bright_cyan")
COPY_STYLE = Style(color="magenta")
GAP_STYLE = Style(color="bright_black")
RANGE_STYLE = Style(color="bright_white")
LABEL_STYLE = Style(bold=True)
CURSOR_STYLE = Style(reverse=True)
SELECTED_STYLE = Style(reverse=True, bold=True)
SELECTED_GAP_STYLE = Style(color="yellow", bold=True)


def locale_is_utf8(env=None) -> bool:
    """The first of LC_ALL, LC_CTYPE, LANG that is set decides; unset everywhere counts as UTF-8
    only when the terminal encoding says so."""
    env = os.environ if env is None else env
    for k in ("LC_ALL", "LC_CTYPE", "LANG"):
        v = env.get(k)
        if v:
            v = v.lower().replace("-", "")
            return "utf8" in v
    return False


def pick(ascii_flag: bool, env=None) -> Glyphs:
    return ASCII if ascii_flag or not locale_is_utf8(env) else UNICODE
